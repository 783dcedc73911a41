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

GPUs working, not quota held (issue 26): a run holds quota from QuotaReserved to Finished (or to the quota
release after an eviction), but its GPUs work only from the pod's binding to a node: the **work window** of a run
is bind → bind + duration (a finished run) or bind → min(bind + duration, quota release) (an evicted run: the pod
works until it is stopped). A run never bound does no work. The offline simulators bind at admission, so for them
work = quota held. *GPU work while saturated* (``work_saturated``) is the headline; ``alloc_saturated`` (quota
held) is reported beside it and the difference (``overhead_points``) is quota held while no pod works: waiting for
a node with room for the whole gang (fragmentation), pod start, and the time between the pod's completion and
Kueue's Finished.

**Upper bound** (``bound_saturated``): at every saturated sample, the most GPUs any scheduler could have working
with the jobs present in that schedule at that moment (submitted, not finished): the largest total size of a subset
of those jobs that packs onto the pool's nodes (each job on one node), ignoring fairness, quotas and priorities.
It is ≤ min(capacity, demand); ``work_vs_bound`` = work ÷ bound.

**Churn**: ``preemptions`` counts every eviction (a recorded ``Evicted=True`` transition, ``JobResult.evictions``;
a workload evicted again while its pods are still stopping counts again, as in Kueue's
``kueue_preempted_workloads_total``); ``runs_evicted`` counts the runs that ended in an eviction (the earlier
figure); per workload: admissions (runs) and preemptions, the worst workload and how many were preempted > 2 times.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Tuple

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


def work_window(job: JobResult, run) -> Optional[Tuple[float, float]]:
    """When the run's GPUs were working (see the module docstring), or None (never bound, or no time)."""
    if run.bind is None:
        return None
    end = run.bind + job.duration
    if run.evicted:
        end = min(end, run.end)
    return (run.bind, end) if end > run.bind else None


def done_run(job: JobResult):
    """The run whose pod did the job's work: the finished run, or (a finished run without a pod of its own: the
    Job completed from a pod of an earlier run, e.g. one evicted after its pod had done its work) the last earlier
    bound run whose work window was complete (bind + duration before its end). None: unfinished, or unknown."""
    if job.finish is None:
        return None
    if job.runs[-1].bind is not None:
        return job.runs[-1]
    for run in reversed(job.runs[:-1]):
        if run.bind is not None and run.bind + job.duration <= run.end + 1e-9:
            return run
    return None


def series(results: List[JobResult], pool: str, tenants: List[str], step: float = 0.5,
           until: Optional[float] = None, basis: str = "held") -> Dict[str, object]:
    """Sampled allocation and demand per tenant (at t = step/2, 3 step/2, ...).

    ``basis="held"``: a run counts from admission to its end (quota held), a job is demand from submission to
    Finished; ``"work"``: a run counts over its work window, a job is demand from submission to the end of its
    last work window (bind + duration: Kueue's Finished comes later). ``present[i]``: the sizes of the jobs that
    are demand at sample i."""
    until = end_time(results) if until is None else until
    n = max(1, int(math.ceil(until / step)))
    times = [(i + 0.5) * step for i in range(n)]
    alloc = {t: [0.0] * n for t in tenants}
    demand = {t: [0.0] * n for t in tenants}
    present: List[List[int]] = [[] for _ in range(n)]

    def idx_range(a: float, b: float) -> range:
        lo = max(0, int(math.ceil(a / step - 0.5)))
        hi = min(n, int(math.ceil(b / step - 0.5)))
        return range(lo, hi)

    for j in results:
        if j.pool != pool or j.tenant not in alloc:
            continue
        for r in j.runs:
            window = (r.start, r.end) if basis == "held" else work_window(j, r)
            if window is None:
                continue
            for i in idx_range(*window):
                alloc[j.tenant][i] += j.size
        fin = j.finish if j.finish is not None else until
        if basis == "work" and j.finish is not None:
            done = done_run(j)
            last = work_window(j, done) if done is not None else None
            fin = last[1] if last else fin   # the user's job is done when its pod has done its work
        for i in idx_range(j.submit, fin):
            demand[j.tenant][i] += j.size
            present[i].append(j.size)
    return {"times": times, "alloc": alloc, "demand": demand, "present": present, "step": step}


def packing_bound(sizes: List[int], nodes: List[float]) -> float:
    """The largest total size of a subset of ``sizes`` that fits on ``nodes`` (free GPUs per node), one node per
    job: exact, over the set of reachable free-capacity vectors (small: a node holds a few GPUs)."""
    if sum(sizes) <= 0:
        return 0.0
    states = {tuple(sorted(float(x) for x in nodes))}
    for s in sorted(sizes, reverse=True):
        grown = set(states)
        for st in states:
            for i, free in enumerate(st):
                if free >= s - 1e-9 and (i == 0 or st[i - 1] != free):
                    grown.add(tuple(sorted(st[:i] + (free - s,) + st[i + 1:])))
        states = grown
    return float(sum(nodes)) - min(sum(st) for st in states)


def _jains(alloc: Mapping[str, List[float]], ent: List[Optional[Dict[str, float]]], sat: List[bool],
           tenants: List[str], per_window: int) -> List[float]:
    n = len(sat)
    out = []
    for w0 in range(0, n, per_window):
        idx = [i for i in range(w0, min(n, w0 + per_window)) if sat[i]]
        if len(idx) * 2 < per_window:
            continue
        xs = []
        for t in tenants:
            e = sum(ent[i][t] for i in idx) / len(idx)
            if e > 1e-9:
                xs.append(sum(alloc[t][i] for i in idx) / len(idx) / e)
        if len(xs) >= 2:
            out.append(jain(xs))
    return out


def _mean(xs: List[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def evictions_of(job: JobResult) -> int:
    return job.evictions if job.evictions is not None else sum(1 for r in job.runs if r.evicted)


def churn(results: List[JobResult]) -> Dict[str, object]:
    """Admissions and preemptions per workload."""
    per_job = [(evictions_of(j), len(j.runs), j.id, j.tenant) for j in results]
    worst = max(per_job, default=(0, 0, None, None))
    hist: Dict[int, int] = {}
    by_tenant: Dict[str, int] = {}
    for e, _, _, t in per_job:
        hist[e] = hist.get(e, 0) + 1
        by_tenant[t] = by_tenant.get(t, 0) + e
    return {
        "admissions": sum(p[1] for p in per_job),
        "jobs_preempted": sum(1 for p in per_job if p[0] > 0),
        "jobs_preempted_over_2": sum(1 for p in per_job if p[0] > 2),
        "max_preemptions": worst[0],
        "max_preemptions_job": {"id": worst[2], "tenant": worst[3], "preempted": worst[0], "admitted": worst[1]},
        "preemptions_histogram": {str(k): hist[k] for k in sorted(hist)},
        "preemptions_by_tenant": by_tenant,
    }


def _pool_figures(s: Mapping[str, object], fair_tree: Tree, pool: str, cap: float, pool_nodes: List[float],
                  tenants: List[str], per_window: int) -> Dict[str, float]:
    n = len(s["times"])
    step = s["step"]
    sat = [sum(s["demand"][t][i] for t in tenants) >= cap - 1e-9 for i in range(n)]
    used = [sum(s["alloc"][t][i] for t in tenants) for i in range(n)]
    sat_idx = [i for i in range(n) if sat[i]]
    cache: Dict[tuple, float] = {}
    bound = []
    for i in sat_idx:
        key = tuple(sorted(s["present"][i]))
        if key not in cache:
            cache[key] = packing_bound(list(key), pool_nodes)
        bound.append(cache[key] / cap)
    ent = [entitlements(fair_tree, pool, {t: s["demand"][t][i] for t in tenants}, cap) if sat[i] else None
           for i in range(n)]
    jains = _jains(s["alloc"], ent, sat, tenants, per_window)
    return {"saturated_minutes": sum(sat) * step, "saturated": _mean([used[i] / cap for i in sat_idx]),
            "overall": sum(used) / (cap * n) if n else float("nan"), "bound": _mean(bound),
            "jain_mean": _mean(jains), "jain_worst": min(jains) if jains else float("nan"), "jain_windows": len(jains)}


def summarise(results: List[JobResult], tree: Tree, fair_tree: Tree, capacity: Mapping[str, float],
              window: float = 10.0, step: float = 0.5,
              nodes: Optional[Mapping[str, List[float]]] = None) -> Dict[str, object]:
    """``nodes``: GPUs per node of each pool, for the upper bound (default: one node holding the whole pool)."""
    tenants = fair_tree.tenant_names
    until = end_time(results)
    out: Dict[str, object] = {"pools": {}, "tenants": {}}
    per_window = int(round(window / step))
    for pool, cap in capacity.items():
        pool_nodes = list((nodes or {}).get(pool) or [cap])
        held = _pool_figures(series(results, pool, tenants, step, until), fair_tree, pool, cap, pool_nodes,
                             tenants, per_window)
        work = _pool_figures(series(results, pool, tenants, step, until, basis="work"), fair_tree, pool, cap,
                             pool_nodes, tenants, per_window)
        out["pools"][pool] = {
            "capacity": cap,
            "nodes": pool_nodes,
            "saturated_minutes": held["saturated_minutes"],
            "alloc_saturated": held["saturated"],
            "alloc_overall": held["overall"],
            "jain_mean": held["jain_mean"],
            "jain_worst": held["jain_worst"],
            "jain_windows": held["jain_windows"],
            "work_saturated_minutes": work["saturated_minutes"],
            "work_saturated": work["saturated"],
            "work_overall": work["overall"],
            "overhead_points": 100.0 * (held["saturated"] - work["saturated"]),
            "bound_saturated": work["bound"],
            "work_vs_bound": work["saturated"] / work["bound"] if work["bound"] and not math.isnan(work["bound"])
            else float("nan"),
            "jain_work_mean": work["jain_mean"],
            "jain_work_worst": work["jain_worst"],
            "jain_work_windows": work["jain_windows"],
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
    evictions = sum(evictions_of(j) for j in results)
    runs_evicted = sum(1 for j in results for r in j.runs if r.evicted)
    gpu_all = sum(j.size * (r.end - r.start) for j in results for r in j.runs)
    gpu_wasted = sum(j.size * (r.end - r.start) for j in results for r in j.runs if r.evicted)
    windows = [(j, r, work_window(j, r)) for j in results for r in j.runs]
    work_all = sum(j.size * (ww[1] - ww[0]) for j, r, ww in windows if ww)
    work_wasted = sum(j.size * (ww[1] - ww[0]) for j, r, ww in windows if ww and r.evicted and r is not done_run(j))
    finished = [j for j in results if j.finish is not None]
    # where quota held is not work: before the pod is bound (a node with room for the whole job, pod creation)
    # and after its work (Kueue's Finished); GPU-minutes and the worst run
    prebind = [(r.bind - r.start, j.size, j.id) for j in results for r in j.runs if r.bind is not None]
    unbound = [(r.end - r.start, j.size, j.id) for j in results for r in j.runs if r.bind is None]
    lag = [(r.end - (r.bind + j.duration), j.size, j.id) for j in results for r in j.runs
           if not r.evicted and r.bind is not None]
    worst_pre = max(prebind, default=(0.0, 0, None))
    worst_lag = max(lag, default=(0.0, 0, None))
    overhead = {
        "before_bind_gpu_minutes": sum(d * size for d, size, _ in prebind),
        "before_bind_max": {"minutes": worst_pre[0], "size": worst_pre[1], "job": worst_pre[2]},
        "never_bound_runs": len(unbound),
        "never_bound_gpu_minutes": sum(d * size for d, size, _ in unbound),
        "after_work_gpu_minutes": sum(max(0.0, d) * size for d, size, _ in lag),
        "after_work_max": {"minutes": worst_lag[0], "size": worst_lag[1], "job": worst_lag[2]},
    }
    first_submit = min((j.submit for j in results), default=0.0)
    out.update({
        "jobs": len(results),
        "unfinished": len(results) - len(finished),
        "preemptions": evictions,
        "preemptions_per_100": 100.0 * evictions / len(results) if results else float("nan"),
        "runs_evicted": runs_evicted,
        "runs_evicted_per_100": 100.0 * runs_evicted / len(results) if results else float("nan"),
        "churn": churn(results),
        "overhead": overhead,
        "finished_by_earlier_pod": sorted(j.id for j in results if j.finish is not None and done_run(j) is not None
                                          and done_run(j) is not j.runs[-1]),
        "wasted_fraction": gpu_wasted / gpu_all if gpu_all > 0 else 0.0,
        "wasted_work_fraction": work_wasted / work_all if work_all > 0 else 0.0,
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
