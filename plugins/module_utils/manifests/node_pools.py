# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU node pools (issue 13): validated ``NodePool`` -> the KEDA objects that grow a pool from Kueue's quota.

Per pool one ScaledObject on the pool's ``/scale`` (OpenShift MachineSet or Cluster API MachineDeployment):

* the signal is the GPU quota Kueue has **reserved** on the pool's flavor
  (``kueue_cluster_queue_resource_reservation{flavor,resource}``, summed over ClusterQueues), optionally plus
  the GPUs pending workloads of the ClusterQueues that have quota on the flavor ask for
  (``kueue_cluster_queue_resource_pending`` has no flavor label);
* ``metricType: AverageValue`` with the pool's GPUs per node as target: desired nodes = ceil(GPUs / per node)
  whatever the current replica count (``Value`` would make the HPA count pods behind the selector: Machines are
  not pods);
* the HPA never scales a pool *down* (``behavior.scaleDown.selectPolicy: Disabled``): lowering replicas lets the
  machine controller pick a machine by its delete policy, which may be busy. Idle nodes are removed by the
  ``node_pool_scaledown`` module (cordon, delete-machine annotation, then fewer replicas); KEDA takes a pool to
  ``min_nodes`` (0) only when nothing has been reserved on the flavor for ``idle_seconds``.

Pure functions; callers pass the labels (ownership).
"""

from __future__ import annotations

import datetime
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import NodePool, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.node_pools import (
    SCALE_BY_KEDA,
    SCALE_BY_PROVISIONING_REQUEST,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda, provisioning

COMPONENT_VALUE = "node-pools"
POOL_LABEL = "gpuaas.io/node-pool"
PROMETHEUS_AUTH_NAME = "gpuaas-prometheus-node-pools"

# Kueue v0.19.2 pkg/metrics/metrics.go (every series also carries replica_role: leader|follower|standalone).
RESERVATION_METRIC = "kueue_cluster_queue_resource_reservation"  # cohort, cluster_queue, flavor, resource
PENDING_METRIC = "kueue_cluster_queue_resource_pending"  # cluster_queue, resource (no flavor yet)

# The annotation that tells the machine controller which Machine to delete first when replicas go down.
DELETE_MACHINE_ANNOTATIONS = {
    "MachineSet": "machine.openshift.io/delete-machine",
    "MachineDeployment": "cluster.x-k8s.io/delete-machine",
}
# The cluster autoscaler's node-group size annotations (clusterapi provider: (min, max) per target kind; on
# OpenShift the MachineAutoscaler controller writes the machine.openshift.io ones).
AUTOSCALER_SIZE_ANNOTATIONS = {
    "MachineSet": ("machine.openshift.io/cluster-api-autoscaler-node-group-min-size",
                   "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"),
    "MachineDeployment": ("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
                          "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"),
}
# Scale-from-zero capacity annotations the cluster-autoscaler reads on a MachineSet/MachineDeployment.
GPU_COUNT_ANNOTATIONS = ("capacity.cluster-autoscaler.kubernetes.io/gpu-count",
                         "machine.openshift.io/GPU")


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def reserved_query(pool: NodePool, pending_queues: t.Sequence[str] = ()) -> str:
    """PromQL: GPUs reserved on the pool's flavor (+ pending in ``pending_queues`` when the pool counts them)."""
    query = 'sum(%s{flavor="%s",resource="%s",replica_role!="follower"})' % (
        RESERVATION_METRIC, _label_value(pool.flavor), _label_value(pool.gpu_resource))
    if pool.include_pending and pending_queues:
        pending = 'sum(%s{cluster_queue=~"%s",resource="%s",replica_role!="follower"})' % (
            PENDING_METRIC, "|".join(_label_value(q) for q in sorted(pending_queues)), _label_value(pool.gpu_resource))
        query = "(%s or vector(0)) + (%s or vector(0))" % (query, pending)
        return query
    return "%s or vector(0)" % query


def queues_using_flavor(model: TenantModel, flavor: str, resource: str) -> t.List[str]:
    """ClusterQueues (named after their tenants) that have a nominal quota for ``resource`` on ``flavor``."""
    out = []
    for tenant in model.present_tenants:
        for quota in tenant.quotas:
            if quota.flavor == flavor and resource in quota.resources:
                out.append(tenant.name)
    return out


def pool_scaled_object(pool: NodePool, prometheus_url: str, labels: t.Mapping[str, str],
                       pending_queues: t.Sequence[str] = (), authenticated: bool = False) -> t.Dict[str, t.Any]:
    """The ScaledObject that sizes one pool from the reserved GPU quota of its flavor."""
    trigger = keda.prometheus_trigger(prometheus_url, reserved_query(pool, pending_queues),
                                      threshold=str(pool.gpus_per_node), activation_threshold="0",
                                      authenticated=False, name="kueue-reserved-gpus")
    trigger["metricType"] = "AverageValue"
    if authenticated:
        trigger["metadata"]["authModes"] = "bearer"
        trigger["authenticationRef"] = {"name": PROMETHEUS_AUTH_NAME, "kind": "ClusterTriggerAuthentication"}
    obj = keda.scaled_object(
        "gpuaas-pool-%s" % pool.name, pool.target_namespace, pool.target_kind, pool.target_name,
        pool.target_api_version, [trigger], min_replicas=pool.min_nodes, max_replicas=pool.max_nodes,
        polling_interval=pool.polling_interval, cooldown_period=pool.idle_seconds,
        labels=dict(labels, **{POOL_LABEL: pool.name}))
    obj["spec"]["advanced"] = {
        "horizontalPodAutoscalerConfig": {
            "name": "gpuaas-pool-%s" % pool.name,
            "behavior": {
                # grow at once (a node takes minutes to provision; the quota is already reserved) ...
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": pool.max_nodes, "periodSeconds": 15}]},
                # ... and never shrink through the HPA: it cannot tell an idle machine from a busy one.
                "scaleDown": {"selectPolicy": "Disabled"},
            },
        },
    }
    return obj


def prometheus_auth(model: TenantModel, token: t.Optional[str], ca_data: t.Optional[str], keda_namespace: str,
                    labels: t.Mapping[str, str]) -> t.List[t.Dict[str, t.Any]]:
    """The pools' own Prometheus credential (Secret + ClusterTriggerAuthentication), empty when not needed."""
    objs = keda.prometheus_auth(model.prometheus, token, ca_data, keda_namespace, labels)
    for obj in objs:
        obj["metadata"]["name"] = PROMETHEUS_AUTH_NAME
        for ref in (obj.get("spec") or {}).get("secretTargetRef") or []:
            ref["name"] = PROMETHEUS_AUTH_NAME
    return objs


def desired_objects(model: TenantModel, labels: t.Mapping[str, str], prometheus_token: t.Optional[str] = None,
                    prometheus_ca: t.Optional[str] = None, keda_namespace: str = "keda") -> t.List[t.Dict[str, t.Any]]:
    """Every object the inventory's ``gpuaas_node_pools`` ask for (empty without pools): a ScaledObject per KEDA
    pool (with the pools' Prometheus credential), the ProvisioningRequestConfig and AdmissionCheck per flavor of
    ``scale_by: provisioning_request`` pools (their ClusterQueues' checks come with the tenants' objects)."""
    keda_pools = keda_scaled_pools(model)
    objs = prometheus_auth(model, prometheus_token, prometheus_ca, keda_namespace, labels) if keda_pools else []
    authenticated = bool(objs)
    for pool in keda_pools:
        objs.append(pool_scaled_object(pool, model.prometheus.url or "", labels,
                                       queues_using_flavor(model, pool.flavor, pool.gpu_resource), authenticated))
    objs.extend(provisioning.desired_objects(model, labels))
    return objs


def keda_scaled_pools(model: TenantModel) -> t.List[NodePool]:
    """The pools KEDA sizes from Kueue's reserved quota (``scale_by: keda``)."""
    return [pool for pool in model.node_pools if pool.scale_by == SCALE_BY_KEDA]


# -- reading a pool's target (used by the modules; pure, on dicts) -----------------------------------------

def template_node_labels(target: t.Mapping[str, t.Any]) -> t.Dict[str, str]:
    """Labels the target's machine template gives its nodes.

    OpenShift MachineSet: ``spec.template.spec.metadata.labels``; Cluster API MachineDeployment: labels of
    ``spec.template.metadata.labels`` of the domains Cluster API propagates to Nodes (``node.cluster.x-k8s.io``,
    ``node-role.kubernetes.io``, ``node-restriction.kubernetes.io``)."""
    spec = (target.get("spec") or {}).get("template") or {}
    if target.get("kind") == "MachineSet":
        return dict((((spec.get("spec") or {}).get("metadata") or {}).get("labels")) or {})
    labels = ((spec.get("metadata") or {}).get("labels")) or {}
    return {k: v for k, v in labels.items() if _capi_propagates(k)}


def _capi_propagates(key: str) -> bool:
    """Cluster API (>= 1.4) syncs Machine labels of these domains to the Node; other template labels stay on the Machine."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return (domain == "node.cluster.x-k8s.io" or domain.endswith(".node.cluster.x-k8s.io")
            or domain in ("node-role.kubernetes.io", "node-restriction.kubernetes.io")
            or domain.endswith(".node-restriction.kubernetes.io"))


def autoscaler_bounds_problems(pool: NodePool, target: t.Mapping[str, t.Any]) -> t.List[str]:
    """What keeps the cluster autoscaler from sizing a ``scale_by: provisioning_request`` pool as the inventory says:
    its node-group size annotations on the live target (written by a MachineAutoscaler on OpenShift, set on the
    MachineDeployment with Cluster API) missing or not ``min_nodes``/``max_nodes``. Without them the autoscaler does
    not treat the target as a node group and every ProvisioningRequest for the flavor waits forever."""
    names = AUTOSCALER_SIZE_ANNOTATIONS.get(pool.target_kind)
    if pool.scale_by != SCALE_BY_PROVISIONING_REQUEST or not names:
        return []
    annotations = ((target.get("metadata") or {}).get("annotations")) or {}
    how = ("a MachineAutoscaler with minReplicas %d and maxReplicas %d" if pool.target_kind == "MachineSet"
           else "the annotations min-size %d and max-size %d on it") % (pool.min_nodes, pool.max_nodes)
    out = []
    for name, key, want in ((names[0], "min_nodes", pool.min_nodes), (names[1], "max_nodes", pool.max_nodes)):
        have = annotations.get(name)
        if have is None:
            out.append("the cluster autoscaler does not size %s %s/%s: annotation %s is missing (give it %s)"
                       % (pool.target_kind, pool.target_namespace, pool.target_name, name, how))
        elif str(have).strip() != str(want):
            out.append("annotation %s of %s %s/%s is %s, but the pool's %s is %d (give it %s)"
                       % (name, pool.target_kind, pool.target_namespace, pool.target_name, have, key, want, how))
    return out


def template_mismatch(pool: NodePool, target: t.Mapping[str, t.Any], flavor_labels: t.Mapping[str, str]) -> t.List[str]:
    """``key=value`` of the flavor's node labels the live template does not give its nodes."""
    labels = template_node_labels(target)
    return ["%s=%s" % (k, v) for k, v in sorted(flavor_labels.items()) if labels.get(k) != v]


# -- safe scale-down: which of a pool's nodes may go (pure; the node_pool_scaledown module does the I/O) ----

def _requests(pod: t.Mapping[str, t.Any]) -> t.Dict[str, float]:
    """Accelerator requests (or limits) of a pod, summed over its containers."""
    out: t.Dict[str, float] = {}
    for container in ((pod.get("spec") or {}).get("containers") or []):
        res = container.get("resources") or {}
        merged: t.Dict[str, t.Any] = dict(res.get("limits") or {})
        merged.update(res.get("requests") or {})
        for name, amount in merged.items():
            if "/" in name and not name.startswith(("kubernetes.io/", "hugepages-")):
                try:
                    out[name] = out.get(name, 0.0) + float(amount)
                except (TypeError, ValueError):
                    continue
    return out


def _is_daemon(pod: t.Mapping[str, t.Any]) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in ((pod.get("metadata") or {}).get("ownerReferences") or []))


def _time(text: t.Optional[str]) -> float:
    if not text:
        return 0.0
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def _finished_at(pod: t.Mapping[str, t.Any]) -> float:
    latest = 0.0
    for status in ((pod.get("status") or {}).get("containerStatuses") or []):
        term = (status.get("state") or {}).get("terminated") or {}
        latest = max(latest, _time(term.get("finishedAt")))
    return latest


def plan_scale_down(pool: NodePool, machines: t.Sequence[t.Mapping[str, t.Any]], nodes: t.Mapping[str, t.Mapping[str, t.Any]],
                    pods: t.Sequence[t.Mapping[str, t.Any]], now: float) -> t.Dict[str, t.Any]:
    """Decide which of a pool's machines may be removed now.

    A node is *busy* while any non-DaemonSet pod bound to it has not finished (Pending or Running), whatever it
    requests: such a node is never chosen. An *idle* node may go once it is older than ``provisioning_seconds`` and
    its last pod finished at least ``idle_seconds`` ago. Machines without a node yet (provisioning) stay. Idle nodes
    are kept for unscheduled pods that ask for the pool's GPU resource and whose node selector the pool's nodes
    satisfy (one node per ``gpus_per_node`` GPUs), and so that the pool keeps ``min_nodes``.

    Returns ``{"remove": [{"machine", "node", "idle_seconds"}], "busy": [node…], "idle_kept": [node…],
    "provisioning": [machine…], "waiting_gpus": n}``.
    """
    by_node: t.Dict[str, t.List[t.Mapping[str, t.Any]]] = {}
    waiting = 0.0
    for pod in pods:
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if node:
            by_node.setdefault(node, []).append(pod)
        elif phase == "Pending" and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            selector = spec.get("nodeSelector") or {}
            if all(pool.node_labels.get(k) == v for k, v in selector.items()):
                waiting += _requests(pod).get(pool.gpu_resource, 0.0)
    busy: t.List[str] = []
    idle: t.List[t.Tuple[float, str, str]] = []  # (idle since, node, machine)
    provisioning: t.List[str] = []
    for machine in machines:
        mname = (machine.get("metadata") or {}).get("name") or ""
        if (machine.get("metadata") or {}).get("deletionTimestamp"):
            continue
        node_name = (((machine.get("status") or {}).get("nodeRef")) or {}).get("name")
        node = nodes.get(node_name or "")
        if not node:
            provisioning.append(mname)
            continue
        running = [p for p in by_node.get(node_name or "", [])
                   if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not _is_daemon(p)]
        if running:
            busy.append(node_name or "")
            continue
        created = _time((node.get("metadata") or {}).get("creationTimestamp"))
        last = max([created] + [_finished_at(p) for p in by_node.get(node_name or "", [])])
        if now - created < pool.provisioning_seconds and not by_node.get(node_name or ""):
            provisioning.append(mname)  # new and never used: its pod may be on the way
            continue
        idle.append((last, node_name or "", mname))
    idle.sort()
    need_for_waiting = int(-(-waiting // pool.gpus_per_node)) if waiting else 0
    keep = max(pool.min_nodes - len(busy) - len(provisioning), 0) + need_for_waiting
    remove, kept = [], []
    candidates = [x for x in idle if now - x[0] >= pool.idle_seconds]
    kept.extend(x[1] for x in idle if now - x[0] < pool.idle_seconds)
    for index, (since, node_name, mname) in enumerate(candidates):
        if index < keep:
            kept.append(node_name)
        else:
            remove.append({"machine": mname, "node": node_name, "idle_seconds": int(now - since)})
    return {"remove": remove, "busy": sorted(busy), "idle_kept": sorted(kept), "provisioning": sorted(provisioning),
            "waiting_gpus": waiting}
