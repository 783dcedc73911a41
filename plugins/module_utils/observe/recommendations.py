# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Quota recommendations and threshold checks from a utilization report. Pure."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.observe.formatting import format_duration, format_number, window_text
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.tuning import TUNING_DEFAULTS, tuning_recommendations
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.utilization import UNASSIGNED, gpu_name


def recommendations(
    report: t.Mapping[str, t.Any],
    persistent_ratio: float = TUNING_DEFAULTS["persistent_ratio"],
    headroom: float = TUNING_DEFAULTS["headroom"],
    min_change: float = TUNING_DEFAULTS["min_change"],
    tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
) -> t.List[t.Dict[str, t.Any]]:
    """Quota advice from ``report["tuning"]`` (:func:`tuning.quota_analysis`; "insufficient data" when the window
    or its coverage is too short, or when Kueue's history is not in Prometheus), idle GPUs, and GPUs left
    unallocated while tenants wait."""
    window = window_text(report)
    out: t.List[t.Dict[str, t.Any]] = []
    analysis = report.get("tuning")
    if analysis and not analysis.get("sufficient"):
        out.append({"tenant": None, "kind": "insufficient_data", "reasons": list(analysis.get("insufficient_reasons") or []),
                    "message": "insufficient data for quota recommendations: %s. Use a longer window (the default is "
                               "14d) once Prometheus holds that much Kueue and DCGM history"
                               % "; ".join(analysis.get("insufficient_reasons") or [])})
    elif analysis:
        out.extend(tuning_recommendations(analysis, tenants, report.get("tenants"), headroom=headroom,
                                          min_change=min_change, persistent_ratio=persistent_ratio, window=window))
    elif report.get("queues"):
        out.append({"tenant": None, "kind": "insufficient_data",
                    "reasons": ["the quota figures come from the ClusterQueue objects (a snapshot, no history)"],
                    "message": "insufficient data for quota recommendations: the quota figures come from the ClusterQueue "
                               "objects, a snapshot without history; scrape Kueue with enableClusterQueueResources "
                               "(observability and kueue roles) so Prometheus holds its quota and pending series"})
    for tenant in report.get("tenants", []):
        name = tenant["tenant"]
        if name == UNASSIGNED:
            continue
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
    window = window_text(report)
    out: t.List[t.Dict[str, t.Any]] = []
    if min_utilization is not None:
        for tenant in report.get("tenants", []):
            avg = tenant.get("avg_utilization")
            if tenant["tenant"] == UNASSIGNED or avg is None or tenant.get("gpu_hours", 0) <= 0 or avg >= min_utilization:
                continue  # namespaces of no tenant are reported, not judged
            gpus = sorted(tenant.get("gpu_list", []), key=lambda g: (g["avg_utilization"] is None, g["avg_utilization"] or 0))
            detail = ", ".join("%s (%s/%s) %s%%" % (g["gpu"], g["namespace"], g["pod"], format_number(g["avg_utilization"]))
                               for g in gpus) or "no GPU held now"
            who = "tenant %s" % tenant["tenant"]
            out.append({
                "check": "min_utilization", "tenant": tenant["tenant"], "value": avg, "threshold": min_utilization,
                "gpus": [g["gpu"] for g in gpus],
                "message": "%s: average GPU utilization %s%% over the last %s is below the minimum %s%% "
                           "(gpuaas_validate_min_utilization); its GPUs: %s. Stop or right-size the idle workloads, "
                           "or lower the threshold" % (who, format_number(avg), window, format_number(min_utilization), detail),
            })
    idle = report.get("idle_gpus") or []
    if max_idle_gpus is not None and len(idle) > max_idle_gpus:
        detail = "; ".join("%s (UUID %s) held by %s/%s of tenant %s, below %s%% for %s"
                           % (gpu_name(g), g["uuid"] or "?", g["namespace"], g["pod"], g["tenant"],
                              format_number(report.get("idle_threshold")), format_duration(g["idle_seconds"])) for g in idle)
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
