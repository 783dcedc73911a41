# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Figures of one schedule (offline or recorded on the lab), all in trace minutes.

A schedule is a list of ``sim.JobResult`` (runs = admission .. finish or eviction). Definitions:

* **saturated**: a sample instant where the pool's total demand (GPUs of jobs submitted and not finished, queued or
  running) is at least the pool's capacity. *Allocation while saturated* = mean of allocated ÷ capacity over
  the saturated samples.
* **Jain's index** per window of ``window`` minutes that is saturated at least half of the time: x_t = mean
  allocation ÷ mean entitlement of tenant t (hierarchical weighted water-filling of the *tenancy* tree for the
  demand of that moment), over the tenants with an entitlement; J = (Σx)² / (n Σx²). Mean and worst over windows.
* **wait**: first admission − submission (a job never admitted counts until the end of the schedule).
* **preemptions per 100 jobs**, **wasted GPU-time** = GPU-minutes of runs that were evicted ÷ all GPU-minutes run.
* **makespan** = last finish − first submission; **lower bound** = max(longest submit+duration, and per pool, for
  every submission time s: s + GPU-work submitted at or after s ÷ capacity) − first submission.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional

from bench.fairness.model import Tree, entitlements
from bench.fairness.sim import JobResult


def percentile(values: List[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, math.ceil(q / 100.0 * len(s)) - 1)
    return s[k]


def jain(xs: List[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return float("nan")
    sq = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * sq) if sq > 0 else 1.0


def end_time(results: List[JobResult]) -> float:
    ends = [r.end for j in results for r in j.runs]
    return max(ends + [j.submit for j in results]) if results else 0.0


def series(results: List[JobResult], pool: str, tenants: List[str], step: float = 0.5,
           until: Optional[float] = None) -> Dict[str, object]:
    """Sampled allocation and demand per tenant (at t = step/2, 3 step/2, ...)."""
    until = end_time(results) if until is None else until
    n = max(1, int(math.ceil(until / step)))
    times = [(i + 0.5) * step for i in range(n)]
    alloc = {t: [0.0] * n for t in tenants}
    demand = {t: [0.0] * n for t in tenants}

    def idx_range(a: float, b: float) -> range:
        lo = max(0, int(math.ceil(a / step - 0.5)))
        hi = min(n, int(math.ceil(b / step - 0.5)))
        return range(lo, hi)

    for j in results:
        if j.pool != pool or j.tenant not in alloc:
            continue
        for r in j.runs:
            for i in idx_range(r.start, r.end):
                alloc[j.tenant][i] += j.size
        fin = j.finish if j.finish is not None else until
        for i in idx_range(j.submit, fin):
            demand[j.tenant][i] += j.size
    return {"times": times, "alloc": alloc, "demand": demand, "step": step}


def summarise(results: List[JobResult], tree: Tree, fair_tree: Tree, capacity: Mapping[str, float],
              window: float = 10.0, step: float = 0.5) -> Dict[str, object]:
    tenants = fair_tree.tenant_names
    until = end_time(results)
    out: Dict[str, object] = {"pools": {}, "tenants": {}}
    for pool, cap in capacity.items():
        s = series(results, pool, tenants, step, until)
        n = len(s["times"])
        sat = [sum(s["demand"][t][i] for t in tenants) >= cap - 1e-9 for i in range(n)]
        used = [sum(s["alloc"][t][i] for t in tenants) for i in range(n)]
        sat_alloc = [used[i] / cap for i in range(n) if sat[i]]
        ent = [entitlements(fair_tree, pool, {t: s["demand"][t][i] for t in tenants}, cap) if sat[i] else None
               for i in range(n)]
        per_window = int(round(window / step))
        jains = []
        for w0 in range(0, n, per_window):
            idx = [i for i in range(w0, min(n, w0 + per_window)) if sat[i]]
            if len(idx) * 2 < per_window:
                continue
            xs = []
            for t in tenants:
                e = sum(ent[i][t] for i in idx) / len(idx)
                if e > 1e-9:
                    xs.append(sum(s["alloc"][t][i] for i in idx) / len(idx) / e)
            if len(xs) >= 2:
                jains.append(jain(xs))
        out["pools"][pool] = {
            "capacity": cap,
            "saturated_minutes": sum(sat) * step,
            "alloc_saturated": sum(sat_alloc) / len(sat_alloc) if sat_alloc else float("nan"),
            "alloc_overall": sum(used) / (cap * n) if n else float("nan"),
            "jain_mean": sum(jains) / len(jains) if jains else float("nan"),
            "jain_worst": min(jains) if jains else float("nan"),
            "jain_windows": len(jains),
        }
    for t in tenants:
        waits = []
        for j in results:
            if j.tenant != t:
                continue
            first = j.first_start
            waits.append((first if first is not None else until) - j.submit)
        out["tenants"][t] = {"jobs": len(waits), "wait_mean": sum(waits) / len(waits) if waits else float("nan"),
                             "wait_p95": percentile(waits, 95)}
    evictions = sum(1 for j in results for r in j.runs if r.evicted)
    gpu_all = sum(j.size * (r.end - r.start) for j in results for r in j.runs)
    gpu_wasted = sum(j.size * (r.end - r.start) for j in results for r in j.runs if r.evicted)
    finished = [j for j in results if j.finish is not None]
    first_submit = min((j.submit for j in results), default=0.0)
    out.update({
        "jobs": len(results),
        "unfinished": len(results) - len(finished),
        "preemptions": evictions,
        "preemptions_per_100": 100.0 * evictions / len(results) if results else float("nan"),
        "wasted_fraction": gpu_wasted / gpu_all if gpu_all > 0 else 0.0,
        "makespan": (max(j.finish for j in finished) - first_submit) if finished else float("nan"),
        "makespan_lower_bound": makespan_lower_bound(results, capacity),
    })
    return out


def makespan_lower_bound(results: List[JobResult], capacity: Mapping[str, float]) -> float:
    if not results:
        return 0.0
    first = min(j.submit for j in results)
    lb = max(j.submit + j.duration for j in results)
    for pool, cap in capacity.items():
        jobs = sorted((j for j in results if j.pool == pool), key=lambda j: j.submit)
        work_after = sum(j.size * j.duration for j in jobs)
        for j in jobs:
            lb = max(lb, j.submit + work_after / cap)
            work_after -= j.size * j.duration
    return lb - first
