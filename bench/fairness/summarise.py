# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Figures, target checks and SVG plots for offline and recorded schedules (no plotting library needed)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional

from bench.fairness import metrics
from bench.fairness.model import Tree
from bench.fairness.sim import JobResult

COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")


def fmt(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return ("%." + str(digits) + "f") % x
    return str(x)


def _steps(values: List[float], x, y, forward: bool) -> List[str]:
    """Corner points of a step line (only where the value changes), left to right or right to left."""
    n = len(values)
    pts = []
    order = range(n) if forward else reversed(range(n))
    for i in order:
        a, b = (i, i + 1) if forward else (i + 1, i)
        prev = i - 1 if forward else i + 1
        if 0 <= prev < n and values[prev] == values[i]:
            pts[-1] = "%.1f,%.1f" % (x(b), y(values[i]))
            continue
        pts += ["%.1f,%.1f" % (x(a), y(values[i])), "%.1f,%.1f" % (x(b), y(values[i]))]
    return pts


def stacked_svg(results: List[JobResult], pool: str, tenants: List[str], cap: float, title: str,
                step: float = 1.0, width: int = 820, height: int = 220) -> str:
    s = metrics.series(results, pool, tenants, step)
    times = s["times"]
    n = len(times)
    left, right, top, bottom = 50, 130, 24, 28
    w, h = width - left - right, height - top - bottom
    tmax = max(1.0, n * step)
    ymax = max(cap, max((sum(s["alloc"][t][i] for t in tenants) for i in range(n)), default=0))

    def x(i: float) -> float:
        return left + w * i * step / tmax

    def y(v: float) -> float:
        return top + h - h * v / ymax

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="11">' % (width, height),
             '<text x="%d" y="15" font-size="12" font-weight="bold">%s</text>' % (left, title)]
    base = [0.0] * n
    for k, t in enumerate(tenants):
        upper = [base[i] + s["alloc"][t][i] for i in range(n)]
        pts = _steps(upper, x, y, forward=True) + _steps(base, x, y, forward=False)
        parts.append('<polygon points="%s" fill="%s" stroke="none"/>' % (" ".join(pts), COLORS[k % len(COLORS)]))
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>'
                     % (left + w + 10, top + 16 * k, COLORS[k % len(COLORS)], left + w + 24, top + 9 + 16 * k, t))
        base = upper
    demand = [min(ymax, sum(s["demand"][t][i] for t in tenants)) for i in range(n)]
    dpts = " ".join(_steps(demand, x, y, forward=True))
    parts.append('<polyline points="%s" fill="none" stroke="#333" stroke-dasharray="3,2" stroke-width="1"/>' % dpts)
    parts.append('<text x="%d" y="%d">demand (dashed, capped)</text>' % (left + w + 10, top + 16 * len(tenants) + 9))
    parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#000" stroke-width="0.5"/>' % (left, y(cap), left + w, y(cap)))
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (left, top + h, left + w, top + h))
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (left, top, left, top + h))
    for v in range(0, int(ymax) + 1, max(1, int(ymax) // 4)):
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (left - 4, y(v) + 4, v))
    tick = 10 ** max(0, int(math.log10(tmax)))
    if tmax / tick < 4:
        tick /= 2
    v = 0.0
    while v <= tmax:
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (left + w * v / tmax, top + h + 14, v))
        v += tick
    parts.append('<text x="%d" y="%d" text-anchor="middle">trace minutes</text>' % (left + w // 2, height - 2))
    parts.append('</svg>')
    return "\n".join(parts)


TARGETS = (
    ("alloc_saturated >= 0.95", "allocation while saturated ≥ 0.95"),
    ("alloc_vs_ideal >= 0.97", "≥ 0.97 × ideal"),
    ("gain_points >= 15", "≥ +15 points over static"),
    ("jain_mean >= 0.95", "Jain mean ≥ 0.95"),
    ("jain_worst >= 0.85", "Jain worst window ≥ 0.85"),
    ("p95_ok", "every tenant's p95 wait ≤ 1.1 × static p95 + 5 min"),
    ("preemptions_per_100 <= 10", "≤ 10 preemptions per 100 jobs"),
    ("wasted_fraction <= 0.05", "wasted GPU-time ≤ 5 %"),
    ("makespan_ratio <= 0.9", "makespan ≤ 0.9 × static"),
)


def compare(s: Mapping[str, Any], static: Mapping[str, Any], ideal: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Per pool and overall: the figures the targets are about, relative to static (and the ideal)."""
    out: Dict[str, Any] = {"pools": {}}
    for pool, p in s["pools"].items():
        sp = static["pools"][pool]
        ip = ideal["pools"][pool] if ideal else None
        out["pools"][pool] = {
            "alloc_saturated": p["alloc_saturated"],
            "alloc_vs_ideal": p["alloc_saturated"] / ip["alloc_saturated"] if ip and ip["alloc_saturated"] else float("nan"),
            "gain_points": 100.0 * (p["alloc_saturated"] - sp["alloc_saturated"]),
            "jain_mean": p["jain_mean"], "jain_worst": p["jain_worst"],
        }
    worst = []
    for t, d in s["tenants"].items():
        limit = 1.1 * static["tenants"][t]["wait_p95"] + 5.0
        worst.append((d["wait_p95"] - limit, t, d["wait_p95"], limit))
    out["p95"] = sorted(worst, reverse=True)
    out["p95_ok"] = all(w[0] <= 0 for w in worst)
    out["preemptions_per_100"] = s["preemptions_per_100"]
    out["wasted_fraction"] = s["wasted_fraction"]
    out["makespan_ratio"] = s["makespan"] / static["makespan"] if static["makespan"] else float("nan")
    return out


def target_rows(c: Mapping[str, Any]) -> List[List[str]]:
    rows = []
    pools = c["pools"]
    for key, label in TARGETS:
        if key == "p95_ok":
            w = c["p95"][0]
            rows.append([label, "worst %s: p95 %.1f vs limit %.1f" % (w[1], w[2], w[3]), "met" if c["p95_ok"] else "**missed**"])
            continue
        metric, op, bound = key.split()
        bound_f = float(bound)
        if metric in ("preemptions_per_100", "wasted_fraction", "makespan_ratio"):
            v = c[metric]
            ok = v <= bound_f + 1e-12
            rows.append([label, fmt(v, 3), "met" if ok else "**missed**"])
            continue
        vals = {pool: pools[pool][metric] for pool in pools}
        known = [v for v in vals.values() if not math.isnan(v)]
        if not known:
            rows.append([label, "no contention window", "n/a"])
            continue
        ok = all(v >= bound_f - 1e-12 for v in known)   # a pool never contended for half a window has no figure
        rows.append([label, ", ".join("%s %s" % (p, fmt(v, 3 if metric != "gain_points" else 1)) for p, v in vals.items()),
                     "met" if ok else "**missed**"])
    return rows


def table(header: List[str], rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def figures_table(named: Mapping[str, Mapping[str, Any]], statics: Mapping[str, Mapping[str, Any]],
                  tree: Tree) -> str:
    pools = list(next(iter(named.values()))["pools"])
    header = ["schedule"] + ["%s alloc sat." % p for p in pools] + ["%s gain pts" % p for p in pools] + \
        ["%s Jain mean/worst" % p for p in pools] + ["preempt./100", "wasted", "makespan / LB", "unfinished"]
    rows = []
    for name, s in named.items():
        st = statics[name]
        row = [name]
        row += [fmt(s["pools"][p]["alloc_saturated"]) for p in pools]
        row += ["%+.1f" % (100 * (s["pools"][p]["alloc_saturated"] - st["pools"][p]["alloc_saturated"]))
                if not math.isnan(s["pools"][p]["alloc_saturated"]) else "–" for p in pools]
        row += ["%s / %s" % (fmt(s["pools"][p]["jain_mean"]), fmt(s["pools"][p]["jain_worst"])) for p in pools]
        row += [fmt(s["preemptions_per_100"], 1), "%.1f %%" % (100 * s["wasted_fraction"]),
                "%s / %s" % (fmt(s["makespan"], 1), fmt(s["makespan_lower_bound"], 1)), str(s["unfinished"])]
        rows.append(row)
    waits = ["| schedule | " + " | ".join("%s mean / p95" % t for t in tree.tenant_names) + " |",
             "|---|" + "|".join("---" for _ in tree.tenant_names) + "|"]
    for name, s in named.items():
        cells = ["%s / %s" % (fmt(s["tenants"][t]["wait_mean"], 1), fmt(s["tenants"][t]["wait_p95"], 1))
                 for t in tree.tenant_names]
        waits.append("| %s | " % name + " | ".join(cells) + " |")
    return table(header, rows) + "\n\nWait for first admission (trace minutes):\n\n" + "\n".join(waits)
