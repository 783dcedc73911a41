# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline simulators on the same trace: the policy without any control-plane overhead.

``simulate(jobs, tree, capacity)`` is the collection's quota-plan scheduler
(``plugins/module_utils/quota_plan/scheduler.py``, the one implementation) on the benchmark's tree
(``model.tree_from_inventory``: no borrowing or lending limits, every tenant may reclaim), an event-driven scheduler
with zero latency that follows the tree:

* a job may start when its tenant's root (its top cohort, or the tenant itself without a cohort) stays within
  the root's nominal quota and the pool within its physical capacity (GPUs are one divisible pool per flavor:
  no node fragmentation);
* among tenants whose queue holds a job that fits (BestEffortFIFO: the first queued job that fits), the tenant
  with the lowest allocation ÷ entitlement (hierarchical weighted water-filling, ``tenancy.entitlements``) starts first;
* when nothing fits, a tenant may preempt the youngest job of another tenant of the same root if, after the
  swap, its allocation ÷ entitlement is not above the victim tenant's (Kueue's LessThanOrEqualToFinalShare), or if
  it only reclaims its nominal quota from a borrower; a preempted job restarts from zero and is queued again at
  the back (Kueue's default requeuing timestamp: the eviction).

Zero latency also means a run's pod is bound when it is admitted (``Run.bind = start``): offline, GPU work
equals quota held. The ideal picks work by allocation ÷ entitlement, the ratio Jain's index scores, so its
fairness is close to 1 by construction and its allocation is **not** an upper bound (issue 26: see
``metrics.packing_bound`` for one).

With the tenancy tree this is the **ideal** (fair-share policy, zero overhead); with the static variant's tree (no
cohorts) it is the **static** partition: every tenant alone in its nominal quota, nothing to preempt.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

from bench.fairness.model import Tree
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan import scheduler
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import EPS


@dataclass
class Run:
    start: float
    end: float
    evicted: bool = False
    bind: Optional[float] = None   # when the pod was bound to a node (GPUs start working); None: never bound


@dataclass
class JobResult:
    id: str
    tenant: str
    pool: str
    size: int
    submit: float
    duration: float
    runs: List[Run] = field(default_factory=list)
    evictions: Optional[int] = None   # recorded Evicted=True transitions (lab); None: one per evicted run

    @property
    def first_start(self) -> Optional[float]:
        return self.runs[0].start if self.runs else None

    @property
    def finish(self) -> Optional[float]:
        if self.runs and not self.runs[-1].evicted:
            return self.runs[-1].end
        return None


def simulate(jobs: List[Mapping], tree: Tree, capacity: Mapping[str, float],
             max_preemptions_per_step: int = 64) -> List[JobResult]:
    """The quota planner's scheduler (``quota_plan.scheduler.simulate``) on trace jobs, as the benchmark's results:
    one per job of a tenant of ``tree``, in trace order (a job of a pool without capacity never runs)."""
    results = [JobResult(j["id"], j["tenant"], j["pool"], int(j["size"]), float(j["submit"]), float(j["duration"]))
               for j in jobs if j["tenant"] in tree.tenant_nodes]
    planned = [r for r in results if r.pool in capacity]
    schedule = scheduler.simulate([scheduler.Job(r.id, r.tenant, r.pool, float(r.size), r.submit, r.duration)
                                   for r in planned], tree, capacity, max_preemptions_per_step)
    for result, item in zip(planned, schedule):
        # zero latency: bound when admitted
        result.runs = [Run(run.start, run.end, run.evicted, bind=run.start) for run in item.runs]
    return results


def fifo(jobs: List[Mapping], nodes: Mapping[str, List[float]]) -> List[JobResult]:
    """A work-conserving, node-aware reference that knows nothing of tenants, quotas or fairness (issue 26).

    Zero latency; jobs wait in one queue per pool in submission order; whenever a job arrives or finishes, every
    queued job that fits on a node starts, in queue order (a later, smaller job passes one that does not fit yet:
    Kueue's BestEffortFIFO, without quotas), on the fitting node with the fewest free GPUs (bin-packing). No
    preemption. Its fairness is whatever first-come-first-served gives, so its Jain index is a reference computed
    independently of the ratio the index scores; a job larger than every node of its pool never starts."""
    results = [JobResult(j["id"], j["tenant"], j["pool"], int(j["size"]), float(j["submit"]), float(j["duration"]))
               for j in jobs if j["pool"] in nodes]
    free = {p: [float(x) for x in n] for p, n in nodes.items()}
    seq = itertools.count()
    events: List[tuple] = []   # (time, kind 0=finish 1=arrival, seq, payload)
    for r in results:
        heapq.heappush(events, (r.submit, 1, next(seq), r))
    queue: Dict[str, List[JobResult]] = {p: [] for p in nodes}
    while events:
        now = events[0][0]
        while events and events[0][0] <= now + EPS:
            _, kind, _, payload = heapq.heappop(events)
            if kind == 1:
                queue[payload.pool].append(payload)
            else:
                pool, node, size = payload
                free[pool][node] += size
        for pool, q in queue.items():
            for job in list(q):
                fitting = [(f, i) for i, f in enumerate(free[pool]) if f >= job.size - EPS]
                if not fitting:
                    continue
                _, node = min(fitting)
                free[pool][node] -= job.size
                q.remove(job)
                job.runs.append(Run(now, now + job.duration, bind=now))
                heapq.heappush(events, (now + job.duration, 0, next(seq), (pool, node, job.size)))
    return results
