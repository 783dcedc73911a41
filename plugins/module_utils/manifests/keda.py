# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""KEDA objects: ScaledObjects with Prometheus triggers (idle GPU -> zero, wake-up, load 1..max) and the
platform's Prometheus credential (Secret + ClusterTriggerAuthentication). Pure functions; callers pass the labels.

What the triggers of one ``autoscaling`` entry mean (docs/autoscaling.md):

- ``gpu-busy``: the highest DCGM GPU utilization of the target's *own* pods over the idle window (pods matched
  by the name grammar of the target's controller, both DCGM label styles). Active above the utilization
  threshold; its metric is a percentage against a target of 100, so it never asks for more than one replica.
- ``wake``: the user's wake signal (request rate, queue depth ...) above ``wake_threshold``, as a 0/1 value, so
  it brings the target back from zero and asks for exactly one replica.
- ``load``: ``metricType: AverageValue`` with ``threshold = target_per_replica``: the HPA asks for
  ceil(value / target_per_replica) replicas, up to ``maxReplicaCount``.
"""

from __future__ import annotations

import base64
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import Autoscaling, PrometheusSettings

KEDA_V = "keda.sh/v1alpha1"
PROMETHEUS_AUTH_NAME = "gpuaas-prometheus"


def default_namespace(platform: str) -> str:
    """KEDA's namespace where the keda role installs it (and the KEDA operator of OpenShift's OperatorHub runs)."""
    return "openshift-keda" if platform == "openshift" else "keda"


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


# Characters of generated names (k8s.io/apimachinery/pkg/util/rand): the pod-template-hash of a ReplicaSet
# and the 5-character suffix of a generated pod name use only these.
GENERATED_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def _regex_literal(name: str) -> str:
    """A Kubernetes name as a regex literal (only '.' is special in DNS names)."""
    return name.replace(".", "\\.")


def pod_name_regex(kind: str, name: str) -> t.Optional[str]:
    """The RE2 regex (anchored by Prometheus) of exactly the pods the controller of ``kind``/``name`` creates.

    Deployment: ``<name>-<pod-template-hash>-<5 chars>`` (ReplicaSet ``<name>-<hash>``); StatefulSet:
    ``<name>-<ordinal>``; LeaderWorkerSet: ``<name>-<group>`` (leaders) and ``<name>-<group>-<index>``.
    A Deployment ``vllm`` does not match the pods of ``vllm-canary`` (``canary`` is not a hash, and the name
    would have one more segment). None for other kinds (the user names the regex).
    """
    lit = _regex_literal(name)
    gen = "[%s]" % GENERATED_NAME_ALPHABET
    if kind == "Deployment":
        return "%s-%s{1,10}-%s{5}" % (lit, gen, gen)
    if kind == "StatefulSet":
        return "%s-[0-9]+" % lit
    if kind == "LeaderWorkerSet":
        return "%s-[0-9]+(-[0-9]+)?" % lit
    return None


def promql_duration(seconds: int) -> str:
    return "%dm" % (seconds // 60) if seconds % 60 == 0 else "%ds" % seconds


def gpu_idle_query(namespace: str, pod_regex: str, window_seconds: int) -> str:
    """Highest GPU utilization (%) of the pods matching ``pod_regex`` over the window (DCGM, both label styles:
    ``namespace``/``pod`` when the ServiceMonitor honours the exporter's labels, ``exported_*`` otherwise).
    0 when no pod of the target holds a GPU (e.g. at zero replicas)."""
    regex = pod_regex.replace("\\", "\\\\").replace('"', '\\"')
    window = promql_duration(window_seconds)
    selectors = ('namespace="%s",pod=~"%s"' % (namespace, regex),
                 'exported_namespace="%s",exported_pod=~"%s"' % (namespace, regex))
    parts = ["max_over_time(%s{%s}[%s])" % (DCGM_UTIL, sel, window) for sel in selectors]
    return "max(%s or %s) or vector(0)" % tuple(parts)


def wake_query(query: str, threshold: str) -> str:
    """1 while the user's wake signal is above ``threshold``, else 0 (so the wake trigger asks for one replica)."""
    return "(%s) > bool %s" % (query.strip(), threshold)


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
                       authenticated: bool = False, name: t.Optional[str] = None,
                       metric_type: t.Optional[str] = "AverageValue") -> t.Dict[str, t.Any]:
    """A KEDA ``prometheus`` trigger. ``metric_type`` AverageValue (KEDA's default, written out): the HPA asks for
    ceil(value / threshold) replicas; it also works for targets without a pod selector."""
    metadata: t.Dict[str, str] = {"serverAddress": server, "query": query, "threshold": str(threshold)}
    if activation_threshold is not None:
        metadata["activationThreshold"] = str(activation_threshold)
    trigger: t.Dict[str, t.Any] = {"type": "prometheus", "metadata": metadata}
    if metric_type:
        trigger["metricType"] = metric_type
    if name:
        trigger["name"] = name
    if authenticated:
        metadata["authModes"] = "bearer"
        trigger["authenticationRef"] = {"name": PROMETHEUS_AUTH_NAME, "kind": "ClusterTriggerAuthentication"}
    return trigger


def autoscaling_triggers(auto: Autoscaling, server: str, authenticated: bool) -> t.List[t.Dict[str, t.Any]]:
    """The triggers of one ``autoscaling`` entry: gpu-busy (idle), wake, load, then the user's own."""
    triggers: t.List[t.Dict[str, t.Any]] = []
    if auto.idle_window_seconds:
        regex = auto.pod_regex or pod_name_regex(auto.target_kind, auto.target_name)
        if not regex:
            raise ValueError("idle scale-to-zero of a %s needs pod_regex (the names of the target's own pods)" % auto.target_kind)
        # Active while any pod of the target used its GPU above the threshold within the window; a percentage
        # against a target of 100 asks for at most one replica (load scaling is the load trigger's job).
        triggers.append(prometheus_trigger(
            server, gpu_idle_query(auto.namespace, regex, auto.idle_window_seconds), threshold="100",
            activation_threshold=auto.idle_utilization_threshold, authenticated=authenticated, name="gpu-busy"))
    load_is_wake = bool(auto.load_target and auto.load_query and auto.load_query == auto.wake_query)
    if auto.wake_query and not load_is_wake:
        triggers.append(prometheus_trigger(server, wake_query(auto.wake_query, auto.wake_threshold), threshold="1",
                                           activation_threshold="0", authenticated=authenticated, name="wake"))
    if auto.load_target and auto.load_query:
        activation = auto.wake_threshold if load_is_wake else (auto.load_activation or "0")
        if load_is_wake and auto.load_activation is not None:
            activation = auto.load_activation
        triggers.append(prometheus_trigger(server, auto.load_query, threshold=auto.load_target,
                                           activation_threshold=activation, authenticated=authenticated, name="load"))
    triggers.extend(dict(x) for x in auto.triggers)
    return triggers


def autoscaling_object(auto: Autoscaling, prometheus: PrometheusSettings, authenticated: bool,
                       labels: t.Mapping[str, str]) -> t.Dict[str, t.Any]:
    """The ScaledObject of one ``autoscaling`` entry (a tenant's, or the ``scaled_object`` module's).

    Idle scale-to-zero: ``initialCooldownPeriod`` = the idle window (no scale-in before the first window is
    seen), ``cooldownPeriod`` (default 60 s) after the last active trigger. A StatefulSet (Kueue allows only
    0 <-> N) gets ``idleReplicaCount: 0`` and ``minReplicaCount = maxReplicaCount = N``.
    """
    triggers = autoscaling_triggers(auto, prometheus.url or "", authenticated)
    cooldown = auto.cooldown_period
    initial = None
    idle_count = None
    min_r, max_r = auto.min_replicas, auto.max_replicas
    if auto.idle_window_seconds:
        cooldown = 60 if cooldown is None else cooldown
        initial = auto.idle_window_seconds
        if auto.target_kind == "StatefulSet":
            idle_count, min_r = 0, max_r
    return scaled_object(auto.name, auto.namespace, auto.target_kind, auto.target_name, auto.target_api_version,
                         triggers, min_r, max_r, auto.polling_interval, cooldown, initial, idle_count,
                         labels=labels)
