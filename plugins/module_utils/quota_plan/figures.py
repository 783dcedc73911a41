# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The figures of one schedule, per tenant and per pool, over the demand window. Pure.

Times are minutes from the start of the demand window ``[0, horizon]``; GPU-hours = GPUs x minutes / 60.

* **served GPU-hours**: GPUs held by the tenant's runs inside the window (admission to end or eviction; the
  scheduler has no start-up latency, so held = working); **wasted**: the part of it in runs that were preempted.
* **wait**: first admission - submission, in minutes; a job never admitted waits until the end of the schedule.
  p50 and p95 are nearest-rank percentiles.
* **preemptions**: evictions of the tenant's jobs.
* **borrowed GPU-hours**: ∫ max(0, usage - nominal) of a tenant in a cohort; **lent**: at each instant the
  borrowed amount of the tenant's root cohort is shared among the members with unused lendable quota
  (min(nominal - usage, lending limit)) in proportion to it — the tuning report's definition (observe/tuning.py) —
  with the cohorts' own quotas (``gpuaas_cohorts[].quotas``) as one more lender of all of their quota.
* **fairness** per pool: Jain's index over the tenants with an entitlement of x = mean allocation ÷ mean
  entitlement (``tenancy.entitlements`` for the demand of that instant) over the instants when the pool is
  saturated (demand ≥ capacity); 1 = every tenant got its fair share. None when the pool was never saturated.
"""

from __future__ import annotations

import math
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.scheduler import Schedule
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import EPS, Tree, entitlements

SAMPLES = 600   # fairness samples per window


def percentile(values: t.Sequence[float], q: float) -> t.Optional[float]:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, int(math.ceil(q / 100.0 * len(ordered))) - 1)]


def jain(xs: t.Sequence[float]) -> t.Optional[float]:
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * sq) if sq > 0 else 1.0


def end_of(schedule: t.Sequence[Schedule]) -> float:
    ends = [r.end for s in schedule for r in s.runs] + [s.job.submit for s in schedule]
    return max(ends) if ends else 0.0


def _clip(a: float, b: float, horizon: float) -> float:
    return max(0.0, min(b, horizon) - max(a, 0.0))


def _r(value: t.Optional[float], digits: int = 3) -> t.Optional[float]:
    return None if value is None or math.isnan(value) else round(value, digits) + 0.0


def _usage_steps(schedule: t.Sequence[Schedule], pool: str, horizon: float) -> t.List[t.Tuple[float, float, t.Dict[str, float]]]:
    """(from, to, usage per tenant) intervals of constant usage of ``pool`` inside the window."""
    changes: t.Dict[float, t.Dict[str, float]] = {}
    for s in schedule:
        if s.job.pool != pool:
            continue
        for run in s.runs:
            for at, delta in ((run.start, s.job.size), (run.end, -s.job.size)):
                slot = changes.setdefault(at, {})
                slot[s.job.tenant] = slot.get(s.job.tenant, 0.0) + delta
    use: t.Dict[str, float] = {}
    out = []
    times = sorted(changes) + [horizon]
    for i, at in enumerate(times[:-1]):
        for name, delta in changes[at].items():
            use[name] = use.get(name, 0.0) + delta
        a, b = max(at, 0.0), min(times[i + 1], horizon)
        if b > a:
            out.append((a, b, dict(use)))
    return out


def borrowed_lent(schedule: t.Sequence[Schedule], tree: Tree, horizon: float) -> t.Dict[str, t.Dict[str, float]]:
    """GPU-hours borrowed and lent per tenant (summed over pools) inside the window."""
    out = {x: {"borrowed": 0.0, "lent": 0.0} for x in tree.tenant_nodes}
    for pool in tree.pools:
        for a, b, use in _usage_steps(schedule, pool, horizon):
            hours = (b - a) / 60.0
            for root in tree.roots:
                members = root.tenants()
                if root.tenant:
                    continue
                borrowed = {m.name: max(0.0, use.get(m.name, 0.0) - m.nominal.get(pool, 0.0)) for m in members}
                free = {m.name: min(max(0.0, m.nominal.get(pool, 0.0) - use.get(m.name, 0.0)), m.lendable(pool))
                        for m in members}
                # a cohort's own quota (a department budget) lends too, all of it: what borrowers take from it is
                # lent by no tenant
                budget = root.guaranteed(pool) - sum(m.nominal.get(pool, 0.0) for m in members)
                total_b, total_f = sum(borrowed.values()), sum(free.values()) + budget
                for m in members:
                    out[m.name]["borrowed"] += borrowed[m.name] * hours
                    if total_b > EPS and total_f > EPS:
                        out[m.name]["lent"] += total_b * free[m.name] / total_f * hours
    return out


def fairness(schedule: t.Sequence[Schedule], tree: Tree, capacity: t.Mapping[str, float], horizon: float,
             samples: int = SAMPLES) -> t.Dict[str, t.Dict[str, t.Any]]:
    """Per pool: Jain's index (see the module docstring), saturated minutes and mean allocation ÷ capacity."""
    until = end_of(schedule)
    out: t.Dict[str, t.Dict[str, t.Any]] = {}
    step = horizon / samples if horizon > 0 else 1.0
    for pool, cap in capacity.items():
        jobs = [s for s in schedule if s.job.pool == pool]
        alloc_sum = {x: 0.0 for x in tree.tenant_nodes}
        ent_sum = {x: 0.0 for x in tree.tenant_nodes}
        saturated = 0
        used_total = 0.0
        for i in range(samples if horizon > 0 else 0):
            at = (i + 0.5) * step
            alloc = {x: 0.0 for x in tree.tenant_nodes}
            demand = {x: 0.0 for x in tree.tenant_nodes}
            for s in jobs:
                done = s.finish if s.finish is not None else until
                if s.job.submit <= at < done:
                    demand[s.job.tenant] += s.job.size
                if any(r.start <= at < r.end for r in s.runs):
                    alloc[s.job.tenant] += s.job.size
            used_total += sum(alloc.values())
            if cap <= 0 or sum(demand.values()) < cap - EPS:
                continue
            saturated += 1
            ent = entitlements(tree, pool, demand, cap)
            for x in tree.tenant_nodes:
                alloc_sum[x] += alloc[x]
                ent_sum[x] += ent[x]
        xs = [alloc_sum[x] / ent_sum[x] for x in tree.tenant_nodes if ent_sum[x] > EPS]
        out[pool] = {"capacity": cap, "saturated_minutes": _r(saturated * step),
                     "jain": _r(jain(xs)) if saturated and len(xs) >= 2 else None,
                     "allocation": _r(used_total / (cap * samples)) if cap > 0 and horizon > 0 else None}
    return out


def tenant_figures(schedule: t.Sequence[Schedule], tree: Tree, horizon: float) -> t.Dict[str, t.Dict[str, t.Any]]:
    """Per tenant: jobs, finished, served/wasted/borrowed/lent GPU-hours, p50/p95/mean wait, preemptions."""
    until = end_of(schedule)
    shares = borrowed_lent(schedule, tree, horizon)
    out: t.Dict[str, t.Dict[str, t.Any]] = {}
    for name in tree.tenant_nodes:
        mine = [s for s in schedule if s.job.tenant == name]
        waits = [((s.first_start if s.first_start is not None else until) - s.job.submit) for s in mine]
        served = sum(s.job.size * _clip(r.start, r.end, horizon) for s in mine for r in s.runs) / 60.0
        wasted = sum(s.job.size * _clip(r.start, r.end, horizon) for s in mine for r in s.runs if r.evicted) / 60.0
        out[name] = {
            "jobs": len(mine),
            "finished": sum(1 for s in mine if s.finish is not None),
            "served_gpu_hours": _r(served),
            "wasted_gpu_hours": _r(wasted),
            "wait_p50_minutes": _r(percentile(waits, 50)),
            "wait_p95_minutes": _r(percentile(waits, 95)),
            "wait_mean_minutes": _r(sum(waits) / len(waits)) if waits else None,
            "preemptions": sum(s.evictions for s in mine),
            "borrowed_gpu_hours": _r(shares[name]["borrowed"]),
            "lent_gpu_hours": _r(shares[name]["lent"]),
        }
    return out


def schedule_figures(schedule: t.Sequence[Schedule], tree: Tree, capacity: t.Mapping[str, float],
                     horizon: float) -> t.Dict[str, t.Any]:
    return {"tenants": tenant_figures(schedule, tree, horizon),
            "pools": fairness(schedule, tree, capacity, horizon),
            "jobs": len(schedule),
            "preemptions": sum(s.evictions for s in schedule),
            "unfinished": sum(1 for s in schedule if s.finish is None)}


def allocation_series(schedule: t.Sequence[Schedule], pool: str, horizon: float,
                      tenants: t.Sequence[str]) -> t.Dict[str, t.List[t.Tuple[float, float]]]:
    """GPUs held per tenant over the window as step points (minute, GPUs), for the charts."""
    out: t.Dict[str, t.List[t.Tuple[float, float]]] = {x: [] for x in tenants}
    for a, _b, use in _usage_steps(schedule, pool, horizon):
        for x in tenants:
            out[x].append((a, use.get(x, 0.0)))
    return out
