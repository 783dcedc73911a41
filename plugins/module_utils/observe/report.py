# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Rendering a utilization report: the per-tenant table and the Markdown report. Pure."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.formatting import format_duration, format_number, window_text
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.utilization import gpu_name

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
            text = "%s/%s" % (format_number(row.get("gpu_quota_used")), format_number(row.get("gpu_quota_nominal")))
            if row.get("gpu_quota_borrowed"):
                text += " (+%s borrowed)" % format_number(row["gpu_quota_borrowed"])
            return text
        parts = []
        for r in gpu_quota:  # several GPU flavors/resources: one figure each, never summed across GPU types
            part = "%s/%s %s" % (format_number(r["usage"]), format_number(r["nominal"]), r["flavor"])
            if r.get("borrowed"):
                part += " (+%s)" % format_number(r["borrowed"])
            parts.append(part)
        return ", ".join(parts)
    value = row.get(key)
    if value is None:
        return "-"
    if isinstance(value, float):
        return format_number(value)
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
        cluster.get("unallocated_gpus", 0), format_number(cluster.get("avg_utilization")),
        format_number(cluster.get("avg_utilization_allocated"))))
    return lines


def _md_escape(value: t.Any) -> str:
    return str(value).replace("|", "\\|")


def render_markdown(report: t.Mapping[str, t.Any], health: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                    title: str = "GPU platform validation report") -> str:
    """The report for people: health checks, per-tenant table, idle and unallocated GPUs, queues, advice."""
    lines = ["# %s" % title, ""]
    window = report.get("window") or {}
    lines.append("Window: last %s ending %s UTC (step %ss); idle = below %s%% for %s."
                 % (window_text(report), _iso(window.get("end")), format_number(window.get("step")),
                    format_number(report.get("idle_threshold")), format_duration(report.get("idle_for_seconds") or 0)))
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
                      format_number(cluster.get("avg_utilization")), format_number(cluster.get("avg_utilization_allocated")),
                      format_number(cluster.get("p95_utilization_allocated"))),
                  "- GPU-hours: %s allocated, %s busy, %s unallocated" % (
                      format_number(cluster.get("gpu_hours_allocated")), format_number(cluster.get("busy_gpu_hours")),
                      format_number(cluster.get("gpu_hours_unallocated"))), ""])
    if report.get("namespaces"):
        lines.extend(["## Namespaces", "", "| namespace | tenant | GPUs | idle | avg% | p95% | GPU-h |", "|---|---|---|---|---|---|---|"])
        for ns in report["namespaces"]:
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                _md_escape(ns["namespace"]), _md_escape(ns["tenant"]), ns["gpus"], ns["idle_gpus"],
                format_number(ns["avg_utilization"]), format_number(ns["p95_utilization"]), format_number(ns["gpu_hours"])))
        lines.append("")
    if report.get("idle_gpus"):
        lines.extend(["## Idle allocated GPUs", "", "| GPU | UUID | model | pod | tenant | idle for | avg% |", "|---|---|---|---|---|---|---|"])
        for g in report["idle_gpus"]:
            lines.append("| %s | %s | %s | %s/%s | %s | %s | %s |" % (
                _md_escape(gpu_name(g)), g["uuid"], _md_escape(g["model"]), g["namespace"], g["pod"], g["tenant"],
                format_duration(g["idle_seconds"]), format_number(g["avg_utilization"])))
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
                    q["cluster_queue"], q.get("status") or "?", r["flavor"], r["resource"], format_number(r["nominal"]),
                    format_number(r["borrowing_limit"]), format_number(r["usage"]), format_number(r["borrowed"]), q["pending_workloads"]))
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
