# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A tenant's ``autoscaling`` entries (KEDA ScaledObjects): idle scale-to-zero, load-based scaling, raw triggers.

An entry whose target is a RayCluster is not a ScaledObject (a RayCluster has no /scale): it opts the cluster in to
idle reclaim of its GPU worker groups by ``gpuaas.platform.ray_idle_reclaim`` (docs/autoscaling.md, RayCluster).
Neither is one whose target is a Kubeflow / OpenShift AI Notebook: its controller owns its StatefulSet's replicas, so
the same module stops it with the annotation ``kubeflow-resource-stopped`` (docs/autoscaling.md, Notebooks).

``parse_autoscaling`` reads one entry outside a tenant, for the ``scaled_object`` module.
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity, quantity_text
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Autoscaling
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import (
    InventoryError,
    Validator,
    problem_count,
)

# Kinds KEDA can scale (they have /scale) whose pod names the idle trigger knows how to match.
SCALE_TARGET_KINDS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
}
# InferenceService has no /scale: its predictor Deployment (KServe raw deployment mode) is scaled instead.
INFERENCE_SERVICE_SUFFIX = "-predictor"
# The kind reclaimed by gpuaas.platform.ray_idle_reclaim instead of KEDA (its worker groups have replicas, the
# cluster has no /scale), and its apiVersion.
RAY_CLUSTER_KIND = "RayCluster"
RAY_API_VERSION = "ray.io/v1"
# The Kubeflow / OpenShift AI workbench, stopped by gpuaas.platform.ray_idle_reclaim through the notebook controller's
# stop annotation: the controller writes its StatefulSet's replicas back on every reconcile, so KEDA cannot scale it.
NOTEBOOK_KIND = "Notebook"
NOTEBOOK_API_VERSION = "kubeflow.org/v1"
# Kinds an autoscaling entry opts in to idle reclaim (no ScaledObject), with their default apiVersion.
IDLE_RECLAIM_KINDS = {RAY_CLUSTER_KIND: RAY_API_VERSION, NOTEBOOK_KIND: NOTEBOOK_API_VERSION}
# Kinds without /scale that users try to autoscale, and what to do instead (docs/autoscaling.md).
NOT_SCALABLE_KINDS = {
    "RayJob": "has no /scale subresource; its RayCluster scales with Ray's in-tree autoscaler, see docs/autoscaling.md",
    "RayService": "has no /scale subresource; use Ray Serve autoscaling, see docs/autoscaling.md",
    "Workload": "is Kueue's bookkeeping object, not a workload; scale the Deployment or StatefulSet that owns it",
    "Job": "runs to completion; Kueue queues Jobs, KEDA ScaledJobs (not ScaledObjects) create them",
}

AUTOSCALING_KEYS = ("name", "namespace", "target", "min_replicas", "max_replicas", "idle_scale_to_zero",
                    "load", "polling_interval", "cooldown_period", "triggers", "worker_groups")
# Keys that mean something to KEDA only: refused on a RayCluster entry (ray_idle_reclaim reads none of them).
KEDA_ONLY_KEYS = ("min_replicas", "max_replicas", "load", "polling_interval", "triggers")
KEDA_ONLY_IDLE_KEYS = ("wake_query", "wake_threshold", "pod_regex")
TARGET_KEYS = ("kind", "name", "api_version")
IDLE_KEYS = ("after_minutes", "after_seconds", "utilization_threshold", "wake_query", "wake_threshold", "pod_regex")
LOAD_KEYS = ("query", "target_per_replica", "activation_threshold")
# Pod names of a Deployment keep at most this many characters of its name (then a ReplicaSet hash and a suffix).
DEPLOYMENT_POD_NAME_PREFIX = 46


def entry_namespace(entry: t.Mapping[str, t.Any], namespaces: t.Sequence[str]) -> t.Optional[str]:
    """The namespace of an autoscaling entry: its own ``namespace``, else the tenant's only namespace (None when the
    tenant has several and the entry names none)."""
    namespace = entry.get("namespace")
    if namespace is None and len(namespaces) == 1:
        namespace = namespaces[0]
    return namespace


def ray_reclaim_namespaces(tenants: t.Sequence[t.Any]) -> t.List[str]:
    """The namespaces of the RayClusters and Notebooks that present tenants opted in to idle reclaim (an autoscaling
    entry whose target kind is RayCluster or Notebook, ``IDLE_RECLAIM_KINDS``), sorted and unique. Read from the raw
    ``gpuaas_tenants`` by the roles that bind the reclaim account there and render its AAP job (filter
    ``gpuaas.platform.ray_reclaim_namespaces``); entries the inventory validation would refuse are left out, never
    guessed."""
    found = set()
    for tenant in tenants if isinstance(tenants, (list, tuple)) else []:
        if not isinstance(tenant, t.Mapping) or tenant.get("state", "present") == "absent":
            continue
        namespaces = [n for n in tenant.get("namespaces") or [] if isinstance(n, str)]
        for entry in tenant.get("autoscaling") or []:
            target = entry.get("target") if isinstance(entry, t.Mapping) else None
            if not isinstance(target, t.Mapping) or target.get("kind") not in IDLE_RECLAIM_KINDS:
                continue
            namespace = entry_namespace(entry, namespaces)
            if namespace in namespaces:
                found.add(namespace)
    return sorted(found)


def parse_autoscaling_list(check: Validator, path: str, value: t.Any, namespaces: t.List[str],
                           prometheus_url: t.Optional[str], ray: bool = True) -> t.List[Autoscaling]:
    """A tenant's autoscaling entries, each in one of its ``namespaces``; idle and load read ``prometheus_url``.
    ``ray``: RayCluster and Notebook targets are accepted (idle reclaim, ``IDLE_RECLAIM_KINDS``); False where only a
    ScaledObject can come out (the ``scaled_object`` module)."""
    out: t.List[Autoscaling] = []
    seen: t.Dict[t.Tuple[str, str], int] = {}
    for j, apath, data in check.items(path, value, AUTOSCALING_KEYS):
        name = check.name(apath + ".name", data.get("name"))
        namespace = entry_namespace(data, namespaces)
        if namespace not in namespaces:
            check.unknown_ref(apath + ".namespace", str(namespace), namespaces, "tenant namespace")
            namespace = None
        auto = _scaled_object(check, apath, data, name, namespace)
        if auto.target_kind in IDLE_RECLAIM_KINDS:
            if not ray and auto.target_kind == RAY_CLUSTER_KIND:
                check.err(apath + ".target.kind", "a RayCluster has no /scale, so no ScaledObject can target it: list "
                                                  "it in a tenant's autoscaling, reclaimed by gpuaas.platform.ray_idle_reclaim "
                                                  "(docs/autoscaling.md, RayCluster)")
            elif not ray:
                check.err(apath + ".target.kind", "a Notebook has no /scale and its controller owns its StatefulSet's "
                                                  "replicas, so no ScaledObject can idle it: list it in a tenant's "
                                                  "autoscaling, stopped by gpuaas.platform.ray_idle_reclaim with the "
                                                  "annotation kubeflow-resource-stopped (docs/autoscaling.md, Notebooks)")
            else:
                _ray_cluster_settings(check, apath, data, auto, prometheus_url)
            if name and namespace:
                if (namespace, name) in seen:
                    check.err(apath + ".name", "duplicate autoscaling entry %s/%s" % (namespace, name))
                seen[(namespace, name)] = j
                out.append(auto)
            continue
        if data.get("worker_groups") is not None:
            check.err(apath + ".worker_groups", "is for a RayCluster target only (target.kind: RayCluster)")
        idle = check.mapping(apath + ".idle_scale_to_zero", data.get("idle_scale_to_zero"), IDLE_KEYS)
        load = check.mapping(apath + ".load", data.get("load"), LOAD_KEYS)
        triggers = check.sequence(apath + ".triggers", data.get("triggers"))
        for k, trig in enumerate(triggers):
            tdata = check.mapping("%s.triggers[%d]" % (apath, k), trig)
            if tdata is not None and not tdata.get("type"):
                check.err("%s.triggers[%d].type" % (apath, k), "is required (a KEDA scaler type, e.g. prometheus)")
        auto.triggers = [dict(x) for x in triggers if isinstance(x, t.Mapping)]
        idle_set = idle is not None and data.get("idle_scale_to_zero") is not None
        load_set = load is not None and data.get("load") is not None
        if idle_set:
            _idle_settings(check, apath, idle or {}, auto)
        if load_set:
            _load_settings(check, apath, load or {}, auto)
        if (idle_set or load_set) and not prometheus_url:
            check.err(apath + (".idle_scale_to_zero" if idle_set else ".load"),
                      "reads %s from Prometheus: set gpuaas_prometheus.url in the inventory"
                      % ("GPU utilization" if idle_set else "its metric"))
        if not idle_set and not load_set and not auto.triggers:
            check.err(apath, "needs idle_scale_to_zero, load or triggers")
        if name and namespace:
            if (namespace, name) in seen:
                check.err(apath + ".name", "duplicate ScaledObject %s/%s" % (namespace, name))
            seen[(namespace, name)] = j
            out.append(auto)
    return out


def _scaled_object(check: Validator, apath: str, data: t.Mapping[str, t.Any], name: t.Optional[str],
                   namespace: t.Optional[str]) -> Autoscaling:
    """The target (a kind with /scale; an InferenceService becomes its predictor Deployment) and the replica bounds."""
    target = check.mapping(apath + ".target", data.get("target"), TARGET_KEYS) or {}
    kind = target.get("kind", "Deployment")
    target_name = check.name(apath + ".target.name", target.get("name"))
    source_kind = None
    api_version = target.get("api_version")
    if kind in IDLE_RECLAIM_KINDS:
        api_version = api_version or IDLE_RECLAIM_KINDS[kind]
    elif kind in NOT_SCALABLE_KINDS:
        check.err(apath + ".target.kind", "KEDA cannot scale a %s: it %s" % (kind, NOT_SCALABLE_KINDS[kind]))
    elif kind == "InferenceService":
        # KServe InferenceService has no /scale: scale its predictor Deployment (raw deployment mode).
        source_kind, kind, api_version = "InferenceService", "Deployment", "apps/v1"
        target_name = (target_name + INFERENCE_SERVICE_SUFFIX) if target_name else target_name
    api_version = api_version or SCALE_TARGET_KINDS.get(kind)
    if not api_version and kind not in NOT_SCALABLE_KINDS:
        check.err(apath + ".target.kind", "%r needs target.api_version (known kinds: %s, InferenceService)"
                  % (kind, ", ".join(SCALE_TARGET_KINDS)))
    min_r = check.integer(apath + ".min_replicas", data.get("min_replicas", 0), 0)
    max_r = check.integer(apath + ".max_replicas", data.get("max_replicas", max(min_r or 0, 1)), 1)
    if min_r is not None and max_r is not None and min_r > max_r:
        check.err(apath + ".max_replicas", "must be at least min_replicas (%d)" % min_r)
    polling = check.optional_integer(apath + ".polling_interval", data.get("polling_interval"), 1)
    cooldown = check.optional_integer(apath + ".cooldown_period", data.get("cooldown_period"), 0)
    return Autoscaling(name=name or "", namespace=namespace or "", target_kind=kind,
                       target_name=target_name or "", target_api_version=api_version or "",
                       min_replicas=min_r or 0, max_replicas=max_r or 1, polling_interval=polling,
                       cooldown_period=cooldown, source_kind=source_kind)


def _idle_settings(check: Validator, apath: str, idle: t.Mapping[str, t.Any], auto: Autoscaling,
                   ray: bool = False) -> None:
    """idle_scale_to_zero: window, threshold, pod match and wake signal; checks the target kind allows 0."""
    ipath = apath + ".idle_scale_to_zero"
    if idle.get("after_minutes") is not None and idle.get("after_seconds") is not None:
        check.err(ipath, "set after_minutes or after_seconds, not both")
    if idle.get("after_seconds") is not None:
        seconds = check.integer(ipath + ".after_seconds", idle.get("after_seconds"), 10)
    else:
        minutes = check.integer(ipath + ".after_minutes", idle.get("after_minutes", 15), 1)
        seconds = minutes * 60 if minutes is not None else None
    auto.idle_window_seconds = seconds or 900
    thr = idle.get("utilization_threshold", 1)
    try:
        parse_quantity(thr)
        auto.idle_utilization_threshold = quantity_text(thr)
    except ValueError as exc:
        check.err(ipath + ".utilization_threshold", str(exc))
    wake = idle.get("wake_query")
    if wake is not None and (not isinstance(wake, str) or not wake.strip()):
        check.err(ipath + ".wake_query", "must be a PromQL expression returning one value")
        wake = None
    auto.wake_query = wake
    try:
        parse_quantity(idle.get("wake_threshold", 0))
        auto.wake_threshold = quantity_text(idle.get("wake_threshold", 0))
    except ValueError as exc:
        check.err(ipath + ".wake_threshold", str(exc))
    regex = idle.get("pod_regex")
    if regex is not None:
        try:
            if not isinstance(regex, str) or not regex:
                raise re.error("empty")
            re.compile(regex)
            auto.pod_regex = regex
        except re.error as exc:
            check.err(ipath + ".pod_regex", "must be a regular expression matched against whole pod names (%s)" % exc)
    elif ray:
        pass  # the cluster's GPU worker pods are read from the cluster (label ray.io/group)
    elif auto.target_kind not in SCALE_TARGET_KINDS:
        check.err(ipath + ".pod_regex", "is required for a %s target: the idle trigger must know the names of the "
                                        "target's own pods (e.g. '%s-[0-9]+')" % (auto.target_kind, auto.target_name or "name"))
    elif auto.target_kind == "Deployment" and len(auto.target_name) > DEPLOYMENT_POD_NAME_PREFIX:
        check.warn("%s.target.name: pod names of a Deployment named longer than %d characters are "
                   "truncated, so the idle trigger may miss its pods; set idle_scale_to_zero.pod_regex"
                   % (apath, DEPLOYMENT_POD_NAME_PREFIX))
    if ray:
        return
    if auto.min_replicas != 0:
        check.err(apath + ".min_replicas", "must be 0 with idle_scale_to_zero")
    if not wake and not auto.triggers:
        check.warn("%s.idle_scale_to_zero: without wake_query (or load.query) nothing brings %s %s back from zero; set "
                   "wake_query to a request-rate or queue-depth PromQL, or scale it up by hand"
                   % (apath, auto.target_kind, auto.target_name))


def _ray_cluster_settings(check: Validator, apath: str, data: t.Mapping[str, t.Any], auto: Autoscaling,
                          prometheus_url: t.Optional[str]) -> None:
    """A RayCluster or Notebook opted in to idle reclaim: the worker groups (RayCluster only; default: every GPU
    group, read from the live cluster), the idle window and threshold, the cooldown after a wake. What only the live
    object can say (does a named group exist, does it ask for GPUs, is the cluster elastic) is checked by
    ``ray_idle_reclaim`` before it writes (manifests/ray_reclaim.py, manifests/notebook_reclaim.py)."""
    kind = auto.target_kind
    what = ("its GPU worker groups go to 0 when idle and back to their replicas on wake" if kind == RAY_CLUSTER_KIND
            else "it is stopped when idle with the annotation kubeflow-resource-stopped and started again on wake")
    for key in KEDA_ONLY_KEYS:
        if data.get(key) is not None:
            check.err("%s.%s" % (apath, key), "is a KEDA setting: a %s is not scaled by KEDA (%s)" % (kind, what))
    groups = data.get("worker_groups")
    if groups is not None and kind != RAY_CLUSTER_KIND:
        check.err(apath + ".worker_groups", "is for a RayCluster target only (target.kind: RayCluster)")
    elif groups is not None:
        raw = check.sequence(apath + ".worker_groups", groups)
        names = [g for g in raw if isinstance(g, str) and g]
        if len(names) != len(raw) or not raw:
            check.err(apath + ".worker_groups", "must be a non-empty list of worker group names (groupName)")
        dupes = sorted({g for g in names if names.count(g) > 1})
        if dupes:
            check.err(apath + ".worker_groups", "names %s more than once" % ", ".join(dupes))
        auto.worker_groups = list(dict.fromkeys(names))
    idle = check.mapping(apath + ".idle_scale_to_zero", data.get("idle_scale_to_zero"), IDLE_KEYS)
    if data.get("idle_scale_to_zero") is None or idle is None:
        check.err(apath + ".idle_scale_to_zero", "is required for a %s target (the idle window: after_minutes "
                                                 "or after_seconds)" % kind)
        return
    for key in KEDA_ONLY_IDLE_KEYS:
        if idle.get(key) is not None:
            check.err("%s.idle_scale_to_zero.%s" % (apath, key),
                      "does not apply to a %s: its GPU pods are known from the object, and it wakes "
                      "when the tenant sets the annotation gpuaas.io/wake on it" % kind)
    _idle_settings(check, apath, {k: v for k, v in idle.items() if k not in KEDA_ONLY_IDLE_KEYS}, auto, ray=True)
    if not prometheus_url:
        check.err(apath + ".idle_scale_to_zero", "reads GPU utilization from Prometheus: set gpuaas_prometheus.url in "
                                                 "the inventory")


def _load_settings(check: Validator, apath: str, load: t.Mapping[str, t.Any], auto: Autoscaling) -> None:
    """load: scale between 1 and max_replicas on a metric (AverageValue: one replica per target_per_replica)."""
    lpath = apath + ".load"
    query = load.get("query") or auto.wake_query
    if not query or not isinstance(query, str):
        check.err(lpath + ".query", "is required (or set idle_scale_to_zero.wake_query, which load then uses)")
    auto.load_query = query if isinstance(query, str) else None
    if load.get("target_per_replica") is None:
        check.err(lpath + ".target_per_replica", "is required: the value of the query one replica handles")
    for key in ("target_per_replica", "activation_threshold"):
        if load.get(key) is None:
            continue
        try:
            number = parse_quantity(load[key])
        except ValueError as exc:
            check.err("%s.%s" % (lpath, key), str(exc))
            continue
        if key == "target_per_replica" and number <= 0:
            check.err(lpath + ".target_per_replica", "must be above 0, got %s" % load[key])
            continue
        setattr(auto, "load_target" if key == "target_per_replica" else "load_activation", quantity_text(load[key]))
    if auto.target_kind == "StatefulSet":
        check.err(lpath, "a StatefulSet under Kueue scales only between 0 and N (Kueue refuses other replica changes); "
                         "use idle_scale_to_zero with max_replicas: N and no load")


def parse_autoscaling(entry: t.Mapping[str, t.Any], namespace: str,
                      prometheus_url: t.Optional[str]) -> t.Tuple[Autoscaling, t.List[str]]:
    """One ``autoscaling`` entry outside a tenant (the ``scaled_object`` module): ``(Autoscaling, warnings)``;
    raises ``InventoryError`` listing every problem, with paths under ``options``."""
    check = Validator()
    autos = parse_autoscaling_list(check, "options", [dict(entry, namespace=namespace)], [namespace], prometheus_url,
                                   ray=False)
    if check.errors or not autos:
        raise InventoryError("The autoscaling options have %s; nothing was changed." % problem_count(len(check.errors)),
                             hint="Fix every listed option (see ansible-doc gpuaas.platform.scaled_object and docs/autoscaling.md).",
                             problems=[e.replace("options[0].", "").replace("gpuaas_prometheus.url in the inventory", "prometheus_url")
                                       for e in check.errors])
    return autos[0], [w.replace("options[0].", "") for w in check.warnings]
