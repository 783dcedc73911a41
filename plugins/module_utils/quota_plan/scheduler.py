# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""An offline, event-driven scheduler that follows Kueue's fair-sharing admission and preemption rules. Pure.

The fair-sharing benchmark (``bench/fairness/sim.py``) replays with it too. The rules, per accelerator pool
(flavor), re-evaluated whenever a job arrives or ends:

* a job fits when its pool stays within ``capacity`` (one divisible pool of GPUs: node fragmentation is not
  modelled) and its size within the quota its tenant may still use (``tenancy.available``: Kueue's hierarchical
  quota, with the tenants' and cohorts' own nominal quotas, borrowing and lending limits; a tenant without a cohort:
  its nominal quota);
* among tenants whose queue holds a job that fits (BestEffortFIFO: the first queued job that fits), the tenant with
  the lowest allocation ÷ entitlement (``tenancy.entitlements``) starts first; while a tenant below its entitlement
  cannot start its head job, nobody else grows beyond its own entitlement;
* when nothing fits, a tenant whose ClusterQueue may reclaim (``reclaim_within_cohort`` other than Never) preempts
  the youngest jobs of other tenants of the same root: a borrower when it reclaims within its nominal quota, or any
  tenant whose share after the swap is not below its own (Kueue's LessThanOrEqualToFinalShare). A preempted job
  restarts from zero at the back of its queue (Kueue's default requeuing timestamp: the eviction).

Zero latency: a job works from its admission. Priorities are not modelled (every job of the demand has the same
priority; LowerPriority is treated as Any).
"""

from __future__ import annotations

import heapq
import itertools
import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import EPS, Tree, available, entitlements


@dataclass
class Job:
    """One job of the demand: times in minutes from the start of the demand window."""
    id: str
    tenant: str
    pool: str
    size: float
    submit: float
    duration: float


@dataclass
class Run:
    start: float
    end: float
    evicted: bool = False


@dataclass
class Schedule:
    """What happened to one job: its runs (admission .. end or eviction) and how often it was preempted."""
    job: Job
    runs: t.List[Run] = field(default_factory=list)
    evictions: int = 0

    @property
    def first_start(self) -> t.Optional[float]:
        return self.runs[0].start if self.runs else None

    @property
    def finish(self) -> t.Optional[float]:
        return self.runs[-1].end if self.runs and not self.runs[-1].evicted else None


@dataclass
class _Queued:
    key: t.Tuple[float, int]
    item: Schedule


class _Scheduler:
    def __init__(self, tree: Tree, capacity: t.Mapping[str, float]) -> None:
        self.tree = tree
        self.capacity = capacity
        self.root_of = {x: tree.root_of(x) for x in tree.tenant_nodes}
        self.members = {x: [m.name for m in self.root_of[x].tenants()] for x in tree.tenant_nodes}
        self.cohorted = {x: node.up is not None for x, node in tree.tenant_nodes.items()}
        self.running: t.Dict[str, t.Tuple[Schedule, Run, int]] = {}

    def usage(self, pool: str) -> t.Dict[str, float]:
        use = {x: 0.0 for x in self.tree.tenant_nodes}
        for item, _run, _token in self.running.values():
            if item.job.pool == pool:
                use[item.job.tenant] += item.job.size
        return use

    def fits(self, job: Job, use: t.Mapping[str, float]) -> bool:
        """Whether ``job`` can be admitted with the pool's usage ``use`` (tenant -> GPUs): the pool's capacity and
        the quota its tenant may still use (``tenancy.available``)."""
        if sum(use.values()) + job.size > self.capacity.get(job.pool, 0.0) + EPS:
            return False
        return job.size <= available(self.tree.tenant_nodes[job.tenant], job.pool, use) + EPS


def simulate(jobs: t.Sequence[Job], tree: Tree, capacity: t.Mapping[str, float],
             max_preemptions_per_step: int = 64) -> t.List[Schedule]:
    """Replay ``jobs`` against the tenancy ``tree`` and the pools' ``capacity`` (flavor -> GPUs); jobs of tenants or
    pools the tenancy does not know are left out (the caller reports them)."""
    sched = _Scheduler(tree, capacity)
    items = [Schedule(j) for j in jobs if j.tenant in tree.tenant_nodes and j.pool in capacity]
    seq = itertools.count()
    events: t.List[t.Tuple[float, int, int, t.Any]] = []   # (time, 0=end 1=arrival, seq, payload)
    for item in items:
        heapq.heappush(events, (item.job.submit, 1, next(seq), item))
    queues: t.Dict[str, t.List[_Queued]] = {x: [] for x in tree.tenant_nodes}
    tokens = itertools.count()

    def start(item: Schedule, now: float) -> None:
        run = Run(now, now + item.job.duration)
        item.runs.append(run)
        token = next(tokens)
        sched.running[item.job.id] = (item, run, token)
        heapq.heappush(events, (run.end, 0, next(seq), (item.job.id, token)))

    def heads(pool: str) -> t.Dict[str, _Queued]:
        out = {}
        for name, queue in queues.items():
            head = next((x for x in queue if x.item.job.pool == pool), None)
            if head is not None:
                out[name] = head
        return out

    def schedule(now: float) -> None:
        preemptions = 0
        for pool in capacity:
            while True:
                use = sched.usage(pool)
                demand = dict(use)
                for name, queue in queues.items():
                    demand[name] += sum(x.item.job.size for x in queue if x.item.job.pool == pool)
                ent = entitlements(tree, pool, demand, capacity[pool])

                def ratio(name: str, extra: float = 0.0) -> float:
                    e = ent.get(name, 0.0)
                    return (use[name] + extra) / e if e > EPS else float("inf")

                first = heads(pool)
                # tenants below their entitlement whose head job does not fit: what is freed is kept for them
                starving = {n for n, h in first.items() if use[n] + EPS < ent.get(n, 0.0) and not sched.fits(h.item.job, use)}
                best = None
                for name, queue in queues.items():
                    if starving and name not in starving and ratio(name) >= 1.0 - EPS:
                        continue
                    for queued in queue:
                        job = queued.item.job
                        if job.pool != pool:
                            continue
                        if starving and name not in starving and ratio(name, job.size) > 1.0 + EPS:
                            continue
                        if sched.fits(job, use):
                            cand = (ratio(name), queued.key, name, queued)
                            if best is None or cand[:2] < best[:2]:
                                best = cand
                            break
                if best is not None:
                    queues[best[2]].remove(best[3])
                    start(best[3].item, now)
                    continue
                if preemptions >= max_preemptions_per_step:
                    break
                done = False
                for _ratio, _key, name, head in sorted((ratio(n), h.key, n, h) for n, h in first.items()):
                    victims = _victims(sched, head.item.job, use, ent)
                    if not victims:
                        continue
                    for vid in victims:
                        vitem, vrun, _token = sched.running.pop(vid)
                        vrun.end = now
                        vrun.evicted = True
                        vitem.evictions += 1
                        queues[vitem.job.tenant].append(_Queued((now, next(seq)), vitem))
                        preemptions += 1
                    queues[name].remove(head)
                    start(head.item, now)
                    done = True
                    break
                if not done:
                    break

    while events:
        now = events[0][0]
        while events and events[0][0] <= now + EPS:
            _at, kind, _seq, payload = heapq.heappop(events)
            if kind == 1:
                queues[payload.job.tenant].append(_Queued((payload.job.submit, next(seq)), payload))
            else:
                jid, token = payload
                if jid in sched.running and sched.running[jid][2] == token:
                    del sched.running[jid]
        for queue in queues.values():
            queue.sort(key=lambda x: x.key)
        schedule(now)
    return items


def _victims(sched: _Scheduler, job: Job, use: t.Mapping[str, float], ent: t.Mapping[str, float]) -> t.List[str]:
    """Jobs to preempt so that ``job`` fits, or [] when the fair-sharing rules allow none that suffice."""
    tenant, pool, tree = job.tenant, job.pool, sched.tree
    node = tree.tenant_nodes[tenant]
    if not sched.cohorted[tenant] or not node.reclaim:
        return []
    members = set(sched.members[tenant])
    reclaim = use[tenant] + job.size <= node.nominal.get(pool, 0.0) + EPS
    after_self = (use[tenant] + job.size) / ent[tenant] if ent.get(tenant, 0.0) > EPS else float("inf")
    candidates = sorted(((item, run) for item, run, _token in sched.running.values()
                         if item.job.pool == pool and item.job.tenant in members and item.job.tenant != tenant),
                        key=lambda ir: -ir[1].start)   # youngest first
    left = dict(use)
    chosen: t.List[str] = []
    while not sched.fits(job, left):
        best = None
        for item, run in candidates:
            if item.job.id in chosen:
                continue
            owner = item.job.tenant
            e = ent.get(owner, 0.0)
            share_after = (left[owner] - item.job.size) / e if e > EPS else float("inf")
            borrowing = left[owner] > tree.tenant_nodes[owner].nominal.get(pool, 0.0) + EPS
            if (reclaim and borrowing) or after_self <= share_after + EPS:
                key = (-(left[owner] / e if e > EPS else float("inf")), -run.start)
                if best is None or key < best[0]:
                    best = (key, item)
        if best is None:
            return []
        chosen.append(best[1].job.id)
        left[best[1].job.tenant] -= best[1].job.size
    return chosen
