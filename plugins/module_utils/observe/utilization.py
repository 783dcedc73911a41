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

Labels = t.Dict[str, str]
Matrix = t.List[t.Tuple[Labels, t.List[t.Tuple[float, float]]]]

# --- metric names ----------------------------------------------------------------------------
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"

# Metrics of NVIDIA dcgm-exporter's default counter set (etc/default-counters.csv) that dashboards and
# alerts may use.
DCGM_METRICS = (
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
)
DCGM_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "hostname", "pci_bus_id", "GPU_I_ID",
               "GPU_I_PROFILE", "namespace", "pod", "container", "exported_namespace", "exported_pod",
               "exported_container", "DCGM_FI_DRIVER_VERSION", "err_code", "err_msg")

# Kueue's Prometheus metrics (sigs.k8s.io/kueue v0.17.0 pkg/metrics/metrics.go); every one also has the
# label ``replica_role`` (leader|follower|standalone) in v0.17.
KUEUE_METRICS = {
    "kueue_admission_attempts_total": ("result",),
    "kueue_admission_attempt_duration_seconds": ("result",),
    "kueue_admission_cycle_preemption_skips": ("cluster_queue",),
    "kueue_build_info": ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"),
    "kueue_pending_workloads": ("cluster_queue", "status"),
    "kueue_local_queue_pending_workloads": ("name", "namespace", "status"),
    "kueue_finished_workloads": ("cluster_queue",),
    "kueue_quota_reserved_workloads_total": ("cluster_queue", "priority_class"),
    "kueue_quota_reserved_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_admitted_workloads_total": ("cluster_queue", "priority_class"),
    "kueue_admission_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_evicted_workloads_total": ("cluster_queue", "reason", "underlying_cause", "priority_class"),
    "kueue_preempted_workloads_total": ("preempting_cluster_queue", "reason"),
    "kueue_reserving_active_workloads": ("cluster_queue",),
    "kueue_admitted_active_workloads": ("cluster_queue",),
    "kueue_local_queue_admitted_active_workloads": ("name", "namespace"),
    "kueue_cluster_queue_status": ("cluster_queue", "status"),
    "kueue_local_queue_status": ("name", "namespace", "active"),
    "kueue_cluster_queue_resource_reservation": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_resource_usage": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_local_queue_resource_usage": ("name", "namespace", "flavor", "resource"),
    "kueue_cluster_queue_nominal_quota": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_borrowing_limit": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_lending_limit": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_weighted_share": ("cluster_queue", "cohort"),
    "kueue_cohort_subtree_quota": ("cohort", "flavor", "resource"),
    "kueue_cohort_subtree_resource_reservations": ("cohort", "flavor", "resource"),
}

NODE_LABELS = ("Hostname", "hostname", "kubernetes_node", "node")
GPU_GROUP_LABELS = ("Hostname", "hostname", "kubernetes_node", "node", "gpu", "UUID", "device", "modelName",
                    "pci_bus_id", "GPU_I_ID", "GPU_I_PROFILE", "namespace", "pod", "container",
                    "exported_namespace", "exported_pod", "exported_container")
KUEUE_NOT_FOLLOWER = 'replica_role!="follower"'

UNASSIGNED = "(no tenant)"

DEFAULTS: t.Dict[str, t.Any] = {
    "idle_threshold": 5.0,       # % utilization below which an allocated GPU counts as idle
    "idle_for": 600.0,           # seconds a GPU must stay below idle_threshold to be reported idle
    "underuse_ratio": 0.3,       # peak quota use <= ratio * nominal -> "quota underused"
    "persistent_ratio": 0.5,     # borrowing / waiting in >= this share of the window -> "keeps ..."
}


# --- PromQL ----------------------------------------------------------------------------------
def _with_selector(metric: str, *matchers: str) -> str:
    parts = [m.strip().strip("{}").strip() for m in matchers if m and m.strip().strip("{}").strip()]
    return "%s{%s}" % (metric, ",".join(parts)) if parts else metric


def dcgm_query(metric: str, selector: str = "") -> str:
    """PromQL for one DCGM metric per GPU (and workload), de-duplicated across scrape jobs/instances.

    ``max by (...)`` keeps every GPU/workload label variant (absent labels group as empty) and drops
    ``job``/``instance``/``endpoint`` so a GPU scraped twice (ServiceMonitor + PodMonitor, HA Prometheus
    behind Thanos) is counted once.
    """
    return "max by (%s) (%s)" % (", ".join(GPU_GROUP_LABELS), _with_selector(metric, selector))


def kueue_queries(selector: str = "") -> t.Dict[str, str]:
    """PromQL for the Kueue quota/usage/pending series used per ClusterQueue (leader or standalone replica)."""
    quota_by = "cohort, cluster_queue, flavor, resource"
    return {
        "nominal": "max by (%s) (%s)" % (quota_by, _with_selector("kueue_cluster_queue_nominal_quota", KUEUE_NOT_FOLLOWER, selector)),
        "borrowing_limit": "max by (%s) (%s)" % (quota_by, _with_selector("kueue_cluster_queue_borrowing_limit", KUEUE_NOT_FOLLOWER, selector)),
        "usage": "max by (%s) (%s)" % (quota_by, _with_selector("kueue_cluster_queue_resource_usage", KUEUE_NOT_FOLLOWER, selector)),
        "pending": "sum by (cluster_queue) (%s)" % _with_selector("kueue_pending_workloads", KUEUE_NOT_FOLLOWER, selector),
        "admitted": "max by (cluster_queue) (%s)" % _with_selector("kueue_admitted_active_workloads", KUEUE_NOT_FOLLOWER, selector),
        "status": "max by (cluster_queue, status) (%s) == 1" % _with_selector("kueue_cluster_queue_status", KUEUE_NOT_FOLLOWER, selector),
    }


def range_bounds(end: float, window: float, step: float) -> t.Tuple[float, float]:
    """``(start, end)`` of a range query with exactly ``window / step`` evaluation points ending at ``end``.

    Each point stands for the ``step`` seconds before it, so the points cover ``(end - window, end]``.
    """
    if step <= 0 or window <= 0:
        raise ValueError("window and step must be positive")
    points = max(int(round(window / step)), 1)
    return end - (points - 1) * step, end


def auto_step(window: float, max_points: int = 240, minimum: float = 15.0) -> float:
    """A step giving at most ``max_points`` points per series (never below ``minimum`` seconds)."""
    step = max(minimum, math.ceil(window / max_points))
    return float(step)


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


def _r(value: t.Optional[float], digits: int = 2) -> t.Optional[float]:
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
class _Gpu:
    __slots__ = ("identity", "util", "fb", "workloads")

    def __init__(self, identity: t.Dict[str, t.Any]) -> None:
        self.identity = identity
        self.util: t.Dict[float, float] = {}
        self.fb: t.Dict[float, float] = {}
        self.workloads: t.Dict[float, t.Set[t.Tuple[str, str, str]]] = {}


def _timelines(util: Matrix, fb: Matrix) -> t.Dict[t.Tuple[str, str, str], _Gpu]:
    gpus: t.Dict[t.Tuple[str, str, str], _Gpu] = {}
    for labels, values in util:
        key = gpu_key(labels)
        gpu = gpus.get(key)
        if gpu is None:
            gpu = gpus[key] = _Gpu(gpu_identity(labels))
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


class _Acc:
    """Accumulates utilization samples and GPU-seconds for a namespace or a tenant."""

    __slots__ = ("samples", "gpu_seconds", "busy_seconds", "gpus_now", "idle_now", "memory_now", "pods", "gpu_refs")

    def __init__(self) -> None:
        self.samples: t.List[float] = []
        self.gpu_seconds = 0.0
        self.busy_seconds = 0.0
        self.gpus_now = 0
        self.idle_now = 0
        self.memory_now = 0.0
        self.pods: t.Set[str] = set()
        self.gpu_refs: t.List[t.Dict[str, t.Any]] = []

    def figures(self) -> t.Dict[str, t.Any]:
        return {
            "gpus": self.gpus_now,
            "idle_gpus": self.idle_now,
            "avg_utilization": _r(_avg(self.samples)),
            "p95_utilization": _r(quantile(self.samples, 0.95)),
            "memory_used_mib": _r(self.memory_now, 1),
            "gpu_hours": _hours(self.gpu_seconds),
            "busy_gpu_hours": _hours(self.busy_seconds),
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
) -> t.Dict[str, t.Any]:
    """Per GPU / namespace / tenant utilization figures for the window ``(start - step, end]``.

    ``util`` and ``fb`` are range results of :func:`dcgm_query` for ``DCGM_FI_DEV_GPU_UTIL`` and
    ``DCGM_FI_DEV_FB_USED``. A GPU is *idle* when it is held by a pod now and its utilization stayed below
    ``idle_threshold`` % for at least ``idle_for`` seconds (trailing); *unallocated* when no pod holds it now.
    """
    fb = fb or []
    variant = label_variant([util, fb])
    gpus = _timelines(util, fb)
    ns_map, tenant_list = tenant_index(tenants)
    namespaces: t.Dict[str, _Acc] = {}
    tenant_acc: t.Dict[str, _Acc] = {x["name"]: _Acc() for x in tenant_list}
    gpu_rows: t.List[t.Dict[str, t.Any]] = []
    cluster_samples: t.List[float] = []
    allocated_samples: t.List[float] = []
    totals = {"gpu_seconds": 0.0, "allocated_seconds": 0.0, "busy_seconds": 0.0, "unallocated_seconds": 0.0}
    idle_needed = max(int(math.ceil(idle_for / step - 1e-9)), 1)

    for key in sorted(gpus, key=lambda k: (k[0], _natural(k[1]), _natural(k[2]))):
        gpu = gpus[key]
        times = sorted(gpu.util)
        if not times:
            continue
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
            share = 1.0 / len(held)
            seen_tenants: t.Set[str] = set()
            for ns, _pod, _ctr in held:
                acc = namespaces.setdefault(ns, _Acc())
                acc.samples.append(val)
                acc.gpu_seconds += step * share
                acc.busy_seconds += step * share * val / 100.0
                tenant = ns_map.get(ns, UNASSIGNED)
                tacc = tenant_acc.setdefault(tenant, _Acc())
                if tenant not in seen_tenants:
                    tacc.samples.append(val)
                    seen_tenants.add(tenant)
                tacc.gpu_seconds += step * share
                tacc.busy_seconds += step * share * val / 100.0
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
            "avg_utilization": _r(_avg(values)),
            "p95_utilization": _r(quantile(values, 0.95)),
            "max_utilization": _r(max(values)),
            "last_utilization": _r(values[-1]),
            "memory_used_mib": _r(memory_now, 1),
            "memory_used_mib_max": _r(max(gpu.fb.values()), 1) if gpu.fb else None,
            "idle_seconds": run * step if current else 0.0,
            "gpu_hours": _hours(allocated_secs),
            "busy_gpu_hours": _hours(busy_secs),
            "samples": len(values),
        })
        gpu_rows.append(row)
        holders_ns = sorted({ns for ns, _p, _c in current})
        holders_tenants = sorted({ns_map.get(ns, UNASSIGNED) for ns in holders_ns})
        for ns in holders_ns:
            acc = namespaces.setdefault(ns, _Acc())
            acc.gpus_now += 1
            acc.idle_now += 1 if state == "idle" else 0
            acc.memory_now += memory_now or 0.0
            acc.pods.update("%s/%s" % (w[0], w[1]) for w in current if w[0] == ns)
        for tenant in holders_tenants:
            tacc = tenant_acc.setdefault(tenant, _Acc())
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
        "avg_utilization": _r(_avg(cluster_samples)),
        "avg_utilization_allocated": _r(_avg(allocated_samples)),
        "p95_utilization_allocated": _r(quantile(allocated_samples, 0.95)),
        "gpu_hours_total": _hours(totals["gpu_seconds"]),
        "gpu_hours_allocated": _hours(totals["allocated_seconds"]),
        "gpu_hours_unallocated": _hours(totals["unallocated_seconds"]),
        "busy_gpu_hours": _hours(totals["busy_seconds"]),
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
                "usage_avg": _r(_avg(usage_vals)) or 0.0,
                "usage_max": max(usage_vals) if usage_vals else 0.0,
                "borrowed": max((_last(u_series) or 0.0) - nominal_now, 0.0),
                "borrowing_fraction": _r(len(borrowing_points) / len(u_series)) if u_series else 0.0,
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
            "pending_fraction": _r(sum(1 for v in p_vals if v > 0) / len(p_vals)) if p_vals else 0.0,
            "pending_growth": int(p_vals[-1] - p_vals[0]) if p_vals else 0,
            "admitted_workloads": int(_last(adm.get((cq,), {})) or 0),
            "source": "prometheus",
        })
    return queues


def _qty(value: t.Any) -> float:
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
                usage[(fu.get("name", ""), res.get("name", ""))] = (_qty(res.get("total", 0)), _qty(res.get("borrowed", 0)))
        resources = []
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    key = (flavor.get("name", ""), res.get("name", ""))
                    total, borrowed = usage.get(key, (0.0, 0.0))
                    resources.append({
                        "flavor": key[0],
                        "resource": key[1],
                        "nominal": _qty(res.get("nominalQuota", 0)),
                        "borrowing_limit": _qty(res["borrowingLimit"]) if res.get("borrowingLimit") is not None else None,
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


# --- recommendations and thresholds ----------------------------------------------------------
def _fmt_num(value: t.Optional[float]) -> str:
    if value is None:
        return "n/a"
    if float(value).is_integer():
        return "%d" % value
    return (("%.4f" if abs(value) < 1 else "%.2f") % value).rstrip("0").rstrip(".")


def _window_text(report: t.Mapping[str, t.Any]) -> str:
    seconds = int(report["window"]["seconds"])
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds


def recommendations(
    report: t.Mapping[str, t.Any],
    underuse_ratio: float = DEFAULTS["underuse_ratio"],
    persistent_ratio: float = DEFAULTS["persistent_ratio"],
) -> t.List[t.Dict[str, t.Any]]:
    """Quota and usage advice per tenant: underused quota, persistent borrowing or waiting, idle GPUs."""
    window = _window_text(report)
    out: t.List[t.Dict[str, t.Any]] = []
    for tenant in report.get("tenants", []):
        name = tenant["tenant"]
        if name == UNASSIGNED:
            continue
        for res in tenant.get("quota") or []:
            if not is_accelerator(res["resource"]) or res["nominal"] <= 0:
                continue
            where = "%s on flavor %s" % (res["resource"], res["flavor"])
            if res["usage_max"] <= underuse_ratio * res["nominal"]:
                suggested = int(math.ceil(res["usage_max"]))
                out.append({
                    "tenant": name, "kind": "quota_underused", "flavor": res["flavor"], "resource": res["resource"],
                    "current": res["nominal"], "suggested": suggested,
                    "message": "tenant %s used at most %s of its nominal quota %s of %s in the last %s: lower the "
                               "nominal quota to %d (or lend the rest to its cohort with a lending limit)"
                               % (name, _fmt_num(res["usage_max"]), _fmt_num(res["nominal"]), where, window, suggested),
                })
            if res["borrowing_fraction"] >= persistent_ratio and res["usage_avg"] > res["nominal"]:
                suggested = int(math.ceil(res["usage_avg"]))
                out.append({
                    "tenant": name, "kind": "keeps_borrowing", "flavor": res["flavor"], "resource": res["resource"],
                    "current": res["nominal"], "suggested": suggested,
                    "message": "tenant %s borrowed %s beyond its nominal quota %s during %d%% of the last %s "
                               "(average use %s): raise the nominal quota to %d"
                               % (name, where, _fmt_num(res["nominal"]), int(round(res["borrowing_fraction"] * 100)),
                                  window, _fmt_num(res["usage_avg"]), suggested),
                })
        if (tenant.get("pending_fraction") or 0) >= persistent_ratio and (tenant.get("pending_workloads") or 0) > 0:
            out.append({
                "tenant": name, "kind": "keeps_waiting", "pending_workloads": tenant["pending_workloads"],
                "message": "tenant %s had workloads waiting in ClusterQueue %s during %d%% of the last %s (%d pending "
                           "now): raise its nominal quota or borrowing limit, or give it a larger fair-sharing weight"
                           % (name, tenant.get("cluster_queue"), int(round(tenant["pending_fraction"] * 100)), window,
                              tenant["pending_workloads"]),
            })
        if tenant.get("idle_gpus"):
            idle = [g for g in tenant.get("gpu_list", []) if g["state"] == "idle"]
            out.append({
                "tenant": name, "kind": "idle_gpus", "gpus": [g["gpu"] for g in idle],
                "message": "tenant %s holds %d idle GPU%s (%s): stop or scale down these pods, or enable idle "
                           "scale-to-zero (autoscaling.idle_scale_to_zero) for them"
                           % (name, len(idle), "" if len(idle) == 1 else "s",
                              ", ".join("%s by %s/%s" % (g["gpu"], g["namespace"], g["pod"]) for g in idle)),
            })
    cluster = report.get("cluster") or {}
    waiting = [t_["tenant"] for t_ in report.get("tenants", []) if (t_.get("pending_workloads") or 0) > 0]
    if cluster.get("unallocated_gpus") and waiting:
        out.append({
            "tenant": None, "kind": "unallocated_while_waiting", "tenants": waiting,
            "message": "%d GPU%s are not allocated while tenant%s %s wait: check the flavors' node labels and "
                       "tolerations, or let the waiting tenants borrow through a cohort"
                       % (cluster["unallocated_gpus"], "" if cluster["unallocated_gpus"] == 1 else "s",
                          "" if len(waiting) == 1 else "s", ", ".join(waiting)),
        })
    return out


def evaluate_thresholds(
    report: t.Mapping[str, t.Any],
    min_utilization: t.Optional[float] = None,
    max_idle_gpus: t.Optional[int] = None,
    max_unallocated_gpus: t.Optional[int] = None,
) -> t.List[t.Dict[str, t.Any]]:
    """Threshold violations with a message naming the tenant, the GPUs and why."""
    window = _window_text(report)
    out: t.List[t.Dict[str, t.Any]] = []
    if min_utilization is not None:
        for tenant in report.get("tenants", []):
            avg = tenant.get("avg_utilization")
            if tenant["tenant"] == UNASSIGNED or avg is None or tenant.get("gpu_hours", 0) <= 0 or avg >= min_utilization:
                continue  # namespaces of no tenant are reported, not judged
            gpus = sorted(tenant.get("gpu_list", []), key=lambda g: (g["avg_utilization"] is None, g["avg_utilization"] or 0))
            detail = ", ".join("%s (%s/%s) %s%%" % (g["gpu"], g["namespace"], g["pod"], _fmt_num(g["avg_utilization"]))
                               for g in gpus) or "no GPU held now"
            who = "tenant %s" % tenant["tenant"]
            out.append({
                "check": "min_utilization", "tenant": tenant["tenant"], "value": avg, "threshold": min_utilization,
                "gpus": [g["gpu"] for g in gpus],
                "message": "%s: average GPU utilization %s%% over the last %s is below the minimum %s%% "
                           "(gpuaas_validate_min_utilization); its GPUs: %s. Stop or right-size the idle workloads, "
                           "or lower the threshold" % (who, _fmt_num(avg), window, _fmt_num(min_utilization), detail),
            })
    idle = report.get("idle_gpus") or []
    if max_idle_gpus is not None and len(idle) > max_idle_gpus:
        detail = "; ".join("%s (UUID %s) held by %s/%s of tenant %s, below %s%% for %s"
                           % (gpu_name(g), g["uuid"] or "?", g["namespace"], g["pod"], g["tenant"],
                              _fmt_num(report.get("idle_threshold")), _dur(g["idle_seconds"])) for g in idle)
        out.append({
            "check": "max_idle_gpus", "tenant": None, "value": len(idle), "threshold": max_idle_gpus,
            "gpus": [gpu_name(g) for g in idle], "tenants": sorted({g["tenant"] for g in idle}),
            "message": "%d allocated GPU%s idle, more than the %d allowed (gpuaas_validate_max_idle_gpus): %s. "
                       "Stop these pods or enable idle scale-to-zero for them"
                       % (len(idle), " is" if len(idle) == 1 else "s are", max_idle_gpus, detail),
        })
    unalloc = report.get("unallocated_gpus") or []
    if max_unallocated_gpus is not None and len(unalloc) > max_unallocated_gpus:
        out.append({
            "check": "max_unallocated_gpus", "tenant": None, "value": len(unalloc), "threshold": max_unallocated_gpus,
            "gpus": [gpu_name(g) for g in unalloc],
            "message": "%d GPUs are not allocated to any pod, more than the %d allowed "
                       "(gpuaas_validate_max_unallocated_gpus): %s. Raise tenant quotas or shrink the GPU node pool"
                       % (len(unalloc), max_unallocated_gpus, ", ".join(gpu_name(g) for g in unalloc)),
        })
    return out


def _dur(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return "%dh%02dm" % (seconds // 3600, (seconds % 3600) // 60)
    if seconds >= 60:
        return "%dm%02ds" % (seconds // 60, seconds % 60) if seconds % 60 else "%dm" % (seconds // 60)
    return "%ds" % seconds


# --- rendering -------------------------------------------------------------------------------
TABLE_COLUMNS = (("tenant", "TENANT"), ("gpus", "GPUS"), ("idle_gpus", "IDLE"), ("avg_utilization", "AVG%"),
                 ("p95_utilization", "P95%"), ("memory_used_mib", "MEM MiB"), ("gpu_hours", "GPU-h"),
                 ("quota", "GPU QUOTA used/nominal"), ("pending_workloads", "PENDING"))


def _cell(row: t.Mapping[str, t.Any], key: str) -> str:
    if key == "quota":
        if row.get("gpu_quota_nominal") is None:
            return "-"
        gpu_quota = [r for r in row.get("quota") or [] if is_accelerator(r["resource"])]
        if len(gpu_quota) <= 1:
            text = "%s/%s" % (_fmt_num(row.get("gpu_quota_used")), _fmt_num(row.get("gpu_quota_nominal")))
            if row.get("gpu_quota_borrowed"):
                text += " (+%s borrowed)" % _fmt_num(row["gpu_quota_borrowed"])
            return text
        parts = []
        for r in gpu_quota:  # several GPU flavors/resources: one figure each, never summed across GPU types
            part = "%s/%s %s" % (_fmt_num(r["usage"]), _fmt_num(r["nominal"]), r["flavor"])
            if r.get("borrowed"):
                part += " (+%s)" % _fmt_num(r["borrowed"])
            parts.append(part)
        return ", ".join(parts)
    value = row.get(key)
    if value is None:
        return "-"
    if isinstance(value, float):
        return _fmt_num(value)
    return str(value)


def tenant_table(report: t.Mapping[str, t.Any]) -> t.List[str]:
    """A short fixed-width per-tenant table (list of lines) for the play output."""
    rows = [[title for _k, title in TABLE_COLUMNS]]
    for tenant in report.get("tenants", []):
        rows.append([_cell(tenant, key) for key, _t in TABLE_COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_COLUMNS))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    cluster = report.get("cluster") or {}
    lines.append("cluster: %s GPUs, %s allocated, %s idle, %s unallocated, avg %s%% (allocated: %s%%)" % (
        cluster.get("gpus", 0), cluster.get("allocated_gpus", 0), cluster.get("idle_gpus", 0),
        cluster.get("unallocated_gpus", 0), _fmt_num(cluster.get("avg_utilization")),
        _fmt_num(cluster.get("avg_utilization_allocated"))))
    return lines


def _md_escape(value: t.Any) -> str:
    return str(value).replace("|", "\\|")


def render_markdown(report: t.Mapping[str, t.Any], health: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                    title: str = "GPU platform validation report") -> str:
    """The report for people: health checks, per-tenant table, idle and unallocated GPUs, queues, advice."""
    lines = ["# %s" % title, ""]
    window = report.get("window") or {}
    lines.append("Window: last %s ending %s UTC (step %ss); idle = below %s%% for %s."
                 % (_window_text(report), _iso(window.get("end")), _fmt_num(window.get("step")),
                    _fmt_num(report.get("idle_threshold")), _dur(report.get("idle_for_seconds") or 0)))
    lines.append("")
    verdict = report.get("result")
    if verdict:
        lines.extend(["**Result: %s**" % verdict.upper(), ""])
    if health is not None:
        lines.extend(["## Health checks", "", "| check | object | status | detail |", "|---|---|---|---|"])
        for item in health:
            detail = item.get("message", "")
            if not item.get("ok") and item.get("hint"):
                detail += " (fix: %s)" % item["hint"]
            lines.append("| %s | %s | %s | %s |" % (_md_escape(item.get("check")), _md_escape(item.get("object", "")),
                                                    "ok" if item.get("ok") else "FAILED", _md_escape(detail)))
        lines.append("")
    violations = report.get("violations") or []
    if violations:
        lines.extend(["## Threshold violations", ""])
        lines.extend("- %s" % v["message"] for v in violations)
        lines.append("")
    lines.extend(["## Tenants", "", "| " + " | ".join(title for _k, title in TABLE_COLUMNS) + " |",
                  "|" + "---|" * len(TABLE_COLUMNS)])
    for tenant in report.get("tenants", []):
        lines.append("| " + " | ".join(_md_escape(_cell(tenant, key)) for key, _t in TABLE_COLUMNS) + " |")
    lines.append("")
    cluster = report.get("cluster") or {}
    lines.extend(["## Cluster", "",
                  "- GPUs: %s (allocated %s, idle %s, unallocated %s)" % (
                      cluster.get("gpus", 0), cluster.get("allocated_gpus", 0), cluster.get("idle_gpus", 0),
                      cluster.get("unallocated_gpus", 0)),
                  "- Average utilization: %s%% of all GPUs, %s%% of allocated GPUs (p95 %s%%)" % (
                      _fmt_num(cluster.get("avg_utilization")), _fmt_num(cluster.get("avg_utilization_allocated")),
                      _fmt_num(cluster.get("p95_utilization_allocated"))),
                  "- GPU-hours: %s allocated, %s busy, %s unallocated" % (
                      _fmt_num(cluster.get("gpu_hours_allocated")), _fmt_num(cluster.get("busy_gpu_hours")),
                      _fmt_num(cluster.get("gpu_hours_unallocated"))), ""])
    if report.get("namespaces"):
        lines.extend(["## Namespaces", "", "| namespace | tenant | GPUs | idle | avg% | p95% | GPU-h |", "|---|---|---|---|---|---|---|"])
        for ns in report["namespaces"]:
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                _md_escape(ns["namespace"]), _md_escape(ns["tenant"]), ns["gpus"], ns["idle_gpus"],
                _fmt_num(ns["avg_utilization"]), _fmt_num(ns["p95_utilization"]), _fmt_num(ns["gpu_hours"])))
        lines.append("")
    if report.get("idle_gpus"):
        lines.extend(["## Idle allocated GPUs", "", "| GPU | UUID | model | pod | tenant | idle for | avg% |", "|---|---|---|---|---|---|---|"])
        for g in report["idle_gpus"]:
            lines.append("| %s | %s | %s | %s/%s | %s | %s | %s |" % (
                _md_escape(gpu_name(g)), g["uuid"], _md_escape(g["model"]), g["namespace"], g["pod"], g["tenant"],
                _dur(g["idle_seconds"]), _fmt_num(g["avg_utilization"])))
        lines.append("")
    if report.get("unallocated_gpus"):
        lines.extend(["## Unallocated GPUs", ""])
        lines.extend("- %s (%s, UUID %s)" % (gpu_name(g), g["model"] or "?", g["uuid"] or "?") for g in report["unallocated_gpus"])
        lines.append("")
    if report.get("queues"):
        lines.extend(["## Queues (quota vs usage)", "",
                      "| ClusterQueue | status | flavor | resource | nominal | borrowing limit | usage | borrowed | pending |",
                      "|---|---|---|---|---|---|---|---|---|"])
        for q in report["queues"]:
            for r in q["resources"] or [{"flavor": "-", "resource": "-", "nominal": None, "borrowing_limit": None,
                                         "usage": None, "borrowed": None}]:
                lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    q["cluster_queue"], q.get("status") or "?", r["flavor"], r["resource"], _fmt_num(r["nominal"]),
                    _fmt_num(r["borrowing_limit"]), _fmt_num(r["usage"]), _fmt_num(r["borrowed"]), q["pending_workloads"]))
        lines.append("")
    recs = report.get("recommendations") or []
    lines.extend(["## Recommendations", ""])
    if recs:
        lines.extend("- %s" % r["message"] for r in recs)
    else:
        lines.append("- none")
    lines.append("")
    return "\n".join(lines)


def _iso(ts: t.Optional[float]) -> str:
    if ts is None:
        return "?"
    import datetime  # local import keeps module import cheap

    return datetime.datetime.fromtimestamp(float(ts), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
