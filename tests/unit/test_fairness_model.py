# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fairness/model.py: variants of the bench inventory and hierarchical weighted water-filling.

Every expected value is worked out by hand in the comments next to it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.fairness import model  # noqa: E402


def inv(tenants, cohorts=()):
    return {"gpuaas_flavors": [{"name": "gpu"}], "gpuaas_cohorts": list(cohorts), "gpuaas_tenants": tenants}


def tenant(name, gpus, cohort=None, weight=None):
    t = {"name": name, "namespaces": [name], "quotas": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": gpus}}]}
    if cohort:
        t["cohort"] = cohort
    if weight is not None:
        t["fair_sharing_weight"] = weight
    return t


def test_waterfill_equal_weights_splits_what_is_left_after_guarantees():
    # A and B guaranteed 3 each, C (guaranteed 3) wants nothing: total = min(9, 10 + 5) = 9;
    # 3 + lam + 3 + lam = 9 -> lam = 1.5 -> A 4.5, B 4.5, C 0
    got = model.waterfill(9, [3, 3, 3], [10, 5, 0], [1, 1, 1])
    assert got == pytest.approx([4.5, 4.5, 0.0])


def test_waterfill_caps_at_demand_and_lends_unused_guarantee():
    # A guaranteed 6 wants 2; B guaranteed 2 wants 10: total 8, A 2, B 2 + lam = 6
    assert model.waterfill(8, [6, 2], [2, 10], [1, 1]) == pytest.approx([2.0, 6.0])


def test_waterfill_weights_divide_the_borrowable_part_only():
    # guarantees 2 and 2, demands 10 and 10, cap 10: borrowable 6 split 2:1 -> 2 + 4 = 6, 2 + 2 = 4
    assert model.waterfill(10, [2, 2], [10, 10], [2, 1]) == pytest.approx([6.0, 4.0])


def test_waterfill_weight_zero_gets_only_what_nobody_else_wants():
    # weight 0 keeps its guarantee 1; the other (guarantee 1) takes everything up to its demand 5: 1 + 4;
    # then 10 - 1 - 5 = 4 are left and go to the weight-0 child: 1 + 4 = 5
    assert model.waterfill(10, [1, 1], [8, 5], [0, 1]) == pytest.approx([5.0, 5.0])
    # with demand for all of it, the weight-0 child gets its guarantee only: 1 and 9
    assert model.waterfill(10, [1, 1], [8, 20], [0, 1]) == pytest.approx([1.0, 9.0])


def test_entitlements_reproduce_kueue_hierarchical_4_2_2_4():
    # Kueue v0.19.2 fair_sharing_test.go "preempts workloads to enforce fair share": 12 CPUs in root;
    # best-effort (0.5) under root; chemistry, physics, llm (2.0) under research under root; all queues 0 quota.
    # Here the 12 are the root Cohort's own quota (gpuaas_cohorts[].quotas), as in Kueue's test.
    # root: best-effort 0.5*lam, research 1*lam -> 1.5 lam = 12 -> lam = 8: best-effort 4, research 8;
    # research: lam + lam + 2 lam = 8 -> lam = 2: chemistry 2, physics 2, llm 4.
    cohorts = [{"name": "root", "quotas": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 12}}]},
               {"name": "research", "parent": "root"},
               {"name": "best-effort", "parent": "root", "fair_sharing_weight": 0.5},
               {"name": "chemistry", "parent": "research"}, {"name": "physics", "parent": "research"},
               {"name": "llm", "parent": "research", "fair_sharing_weight": 2}]
    tenants = [tenant("be", 0, "best-effort"), tenant("chem", 0, "chemistry"),
               tenant("phys", 0, "physics"), tenant("llmq", 0, "llm")]
    tree = model.tree_from_inventory(inv(tenants, cohorts))
    got = model.entitlements(tree, "gpu", {"be": 12, "chem": 12, "phys": 12, "llmq": 12})
    assert got == pytest.approx({"be": 4.0, "chem": 2.0, "phys": 2.0, "llmq": 4.0})


def test_entitlements_without_cohort_are_the_nominal_quota():
    tree = model.tree_from_inventory(inv([tenant("a", 2), tenant("b", 6)]))
    # each tenant is its own root: min(demand, nominal)
    assert model.entitlements(tree, "gpu", {"a": 10, "b": 1}) == pytest.approx({"a": 2.0, "b": 1.0})


def test_variants_of_the_bench_inventory():
    base = model.load_inventory()
    static = model.variant(base, "static")
    assert static["gpuaas_cohorts"] == []
    assert all("cohort" not in t and "fair_sharing_weight" not in t for t in static["gpuaas_tenants"])
    assert all("reclaim_within_cohort" not in (t.get("preemption") or {}) for t in static["gpuaas_tenants"])
    ones = model.variant(base, "weights1")
    assert {t["fair_sharing_weight"] for t in ones["gpuaas_tenants"]} == {1}
    assert all(c.get("fair_sharing_weight", 1) == 1 for c in ones["gpuaas_cohorts"])
    # same tenants and nominal quotas everywhere, and the input is not modified
    assert [t["quotas"] for t in static["gpuaas_tenants"]] == [t["quotas"] for t in base["gpuaas_tenants"]]
    assert any("cohort" in t for t in base["gpuaas_tenants"])
    with pytest.raises(ValueError):
        model.variant(base, "nonsense")


def test_bench_tree_pools_and_capacity_match_the_lab():
    tree = model.tree_from_inventory(model.load_inventory())
    assert tree.pools == {"fs-h100": "nvidia.com/gpu", "fs-mig-1g": "nvidia.com/mig-1g.10gb"}
    # lab/topology.yaml: two H100 nodes of 8 GPUs, one A100 with 7 MIG slices; the quotas add up to exactly that
    assert sum(t.nominal.get("fs-h100", 0) for t in tree.tenant_nodes.values()) == 16
    assert sum(t.nominal.get("fs-mig-1g", 0) for t in tree.tenant_nodes.values()) == 7


def test_apportion_by_hand():
    # 7 in 2:1 -> 4.667 / 2.333 -> floors 4 / 2, the one left to the larger remainder (a) -> 5 / 2
    assert model.apportion(7, {"a": 2, "b": 1}, {}) == {"a": 5, "b": 2}
    # 16 in 3:1:0 -> 12 / 4 / 0
    assert model.apportion(16, {"a": 3, "b": 1, "c": 0}, {}) == {"a": 12, "b": 4, "c": 0}
    # 8 in 9:1 -> 7.2 / 0.8, but b needs 2 -> b 2, a the other 6
    assert model.apportion(8, {"a": 9, "b": 1}, {"b": 2}) == {"a": 6, "b": 2}
    with pytest.raises(ValueError):
        model.apportion(3, {"a": 1, "b": 1}, {"a": 2, "b": 2})


def test_demand_quotas_follow_gpu_minutes_and_keep_every_job_runnable():
    tree = model.tree_from_inventory(inv([tenant("a", 4), tenant("b", 4)]))
    jobs = [{"tenant": "a", "pool": "gpu", "size": 2, "duration": 30},    # a: 60 GPU-min
            {"tenant": "b", "pool": "gpu", "size": 1, "duration": 20}]    # b: 20 GPU-min
    # 8 GPUs in 60:20 -> 6 / 2
    assert model.demand_quotas(tree, jobs, {"gpu": 8}) == {"a": {"gpu": 6}, "b": {"gpu": 2}}
    # b also runs one 4-GPU job for 5 min (20 more: 60:40 -> 4.8 / 3.2 -> 5 / 3), but needs 4 -> a 4, b 4
    jobs.append({"tenant": "b", "pool": "gpu", "size": 4, "duration": 5})
    assert model.demand_quotas(tree, jobs, {"gpu": 8}) == {"a": {"gpu": 4}, "b": {"gpu": 4}}
    # the static variant with those quotas: no cohort, nominal 4 each
    q = model.demand_quotas(tree, jobs, {"gpu": 8})
    t2 = model.tree_from_inventory(model.with_quotas(inv([tenant("a", 4, "org"), tenant("b", 4, "org")],
                                                         [{"name": "org"}]), q, tree))
    assert [r.name for r in t2.roots] == ["a", "b"]
    assert t2.tenant_nodes["a"].nominal == {"gpu": 4.0} and t2.tenant_nodes["b"].nominal == {"gpu": 4.0}


SCENARIOS = Path(__file__).resolve().parents[2] / "bench" / "fairness" / "scenarios"


def test_story1_the_company_pool_is_the_cohorts_quota_and_both_teams_get_equal_extra_space():
    # KEP-1714 story 1: TeamE and TeamW (2 GPUs each) share the company's pool "so that both get equal extra space,
    # whatever their own quota": the 12 of the pool are the company cohort's own quota (no lender tenant). Both
    # backlogged on 16: each keeps its 2 and gets half of the 12 -> 8 / 8; TeamE alone may use 2 + 2 + 12 = 16.
    scenario = model.load_inventory(SCENARIOS / "kep1714-story1-two-timezones.yml")
    assert "fairness_bench_lenders" not in scenario
    tree = model.tree_from_inventory(scenario)
    assert tree.tenant_names == ["team-e", "team-w"]
    assert model.entitlements(tree, "fs-h100", {"team-e": 16, "team-w": 16}) == pytest.approx({"team-e": 8.0, "team-w": 8.0})
    assert model.entitlements(tree, "fs-h100", {"team-e": 16, "team-w": 0}) == pytest.approx({"team-e": 16.0, "team-w": 0.0})


def test_the_weighted_hierarchy_scenario_holds_the_12_on_the_root_cohort():
    # each queue 1 GPU of its own + the root's 12, all backlogged (16 in all): at the root best-effort keeps 1 and
    # research 3, the 12 left go 0.5 : 1 -> 4 / 8, so best-effort 5; in research each keeps 1 and the 8 go
    # 1 : 1 : 2 -> 2 / 2 / 4, so chemistry 3, physics 3, llm 5.
    scenario = model.load_inventory(SCENARIOS / "kueue-weighted-hierarchy.yml")
    assert "fairness_bench_lenders" not in scenario
    tree = model.tree_from_inventory(scenario)
    assert tree.tenant_names == ["be", "chem", "phys", "llmq"]
    got = model.entitlements(tree, "fs-h100", {"be": 16, "chem": 16, "phys": 16, "llmq": 16})
    assert got == pytest.approx({"be": 5.0, "chem": 3.0, "phys": 3.0, "llmq": 5.0})


def test_static_variant_hands_department_budgets_to_the_teams():
    # issue 26: the static variant has no cohorts, so a cohort's own quota (a department budget) would have no
    # owner. It goes to the teams beneath it by their fair share: dept-1 holds 8 for a (weight 1) and b (weight 3)
    # -> 2 / 6; dept-2's 5 for c and d (weight 1 each) -> 2.5 / 2.5 -> 3 / 2 (largest remainder, first in order),
    # plus d's own 1. Without cohort quotas the static variant keeps the tenants' own quotas (None).
    budget = [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 8}}]
    raw = inv([tenant("a", 0, "dept-1"), tenant("b", 0, "dept-1", weight=3), tenant("c", 0, "dept-2"),
               tenant("d", 1, "dept-2")],
              cohorts=[{"name": "org"}, {"name": "dept-1", "parent": "org", "quotas": budget},
                       {"name": "dept-2", "parent": "org", "quotas": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 5}}]}])
    assert model.budget_shares(model.tree_from_inventory(raw)) == {
        "a": {"gpu": 2}, "b": {"gpu": 6}, "c": {"gpu": 2.5}, "d": {"gpu": 3.5}}
    assert model.static_budgets(raw) == {"a": {"gpu": 2}, "b": {"gpu": 6}, "c": {"gpu": 3}, "d": {"gpu": 3}}
    static = model.variant(raw, "static")
    assert static["gpuaas_cohorts"] == []
    assert {t["name"]: t["quotas"] for t in static["gpuaas_tenants"]} == {
        "a": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 2}}],
        "b": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 6}}],
        "c": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 3}}],
        "d": [{"flavor": "gpu", "resources": {"nvidia.com/gpu": 3}}]}
    assert model.static_budgets(inv([tenant("a", 4), tenant("b", 2)])) is None
