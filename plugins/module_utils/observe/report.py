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
TABLE_COLUMNS = (("tenant", "TENANT"), ("flavor", "FLAVOR"), ("gpus", "GPUS"), ("idle_gpus", "IDLE"),
                 ("avg_utilization", "AVG%"), ("p95_utilization", "P95%"), ("memory_used_mib", "MEM MiB"),
                 ("gpu_hours", "GPU-h"), ("quota", "GPU QUOTA used/nominal"), ("pending_workloads", "PENDING"))
TENANT_WIDE = ("gpus", "idle_gpus", "avg_utilization", "p95_utilization", "memory_used_mib", "gpu_hours", "pending_workloads")


def _quota_by_flavor(row: t.Mapping[str, t.Any]) -> t.List[t.Tuple[str, t.List[t.Mapping[str, t.Any]]]]:
    """The tenant's flavors with an accelerator quota (nominal > 0, or in use), each with those resources only."""
    flavors: t.Dict[str, t.List[t.Mapping[str, t.Any]]] = {}
    for r in row.get("quota") or []:
        if is_accelerator(r["resource"]) and (r.get("nominal") or r.get("usage")):
            flavors.setdefault(r["flavor"], []).append(r)
    return list(flavors.items())


def _quota_text(resources: t.Sequence[t.Mapping[str, t.Any]]) -> str:
    parts = []
    for r in resources:  # several GPU resources in one flavor: one figure each, never summed across GPU types
        part = "%s/%s" % (format_number(r["usage"]), format_number(r["nominal"]))
        if len(resources) > 1:
            part += " " + r["resource"]
        if r.get("borrowed"):
            part += " (+%s borrowed)" % format_number(r["borrowed"])
        parts.append(part)
    return ", ".join(parts)


def _value(value: t.Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format_number(value)
    return str(value)


def table_rows(report: t.Mapping[str, t.Any]) -> t.List[t.List[str]]:
    """One row per tenant and flavor with an accelerator quota; tenant-wide figures on the tenant's first row."""
    rows = []
    for tenant in report.get("tenants", []):
        flavors = _quota_by_flavor(tenant) or [("-", [])]
        for i, (flavor, resources) in enumerate(flavors):
            cells = []
            for key, _title in TABLE_COLUMNS:
                if key == "tenant":
                    cells.append(str(tenant["tenant"]))
                elif key == "flavor":
                    cells.append(flavor)
                elif key == "quota":
                    cells.append(_quota_text(resources) if resources else "-")
                elif i > 0 and key in TENANT_WIDE:
                    cells.append("")
                else:
                    cells.append(_value(tenant.get(key)))
            rows.append(cells)
    return rows


def tenant_table(report: t.Mapping[str, t.Any]) -> t.List[str]:
    """A short fixed-width table (list of lines) for the play output: one line per tenant and flavor."""
    rows = [[title for _k, title in TABLE_COLUMNS]] + table_rows(report)
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
    for cells in table_rows(report):
        lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
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
    tuning = report.get("tuning") or {}
    if tuning:
        pct = int(round(float(tuning.get("quantile") or 0.95) * 100))
        lines.extend(["## Quota tuning", ""])
        if not tuning.get("sufficient", True):
            lines.extend(["**Insufficient data**: %s. No quota recommendation." % "; ".join(tuning.get("insufficient_reasons") or []), ""])
        rows = [r for r in tuning.get("rows", []) if r.get("nominal") or r.get("demand_max")]
        if rows:
            lines.extend(["| tenant | flavor | resource | nominal | p%d demand | p%d usage | pending share | borrowed share "
                          "| borrowed h | lent h | coverage |" % (pct, pct), "|---|---|---|---|---|---|---|---|---|---|---|"])
            for r in rows:
                lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    _md_escape(r["tenant"] or r["cluster_queue"]), r["flavor"], r["resource"], format_number(r["nominal"]),
                    format_number(r["demand_quantile"]), format_number(r["usage_quantile"]), format_number(r["pending_fraction"]),
                    format_number(r["borrow_fraction"]), format_number(r["borrowed_hours"]), format_number(r["lent_hours"]),
                    format_number(r["coverage"]) + ("" if r["sufficient"] else " (insufficient)")))
            lines.append("")
    show = report.get("showback") or {}
    if show.get("rows"):
        cols = show["columns"]
        lines.extend(["## Showback%s" % (" (%s)" % show["currency"] if show.get("currency") else ""), "",
                      "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)])
        for row in show["rows"]:
            lines.append("| " + " | ".join(_md_escape(_value(row.get(c)) if row.get(c) is not None else "") for c in cols) + " |")
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
