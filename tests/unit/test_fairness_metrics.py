# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fairness/metrics.py (issue 26): GPUs working, not quota held; a node-aware upper bound; churn per eviction.

Every expected value is worked out by hand in the comments next to it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.fairness import metrics, model  # noqa: E402
from bench.fairness.sim import JobResult, Run  # noqa: E402

TREE = model.tree_from_inventory({
    "gpuaas_cohorts": [{"name": "org"}],
    "gpuaas_tenants": [
        {"name": "a", "namespaces": ["a"], "cohort": "org",
         "quotas": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 2}}]},
        {"name": "b", "namespaces": ["b"], "cohort": "org",
         "quotas": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 2}}]},
    ]})


def schedule():
    # A (tenant a): 2 GPUs for 3 min; admitted at 0, pod bound at 1, Kueue's Finished at 5
    #   -> quota held [0, 5), GPUs working [1, 4) = bind .. bind + duration
    a = JobResult("A", "a", "gpu", 2, 0.0, 3.0, [Run(0.0, 5.0, False, bind=1.0)])
    # B (tenant b): 2 GPUs for 10 min; admitted at 0, bound at 2, evicted (quota released) at 3 -> working [2, 3);
    #   admitted again at 4, bound at 4, finished at 14 -> working [4, 14)
    b = JobResult("B", "b", "gpu", 2, 0.0, 10.0, [Run(0.0, 3.0, True, bind=2.0), Run(4.0, 14.0, False, bind=4.0)])
    return [a, b]


def test_work_window_is_bind_to_bind_plus_duration_cut_at_the_eviction():
    a, b = schedule()
    assert metrics.work_window(a, a.runs[0]) == (1.0, 4.0)
    assert metrics.work_window(b, b.runs[0]) == (2.0, 3.0)     # min(2 + 10, 3)
    assert metrics.work_window(b, b.runs[1]) == (4.0, 14.0)
    assert metrics.work_window(b, Run(0.0, 3.0, True, bind=None)) is None   # never bound: no work


def test_series_held_against_work():
    res = schedule()
    # step 1: samples at 0.5, 1.5, ..., 13.5 (until = last end 14 -> 14 samples); a sample t counts if a <= t < b
    held = metrics.series(res, "gpu", ["a", "b"], step=1.0, basis="held")
    work = metrics.series(res, "gpu", ["a", "b"], step=1.0, basis="work")
    assert len(held["times"]) == 14
    # held: A [0, 5) -> samples 0..4; B [0, 3) -> 0..2 and [4, 14) -> 4..13
    assert held["alloc"]["a"] == [2, 2, 2, 2, 2] + [0] * 9
    assert held["alloc"]["b"] == [2, 2, 2, 0] + [2] * 10
    # work: A [1, 4) -> 1..3; B [2, 3) -> 2 and [4, 14) -> 4..13
    assert work["alloc"]["a"] == [0, 2, 2, 2] + [0] * 10
    assert work["alloc"]["b"] == [0, 0, 2, 0] + [2] * 10
    # demand: held until Finished (A 5), work until the pod's work is done (A 1 + 3 = 4); B 14 both ways
    assert held["demand"]["a"] == [2] * 5 + [0] * 9
    assert work["demand"]["a"] == [2] * 4 + [0] * 10
    assert work["present"][0] == [2, 2] and work["present"][5] == [2]


def test_summarise_work_beside_held_and_the_node_aware_bound():
    res = schedule()
    s = metrics.summarise(res, TREE, TREE, {"gpu": 4.0}, window=10.0, step=1.0)
    p = s["pools"]["gpu"]
    # held: saturated (demand 4 >= 4) at samples 0..4; held GPUs 4, 4, 4, 2, 4 -> mean (1+1+1+.5+1)/5 = 0.9
    assert p["saturated_minutes"] == 5.0
    assert p["alloc_saturated"] == pytest.approx(0.9)
    # work: saturated at samples 0..3 (A's demand ends at 4); working 0, 2, 4, 2 -> (0+.5+1+.5)/4 = 0.5
    assert p["work_saturated_minutes"] == 4.0
    assert p["work_saturated"] == pytest.approx(0.5)
    assert p["overhead_points"] == pytest.approx(40.0)
    # bound: jobs {2, 2} present, one node of 4 -> both fit: 4/4 = 1 at every saturated sample
    assert p["bound_saturated"] == pytest.approx(1.0)
    assert p["work_vs_bound"] == pytest.approx(0.5)
    # two nodes of 3 and 1: only one 2-GPU job fits anywhere at a time -> bound 2/4 = 0.5, work ÷ bound 1.0
    s2 = metrics.summarise(res, TREE, TREE, {"gpu": 4.0}, window=10.0, step=1.0, nodes={"gpu": [3.0, 1.0]})
    assert s2["pools"]["gpu"]["bound_saturated"] == pytest.approx(0.5)
    assert s2["pools"]["gpu"]["work_vs_bound"] == pytest.approx(1.0)
    # wasted work: B's evicted run worked 2 GPUs x 1 min, of A 2x3 + B 2x1 + 2x10 = 6 + 2 + 20 = 28 GPU-min
    assert s["wasted_work_fraction"] == pytest.approx(2.0 / 28.0)
    # held: B's evicted run held 2 x 3 = 6 of 2x5 + 6 + 2x10 = 36 GPU-min
    assert s["wasted_fraction"] == pytest.approx(6.0 / 36.0)


@pytest.mark.parametrize("sizes,nodes,expected", [
    ([8, 4, 4, 4, 2], [8, 8], 16),   # 8 | 4 + 4
    ([4, 4, 4], [8, 8], 12),         # all fit
    ([8, 8, 8], [8, 8], 16),         # one 8 waits
    ([6, 6, 4], [8, 8], 12),         # 6 | 6; the 4 fits beside neither
    ([2, 2, 2, 2], [7], 6),          # a 7-slice A100: one slice stays free
    ([4, 3, 3], [6], 6),             # 3 + 3 beats largest-first (4, then nothing fits)
    ([], [8, 8], 0),
])
def test_packing_bound_by_hand(sizes, nodes, expected):
    assert metrics.packing_bound(sizes, nodes) == expected


def test_churn_counts_every_eviction_and_per_workload():
    res = schedule()
    # C: one run, but evicted 3 times while its pods were stopping (recorded Evicted=True transitions)
    c = JobResult("C", "a", "gpu", 1, 0.0, 5.0, [Run(0.0, 2.0, True, bind=0.5), Run(3.0, 8.0, False, bind=3.0)],
                  evictions=3)
    res.append(c)
    ch = metrics.churn(res)
    # admissions = runs: A 1, B 2, C 2; preemptions: A 0, B 1 (its evicted run, nothing recorded), C 3
    assert ch["admissions"] == 5
    assert ch["jobs_preempted"] == 2 and ch["jobs_preempted_over_2"] == 1
    assert ch["max_preemptions"] == 3
    assert ch["max_preemptions_job"] == {"id": "C", "tenant": "a", "preempted": 3, "admitted": 2}
    assert ch["preemptions_histogram"] == {"0": 1, "1": 1, "3": 1}
    assert ch["preemptions_by_tenant"] == {"a": 3, "b": 1}
    s = metrics.summarise(res, TREE, TREE, {"gpu": 4.0}, step=1.0)
    # 4 preemptions in 3 jobs -> 133.3 per 100 jobs; 2 runs ended in an eviction -> 66.7
    assert s["preemptions"] == 4 and s["preemptions_per_100"] == pytest.approx(400.0 / 3)
    assert s["runs_evicted"] == 2 and s["runs_evicted_per_100"] == pytest.approx(200.0 / 3)


def test_a_job_finished_by_the_pod_of_an_evicted_run():
    # D: bound at 1, 2 min of work done at 3, evicted at 5 (Kueue had not seen it finish), admitted again at 6 and
    # Finished at 7 without a new pod: the work was done by the first pod, the second admission only held quota
    d = JobResult("D", "a", "gpu", 2, 0.0, 2.0, [Run(0.0, 5.0, True, bind=1.0), Run(6.0, 7.0, False, bind=None)])
    assert metrics.done_run(d) is d.runs[0]
    work = metrics.series([d], "gpu", ["a"], step=1.0, basis="work")
    assert work["demand"]["a"] == [2, 2, 2, 0, 0, 0, 0]   # demand until 1 + 2 = 3
    s = metrics.summarise([d], TREE, TREE, {"gpu": 2.0}, step=1.0)
    assert s["finished_by_earlier_pod"] == ["D"]
    assert s["wasted_work_fraction"] == 0.0   # its only work was not wasted


def test_overhead_before_the_bind_and_after_the_work():
    s = metrics.summarise(schedule(), TREE, TREE, {"gpu": 4.0}, step=1.0)
    o = s["overhead"]
    # before the bind: A 2 GPUs x (1 - 0) + B 2 x (2 - 0) + B 2 x (4 - 4) = 2 + 4 + 0 = 6 GPU-min; worst B, 2 min
    assert o["before_bind_gpu_minutes"] == pytest.approx(6.0)
    assert o["before_bind_max"] == {"minutes": 2.0, "size": 2, "job": "B"}
    # after the work (finished runs only): A Finished 5 - (1 + 3) = 1 min x 2; B 14 - (4 + 10) = 0 -> 2 GPU-min
    assert o["after_work_gpu_minutes"] == pytest.approx(2.0)
    assert o["after_work_max"] == {"minutes": 1.0, "size": 2, "job": "A"}
    assert o["never_bound_runs"] == 0
