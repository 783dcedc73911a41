# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline simulators on the same trace: the policy without any control-plane overhead.

``simulate(jobs, tree, capacity)`` is an event-driven scheduler with zero latency that follows the tree:

* a job may start when its tenant's root (its top cohort, or the tenant itself without a cohort) stays within
  the root's nominal quota and the pool within its physical capacity (GPUs are one divisible pool per flavor:
  no node fragmentation);
* among tenants whose queue holds a job that fits (BestEffortFIFO: the first queued job that fits), the tenant
  with the lowest allocation ÷ entitlement (hierarchical weighted water-filling, ``model.entitlements``) starts first;
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
from typing import Dict, List, Mapping, Optional, Tuple

from bench.fairness.model import Tree, entitlements

EPS = 1e-9


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


@dataclass
class _Queued:
    key: Tuple[float, int]
    job: JobResult


def simulate(jobs: List[Mapping], tree: Tree, capacity: Mapping[str, float],
             max_preemptions_per_step: int = 64) -> List[JobResult]:
    results = [JobResult(j["id"], j["tenant"], j["pool"], int(j["size"]), float(j["submit"]), float(j["duration"]))
               for j in jobs if j["tenant"] in tree.tenant_nodes]
    seq = itertools.count()
    events: List[tuple] = []   # (time, kind 0=finish 1=arrival, seq, payload)
    for r in results:
        heapq.heappush(events, (r.submit, 1, next(seq), r))
    queues: Dict[str, List[_Queued]] = {t: [] for t in tree.tenant_nodes}
    running: Dict[str, Tuple[JobResult, Run, int]] = {}   # job id -> (job, run, token)
    tokens = itertools.count()
    root_of = {t: tree.root_of(t) for t in tree.tenant_nodes}

    def usage(pool: str) -> Dict[str, float]:
        u = {t: 0.0 for t in tree.tenant_nodes}
        for job, _, _ in running.values():
            if job.pool == pool:
                u[job.tenant] += job.size
        return u

    def fits(job: JobResult, use: Dict[str, float], freed: float = 0.0, freed_root: float = 0.0) -> bool:
        root = root_of[job.tenant]
        root_use = sum(use[t.name] for t in root.tenants()) - freed_root
        pool_use = sum(use.values()) - freed
        return (root_use + job.size <= root.guaranteed(job.pool) + EPS
                and pool_use + job.size <= capacity[job.pool] + EPS)

    def start(job: JobResult, now: float) -> None:
        run = Run(now, now + job.duration, bind=now)   # zero latency: bound when admitted
        job.runs.append(run)
        token = next(tokens)
        running[job.id] = (job, run, token)
        heapq.heappush(events, (run.end, 0, next(seq), (job.id, token)))

    def schedule(now: float) -> None:
        preemptions = 0
        for pool in capacity:
            while True:
                use = usage(pool)
                demand = dict(use)
                for t, q in queues.items():
                    demand[t] += sum(x.job.size for x in q if x.job.pool == pool)
                ent = entitlements(tree, pool, demand, capacity[pool])

                def ratio(t: str, extra: float = 0.0) -> float:
                    e = ent.get(t, 0.0)
                    return (use[t] + extra) / e if e > EPS else float("inf")

                # tenants below their entitlement whose next job does not fit: nobody else may grow beyond
                # its entitlement meanwhile (what is freed is kept for them)
                starving = set()
                for t, q in queues.items():
                    head = next((x for x in q if x.job.pool == pool), None)
                    if head is not None and use[t] + EPS < ent.get(t, 0.0) and not fits(head.job, use):
                        starving.add(t)
                # 1. admit the first fitting job of the tenant furthest below its entitlement
                best = None
                for t, q in queues.items():
                    if starving and t not in starving and ratio(t, 0.0) >= 1.0 - EPS:
                        continue
                    for item in q:
                        if item.job.pool != pool:
                            continue
                        if starving and t not in starving and ratio(t, item.job.size) > 1.0 + EPS:
                            continue
                        if fits(item.job, use):
                            cand = (ratio(t), item.key, t, item)
                            if best is None or cand[:2] < best[:2]:
                                best = cand
                            break
                if best is not None:
                    queues[best[2]].remove(best[3])
                    start(best[3].job, now)
                    continue
                # 2. preemption for the head job of the tenant furthest below its entitlement
                if preemptions >= max_preemptions_per_step:
                    break
                heads = []
                for t, q in queues.items():
                    head = next((x for x in q if x.job.pool == pool), None)
                    if head is not None:
                        heads.append((ratio(t), head.key, t, head))
                heads.sort(key=lambda h: h[:2])
                done = False
                for _, _, t, head in heads:
                    victims = _victims(head.job, t, pool, use, ent, running, root_of, tree, fits)
                    if victims:
                        for vid in victims:
                            vjob, vrun, _ = running.pop(vid)
                            vrun.end = now
                            vrun.evicted = True
                            queues[vjob.tenant].append(_Queued((now, next(seq)), vjob))
                            preemptions += 1
                        queues[t].remove(head)
                        start(head.job, now)
                        done = True
                        break
                if not done:
                    break

    while events:
        now = events[0][0]
        while events and events[0][0] <= now + EPS:
            _, kind, _, payload = heapq.heappop(events)
            if kind == 1:
                queues[payload.tenant].append(_Queued((payload.submit, next(seq)), payload))
            else:
                jid, token = payload
                if jid in running and running[jid][2] == token:
                    del running[jid]
        for q in queues.values():
            q.sort(key=lambda x: x.key)
        schedule(now)
    return results


def _victims(job: JobResult, tenant: str, pool: str, use: Dict[str, float], ent: Dict[str, float],
             running: Dict[str, tuple], root_of: Dict, tree: Tree, fits) -> List[str]:
    """Jobs to preempt so that ``job`` fits, or [] when the fair-sharing rules allow none that suffice."""
    root = root_of[tenant]
    members = {t.name for t in root.tenants()}
    nominal = tree.tenant_nodes[tenant].nominal.get(pool, 0.0)
    reclaim = use[tenant] + job.size <= nominal + EPS
    after_self = (use[tenant] + job.size) / ent[tenant] if ent.get(tenant, 0.0) > EPS else float("inf")
    candidates = sorted(((j, r) for j, r, _ in running.values() if j.pool == pool and j.tenant in members
                         and j.tenant != tenant), key=lambda jr: -jr[1].start)   # youngest first
    left = dict(use)
    chosen: List[str] = []
    freed = 0.0
    while not fits(job, use, freed, freed):
        best = None
        for j, r in candidates:
            if j.id in chosen:
                continue
            u = j.tenant
            e = ent.get(u, 0.0)
            share_after = (left[u] - j.size) / e if e > EPS else float("inf")
            borrowing = left[u] > tree.tenant_nodes[u].nominal.get(pool, 0.0) + EPS
            allowed = (reclaim and borrowing) or after_self <= share_after + EPS
            if allowed:
                key = (-(left[u] / e if e > EPS else float("inf")), -r.start)
                if best is None or key < best[0]:
                    best = (key, j)
        if best is None:
            return []
        j = best[1]
        chosen.append(j.id)
        left[j.tenant] -= j.size
        freed += j.size
    return chosen


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
