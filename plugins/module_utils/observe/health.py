# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Health of the GPU platform from its objects. Pure: callers read the objects.

Every check result is ``{"check", "object", "ok", "message", "hint"}``; ``check`` is one of
``gpu_operator``, ``gpu_nodes``, ``kueue``, ``keda``.
"""

from __future__ import annotations

import typing as t

Obj = t.Mapping[str, t.Any]

GPU_NODE_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/mig.config")
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def _name(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta["namespace"], meta.get("name")) if meta.get("namespace") else str(meta.get("name"))


def _result(check: str, obj: str, ok: bool, message: str, hint: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    return {"check": check, "object": obj, "ok": ok, "message": message, "hint": None if ok else hint}


def _condition(obj: Obj, ctype: str) -> t.Optional[t.Mapping[str, t.Any]]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def _quantity_positive(value: t.Any) -> bool:
    text = str(value or "0").strip()
    try:
        return float(text) > 0
    except ValueError:
        return text not in ("", "0")


def gpu_operator_checks(cluster_policies: t.Optional[t.Sequence[Obj]]) -> t.List[t.Dict[str, t.Any]]:
    """Every ClusterPolicy must report ``status.state: ready``; nothing to check when the API is not served."""
    if cluster_policies is None:
        return [_result("gpu_operator", "ClusterPolicy", True,
                        "the GPU Operator's ClusterPolicy API (nvidia.com/v1) is not served: check skipped")]
    if not cluster_policies:
        return [_result("gpu_operator", "ClusterPolicy", True,
                        "the ClusterPolicy API is served but there is no ClusterPolicy: check skipped (the "
                        "gpuaas.platform.gpu_operator role creates one)")]
    out = []
    for cp in cluster_policies:
        state = (cp.get("status") or {}).get("state")
        if state == "ready":
            out.append(_result("gpu_operator", "ClusterPolicy/%s" % _name(cp), True, "ClusterPolicy %s is ready" % _name(cp)))
        else:
            out.append(_result(
                "gpu_operator", "ClusterPolicy/%s" % _name(cp), False,
                "ClusterPolicy %s is %s, not ready" % (_name(cp), state or "without a status (the operator has not reconciled it)"),
                "check the GPU Operator pods and the driver, container-toolkit and device-plugin DaemonSets in the "
                "operator namespace (kubectl get pods -n gpu-operator; oc get pods -n nvidia-gpu-operator)"))
    return out


def is_gpu_node(node: Obj, gpu_labels: t.Sequence[str] = GPU_NODE_LABELS) -> bool:
    """A node that should offer GPUs: it has a GPU feature-discovery label, or GPU capacity."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key in gpu_labels:
        if key in labels and str(labels[key]).lower() not in ("false", ""):
            return True
    capacity = (node.get("status") or {}).get("capacity") or {}
    return any(k.startswith(GPU_RESOURCE_PREFIXES) for k in capacity)


def gpu_node_checks(nodes: t.Sequence[Obj], gpu_labels: t.Sequence[str] = GPU_NODE_LABELS) -> t.List[t.Dict[str, t.Any]]:
    """Every GPU node must offer allocatable ``nvidia.com/gpu`` (or MIG ``nvidia.com/mig-*``) resources."""
    gpu_nodes = [n for n in nodes if is_gpu_node(n, gpu_labels)]
    if not gpu_nodes:
        return [_result("gpu_nodes", "Node", False, "no GPU node found (no node has %s or GPU capacity)"
                        % " / ".join(gpu_labels),
                        "label the GPU nodes (Node Feature Discovery + GPU feature discovery do it) or check that the "
                        "GPU node pool is up")]
    out = []
    for node in gpu_nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        gpus = {k: v for k, v in alloc.items() if k.startswith(GPU_RESOURCE_PREFIXES) and _quantity_positive(v)}
        name = _name(node)
        if gpus:
            out.append(_result("gpu_nodes", "Node/%s" % name, True, "node %s offers %s" % (
                name, ", ".join("%s %s" % (v, k) for k, v in sorted(gpus.items())))))
        else:
            out.append(_result("gpu_nodes", "Node/%s" % name, False,
                               "GPU node %s has no allocatable nvidia.com/gpu (or MIG) resource" % name,
                               "is the NVIDIA device plugin running on %s? (kubectl get pods -A -o wide | grep "
                               "device-plugin; with MIG check nvidia.com/mig.config.state)" % name))
    return out


def kueue_checks(cluster_queues: t.Optional[t.Sequence[Obj]], flavors: t.Optional[t.Sequence[Obj]]) -> t.List[t.Dict[str, t.Any]]:
    """Every ClusterQueue must be Active and reference only existing ResourceFlavors."""
    if cluster_queues is None:
        return [_result("kueue", "ClusterQueue", False, "Kueue's API (kueue.x-k8s.io) is not served",
                        "install Kueue with the gpuaas.platform.kueue role")]
    known = {(f.get("metadata") or {}).get("name") for f in flavors or []}
    out = []
    if not cluster_queues:
        out.append(_result("kueue", "ClusterQueue", True, "no ClusterQueue yet (no tenant converged)"))
    for cq in cluster_queues:
        name = _name(cq)
        spec = cq.get("spec") or {}
        referenced = sorted({f.get("name") for g in spec.get("resourceGroups") or [] for f in g.get("flavors") or []})
        missing = [f for f in referenced if f not in known]
        active = _condition(cq, "Active")
        problems = []
        hint = None
        if missing:
            problems.append("references missing ResourceFlavor%s %s" % ("" if len(missing) == 1 else "s", ", ".join(missing)))
            hint = "declare the flavor in gpuaas_flavors (or fix the tenant's quotas[].flavor) and converge the tenants"
        if active is None:
            problems.append("has no Active condition yet (is kueue-controller-manager running?)")
            hint = hint or "check the Kueue controller: kubectl -n kueue-system get pods; kubectl -n kueue-system logs deploy/kueue-controller-manager"
        elif active.get("status") != "True":
            problems.append("is not active: %s%s" % (active.get("reason") or "Unknown",
                                                     " - %s" % active["message"] if active.get("message") else ""))
            reason = active.get("reason") or ""
            if reason == "Stopped" or spec.get("stopPolicy") in ("Hold", "HoldAndDrain"):
                hint = hint or "the ClusterQueue has stopPolicy %s: set it back to None (tenant state present)" % spec.get("stopPolicy")
            elif "AdmissionCheck" in reason:
                hint = hint or "create or fix the AdmissionChecks the ClusterQueue references"
            else:
                hint = hint or "kubectl describe clusterqueue %s" % name
        if problems:
            out.append(_result("kueue", "ClusterQueue/%s" % name, False, "ClusterQueue %s %s" % (name, "; ".join(problems)), hint))
        else:
            out.append(_result("kueue", "ClusterQueue/%s" % name, True, "ClusterQueue %s is active" % name))
    return out


def keda_checks(scaled_objects: t.Optional[t.Sequence[Obj]]) -> t.List[t.Dict[str, t.Any]]:
    """Every ScaledObject must be Ready; nothing to check when KEDA's API is not served."""
    if scaled_objects is None:
        return [_result("keda", "ScaledObject", True, "KEDA's API (keda.sh/v1alpha1) is not served: check skipped")]
    if not scaled_objects:
        return [_result("keda", "ScaledObject", True, "no ScaledObject")]
    out = []
    for so in scaled_objects:
        name = _name(so)
        ready = _condition(so, "Ready")
        if ready is not None and ready.get("status") == "True":
            out.append(_result("keda", "ScaledObject/%s" % name, True, "ScaledObject %s is ready" % name))
            continue
        if ready is None:
            detail = "has no Ready condition yet (is the KEDA operator running?)"
        else:
            detail = "is not ready: %s%s" % (
                ready.get("reason") or "Unknown", " - %s" % ready["message"] if ready.get("message") else "")
        meta = so.get("metadata") or {}
        hint = ("kubectl describe scaledobject -n %s %s; check that the scale target exists and that the trigger "
                "(Prometheus address, query, authentication) works" % (meta.get("namespace"), meta.get("name")))
        out.append(_result("keda", "ScaledObject/%s" % name, False, "ScaledObject %s %s" % (name, detail), hint))
    return out


def summarize(results: t.Sequence[t.Mapping[str, t.Any]]) -> t.Dict[str, t.Any]:
    """Per check area: how many objects were checked and which failed."""
    out: t.Dict[str, t.Any] = {}
    for item in results:
        area = out.setdefault(item["check"], {"checked": 0, "failed": 0, "ok": True})
        area["checked"] += 1
        if not item["ok"]:
            area["failed"] += 1
            area["ok"] = False
    return out
