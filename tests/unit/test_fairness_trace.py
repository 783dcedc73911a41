# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fairness/trace.py: seeded, recorded, and shaped as documented."""

from __future__ import annotations

import statistics

import pytest
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.fairness import model, trace  # noqa: E402

TREE = model.tree_from_inventory(model.load_inventory())


def test_same_seed_same_trace_and_recorded_hash():
    a = trace.generate(seed=7, jobs=200, horizon=300)
    b = trace.generate(seed=7, jobs=200, horizon=300)
    assert a == b
    assert trace.verify(a)
    c = trace.generate(seed=8, jobs=200, horizon=300)
    assert c["sha256"] != a["sha256"]
    a["jobs"][0]["size"] += 1   # any change is caught
    assert not trace.verify(a)


def test_shape_phases_sizes_and_pools():
    tr = trace.generate(seed=3, jobs=600, horizon=600)
    jobs = tr["jobs"]
    assert tr["params"]["seed"] == 3
    # roughly the requested count (Poisson arrivals): within 20 %
    assert 480 <= len(jobs) <= 720
    first = TREE.tenant_names[0]
    # phase "alone" (first 15 % = 90 min): the first tenant only
    assert {j["tenant"] for j in jobs if j["submit"] < 90} == {first}
    # "all" (90 .. 270 min): every tenant submits
    assert {j["tenant"] for j in jobs if 90 <= j["submit"] < 270} == set(TREE.tenant_names)
    # the scripted burst: 6 jobs of 8 GPUs of the first tenant at 270 min (45 %)
    burst = [j for j in jobs if 270 <= j["submit"] < 271 and j["size"] == 8]
    assert len(burst) == 6 and {j["tenant"] for j in burst} == {first}
    for j in jobs:
        nominal = TREE.tenant_nodes[j["tenant"]].nominal
        assert j["pool"] in nominal, j   # MIG jobs only for tenants with a MIG quota
        assert j["size"] <= nominal[j["pool"]]   # the static partition can run every job
        if j["pool"] == "fs-h100":
            assert j["size"] in (1, 2, 4, 8)
        else:
            assert j["size"] in (1, 2)
        assert 1.0 <= j["duration"] <= 60.0
    assert any(j["pool"] == "fs-mig-1g" for j in jobs)
    assert len({j["id"] for j in jobs}) == len(jobs)
    assert [j["submit"] for j in jobs] == sorted(j["submit"] for j in jobs)


def test_durations_are_lognormal_around_the_median():
    tr = trace.generate(seed=11, jobs=3000, horizon=600, median_minutes=8.0, sigma=0.8, max_minutes=1000)
    regular = [j["duration"] for j in tr["jobs"] if not (j["phase"] == "burst" and j["size"] == 8)]
    # median of a lognormal = exp(mu) = 8 (clipping at 1 minute only touches ~0.5 % of the draws)
    assert 7.0 <= statistics.median(regular) <= 9.0


def _inv(quotas):
    """tenants with {pool: n} quotas on a GPU pool and a MIG pool."""
    res = {"gpu": "nvidia.com/gpu", "mig": "nvidia.com/mig-1g.10gb"}
    return {"gpuaas_tenants": [
        {"name": name, "namespaces": [name],
         "quotas": [{"flavor": p, "resources": {res[p]: n}} for p, n in q.items()]} for name, q in quotas]}


def test_rate_weights_follow_the_quota_share():
    tree = model.tree_from_inventory(_inv([("a", {"gpu": 8}), ("b", {"gpu": 8, "mig": 7}), ("c", {"gpu": 0})]))
    # a: 8/16 of the GPUs; b: 8/16 of the GPUs + 7/7 of the slices = 1.5; c: nothing
    assert trace.rate_weights(tree) == {"a": 0.5, "b": 1.5, "c": 0.0}
    assert trace.rate_weights(tree, "equal") == {"a": 1.0, "b": 1.0, "c": 0.0}


def test_a_zero_quota_tenant_submits_nothing_and_the_burst_moves_on():
    # the first tenant has no quota at all: the generator used to crash on it (max() of no sizes)
    tree = model.tree_from_inventory(_inv([("zero", {}), ("big", {"gpu": 8}), ("small", {"gpu": 2})]))
    tr = trace.generate(seed=5, jobs=400, horizon=200, tree=tree)
    tenants = {j["tenant"] for j in tr["jobs"]}
    assert tenants == {"big", "small"}
    # "alone" (first 15 % = 30 min) and the burst of 8-GPU jobs belong to the first tenant with GPU quota
    assert {j["tenant"] for j in tr["jobs"] if j["submit"] < 30} == {"big"}
    assert [j["tenant"] for j in tr["jobs"] if j["phase"] == "burst" and j["size"] == 8 and j["submit"] < 91] \
        == ["big"] * 6
    # quota 8 vs 2 -> rate 0.8 vs 0.2 in the phases both submit: about 4x the jobs (Poisson, so within 2.5x..6.5x)
    both = [j for j in tr["jobs"] if j["submit"] >= 30 and not (j["phase"] == "burst" and j["size"] == 8)]
    n_big = sum(1 for j in both if j["tenant"] == "big")
    n_small = sum(1 for j in both if j["tenant"] == "small")
    assert 2.5 * n_small <= n_big <= 6.5 * n_small


def test_equal_rates_reproduce_the_committed_reduced_trace():
    # results/reduced/trace.json was generated before issue 26 with equal rates: same seed, same bytes
    import json
    committed = json.loads((Path(__file__).resolve().parents[2] / "bench/fairness/results/reduced/trace.json").read_text())
    again = trace.generate(seed=14, jobs=120, horizon=160.0, rates="equal")
    assert again["sha256"] == committed["sha256"] and again["jobs"] == committed["jobs"]


SCENARIOS = Path(__file__).resolve().parents[2] / "bench" / "fairness" / "scenarios"


def test_a_lender_submits_nothing_and_the_others_keep_their_rates():
    inv = model.load_inventory(SCENARIOS / "kep1714-story3-weights.yml")
    tree = model.tree_from_inventory(inv)
    assert trace.lenders_of(inv) == ["cs-pool"]
    tr = trace.generate(14, 120, 160.0, tree=tree, lenders=trace.lenders_of(inv))
    by_tenant = {t: sum(1 for j in tr["jobs"] if j["tenant"] == t) for t in tree.tenant_names}
    assert by_tenant["cs-pool"] == 0
    assert all(by_tenant[t] > 0 for t in ("team-1a", "team-1b", "team-1c", "team-2a"))
    assert all(j["size"] <= 1 for j in tr["jobs"])          # a job never asks more than its tenant's quota (1)
    assert tr["params"]["lenders"] == ["cs-pool"] and "cs-pool" not in tr["params"]["tenants"]
    assert trace.verify(tr)
    # without lenders the pool would submit most of the jobs (12 of the 16 GPUs of quota)
    plain = trace.generate(14, 120, 160.0, tree=tree)
    assert sum(1 for j in plain["jobs"] if j["tenant"] == "cs-pool") > len(plain["jobs"]) / 2
    with pytest.raises(ValueError):
        trace.generate(14, 120, 160.0, tree=tree, lenders=["nobody"])


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS.glob("*.yml")))
def test_scenario_files_are_valid_inventories_within_the_lab(name):
    # every scenario must pass the collection's own inventory validation (the lab replay converges it) and fit
    # the lab's 16 H100 (the replay checks capacity)
    from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel

    inv = model.load_inventory(SCENARIOS / ("%s.yml" % name))
    tree = model.tree_from_inventory(inv)
    assert sum(n.nominal.get("fs-h100", 0.0) for n in tree.tenant_nodes.values()) <= 16
    collection = {k: v for k, v in inv.items() if not k.startswith("fairness_bench_")}
    parsed = TenantModel.from_inventory(collection)    # raises on any problem of the collection's contract
    assert sorted(t.name for t in parsed.present_tenants) == sorted(tree.tenant_names)


def test_teams_without_quota_under_a_department_budget_get_jobs_within_their_share():
    # issue 26: department budgets. The teams hold nothing themselves; each department's 8 H100 are its cohort's
    # quota, so each of its three teams can count on 8/3 = 2.67 GPUs: it submits, at a third of its department's
    # rate, jobs of 1 or 2 GPUs (4 would be above its share)
    inv = model.load_inventory(SCENARIOS / "kep1714-story2-department-budgets.yml")
    tree = model.tree_from_inventory(inv)
    assert all(not n.nominal.get("fs-h100") for n in tree.tenant_nodes.values())
    weights = trace.rate_weights(tree)
    assert weights == pytest.approx({t: 1 / 6 for t in tree.tenant_names})
    tr = trace.generate(14, 120, 160.0, tree=tree)
    assert {j["tenant"] for j in tr["jobs"]} == set(tree.tenant_names)
    assert {j["size"] for j in tr["jobs"]} == {1, 2}
    assert tr["params"]["budget"]["d1-a"] == {"fs-h100": pytest.approx(8 / 3)}
    assert trace.verify(tr)


def test_a_department_budget_changes_nothing_for_an_inventory_without_cohort_quotas():
    # the budget share of a tenant whose cohorts hold nothing is its own nominal quota: same trace, same params
    tree = model.tree_from_inventory(_inv([("big", {"gpu": 8}), ("small", {"gpu": 2})]))
    assert model.budget_shares(tree) == {"big": {"gpu": 8}, "small": {"gpu": 2}}
    assert "budget" not in trace.generate(seed=5, jobs=50, horizon=100, tree=tree)["params"]
