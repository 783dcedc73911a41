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
    # issue 26: GPUs working, not quota held; churn per eviction
    ("work_saturated >= 0.85", "GPU work while saturated ≥ 0.85"),
    ("gain_work_points >= 20", "≥ +20 points over static (GPU work)"),
    ("jain_work_mean >= 0.9", "Jain mean (GPU work) ≥ 0.90"),
    ("preemptions_per_100 <= 10", "≤ 10 preemptions (evictions) per 100 jobs"),
    ("max_preemptions <= 2", "no job preempted more than twice"),
    # issue 14, kept
    ("jain_work_worst >= 0.85", "Jain worst window (GPU work) ≥ 0.85"),
    ("p95_ok", "every tenant's p95 wait ≤ 1.1 × static p95 + 5 min"),
    ("wasted_work_fraction <= 0.05", "wasted GPU work ≤ 5 %"),
    ("makespan_ratio <= 0.9", "makespan ≤ 0.9 × static"),
    ("work_vs_bound info", "GPU work ÷ node-aware upper bound (no target)"),
)
SCALARS = ("preemptions_per_100", "max_preemptions", "wasted_work_fraction", "makespan_ratio")


def compare(s: Mapping[str, Any], static: Mapping[str, Any], ideal: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Per pool and overall: the figures the targets are about, relative to static (and the ideal)."""
    out: Dict[str, Any] = {"pools": {}}
    for pool, p in s["pools"].items():
        sp = static["pools"][pool]
        ip = ideal["pools"][pool] if ideal else None
        out["pools"][pool] = {
            "alloc_saturated": p["alloc_saturated"],
            "work_saturated": p["work_saturated"],
            "alloc_vs_ideal": p["alloc_saturated"] / ip["alloc_saturated"] if ip and ip["alloc_saturated"] else float("nan"),
            "gain_points": 100.0 * (p["alloc_saturated"] - sp["alloc_saturated"]),
            "gain_work_points": 100.0 * (p["work_saturated"] - sp["work_saturated"]),
            "work_vs_bound": p["work_vs_bound"],
            "jain_mean": p["jain_mean"], "jain_worst": p["jain_worst"],
            "jain_work_mean": p["jain_work_mean"], "jain_work_worst": p["jain_work_worst"],
        }
    worst = []
    for t, d in s["tenants"].items():
        limit = 1.1 * static["tenants"][t]["wait_p95"] + 5.0
        worst.append((d["wait_p95"] - limit, t, d["wait_p95"], limit))
    out["p95"] = sorted(worst, reverse=True)
    out["p95_ok"] = all(w[0] <= 0 for w in worst)
    out["preemptions_per_100"] = s["preemptions_per_100"]
    out["max_preemptions"] = float(s["churn"]["max_preemptions"])
    out["wasted_fraction"] = s["wasted_fraction"]
    out["wasted_work_fraction"] = s["wasted_work_fraction"]
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
        parts = key.split()
        metric = parts[0]
        if parts[1] == "info":
            rows.append([label, ", ".join("%s %s" % (p, fmt(pools[p][metric])) for p in pools), ""])
            continue
        bound_f = float(parts[2])
        if metric in SCALARS:
            v = c[metric]
            ok = v <= bound_f + 1e-12
            rows.append([label, fmt(v, 0 if metric == "max_preemptions" else 3), "met" if ok else "**missed**"])
            continue
        vals = {pool: pools[pool][metric] for pool in pools}
        known = [v for v in vals.values() if not math.isnan(v)]
        if not known:
            rows.append([label, "no contention window", "n/a"])
            continue
        ok = all(v >= bound_f - 1e-12 for v in known)   # a pool never contended for half a window has no figure
        rows.append([label, ", ".join("%s %s" % (p, fmt(v, 3 if "points" not in metric else 1)) for p, v in vals.items()),
                     "met" if ok else "**missed**"])
    return rows


def table(header: List[str], rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _pts(a: float, b: float) -> str:
    return "–" if math.isnan(a) or math.isnan(b) else "%+.1f" % (100 * (a - b))


def figures_table(named: Mapping[str, Mapping[str, Any]], statics: Mapping[str, Mapping[str, Any]],
                  tree: Tree) -> str:
    pools = list(next(iter(named.values()))["pools"])
    header = ["schedule"] + ["%s GPU work sat. (quota held)" % p for p in pools] + \
        ["%s gain pts work (held)" % p for p in pools] + ["%s bound / work÷bound" % p for p in pools] + \
        ["%s Jain work mean/worst (held)" % p for p in pools] + \
        ["preempt./100 (runs evicted/100)", "max preempt./job", "wasted work", "makespan / LB", "unfinished"]
    rows = []
    for name, s in named.items():
        st = statics[name]
        row = [name]
        row += ["%s (%s)" % (fmt(s["pools"][p]["work_saturated"]), fmt(s["pools"][p]["alloc_saturated"])) for p in pools]
        row += ["%s (%s)" % (_pts(s["pools"][p]["work_saturated"], st["pools"][p]["work_saturated"]),
                             _pts(s["pools"][p]["alloc_saturated"], st["pools"][p]["alloc_saturated"])) for p in pools]
        row += ["%s / %s" % (fmt(s["pools"][p]["bound_saturated"]), fmt(s["pools"][p]["work_vs_bound"])) for p in pools]
        row += ["%s / %s (%s / %s)" % (fmt(s["pools"][p]["jain_work_mean"]), fmt(s["pools"][p]["jain_work_worst"]),
                                       fmt(s["pools"][p]["jain_mean"]), fmt(s["pools"][p]["jain_worst"])) for p in pools]
        row += ["%s (%s)" % (fmt(s["preemptions_per_100"], 1), fmt(s["runs_evicted_per_100"], 1)),
                str(s["churn"]["max_preemptions"]), "%.1f %%" % (100 * s["wasted_work_fraction"]),
                "%s / %s" % (fmt(s["makespan"], 1), fmt(s["makespan_lower_bound"], 1)), str(s["unfinished"])]
        rows.append(row)
    waits = ["| schedule | " + " | ".join("%s mean / p95" % t for t in tree.tenant_names) + " |",
             "|---|" + "|".join("---" for _ in tree.tenant_names) + "|"]
    for name, s in named.items():
        cells = ["%s / %s" % (fmt(s["tenants"][t]["wait_mean"], 1), fmt(s["tenants"][t]["wait_p95"], 1))
                 for t in tree.tenant_names]
        waits.append("| %s | " % name + " | ".join(cells) + " |")
    churn = []
    for name, s in named.items():
        c = s["churn"]
        w = c["max_preemptions_job"]
        churn.append([name, str(c["admissions"]), str(s["preemptions"]), str(s["runs_evicted"]), str(c["jobs_preempted"]),
                      str(c["jobs_preempted_over_2"]),
                      "%s (%s): admitted %s, preempted %s" % (w["id"], w["tenant"], w["admitted"], w["preempted"])
                      if w["preempted"] else "–",
                      ", ".join("%s×%s" % (k, v) for k, v in c["preemptions_histogram"].items()),
                      ", ".join("%s %s" % (t, v) for t, v in c["preemptions_by_tenant"].items() if v)])
    over = []
    for name, s in named.items():
        o = s["overhead"]
        over.append([name, fmt(o["before_bind_gpu_minutes"], 1),
                     "%s min (%s GPUs, %s)" % (fmt(o["before_bind_max"]["minutes"], 1), o["before_bind_max"]["size"],
                                               o["before_bind_max"]["job"]) if o["before_bind_max"]["minutes"] > 1e-9 else "–",
                     "%d / %s" % (o["never_bound_runs"], fmt(o["never_bound_gpu_minutes"], 1)),
                     fmt(o["after_work_gpu_minutes"], 1),
                     "%s min (%s GPUs, %s)" % (fmt(o["after_work_max"]["minutes"], 1), o["after_work_max"]["size"],
                                               o["after_work_max"]["job"]) if o["after_work_max"]["minutes"] > 1e-9 else "–"])
    return (table(header, rows) + "\n\nQuota held without GPU work (GPU-minutes over the whole schedule):\n\n" +
            table(["schedule", "admitted, pod not bound yet", "worst run", "runs never bound / GPU-min",
                   "pod's work done, not Finished yet", "worst run"], over) +
            "\n\nWait for first admission (trace minutes):\n\n" + "\n".join(waits) +
            "\n\nChurn per workload (preemptions = Evicted=True transitions; runs evicted = admissions that ended in "
            "an eviction):\n\n" +
            table(["schedule", "admissions", "preemptions", "runs evicted", "jobs preempted", "jobs preempted > 2×",
                   "worst job", "jobs by times preempted", "preemptions by victim tenant"], churn))


# Several lab runs of one variant (issue 26): each run is scored against the static run of the same round (same
# hour, similar machine load); the targets are judged on the mean over the runs, with min–max beside it.
def spread_figures(comparisons: List[Mapping[str, Any]], summaries: List[Mapping[str, Any]]) -> Dict[str, Any]:
    """figure -> {"mean", "min", "max", "runs": [one value per run]} over the runs of one variant."""
    values: Dict[str, List[float]] = {}

    def add(key: str, v: Any) -> None:
        values.setdefault(key, []).append(float(v))

    for c, s in zip(comparisons, summaries):
        for pool, p in c["pools"].items():
            for metric in ("work_saturated", "alloc_saturated", "gain_work_points", "gain_points", "jain_work_mean",
                           "jain_work_worst", "work_vs_bound"):
                add("%s %s" % (pool, metric), p[metric])
        for metric in ("preemptions_per_100", "max_preemptions", "wasted_work_fraction", "makespan_ratio"):
            add(metric, c[metric])
        add("runs_evicted_per_100", s["runs_evicted_per_100"])
        add("jobs_preempted_over_2", s["churn"]["jobs_preempted_over_2"])
        add("p95_worst_excess", c["p95"][0][0])   # worst tenant's p95 wait minus its limit (≤ 0: met)
    out: Dict[str, Any] = {}
    for key, vs in values.items():
        known = [v for v in vs if not math.isnan(v)]
        out[key] = {"runs": vs, "mean": sum(known) / len(known) if known else float("nan"),
                    "min": min(known) if known else float("nan"), "max": max(known) if known else float("nan")}
    return out


def _mmm(f: Mapping[str, Any], digits: int = 3) -> str:
    if len(f["runs"]) == 1:
        return fmt(f["mean"], digits)
    return "%s (%s–%s)" % (fmt(f["mean"], digits), fmt(f["min"], digits), fmt(f["max"], digits))


def spread_target_rows(spread: Mapping[str, Any], pools: List[str]) -> List[List[str]]:
    """The targets judged on the mean over the runs; min–max and how many runs met each target beside it."""
    rows = []
    n = len(next(iter(spread.values()))["runs"])
    for key, label in TARGETS:
        parts = key.split()
        metric = parts[0]
        if key == "p95_ok":
            f = spread["p95_worst_excess"]
            met = sum(1 for v in f["runs"] if v <= 0)
            rows.append([label, "worst tenant's p95 − limit: %s min" % _mmm(f, 1), "%d of %d" % (met, n),
                         "met" if f["mean"] <= 0 else "**missed**"])
            continue
        if parts[1] == "info":
            rows.append([label, ", ".join("%s %s" % (p, _mmm(spread["%s %s" % (p, metric)])) for p in pools), "", ""])
            continue
        bound_f = float(parts[2])
        if metric in SCALARS:
            f = spread[metric]
            digits = 0 if metric == "max_preemptions" else 1 if metric == "preemptions_per_100" else 3
            met = sum(1 for v in f["runs"] if v <= bound_f + 1e-12)
            rows.append([label, _mmm(f, digits), "%d of %d" % (met, n),
                         "met" if f["mean"] <= bound_f + 1e-12 else "**missed**"])
            continue
        fs = {p: spread["%s %s" % (p, metric)] for p in pools}
        known = {p: f for p, f in fs.items() if not math.isnan(f["mean"])}
        if not known:
            rows.append([label, "no contention window", "", "n/a"])
            continue
        digits = 1 if "points" in metric else 3
        met = sum(1 for i in range(n) if all(math.isnan(f["runs"][i]) or f["runs"][i] >= bound_f - 1e-12
                                             for f in known.values()))
        rows.append([label, ", ".join("%s %s" % (p, _mmm(f, digits)) for p, f in fs.items()), "%d of %d" % (met, n),
                     "met" if all(f["mean"] >= bound_f - 1e-12 for f in known.values()) else "**missed**"])
    return rows


def spread_table(spreads: Mapping[str, Mapping[str, Any]], pools: List[str]) -> str:
    """One row per variant: mean (min–max) over its lab runs of the headline figures."""
    header = ["variant (runs)"] + ["%s GPU work sat." % p for p in pools] + ["%s gain pts (work)" % p for p in pools] + \
        ["%s Jain work mean" % p for p in pools] + ["preempt./100", "max preempt./job", "jobs preempted > 2×",
                                                   "wasted work"]
    rows = []
    for name, sp in spreads.items():
        n = len(next(iter(sp.values()))["runs"])
        row = ["%s (%d)" % (name, n)]
        row += [_mmm(sp["%s work_saturated" % p]) for p in pools]
        row += [_mmm(sp["%s gain_work_points" % p], 1) for p in pools]
        row += [_mmm(sp["%s jain_work_mean" % p]) for p in pools]
        row += [_mmm(sp["preemptions_per_100"], 1), _mmm(sp["max_preemptions"], 1),
                _mmm(sp["jobs_preempted_over_2"], 1), _mmm(sp["wasted_work_fraction"], 3)]
        rows.append(row)
    return table(header, rows)
