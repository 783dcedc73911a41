# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fairness/sim.py and metrics.py on schedules small enough to work out by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.fairness import metrics, model, sim  # noqa: E402


def tree(quotas, cohort=True):
    tenants = []
    for name, gpus in quotas.items():
        t = {"name": name, "namespaces": [name], "quotas": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": gpus}}]}
        if cohort:
            t["cohort"] = "all"
        tenants.append(t)
    return model.tree_from_inventory({"gpuaas_cohorts": [{"name": "all"}] if cohort else [], "gpuaas_tenants": tenants})


def job(i, tenant, size, submit, duration):
    return {"id": "j%d" % i, "tenant": tenant, "pool": "gpu", "size": size, "submit": submit, "duration": duration}


def runs(results):
    return {r.id: [(x.start, x.end, x.evicted) for x in r.runs] for r in results}


def test_static_partition_queues_what_a_cohort_lets_borrow():
    jobs = [job(1, "a", 2, 0, 10), job(2, "a", 2, 0, 10)]
    # static: A owns 2 of the 4 GPUs, the second job waits for the first
    got = runs(sim.simulate(jobs, tree({"a": 2, "b": 2}, cohort=False), {"gpu": 4}))
    assert got == {"j1": [(0, 10, False)], "j2": [(10, 20, False)]}
    # cohort: A borrows B's idle 2 GPUs, both run at once
    got = runs(sim.simulate(jobs, tree({"a": 2, "b": 2}), {"gpu": 4}))
    assert got == {"j1": [(0, 10, False)], "j2": [(0, 10, False)]}


def test_reclaim_preempts_the_borrowers_youngest_job_which_restarts_from_zero():
    jobs = [job(1, "a", 2, 0, 10), job(2, "a", 2, 0.5, 10), job(3, "b", 2, 1, 5)]
    res = sim.simulate(jobs, tree({"a": 2, "b": 2}), {"gpu": 4})
    # B reclaims its nominal 2 at t=1 by evicting A's youngest job (j2, started 0.5); j2 is queued again and
    # restarts when B finishes at 6, for its whole 10 minutes
    assert runs(res) == {"j1": [(0, 10, False)], "j2": [(0.5, 1, True), (6, 16, False)], "j3": [(1, 6, False)]}
    s = metrics.summarise(res, tree({"a": 2, "b": 2}), tree({"a": 2, "b": 2}), {"gpu": 4})
    assert s["preemptions"] == 1
    assert s["preemptions_per_100"] == pytest.approx(100 / 3)
    # wasted: 2 GPUs x 0.5 min of the evicted run, of 2x10 + 2x0.5 + 2x10 + 2x5 = 51 GPU-minutes
    assert s["wasted_fraction"] == pytest.approx(1 / 51)


def test_fair_sharing_matches_kueue_three_queues_of_three():
    # Kueue v0.19.2 fair_sharing_test.go "Preemption is enabled": queues a, b, c with nominal 3 in one cohort.
    t = tree({"a": 3, "b": 3, "c": 3})
    jobs = [job(i, "a", 1, i * 0.01, 1000) for i in range(10)]
    # a alone: 9 of its 10 jobs fit the cohort's 9
    res = sim.simulate(jobs, t, {"gpu": 9})
    assert sum(1 for r in res if r.runs and r.runs[0].start < 1) == 9
    # b submits 5 at t=1. Entitlements: 9 = (3 + lam) + (3 + lam) -> a 4.5, b 4.5.
    # b reclaims 3 (up to its nominal, a borrows); the 4th: b 4/4.5 = 0.89 <= a (6-1)/4.5 = 1.11 -> preempt;
    # the 5th: b 5/4.5 = 1.11 > a (5-1)/4.5 = 0.89 -> no. So a 5, b 4.
    jobs += [job(100 + i, "b", 1, 1, 1000) for i in range(5)]
    # c submits 1 at t=2: c wants 1 < nominal 3 -> entitlements c 1, a and b 3 + lam with 6 + 2 lam = 8 -> 4 each;
    # c reclaims from the borrower with the highest allocation/entitlement: a (5/4) over b (4/4). a 4, b 4, c 1.
    jobs += [job(200, "c", 1, 2, 1000)]
    res = sim.simulate(jobs, t, {"gpu": 9})

    def running_at(when):
        out = {"a": 0, "b": 0, "c": 0}
        for r in res:
            out[r.tenant] += sum(1 for x in r.runs if x.start <= when < x.end)
        return out

    assert running_at(1.5) == {"a": 5, "b": 4, "c": 0}
    assert running_at(2.5) == {"a": 4, "b": 4, "c": 1}


def test_metrics_by_hand():
    # static A (nominal 1) with two 1-GPU jobs of 10 min submitted at 0, pool of 2 GPUs, B idle
    t = tree({"a": 1, "b": 1}, cohort=False)
    res = sim.simulate([job(1, "a", 1, 0, 10), job(2, "a", 1, 0, 10)], t, {"gpu": 2})
    s = metrics.summarise(res, t, t, {"gpu": 2}, window=10, step=0.5)
    pool = s["pools"]["gpu"]
    # demand 2 >= capacity 2 during [0, 10) (allocated 1 of 2), 1 < 2 during [10, 20): saturated 10 min at 0.5
    assert pool["saturated_minutes"] == pytest.approx(10)
    assert pool["alloc_saturated"] == pytest.approx(0.5)
    # waits 0 and 10: mean 5, nearest-rank p95 of two values = the larger
    assert s["tenants"]["a"]["wait_mean"] == pytest.approx(5)
    assert s["tenants"]["a"]["wait_p95"] == pytest.approx(10)
    # makespan 20; lower bound max(0 + 10, 0 + 20 GPU-min / 2 GPUs) = 10
    assert s["makespan"] == pytest.approx(20)
    assert s["makespan_lower_bound"] == pytest.approx(10)


def test_jain_and_percentile():
    assert metrics.jain([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    # (1 + 0)^2 / (2 * 1) = 0.5
    assert metrics.jain([1.0, 0.0]) == pytest.approx(0.5)
    # (1 + 0.5)^2 / (2 * 1.25) = 2.25 / 2.5 = 0.9
    assert metrics.jain([1.0, 0.5]) == pytest.approx(0.9)
    # nearest rank: ceil(0.95 * 20) = 19th of 1..20
    assert metrics.percentile(list(range(1, 21)), 95) == 19
    assert metrics.percentile([7.0], 95) == 7.0


def test_fifo_reference_is_work_conserving_and_node_aware():
    from bench.fairness import sim as s

    def job(i, size, submit, duration, tenant="t"):
        return {"id": i, "tenant": tenant, "pool": "gpu", "size": size, "submit": submit, "duration": duration}

    # nodes of 3 and 1 GPUs:
    # A (2 GPUs, 0..4) -> only the 3-GPU node fits; B (1 GPU at 0) -> the fitting node with the fewest free GPUs is
    # the 1-GPU node: 0..2; C (2 GPUs at 1) does not fit anywhere (1 + 0 free) and waits until A ends at 4: 4..5;
    # D (1 GPU at 1) passes C onto the 3-GPU node's last GPU: 1..2; E (4 GPUs) is larger than any node: never starts
    got = {r.id: [(x.start, x.end) for x in r.runs] for r in s.fifo(
        [job("A", 2, 0, 4), job("B", 1, 0, 2), job("C", 2, 1, 1), job("D", 1, 1, 1), job("E", 4, 0, 1)],
        {"gpu": [3, 1]})}
    assert got == {"A": [(0, 4)], "B": [(0, 2)], "C": [(4, 5)], "D": [(1, 2)], "E": []}
    # one node of 4: A (4 GPUs, 0..10) holds it; B and C (2 GPUs at 1 and 2) both start when it ends: 10..15
    got = {r.id: [(x.start, x.end) for x in r.runs] for r in s.fifo(
        [job("A", 4, 0, 10), job("B", 2, 1, 5), job("C", 2, 2, 5)], {"gpu": [4]})}
    assert got == {"A": [(0, 10)], "B": [(10, 15)], "C": [(10, 15)]}
