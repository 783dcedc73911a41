# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU utilization per GPU, namespace and tenant from DCGM exporter and Kueue series. Pure: no I/O.

Inputs are Prometheus range-query results (``[(labels, [(ts, value), ...]), ...]``, see
``prometheus.matrix_samples``) taken every ``step`` seconds over a window, and optionally ClusterQueue
objects. Each sample stands for ``step`` seconds, so ``GPU-hours = samples * step / 3600``.

DCGM exporter label variants handled:

* node: ``Hostname`` (older exporters), ``hostname`` (newer), ``kubernetes_node``/``node`` (relabelled);
* workload: ``namespace``/``pod``/``container`` when the scrape honours the exporter's labels, or
  ``exported_namespace``/``exported_pod``/``exported_container`` when it does not (then ``namespace``
  and ``pod`` name the exporter's own pod and are ignored), decided per series, so a mix of both scrapes works;
* MIG instances: ``GPU_I_ID``/``GPU_I_PROFILE`` make each instance its own GPU entry.
"""

from __future__ import annotations

import math
import re
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import tenant_index  # noqa: F401 - part of this module's API
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.promql import NODE_LABELS

Labels = t.Dict[str, str]
Matrix = t.List[t.Tuple[Labels, t.List[t.Tuple[float, float]]]]

UNASSIGNED = "(no tenant)"

DEFAULTS: t.Dict[str, t.Any] = {
    "idle_threshold": 5.0,       # % utilization below which an allocated GPU counts as idle
    "idle_for": 600.0,           # seconds a GPU must stay below idle_threshold to be reported idle
}


# --- small numeric helpers -------------------------------------------------------------------
def quantile(values: t.Sequence[float], q: float) -> t.Optional[float]:
    """The ``q`` quantile with linear interpolation between ranks, as PromQL ``quantile()`` computes it."""
    data = sorted(v for v in values if not math.isnan(v))
    if not data:
        return None
    rank = q * (len(data) - 1)
    low = int(math.floor(rank))
    high = min(low + 1, len(data) - 1)
    weight = rank - low
    return data[low] * (1 - weight) + data[high] * weight


def _avg(values: t.Sequence[float]) -> t.Optional[float]:
    data = [v for v in values if not math.isnan(v)]
    return sum(data) / len(data) if data else None


def _rounded(value: t.Optional[float], digits: int = 2) -> t.Optional[float]:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    out = round(value, digits)
    return out + 0.0  # no -0.0


def _hours(seconds: float) -> float:
    return round(seconds / 3600.0, 4) + 0.0


# --- labels ----------------------------------------------------------------------------------
def node_of(labels: t.Mapping[str, str]) -> str:
    """Node name from whichever hostname label the exporter/relabelling produced."""
    for key in NODE_LABELS:
        if labels.get(key):
            return labels[key]
    return labels.get("instance", "unknown")


EXPORTER_POD = re.compile(r"dcgm-exporter")


def label_variant(matrices: t.Iterable[Matrix]) -> str:
    """``namespace/pod`` (scrape honoured the exporter's labels), ``exported_*`` (it did not) or ``mixed``."""
    exported = honoured = False
    for matrix in matrices:
        for labels, _values in matrix:
            if labels.get("exported_namespace") or labels.get("exported_pod"):
                exported = True
            elif labels.get("pod") and not EXPORTER_POD.search(labels["pod"]):
                honoured = True
    if exported and honoured:
        return "mixed"
    return "exported_*" if exported else "namespace/pod"


def workload_of(labels: t.Mapping[str, str]) -> t.Optional[t.Tuple[str, str, str]]:
    """``(namespace, pod, container)`` of the workload holding the GPU, ``None`` when unallocated.

    Per series: ``exported_*`` labels win (the scrape did not honour the exporter's labels; ``namespace``/``pod``
    then name the exporter's own pod); a ``pod`` that is the DCGM exporter itself means no workload.
    """
    if labels.get("exported_namespace") or labels.get("exported_pod"):
        ns, pod, ctr = labels.get("exported_namespace"), labels.get("exported_pod"), labels.get("exported_container")
    else:
        ns, pod, ctr = labels.get("namespace"), labels.get("pod"), labels.get("container")
        if pod and EXPORTER_POD.search(pod):
            return None
    if not ns or not pod:
        return None
    return ns, pod, ctr or ""


def gpu_key(labels: t.Mapping[str, str]) -> t.Tuple[str, str, str]:
    """Identity of a GPU (or MIG instance): node, GPU index, GPU instance id."""
    return node_of(labels), labels.get("gpu", labels.get("device", "?")), labels.get("GPU_I_ID", "")


def gpu_identity(labels: t.Mapping[str, str]) -> t.Dict[str, t.Any]:
    node, index, instance = gpu_key(labels)
    return {
        "node": node,
        "gpu": index,
        "uuid": labels.get("UUID", ""),
        "model": labels.get("modelName", ""),
        "device": labels.get("device", ""),
        "pci_bus_id": labels.get("pci_bus_id", ""),
        "mig_instance": instance or None,
        "mig_profile": labels.get("GPU_I_PROFILE") or None,
    }


def gpu_name(gpu: t.Mapping[str, t.Any]) -> str:
    """Human name such as ``gpu-h100-0 GPU 3`` or ``gpu-a100-mig-0 GPU 0 MIG 1 (1g.10gb)``."""
    name = "%s GPU %s" % (gpu["node"], gpu["gpu"])
    if gpu.get("mig_instance"):
        name += " MIG %s" % gpu["mig_instance"]
        if gpu.get("mig_profile"):
            name += " (%s)" % gpu["mig_profile"]
    return name


# --- per-GPU timelines -----------------------------------------------------------------------
class _GpuTimeline:
    __slots__ = ("identity", "util", "fb", "workloads")

    def __init__(self, identity: t.Dict[str, t.Any]) -> None:
        self.identity = identity
        self.util: t.Dict[float, float] = {}
        self.fb: t.Dict[float, float] = {}
        self.workloads: t.Dict[float, t.Set[t.Tuple[str, str, str]]] = {}


def _timelines(util: Matrix, fb: Matrix) -> t.Dict[t.Tuple[str, str, str], _GpuTimeline]:
    gpus: t.Dict[t.Tuple[str, str, str], _GpuTimeline] = {}
    for labels, values in util:
        key = gpu_key(labels)
        gpu = gpus.get(key)
        if gpu is None:
            gpu = gpus[key] = _GpuTimeline(gpu_identity(labels))
        else:
            for field, val in gpu_identity(labels).items():
                if val and not gpu.identity.get(field):
                    gpu.identity[field] = val
        workload = workload_of(labels)
        for ts, val in values:
            if math.isnan(val):
                continue
            prev = gpu.util.get(ts)
            gpu.util[ts] = val if prev is None else max(prev, val)
            slot = gpu.workloads.setdefault(ts, set())
            if workload:
                slot.add(workload)
    for labels, values in fb:
        gpu = gpus.get(gpu_key(labels))
        if gpu is None:
            continue
        for ts, val in values:
            if not math.isnan(val):
                gpu.fb[ts] = max(gpu.fb.get(ts, 0.0), val)
    return gpus


class _GroupFigures:
    """Accumulates utilization samples and GPU-seconds for a namespace or a tenant."""

    __slots__ = ("samples", "gpu_seconds", "busy_seconds", "idle_seconds", "gpus_now", "idle_now", "memory_now", "pods",
                 "gpu_refs")

    def __init__(self) -> None:
        self.samples: t.List[float] = []
        self.gpu_seconds = 0.0
        self.busy_seconds = 0.0
        self.idle_seconds = 0.0
        self.gpus_now = 0
        self.idle_now = 0
        self.memory_now = 0.0
        self.pods: t.Set[str] = set()
        self.gpu_refs: t.List[t.Dict[str, t.Any]] = []

    def figures(self) -> t.Dict[str, t.Any]:
        return {
            "gpus": self.gpus_now,
            "idle_gpus": self.idle_now,
            "avg_utilization": _rounded(_avg(self.samples)),
            "p95_utilization": _rounded(quantile(self.samples, 0.95)),
            "memory_used_mib": _rounded(self.memory_now, 1),
            "gpu_hours": _hours(self.gpu_seconds),
            "busy_gpu_hours": _hours(self.busy_seconds),
            "idle_gpu_hours": _hours(self.idle_seconds),
            "pods": sorted(self.pods),
        }


def gpu_report(
    util: Matrix,
    fb: t.Optional[Matrix],
    start: float,
    end: float,
    step: float,
    tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
    idle_threshold: float = DEFAULTS["idle_threshold"],
    idle_for: float = DEFAULTS["idle_for"],
    node_flavors: t.Optional[t.Mapping[str, str]] = None,
) -> t.Dict[str, t.Any]:
    """Per GPU / namespace / tenant utilization figures for the window ``(start - step, end]``.

    ``node_flavors`` (node name -> ResourceFlavor) splits the GPU-hours per flavor in ``usage_by_flavor``
    (showback); GPUs on nodes of no known flavor count under the flavor ``""``.

    ``util`` and ``fb`` are range results of :func:`dcgm_query` for ``DCGM_FI_DEV_GPU_UTIL`` and
    ``DCGM_FI_DEV_FB_USED``. A GPU is *idle* when it is held by a pod now and its utilization stayed below
    ``idle_threshold`` % for at least ``idle_for`` seconds (trailing); *unallocated* when no pod holds it now.
    """
    fb = fb or []
    variant = label_variant([util, fb])
    gpus = _timelines(util, fb)
    ns_map, tenant_list = tenant_index(tenants)
    namespaces: t.Dict[str, _GroupFigures] = {}
    tenant_acc: t.Dict[str, _GroupFigures] = {x["name"]: _GroupFigures() for x in tenant_list}
    gpu_rows: t.List[t.Dict[str, t.Any]] = []
    cluster_samples: t.List[float] = []
    allocated_samples: t.List[float] = []
    totals = {"gpu_seconds": 0.0, "allocated_seconds": 0.0, "busy_seconds": 0.0, "unallocated_seconds": 0.0,
              "idle_seconds": 0.0}
    # per tenant and sample: [sum of utilization of its GPUs, GPUs held, GPUs held below idle_threshold]
    tenant_series: t.Dict[str, t.Dict[float, t.List[float]]] = {}
    cluster_series: t.Dict[float, t.List[float]] = {}
    # (tenant, namespace, flavor) -> [allocated, busy, idle] GPU-seconds
    by_flavor: t.Dict[t.Tuple[str, str, str], t.List[float]] = {}
    node_flavors = node_flavors or {}
    idle_needed = max(int(math.ceil(idle_for / step - 1e-9)), 1)

    for key in sorted(gpus, key=lambda k: (k[0], _natural(k[1]), _natural(k[2]))):
        gpu = gpus[key]
        times = sorted(gpu.util)
        if not times:
            continue
        flavor = node_flavors.get(key[0], "")
        values = [gpu.util[ts] for ts in times]
        cluster_samples.extend(values)
        last_ts = times[-1]
        current = sorted(gpu.workloads.get(last_ts) or ())
        allocated_secs = 0.0
        busy_secs = 0.0
        for ts in times:
            held = gpu.workloads.get(ts) or set()
            val = gpu.util[ts]
            totals["gpu_seconds"] += step
            if not held:
                totals["unallocated_seconds"] += step
                continue
            allocated_secs += step
            busy_secs += step * val / 100.0
            allocated_samples.append(val)
            is_idle = val < idle_threshold
            totals["idle_seconds"] += step if is_idle else 0.0
            point = cluster_series.setdefault(ts, [0.0, 0.0])
            point[0] += 1
            point[1] += 1 if is_idle else 0
            share = 1.0 / len(held)
            seen_tenants: t.Set[str] = set()
            for ns, _pod, _ctr in held:
                acc = namespaces.setdefault(ns, _GroupFigures())
                acc.samples.append(val)
                acc.gpu_seconds += step * share
                acc.busy_seconds += step * share * val / 100.0
                acc.idle_seconds += step * share if is_idle else 0.0
                tenant = ns_map.get(ns, UNASSIGNED)
                fig = by_flavor.setdefault((tenant, ns, flavor), [0.0, 0.0, 0.0])
                fig[0] += step * share
                fig[1] += step * share * val / 100.0
                fig[2] += step * share if is_idle else 0.0
                tacc = tenant_acc.setdefault(tenant, _GroupFigures())
                if tenant not in seen_tenants:
                    tacc.samples.append(val)
                    seen_tenants.add(tenant)
                    tpoint = tenant_series.setdefault(tenant, {}).setdefault(ts, [0.0, 0.0, 0.0])
                    tpoint[0] += val
                    tpoint[1] += 1
                    tpoint[2] += 1 if is_idle else 0
                tacc.gpu_seconds += step * share
                tacc.busy_seconds += step * share * val / 100.0
                tacc.idle_seconds += step * share if is_idle else 0.0
        totals["allocated_seconds"] += allocated_secs
        totals["busy_seconds"] += busy_secs

        # trailing idle run: allocated samples below the threshold, counted back from the last sample
        run = 0
        for ts in reversed(times):
            if gpu.workloads.get(ts) and gpu.util[ts] < idle_threshold:
                run += 1
            else:
                break
        if not current:
            state = "unallocated"
        elif run >= idle_needed:
            state = "idle"
        else:
            state = "busy"
        fb_times = sorted(gpu.fb)
        memory_now = gpu.fb[fb_times[-1]] if fb_times else None
        row = dict(gpu.identity)
        row.update({
            "state": state,
            "namespace": current[0][0] if current else None,
            "pod": current[0][1] if current else None,
            "container": current[0][2] if current else None,
            "workloads": ["%s/%s" % (ns, pod) for ns, pod, _c in current],
            "tenant": ns_map.get(current[0][0], UNASSIGNED) if current else None,
            "avg_utilization": _rounded(_avg(values)),
            "p95_utilization": _rounded(quantile(values, 0.95)),
            "max_utilization": _rounded(max(values)),
            "last_utilization": _rounded(values[-1]),
            "memory_used_mib": _rounded(memory_now, 1),
            "memory_used_mib_max": _rounded(max(gpu.fb.values()), 1) if gpu.fb else None,
            "idle_seconds": run * step if current else 0.0,
            "gpu_hours": _hours(allocated_secs),
            "busy_gpu_hours": _hours(busy_secs),
            "samples": len(values),
        })
        gpu_rows.append(row)
        holders_ns = sorted({ns for ns, _p, _c in current})
        holders_tenants = sorted({ns_map.get(ns, UNASSIGNED) for ns in holders_ns})
        for ns in holders_ns:
            acc = namespaces.setdefault(ns, _GroupFigures())
            acc.gpus_now += 1
            acc.idle_now += 1 if state == "idle" else 0
            acc.memory_now += memory_now or 0.0
            acc.pods.update("%s/%s" % (w[0], w[1]) for w in current if w[0] == ns)
        for tenant in holders_tenants:
            tacc = tenant_acc.setdefault(tenant, _GroupFigures())
            tacc.gpus_now += 1
            tacc.idle_now += 1 if state == "idle" else 0
            tacc.memory_now += memory_now or 0.0
            tacc.pods.update("%s/%s" % (w[0], w[1]) for w in current if ns_map.get(w[0], UNASSIGNED) == tenant)
            tacc.gpu_refs.append(row)

    ns_rows = []
    for ns in sorted(namespaces):
        row = {"namespace": ns, "tenant": ns_map.get(ns, UNASSIGNED)}
        row.update(namespaces[ns].figures())
        ns_rows.append(row)

    tenant_rows = []
    known = {x["name"]: x for x in tenant_list}
    for name in [x["name"] for x in tenant_list] + sorted(n for n in tenant_acc if n not in known):
        acc = tenant_acc[name]
        info = known.get(name, {"namespaces": sorted(ns for ns in namespaces if ns_map.get(ns, UNASSIGNED) == name),
                                "cluster_queue": None})
        row = {"tenant": name, "namespaces": list(info["namespaces"]), "cluster_queue": info["cluster_queue"]}
        row.update(acc.figures())
        row["gpu_list"] = [{"gpu": gpu_name(g), "uuid": g["uuid"], "state": g["state"], "pod": g["pod"],
                            "namespace": g["namespace"], "avg_utilization": g["avg_utilization"]}
                           for g in acc.gpu_refs]
        tenant_rows.append(row)

    idle = [g for g in gpu_rows if g["state"] == "idle"]
    unallocated = [g for g in gpu_rows if g["state"] == "unallocated"]
    cluster = {
        "gpus": len(gpu_rows),
        "allocated_gpus": sum(1 for g in gpu_rows if g["state"] != "unallocated"),
        "idle_gpus": len(idle),
        "unallocated_gpus": len(unallocated),
        "avg_utilization": _rounded(_avg(cluster_samples)),
        "avg_utilization_allocated": _rounded(_avg(allocated_samples)),
        "p95_utilization_allocated": _rounded(quantile(allocated_samples, 0.95)),
        "gpu_hours_total": _hours(totals["gpu_seconds"]),
        "gpu_hours_allocated": _hours(totals["allocated_seconds"]),
        "gpu_hours_unallocated": _hours(totals["unallocated_seconds"]),
        "busy_gpu_hours": _hours(totals["busy_seconds"]),
        "idle_gpu_hours": _hours(totals["idle_seconds"]),
    }
    timeseries = {
        # per tenant: [time, average utilization of the GPUs it held, GPUs held, of which idle]
        "tenants": {name: [[ts, _rounded(p[0] / p[1]), p[1], p[2]] for ts, p in sorted(series.items())]
                    for name, series in tenant_series.items()},
        # cluster: [time, allocated GPUs, idle allocated GPUs]
        "cluster": [[ts, p[0], p[1]] for ts, p in sorted(cluster_series.items())],
    }
    return {
        "window": {"start": start, "end": end, "seconds": (end - start) + step, "step": step},
        "idle_threshold": idle_threshold,
        "idle_for_seconds": idle_for,
        "label_variant": variant,
        "cluster": cluster,
        "gpus": gpu_rows,
        "namespaces": ns_rows,
        "tenants": tenant_rows,
        "idle_gpus": [_short_gpu(g) for g in idle],
        "unallocated_gpus": [_short_gpu(g) for g in unallocated],
        "timeseries": timeseries,
        "usage_by_flavor": [{"tenant": k[0], "namespace": k[1], "flavor": k[2], "gpu_hours": _hours(v[0]),
                             "busy_gpu_hours": _hours(v[1]), "idle_gpu_hours": _hours(v[2])}
                            for k, v in sorted(by_flavor.items())],
    }


def _short_gpu(g: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    keys = ("node", "gpu", "uuid", "model", "mig_instance", "mig_profile", "namespace", "pod", "tenant",
            "idle_seconds", "avg_utilization", "last_utilization")
    return {k: g[k] for k in keys}


def _natural(text: str) -> t.Tuple[int, t.Union[int, str]]:
    return (0, int(text)) if str(text).isdigit() else (1, str(text))


# --- Kueue -----------------------------------------------------------------------------------
def _series_by(matrix: Matrix, *keys: str) -> t.Dict[t.Tuple[str, ...], t.Dict[float, float]]:
    out: t.Dict[t.Tuple[str, ...], t.Dict[float, float]] = {}
    for labels, values in matrix:
        key = tuple(labels.get(k, "") for k in keys)
        slot = out.setdefault(key, {})
        for ts, val in values:
            if not math.isnan(val):
                slot[ts] = max(slot.get(ts, float("-inf")), val)
    return out


def _last(series: t.Mapping[float, float]) -> t.Optional[float]:
    return series[max(series)] if series else None


def queue_report_from_metrics(
    nominal: Matrix,
    borrowing_limit: Matrix,
    usage: Matrix,
    pending: Matrix,
    admitted: t.Optional[Matrix] = None,
    status: t.Optional[Matrix] = None,
) -> t.List[t.Dict[str, t.Any]]:
    """Per ClusterQueue: quota (nominal, borrowing limit) vs usage per flavor/resource, borrowed amount,
    pending/admitted workloads, over time (range results of :func:`kueue_queries`)."""
    nom = _series_by(nominal, "cluster_queue", "flavor", "resource")
    blim = _series_by(borrowing_limit, "cluster_queue", "flavor", "resource")
    use = _series_by(usage, "cluster_queue", "flavor", "resource")
    pend = _series_by(pending, "cluster_queue")
    adm = _series_by(admitted or [], "cluster_queue")
    cohorts: t.Dict[str, str] = {}
    for labels, _v in list(nominal) + list(usage):
        if labels.get("cluster_queue") and labels.get("cohort"):
            cohorts[labels["cluster_queue"]] = labels["cohort"]
    statuses: t.Dict[str, t.Tuple[str, float]] = {}
    for labels, values in status or []:
        live = [ts for ts, val in values if val == 1]
        if labels.get("cluster_queue") and live:
            prev = statuses.get(labels["cluster_queue"])
            if prev is None or max(live) >= prev[1]:
                statuses[labels["cluster_queue"]] = (labels.get("status", ""), max(live))
    names = sorted({k[0] for k in nom} | {k[0] for k in use} | {k[0] for k in pend})
    queues = []
    for cq in names:
        resources = []
        for key in sorted(k for k in set(nom) | set(use) if k[0] == cq):
            n_series = nom.get(key, {})
            u_series = use.get(key, {})
            nominal_now = _last(n_series) or 0.0
            usage_vals = [u_series[ts] for ts in sorted(u_series)]
            borrowing_points = [ts for ts in u_series if u_series[ts] > n_series.get(ts, nominal_now)]
            resources.append({
                "flavor": key[1],
                "resource": key[2],
                "nominal": nominal_now,
                "borrowing_limit": _last(blim.get(key, {})),
                "usage": _last(u_series) or 0.0,
                "usage_avg": _rounded(_avg(usage_vals)) or 0.0,
                "usage_max": max(usage_vals) if usage_vals else 0.0,
                "borrowed": max((_last(u_series) or 0.0) - nominal_now, 0.0),
                "borrowing_fraction": _rounded(len(borrowing_points) / len(u_series)) if u_series else 0.0,
            })
        p_series = pend.get((cq,), {})
        p_vals = [p_series[ts] for ts in sorted(p_series)]
        state = statuses.get(cq)
        queues.append({
            "cluster_queue": cq,
            "cohort": cohorts.get(cq),
            "status": state[0] if state else None,
            "resources": resources,
            "pending_workloads": int(p_vals[-1]) if p_vals else 0,
            "pending_max": int(max(p_vals)) if p_vals else 0,
            "pending_fraction": _rounded(sum(1 for v in p_vals if v > 0) / len(p_vals)) if p_vals else 0.0,
            "pending_growth": int(p_vals[-1] - p_vals[0]) if p_vals else 0,
            "admitted_workloads": int(_last(adm.get((cq,), {})) or 0),
            "source": "prometheus",
        })
    return queues


def _quantity_float(value: t.Any) -> float:
    try:
        return float(parse_quantity(value))
    except (ValueError, TypeError):
        return 0.0


def queue_report_from_objects(cluster_queues: t.Sequence[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
    """The same per-ClusterQueue figures from ClusterQueue objects (v1beta2 or v1beta1): a snapshot, so
    the fractions are 1 or 0 (borrowing/waiting now or not)."""
    queues = []
    for cq in sorted(cluster_queues, key=lambda o: o.get("metadata", {}).get("name", "")):
        spec = cq.get("spec") or {}
        status = cq.get("status") or {}
        usage: t.Dict[t.Tuple[str, str], t.Tuple[float, float]] = {}
        for fu in status.get("flavorsUsage") or []:
            for res in fu.get("resources") or []:
                usage[(fu.get("name", ""), res.get("name", ""))] = (_quantity_float(res.get("total", 0)), _quantity_float(res.get("borrowed", 0)))
        resources = []
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    key = (flavor.get("name", ""), res.get("name", ""))
                    total, borrowed = usage.get(key, (0.0, 0.0))
                    resources.append({
                        "flavor": key[0],
                        "resource": key[1],
                        "nominal": _quantity_float(res.get("nominalQuota", 0)),
                        "borrowing_limit": _quantity_float(res["borrowingLimit"]) if res.get("borrowingLimit") is not None else None,
                        "usage": total,
                        "usage_avg": total,
                        "usage_max": total,
                        "borrowed": borrowed,
                        "borrowing_fraction": 1.0 if borrowed > 0 else 0.0,
                    })
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        active = conditions.get("Active", {})
        pending = int(status.get("pendingWorkloads") or 0)
        queues.append({
            "cluster_queue": cq.get("metadata", {}).get("name"),
            "cohort": spec.get("cohortName") or spec.get("cohort"),
            "status": "active" if active.get("status") == "True" else ("pending" if active else None),
            "resources": resources,
            "pending_workloads": pending,
            "pending_max": pending,
            "pending_fraction": 1.0 if pending > 0 else 0.0,
            "pending_growth": 0,
            "admitted_workloads": int(status.get("admittedWorkloads") or 0),
            "source": "cluster",
        })
    return queues


def attach_queues(report: t.Dict[str, t.Any], queues: t.Sequence[t.Mapping[str, t.Any]]) -> None:
    """Add ClusterQueue figures to the report and to each tenant (by its ``cluster_queue``)."""
    by_name = {q["cluster_queue"]: q for q in queues}
    report["queues"] = list(queues)
    for tenant in report["tenants"]:
        queue = by_name.get(tenant.get("cluster_queue") or "")
        tenant["quota"] = [dict(r) for r in queue["resources"]] if queue else []
        tenant["pending_workloads"] = queue["pending_workloads"] if queue else None
        tenant["admitted_workloads"] = queue["admitted_workloads"] if queue else None
        tenant["queue_status"] = queue["status"] if queue else None
        tenant["pending_fraction"] = queue["pending_fraction"] if queue else None
        tenant["pending_growth"] = queue["pending_growth"] if queue else None
        gpu_quota = [r for r in tenant["quota"] if is_accelerator(r["resource"])]
        tenant["gpu_quota_nominal"] = sum(r["nominal"] for r in gpu_quota) if queue else None
        tenant["gpu_quota_used"] = sum(r["usage"] for r in gpu_quota) if queue else None
        tenant["gpu_quota_borrowed"] = sum(r["borrowed"] for r in gpu_quota) if queue else None
