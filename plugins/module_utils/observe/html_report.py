# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A self-contained HTML report (inline CSS and SVG, no script, no external reference): per-tenant utilization
over time, quota vs usage vs pending per tenant and flavor, the idle-GPU share, recommendations and showback.
Pure: builds a string. Works offline and as an AWX job artifact."""

from __future__ import annotations

import datetime
import html
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.formatting import format_number, window_text

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
Series = t.Tuple[str, t.Sequence[t.Tuple[float, float]]]

CSS = """
body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #bbb;padding:2px 6px;font-size:13px;text-align:right}
td:first-child,th:first-child{text-align:left}
figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}
figcaption{font-weight:bold;font-size:14px}
.insufficient{color:#a60}
svg text{font-size:11px;font-family:sans-serif}
"""


def _e(value: t.Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _clock(ts: float) -> str:
    return datetime.datetime.fromtimestamp(float(ts), datetime.timezone.utc).strftime("%m-%d %H:%M:%S")


def line_chart(chart_id: str, title: str, series: t.Sequence[Series], y_label: str, y_max: t.Optional[float] = None,
               width: int = 640, height: int = 240) -> str:
    """An inline SVG step chart: one ``<polyline data-series=name>`` per series, axes, a legend."""
    left, right, top, bottom = 48, 150, 10, 28
    xs = [p[0] for _n, pts in series for p in pts]
    ys = [p[1] for _n, pts in series for p in pts]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1.0
    top_y = y_max if y_max is not None else max(ys + [1.0]) * 1.1
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (min(y, top_y) / top_y) * plot_h

    parts = ['<svg id="%s" class="chart" role="img" width="%d" height="%d" '
             'viewBox="0 0 %d %d" aria-label="%s">' % (_e(chart_id), width, height, width, height, _e(title)),
             "<title>%s</title>" % _e(title),
             '<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#999"/>' % (left, top, plot_w, plot_h)]
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h - frac * plot_h
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (left, y, left + plot_w, y))
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, y + 4, _e(format_number(round(top_y * frac, 2)))))
    parts.append('<text x="%d" y="%d">%s</text>' % (left, height - 6, _e(_clock(x0))))
    parts.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left + plot_w, height - 6, _e(_clock(x1))))
    parts.append('<text x="4" y="%d" transform="rotate(-90 10 %d)">%s</text>' % (top + plot_h // 2, top + plot_h // 2, _e(y_label)))
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        coords: t.List[str] = []
        prev: t.Optional[float] = None
        for x, y in sorted(pts):
            if prev is not None:  # step: hold the previous value until this point
                coords.append("%.1f,%.1f" % (px(x), py(prev)))
            coords.append("%.1f,%.1f" % (px(x), py(y)))
            prev = y
        parts.append('<polyline data-series="%s" data-points="%d" fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                     % (_e(name), len(pts), color, " ".join(coords)))
        ly = top + 12 + i * 14
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (left + plot_w + 8, ly - 9, color))
        parts.append('<text x="%d" y="%d">%s</text>' % (left + plot_w + 22, ly, _e(name)))
    if not series:
        parts.append('<text x="%d" y="%d">no data</text>' % (left + 10, top + 20))
    parts.append("</svg>")
    return "".join(parts)


def _figure(chart_id: str, title: str, series: t.Sequence[Series], y_label: str, y_max: t.Optional[float] = None) -> str:
    return "<figure><figcaption>%s</figcaption>%s</figure>" % (_e(title), line_chart(chart_id, title, series, y_label, y_max))


def charts(report: t.Mapping[str, t.Any]) -> t.List[t.Dict[str, t.Any]]:
    """The charts of the report: ``id``, ``title``, ``series`` (name -> points), ``y_label``, ``y_max``."""
    out: t.List[t.Dict[str, t.Any]] = []
    ts = report.get("timeseries") or {}
    tenants = ts.get("tenants") or {}
    out.append({"id": "tenant-utilization", "title": "GPU utilization per tenant (%)", "y_label": "%", "y_max": 100.0,
                "series": [(name, [(p[0], p[1]) for p in pts]) for name, pts in sorted(tenants.items())]})
    idle_series = [(name, [(p[0], (p[3] / p[2]) if p[2] else 0.0) for p in pts]) for name, pts in sorted(tenants.items())]
    cluster = ts.get("cluster") or []
    if cluster:
        idle_series.append(("cluster", [(p[0], (p[2] / p[1]) if p[1] else 0.0) for p in cluster]))
    out.append({"id": "idle-share", "title": "Idle share of allocated GPUs (below the idle threshold)", "y_label": "share",
                "y_max": 1.0, "series": idle_series})
    for row in (report.get("tuning") or {}).get("rows", []):
        if not row.get("tenant") or not is_accelerator(row["resource"]) or (row["nominal"] <= 0 and row["demand_max"] <= 0):
            continue
        s = row["series"]
        out.append({"id": "quota-%s-%s-%s" % (row["tenant"], row["flavor"], row["resource"].replace("/", "-")),
                    "title": "Quota vs usage vs pending: %s, %s %s" % (row["tenant"], row["flavor"], row["resource"]),
                    "y_label": row["resource"], "y_max": None,
                    "series": [("nominal quota", list(zip(s["t"], s["nominal"]))), ("usage", list(zip(s["t"], s["usage"]))),
                               ("pending", list(zip(s["t"], s["pending"])))]})
    return out


def _table(headers: t.Sequence[str], rows: t.Iterable[t.Sequence[t.Any]]) -> str:
    head = "".join("<th>%s</th>" % _e(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(format_number(c) if isinstance(c, float) else c) for c in r)
                   for r in rows)
    return "<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (head, body)


def render_html(report: t.Mapping[str, t.Any], title: str = "GPU platform validation report") -> str:
    """The whole report as one HTML page (no script, no link, no external resource)."""
    window = report.get("window") or {}
    tuning = report.get("tuning") or {}
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>%s</title><style>%s</style></head><body>'
             % (_e(title), CSS), "<h1>%s</h1>" % _e(title)]
    parts.append("<p>Window: last %s ending %s UTC, step %ss. Result: <b>%s</b>.</p>"
                 % (_e(window_text(report)), _e(_clock(window.get("end") or 0)), _e(format_number(window.get("step"))),
                    _e(report.get("result") or "-")))
    if tuning and not tuning.get("sufficient", True):
        parts.append('<p class="insufficient"><b>Insufficient data</b>: %s. No quota recommendation.</p>'
                     % _e("; ".join(tuning.get("insufficient_reasons") or [])))
    parts.append("<h2>Charts</h2>")
    for chart in charts(report):
        parts.append(_figure(chart["id"], chart["title"], chart["series"], chart["y_label"], chart["y_max"]))
    recs = report.get("recommendations") or []
    parts.append("<h2>Recommendations</h2>")
    parts.append("<ul>%s</ul>" % ("".join("<li>%s</li>" % _e(r["message"]) for r in recs) or "<li>none</li>"))
    if tuning.get("rows"):
        parts.append("<h2>Quota tuning figures</h2>")
        pct = int(round(float(tuning.get("quantile") or 0.95) * 100))
        parts.append(_table(
            ("tenant", "flavor", "resource", "nominal", "p%d demand" % pct, "p%d usage" % pct, "pending share", "borrowed share",
             "borrowed h", "lent h", "coverage", "data"),
            [(r["tenant"] or r["cluster_queue"], r["flavor"], r["resource"], r["nominal"], r["demand_quantile"], r["usage_quantile"],
              r["pending_fraction"], r["borrow_fraction"], r["borrowed_hours"], r["lent_hours"], r["coverage"],
              "ok" if r["sufficient"] else "insufficient") for r in tuning["rows"]]))
    show = report.get("showback") or {}
    if show.get("rows"):
        parts.append("<h2>Showback%s</h2>" % (" (%s)" % _e(show["currency"]) if show.get("currency") else ""))
        cols = show["columns"]
        parts.append(_table(cols, [[row.get(c) if row.get(c) is not None else "" for c in cols] for row in show["rows"]]))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
