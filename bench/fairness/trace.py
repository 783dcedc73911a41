# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seeded GPU workload trace for the fair-sharing benchmark.

Time is in *trace minutes*; the replay compresses it (default 1 trace minute = 1 s). The trace has four phases:

1. ``alone``  (0 .. 15 %)   only the first tenant submits: it should borrow the whole pool;
2. ``all``    (15 .. 45 %)  every tenant submits at a high rate: demand far above capacity;
3. ``burst``  (45 .. 55 %)  the first tenant submits a burst of 8-GPU jobs while the others keep going;
4. ``onoff``  (55 .. 100 %) every tenant alternates ON/OFF periods (exponential lengths, seeded).

Jobs ask for 1/2/4/8 GPUs of the H100 pool (never more than the tenant's nominal quota, so the static partition
can run every job), or 1/2 MIG slices for tenants with a MIG quota. Durations are lognormal. The same seed gives
the same trace (``sha256`` of its canonical JSON is recorded with it).

Arrival rates (``rates``): ``"quota"`` (the default) makes each tenant's rate while ON proportional to its share
of the accelerator quota (the sum over pools of its nominal ÷ the pool's total nominal), so a tenant with half the
GPUs submits about as much as two tenants with a quarter each; ``"equal"`` gives every tenant the same rate (the
traces committed before issue 26, e.g. ``results/reduced/trace.json``, were made so and are reproduced
bit for bit by it). A tenant's quota here is its *budget share* (``model.budget_shares``): its own nominal quota
plus its fair part of the quota its cohorts hold themselves (department budgets, ``gpuaas_cohorts[].quotas``), so
a team without quota of its own under a department budget submits jobs no larger than its share (recorded as
``params.budget`` when it differs from ``params.nominal``). A tenant without any budget share submits nothing (it
cannot run anything in the static partition); the ``alone`` phase and the burst belong to the first tenant with
a share of the GPU pool.
A scenario inventory can name *lenders* (top-level ``fairness_bench_lenders: [tenant, ...]``): ClusterQueues that
only hold quota for the others (KEP-1714 story 3's CS, a company pool) and submit nothing.

Trace file format (``--trace`` of run.py): JSON ``{"params": {...}, "jobs": [...], "sha256": "..."}``; each job
``{"id", "tenant", "pool" (flavor name), "size" (GPUs or slices), "submit" and "duration" (trace minutes),
"phase"}``; ``sha256`` = sha256 of ``{"jobs", "params"}`` as compact, key-sorted JSON (``canonical_sha256``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.fairness.model import Tree, budget_shares, load_inventory, tree_from_inventory  # noqa: E402

GPU_SIZES = (1, 2, 4, 8)
GPU_SIZE_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
MIG_SIZES = (1, 2)
MIG_SIZE_WEIGHTS = (0.7, 0.3)
PHASES = (("alone", 0.0, 0.15), ("all", 0.15, 0.45), ("burst", 0.45, 0.55), ("onoff", 0.55, 1.0))
# arrival intensity while ON, relative to the ON/OFF phase: the lone tenant and the "all" phase push harder
INTENSITY = {"alone": 3.0, "all": 1.5, "burst": 1.0, "onoff": 1.0}


def lenders_of(inventory: Mapping[str, Any]) -> List[str]:
    """The tenants a scenario marks as lenders (top-level ``fairness_bench_lenders``: a bench-only key, which the
    collection's playbooks ignore like any unknown extra variable)."""
    return list(inventory.get("fairness_bench_lenders") or [])


def canonical_sha256(jobs: List[Mapping[str, Any]], params: Mapping[str, Any]) -> str:
    blob = json.dumps({"jobs": jobs, "params": params}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _sizes(limit: float, sizes: tuple, weights: tuple) -> tuple:
    keep = [(s, w) for s, w in zip(sizes, weights) if s <= limit]
    return tuple(s for s, _ in keep), tuple(w for _, w in keep)


def _onoff_periods(rng: random.Random, start: float, end: float, mean_on: float, mean_off: float) -> List[tuple]:
    """ON intervals inside [start, end): alternating exponential ON/OFF lengths, random initial state."""
    out = []
    t = start
    on = rng.random() < 0.5
    while t < end:
        length = rng.expovariate(1.0 / (mean_on if on else mean_off))
        if on:
            out.append((t, min(end, t + length)))
        t += length
        on = not on
    return out


def rate_weights(tree: Tree, rates: str = "quota", lenders: Sequence[str] = ()) -> Dict[str, float]:
    """Relative arrival rate per tenant (see the module docstring); 0 for a tenant without accelerator quota and
    for a lender (a ClusterQueue that only holds quota for the others, e.g. KEP-1714 story 3's CS)."""
    if rates not in ("quota", "equal"):
        raise ValueError("rates must be 'quota' or 'equal', not %r" % rates)
    budget = budget_shares(tree)
    total = {p: sum(b.get(p, 0.0) for b in budget.values()) for p in tree.pools}
    out = {}
    for t in tree.tenant_nodes:
        share = sum(budget[t].get(p, 0.0) / total[p] for p in tree.pools if total[p] > 0)
        out[t] = 0.0 if t in lenders else (1.0 if share > 0 else 0.0) if rates == "equal" else share
    return out


def generate(seed: int = 14, jobs: int = 450, horizon: float = 600.0, tree: Optional[Tree] = None,
             median_minutes: float = 8.0, sigma: float = 0.8, max_minutes: float = 60.0,
             burst_jobs: int = 6, mig_fraction: float = 0.6, rates: str = "quota",
             lenders: Sequence[str] = ()) -> Dict[str, Any]:
    """A trace of about ``jobs`` jobs over ``horizon`` trace minutes (the count is a Poisson draw around it).
    ``lenders``: tenants that submit nothing (their quota is only lent)."""
    tree = tree or tree_from_inventory(load_inventory())
    unknown = sorted(set(lenders) - set(tree.tenant_names))
    if unknown:
        raise ValueError("lenders not in the inventory: %s" % ", ".join(unknown))
    rng = random.Random(seed)
    weight = rate_weights(tree, rates, lenders)
    budget = budget_shares(tree)   # own nominal quota, plus a share of a department budget (cohort quota)
    tenants = [t for t in tree.tenant_names if weight[t] > 0]
    gpu_pool = next((p for p, r in tree.pools.items() if r == "nvidia.com/gpu"), None)
    mig_pool = next((p for p, r in tree.pools.items() if r != "nvidia.com/gpu"), None)
    first = next((t for t in tenants if gpu_pool and budget[t].get(gpu_pool, 0.0) >= 1),
                 tenants[0] if tenants else None)

    # ON intervals per tenant (intensity 1 while ON), by phase
    on: Dict[str, List[tuple]] = {t: [] for t in tenants}
    for phase, a, b in PHASES:
        start, end = a * horizon, b * horizon
        for t in tenants:
            if phase == "alone":
                if t == first:
                    on[t].append((start, end, INTENSITY[phase]))
            elif phase in ("all", "burst"):
                on[t].append((start, end, INTENSITY[phase]))
            else:
                on[t].extend((a2, b2, INTENSITY[phase])
                             for a2, b2 in _onoff_periods(rng, start, end, 0.1 * horizon, 0.08 * horizon))
    total_on = sum((b - a) * k * weight[t] for t in tenants for a, b, k in on[t])
    big_sizes = [s for s in GPU_SIZES if first and s <= budget[first].get(gpu_pool, 0.0)]
    if not big_sizes:
        burst_jobs = 0
    regular = max(0, jobs - burst_jobs)
    rate = regular / total_on if total_on > 0 else 0.0

    out: List[Dict[str, Any]] = []
    for t in tenants:
        g_sizes, g_weights = _sizes(budget[t].get(gpu_pool, 0.0), GPU_SIZES, GPU_SIZE_WEIGHTS) if gpu_pool else ((), ())
        m_sizes, m_weights = _sizes(budget[t].get(mig_pool, 0.0), MIG_SIZES, MIG_SIZE_WEIGHTS) if mig_pool else ((), ())
        for a, b, k in on[t]:
            time = a
            while True:
                time += rng.expovariate(rate * k * weight[t]) if rate > 0 else math.inf
                if time >= b:
                    break
                use_mig = bool(m_sizes) and (not g_sizes or rng.random() < mig_fraction)
                if use_mig:
                    pool, size = mig_pool, rng.choices(m_sizes, m_weights)[0]
                else:
                    pool, size = gpu_pool, rng.choices(g_sizes, g_weights)[0]
                dur = min(max_minutes, max(1.0, rng.lognormvariate(math.log(median_minutes), sigma)))
                out.append({"tenant": t, "submit": round(time, 3), "pool": pool, "size": size,
                            "duration": round(dur, 3), "phase": _phase(time / horizon)})
    # the scripted burst: 8-GPU jobs of the first tenant at the start of the burst phase
    burst_at = PHASES[2][1] * horizon
    big = max(big_sizes, default=0)
    for i in range(burst_jobs):
        dur = min(max_minutes, max(1.0, rng.lognormvariate(math.log(median_minutes * 1.5), sigma / 2)))
        out.append({"tenant": first, "submit": round(burst_at + 0.1 * i, 3), "pool": gpu_pool, "size": big,
                    "duration": round(dur, 3), "phase": "burst"})
    out.sort(key=lambda j: (j["submit"], j["tenant"]))
    for i, job in enumerate(out):
        job["id"] = "j%04d" % i
    params = {"seed": seed, "jobs": jobs, "horizon": horizon, "median_minutes": median_minutes, "sigma": sigma,
              "max_minutes": max_minutes, "burst_jobs": burst_jobs, "mig_fraction": mig_fraction,
              "tenants": tenants, "pools": tree.pools,
              "nominal": {t: tree.tenant_nodes[t].nominal for t in tenants}}
    if rates != "equal":
        params["rates"] = {t: round(weight[t], 6) for t in tenants}
    if any(budget[t] != {p: v for p, v in tree.tenant_nodes[t].nominal.items() if v > 0} for t in tenants):
        # department budgets: only then, so that the traces made before keep their sha256
        params["budget"] = {t: {p: round(v, 6) for p, v in budget[t].items()} for t in tenants}
    if lenders:   # only then, so that the traces made before keep their sha256
        params["lenders"] = sorted(lenders)
    return {"params": params, "jobs": out, "sha256": canonical_sha256(out, params)}


def _phase(fraction: float) -> str:
    for name, a, b in PHASES:
        if a <= fraction < b:
            return name
    return PHASES[-1][0]


def verify(trace: Mapping[str, Any]) -> bool:
    return canonical_sha256(trace["jobs"], trace["params"]) == trace["sha256"]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--jobs", type=int, default=450)
    ap.add_argument("--horizon", type=float, default=600.0, help="trace minutes")
    ap.add_argument("--rates", choices=("quota", "equal"), default="quota")
    ap.add_argument("--inventory", type=Path, help="tenant inventory (default: bench/fairness/inventory.yml)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    inv = load_inventory(args.inventory) if args.inventory else load_inventory()
    trace = generate(args.seed, args.jobs, args.horizon, tree=tree_from_inventory(inv), rates=args.rates,
                     lenders=lenders_of(inv))
    args.out.write_text(json.dumps(trace, indent=1, sort_keys=True))
    print("%d jobs, seed %d, sha256 %s -> %s" % (len(trace["jobs"]), args.seed, trace["sha256"], args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
