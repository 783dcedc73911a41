# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Metric names and label sets of the DCGM exporter and Kueue, and the PromQL the reports run. Pure."""

from __future__ import annotations

import math
import typing as t

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
    # v0.19: pending requests per resource (no flavor: pending workloads are not assigned to one yet)
    "kueue_cluster_queue_resource_pending": ("cluster_queue", "resource"),
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


def tuning_queries(selector: str = "") -> t.Dict[str, str]:
    """PromQL for the quota tuning series: quota, limits, usage per flavor/resource and pending requests per
    resource (``kueue_cluster_queue_resource_pending``, Kueue >= v0.19 with enableClusterQueueResources).
    Unset borrowing/lending limits are reported by Kueue as +Inf."""
    quota_by = "cohort, cluster_queue, flavor, resource"

    def q(metric: str, by: str = quota_by) -> str:
        return "max by (%s) (%s)" % (by, _with_selector(metric, KUEUE_NOT_FOLLOWER, selector))

    return {
        "nominal": q("kueue_cluster_queue_nominal_quota"),
        "borrowing_limit": q("kueue_cluster_queue_borrowing_limit"),
        "lending_limit": q("kueue_cluster_queue_lending_limit"),
        "usage": q("kueue_cluster_queue_resource_usage"),
        "pending_resources": q("kueue_cluster_queue_resource_pending", "cluster_queue, resource"),
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


def gpu_util_by_pod_query(namespace: str, pods: t.Iterable[str], window_seconds: int) -> str:
    """The highest GPU utilization (%) of each of ``pods`` over the last ``window_seconds``, one series per pod
    (label ``pod``); both DCGM label styles (``namespace``/``pod``, or ``exported_*`` when Prometheus renamed the
    exporter's labels). A pod without any sample in the window has no series (unknown is not idle)."""
    names = "|".join(sorted(set(pods)))  # DNS-1123 names: no character needs escaping beyond '.', matched exactly below
    names = names.replace(".", "\\\\.")
    plain = ('max by (pod) (max_over_time(%s{namespace="%s",pod=~"%s"}[%ds]))'
             % (DCGM_GPU_UTIL, namespace, names, window_seconds))
    exported = ('max by (pod) (label_replace(max_over_time(%s{exported_namespace="%s",exported_pod=~"%s"}[%ds]), '
                '"pod", "$1", "exported_pod", "(.+)"))' % (DCGM_GPU_UTIL, namespace, names, window_seconds))
    return "%s or %s" % (plain, exported)
