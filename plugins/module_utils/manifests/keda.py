# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""KEDA objects: ScaledObjects with Prometheus triggers (idle GPU -> zero, wake-up) and the platform's
Prometheus credential (Secret + ClusterTriggerAuthentication). Pure functions; callers pass the labels."""

from __future__ import annotations

import base64
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import Autoscaling, PrometheusSettings

KEDA_V = "keda.sh/v1alpha1"
PROMETHEUS_AUTH_NAME = "gpuaas-prometheus"


def prometheus_auth(settings: PrometheusSettings, token: t.Optional[str], ca_data: t.Optional[str],
                    keda_namespace: str, labels: t.Mapping[str, str]) -> t.List[t.Dict[str, t.Any]]:
    """Secret (in KEDA's namespace) + ClusterTriggerAuthentication for an authenticated Prometheus.

    Cluster-scoped so the token never lands in a tenant namespace (tenant users may read their Secrets).
    Empty when neither a token nor a CA is configured.
    """
    if not token and not ca_data:
        return []
    data: t.Dict[str, str] = {}
    refs = []
    if token:
        data["bearerToken"] = base64.b64encode(token.strip().encode()).decode()
        refs.append({"parameter": "bearerToken", "name": PROMETHEUS_AUTH_NAME, "key": "bearerToken"})
    if ca_data:
        data["ca"] = base64.b64encode(ca_data.encode()).decode()
        refs.append({"parameter": "ca", "name": PROMETHEUS_AUTH_NAME, "key": "ca"})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": PROMETHEUS_AUTH_NAME, "namespace": keda_namespace, "labels": dict(labels)},
              "type": "Opaque", "data": data}
    auth = {"apiVersion": KEDA_V, "kind": "ClusterTriggerAuthentication", "metadata": {"name": PROMETHEUS_AUTH_NAME, "labels": dict(labels)},
            "spec": {"secretTargetRef": refs}}
    return [secret, auth]


def gpu_idle_query(namespace: str, pod_prefix: str, minutes: int) -> str:
    """Highest GPU utilization (%) of the target's pods over the last ``minutes`` (DCGM, both label styles)."""
    selectors = ('namespace="%s",pod=~"%s-.*"' % (namespace, pod_prefix),
                 'exported_namespace="%s",exported_pod=~"%s-.*"' % (namespace, pod_prefix))
    parts = ["max_over_time(DCGM_FI_DEV_GPU_UTIL{%s}[%dm])" % (s, minutes) for s in selectors]
    return "max(%s or %s) or vector(0)" % tuple(parts)


def scaled_object(name: str, namespace: str, target_kind: str, target_name: str, target_api_version: str,
                  triggers: t.List[t.Dict[str, t.Any]], min_replicas: int = 0, max_replicas: int = 1,
                  polling_interval: t.Optional[int] = None, cooldown_period: t.Optional[int] = None,
                  initial_cooldown_period: t.Optional[int] = None, idle_replica_count: t.Optional[int] = None,
                  labels: t.Optional[t.Mapping[str, str]] = None) -> t.Dict[str, t.Any]:
    """A KEDA ScaledObject with exactly ``labels`` (the caller decides ownership: the tenants reconcile adds
    its component label so it can prune; the ``scaled_object`` module does not)."""
    spec: t.Dict[str, t.Any] = {
        "scaleTargetRef": {"apiVersion": target_api_version, "kind": target_kind, "name": target_name},
        "minReplicaCount": min_replicas,
        "maxReplicaCount": max_replicas,
        "triggers": triggers,
    }
    if polling_interval is not None:
        spec["pollingInterval"] = polling_interval
    if cooldown_period is not None:
        spec["cooldownPeriod"] = cooldown_period
    if initial_cooldown_period is not None:
        spec["initialCooldownPeriod"] = initial_cooldown_period
    if idle_replica_count is not None:
        spec["idleReplicaCount"] = idle_replica_count
    meta: t.Dict[str, t.Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": KEDA_V, "kind": "ScaledObject", "metadata": meta, "spec": spec}


def prometheus_trigger(server: str, query: str, threshold: str, activation_threshold: t.Optional[str] = None,
                       authenticated: bool = False, name: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    metadata: t.Dict[str, str] = {"serverAddress": server, "query": query, "threshold": str(threshold)}
    if activation_threshold is not None:
        metadata["activationThreshold"] = str(activation_threshold)
    trigger: t.Dict[str, t.Any] = {"type": "prometheus", "metadata": metadata}
    if name:
        trigger["name"] = name
    if authenticated:
        metadata["authModes"] = "bearer"
        trigger["authenticationRef"] = {"name": PROMETHEUS_AUTH_NAME, "kind": "ClusterTriggerAuthentication"}
    return trigger


def autoscaling_object(auto: Autoscaling, prometheus: PrometheusSettings, authenticated: bool,
                       labels: t.Mapping[str, str]) -> t.Dict[str, t.Any]:
    """The ScaledObject of one ``autoscaling`` entry of a tenant."""
    triggers: t.List[t.Dict[str, t.Any]] = []
    cooldown = None
    initial = None
    if auto.idle_after_minutes:
        # Active while any pod of the target used its GPU above the threshold in the window; the window is
        # the idle time, so KEDA scales to zero as soon as the query turns inactive (cooldown 60 s), and
        # never during the first window after start (initialCooldownPeriod).
        triggers.append(prometheus_trigger(
            prometheus.url or "", gpu_idle_query(auto.namespace, auto.target_name, auto.idle_after_minutes),
            threshold="100", activation_threshold=auto.idle_utilization_threshold,
            authenticated=authenticated, name="gpu-utilization"))
        if auto.wake_query:
            triggers.append(prometheus_trigger(prometheus.url or "", auto.wake_query, threshold=auto.wake_threshold,
                                               activation_threshold="0", authenticated=authenticated, name="wake"))
        cooldown = 60
        initial = auto.idle_after_minutes * 60
    triggers.extend(auto.triggers)
    return scaled_object(auto.name, auto.namespace, auto.target_kind, auto.target_name, auto.target_api_version,
                         triggers, auto.min_replicas, auto.max_replicas, auto.polling_interval, cooldown, initial,
                         labels=labels)
