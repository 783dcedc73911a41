# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quota plan (issue 26): the replay follows Kueue's cohort rules (borrowing, reclaim, borrowing and lending
limits, no cohort), the per-tenant figures, the proposal over the inventory, demand from a trace and from DCGM +
Kueue series. Every expected figure is worked out by hand from the small scenario of the test."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan import demand, figures, plan
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.scheduler import Job, simulate
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import entitlements, tree_from_model, waterfill

GPU = "nvidia.com/gpu"


def inventory(a_quota=None, b_quota=None, cohort=True, b_reclaim="Any"):
    """Two tenants of one cohort, 2 H100 each (capacity 4)."""
    tenants = []
    for name, quota, reclaim in (("team-a", a_quota, "Any"), ("team-b", b_quota, b_reclaim)):
        entry = {"name": name, "namespaces": [name], "quotas": [quota or {"flavor": "h100", "resources": {GPU: 2}}]}
        if cohort:
            entry["cohort"] = "org"
            if reclaim:
                entry["preemption"] = {"reclaim_within_cohort": reclaim}
        tenants.append(entry)
    return {"gpuaas_flavors": [{"name": "h100", "node_labels": {"nvidia.com/gpu.product": "H100"}}],
            "gpuaas_cohorts": [{"name": "org"}] if cohort else [], "gpuaas_tenants": tenants}


def tree(inv):
    return tree_from_model(TenantModel.from_inventory(inv))


def a_jobs(count=4, size=1, duration=10.0):
    return [Job("a%d" % i, "team-a", "h100", size, 0.0, duration) for i in range(count)]


def b_jobs(count=2, at=5.0, duration=10.0):
    return [Job("b%d" % i, "team-b", "h100", 1, at, duration) for i in range(count)]


def by_id(schedule):
    return {s.job.id: s for s in schedule}


def test_a_lone_tenant_borrows_the_idle_quota_of_its_cohort_and_the_lender_is_credited():
    t = tree(inventory())
    out = by_id(simulate(a_jobs(), t, {"h100": 4}))
    assert [(r.start, r.end) for s in out.values() for r in s.runs] == [(0.0, 10.0)] * 4
    figs = figures.tenant_figures(list(out.values()), t, horizon=30.0)
    # 4 GPUs x 10 min served; 2 of them above the nominal quota for 10 min; team-b lent those 2 GPUs x 10 min
    assert figs["team-a"]["served_gpu_hours"] == round(40 / 60, 3)
    assert figs["team-a"]["borrowed_gpu_hours"] == round(20 / 60, 3)
    assert figs["team-b"]["lent_gpu_hours"] == round(20 / 60, 3)
    assert figs["team-a"]["wait_p95_minutes"] == 0.0


def test_reclaim_preempts_the_borrower_and_the_victims_restart_from_zero():
    t = tree(inventory())
    schedule = simulate(a_jobs() + b_jobs(), t, {"h100": 4})
    out = by_id(schedule)
    # t=5: team-b reclaims its 2 GPUs from team-a (borrowing); two of team-a's jobs are evicted, rerun at t=10
    assert sum(s.evictions for s in schedule if s.job.tenant == "team-a") == 2
    assert [(r.start, r.end) for r in out["b0"].runs] == [(5.0, 15.0)]
    rerun = [s for s in schedule if s.evictions]
    assert all([(r.start, r.end, r.evicted) for r in s.runs] == [(0.0, 5.0, True), (10.0, 20.0, False)] for s in rerun)
    figs = figures.tenant_figures(schedule, t, horizon=30.0)
    assert figs["team-a"]["preemptions"] == 2
    assert figs["team-a"]["served_gpu_hours"] == round((2 * 10 + 2 * 5 + 2 * 10) / 60, 3)
    assert figs["team-a"]["wasted_gpu_hours"] == round(2 * 5 / 60, 3)
    assert figs["team-a"]["borrowed_gpu_hours"] == round(2 * 5 / 60, 3)
    assert figs["team-b"]["wait_p95_minutes"] == 0.0


def test_without_reclaim_the_owner_waits_for_the_borrower():
    t = tree(inventory(b_reclaim=None))   # Kueue's default reclaimWithinCohort: Never
    schedule = simulate(a_jobs() + b_jobs(), t, {"h100": 4})
    figs = figures.tenant_figures(schedule, t, horizon=30.0)
    assert figs["team-a"]["preemptions"] == 0
    assert (figs["team-b"]["wait_p50_minutes"], figs["team-b"]["wait_p95_minutes"]) == (5.0, 5.0)


def test_borrowing_limit_caps_the_borrower():
    t = tree(inventory(a_quota={"flavor": "h100", "resources": {GPU: 2}, "borrowing_limit": {GPU: 1}}))
    out = by_id(simulate(a_jobs(), t, {"h100": 4}))
    assert sorted(s.first_start for s in out.values()) == [0.0, 0.0, 0.0, 10.0]


def test_lending_limit_keeps_the_rest_for_the_lender():
    t = tree(inventory(b_quota={"flavor": "h100", "resources": {GPU: 2}, "lending_limit": {GPU: 1}}))
    out = by_id(simulate(a_jobs(), t, {"h100": 4}))
    assert sorted(s.first_start for s in out.values()) == [0.0, 0.0, 0.0, 10.0]


def test_a_tenant_without_cohort_stays_within_its_nominal_quota():
    t = tree(inventory(cohort=False))
    out = by_id(simulate(a_jobs(), t, {"h100": 4}))
    assert sorted(s.first_start for s in out.values()) == [0.0, 0.0, 10.0, 10.0]
    assert figures.tenant_figures(list(out.values()), t, 30.0)["team-a"]["wait_p95_minutes"] == 10.0


def test_capacity_below_the_quotas_holds_jobs_back():
    t = tree(inventory())
    out = by_id(simulate(a_jobs(), t, {"h100": 3}))
    assert sorted(s.first_start for s in out.values()) == [0.0, 0.0, 0.0, 10.0]


def test_water_filling_shares_by_weight_above_the_guarantees():
    assert [round(x, 6) for x in waterfill(6, [0, 0], [10, 10], [2, 1])] == [4.0, 2.0]
    assert [round(x, 6) for x in waterfill(6, [1, 1], [10, 2], [1, 1])] == [4.0, 2.0]


def test_jain_is_one_for_an_equal_split_and_lower_for_a_skewed_one():
    assert figures.jain([1.0, 1.0]) == 1.0
    assert figures.jain([2.0, 0.0]) == 0.5


def test_the_proposal_is_laid_over_the_inventory_and_a_tuning_patch_replaces_the_tenants():
    current = inventory()
    patched = copy.deepcopy(current["gpuaas_tenants"])
    patched[0]["quotas"][0]["resources"][GPU] = 3
    out = plan.proposed_inventory(current, {"gpuaas_tenants_override": patched})
    assert out["gpuaas_tenants"][0]["quotas"][0]["resources"][GPU] == 3
    assert "gpuaas_tenants_override" not in out
    assert current["gpuaas_tenants"][0]["quotas"][0]["resources"][GPU] == 2   # the input is not changed
    assert plan.proposed_inventory(current, {"gpuaas_cohorts": []})["gpuaas_cohorts"] == []


def test_both_inventories_are_validated_and_every_problem_is_reported_at_once():
    bad = inventory()
    bad["gpuaas_tenants"][0]["quotas"][0]["flavor"] = "nope"
    worse = inventory()
    worse["gpuaas_tenants"][1]["cohort"] = "missing"
    with pytest.raises(GpuaasError) as err:
        plan.validated({"current": bad, "proposed": worse})
    problems = err.value.problems
    assert any(p.startswith("current:") and "nope" in p for p in problems), problems
    assert any(p.startswith("proposed:") and "missing" in p for p in problems), problems


def test_a_plan_reports_current_and_proposed_and_the_delta():
    current = inventory(b_reclaim=None)
    proposed = plan.proposed_inventory(current, {"gpuaas_tenants": inventory()["gpuaas_tenants"]})  # reclaim Any
    models = plan.validated({"current": current, "proposed": proposed})
    result = plan.plan(models, a_jobs() + b_jobs() + [Job("x", "stranger", "h100", 1, 0.0, 1.0)], 30.0)
    assert result["capacity"] == {"h100": 4.0}   # default: the sum of the current nominal quotas
    assert (result["jobs_outside_tenancy"], result["dropped_tenants"]) == (1, ["stranger"])
    assert result["variants"]["current"]["tenants"]["team-b"]["wait_p95_minutes"] == 5.0
    assert result["variants"]["proposed"]["tenants"]["team-b"]["wait_p95_minutes"] == 0.0
    assert result["delta"]["team-a"]["preemptions"] == 2
    text = plan.render_markdown(result)
    assert "| team-b | current |" in text and "| team-b | proposed |" in text
    page = plan.render_html(result)
    assert page.count("<svg") == 2 and "<script" not in page


def test_a_trace_with_malformed_jobs_lists_every_one():
    trace = {"params": {"horizon": 50}, "jobs": [
        {"id": "ok", "tenant": "team-a", "pool": "h100", "size": 1, "submit": 0, "duration": 3},
        {"id": "x", "tenant": "team-a", "pool": "h100", "size": 1},
        {"id": "y", "tenant": "team-a", "pool": "h100", "size": 0, "submit": 0, "duration": 3},
        "junk"]}
    with pytest.raises(GpuaasError) as err:
        demand.jobs_from_trace(trace)
    assert len(err.value.problems) == 3
    jobs, horizon = demand.jobs_from_trace({"params": {"horizon": 50}, "jobs": trace["jobs"][:1]})
    assert (len(jobs), horizon) == (1, 50.0)


def test_demand_from_dcgm_and_kueue_pending():
    model = TenantModel.from_inventory(inventory())
    start, step = 1000.0, 60.0

    def series(points, value=1.0):
        return [(start + i * step, value) for i in points]

    gpu = {"namespace": "team-a", "pod": "train-x", "Hostname": "n1"}
    dcgm = [(dict(gpu, UUID="GPU-1"), series(range(2, 6))), (dict(gpu, UUID="GPU-2"), series(range(2, 6))),
            ({"namespace": "elsewhere", "pod": "p", "UUID": "GPU-3"}, series(range(0, 3)))]
    # team-a had 2 GPUs pending at points 0-1 (the pod above waited 2 minutes); team-b has 1 pending from point 7 on
    pending = [({"cluster_queue": "team-a", "resource": GPU}, series(range(0, 2), 2.0) + series(range(2, 10), 0.0)),
               ({"cluster_queue": "team-b", "resource": GPU}, series(range(7, 10), 1.0))]
    jobs, horizon, notes = demand.jobs_from_prometheus(model, dcgm, pending, start, start + 9 * step, step)
    assert horizon == 9.0
    assert notes["pods_outside_tenancy"] == 1
    got = {j.id: (j.tenant, j.pool, j.size, j.submit, j.duration) for j in jobs}
    # ran at points 2..5 -> 2 .. 6 minutes; submitted at point 0
    assert got["team-a/train-x"] == ("team-a", "h100", 2.0, 0.0, 4.0)
    # still pending at the end, never ran: 1 GPU (no job of team-b seen) for the window, from point 7
    assert got["team-b/pending-0"] == ("team-b", "h100", 1.0, 7.0, 9.0)


# Cohort quotas (gpuaas_cohorts[].quotas, a Cohort's spec.resourceGroups). Kueue's documented semantics
# (site/content/en/docs/concepts/cohort.md, "Configuring Quotas" and "Hierarchical Cohorts"): a Cohort's nominalQuota
# is *additional* to its ClusterQueues' and a shared pool for the ClusterQueues within it (a ClusterQueue of nominal
# quota 0 "may access the 12 shared CPUs defined by its Cohort"); it may be lent to a parent Cohort subject to the
# LendingLimit; Borrowing and Lending limits apply to Cohorts as to ClusterQueues; with fair sharing, Cohorts of
# weights 0.75 and 0.25 trend towards 75% and 25% of the common resources.

def budget_inventory(cohorts, teams):
    """``cohorts``: [(name, parent, own GPUs or None, extra keys)]; ``teams``: [(name, cohort, nominal GPUs)]."""
    out_cohorts = []
    for name, parent, own, extra in cohorts:
        entry = {"name": name}
        if parent:
            entry["parent"] = parent
        if own is not None:
            entry["quotas"] = [dict({"flavor": "h100", "resources": {GPU: own}}, **extra.pop("quota", {}))]
        entry.update(extra)
        out_cohorts.append(entry)
    tenants = [{"name": name, "namespaces": [name], "cohort": cohort, "preemption": {"reclaim_within_cohort": "Any"},
                "quotas": [{"flavor": "h100", "resources": {GPU: gpus}}]} for name, cohort, gpus in teams]
    return {"gpuaas_flavors": [{"name": "h100", "node_labels": {"nvidia.com/gpu.product": "H100"}}],
            "gpuaas_cohorts": out_cohorts, "gpuaas_tenants": tenants}


def team_jobs(team, count, size=1, at=0.0, duration=10.0):
    return [Job("%s-%d" % (team, i), team, "h100", size, at, duration) for i in range(count)]


def test_a_team_of_zero_nominal_quota_runs_on_its_cohorts_budget():
    # the docs' example: the Cohort holds 12, the ClusterQueue 0 and may use the 12 (capacity 16: the quota binds)
    t = tree(budget_inventory([("hello-cohort", None, 12, {})], [("team", "hello-cohort", 0)]))
    starts = sorted(s.first_start for s in simulate(team_jobs("team", 14), t, {"h100": 16}))
    assert starts == [0.0] * 12 + [10.0] * 2


def test_a_cohort_budget_is_on_top_of_its_members_quota_and_counts_in_the_default_capacity():
    t = tree(budget_inventory([("dept", None, 4, {})], [("team-a", "dept", 2), ("team-b", "dept", 2)]))
    # additional resources: 2 + 2 + 4 = 8 GPUs; team-a alone may use its 2, team-b's idle 2 and the 4 shared
    assert plan.capacity_of(t, None) == {"h100": 8.0}
    starts = sorted(s.first_start for s in simulate(team_jobs("team-a", 9), t, {"h100": 8}))
    assert starts == [0.0] * 8 + [10.0]


def test_a_cohort_budget_is_shared_by_the_weights_of_its_children():
    # the docs' tree: important-org (0.75) and regular-org (0.25) under root-cohort, here with the 12 on the root and
    # one team of nominal quota 0 in each org; both want all 12: 75% and 25% of the common 12 = 9 and 3
    inv = budget_inventory([("root-cohort", None, 12, {}),
                            ("important-org", "root-cohort", None, {"fair_sharing_weight": "0.75"}),
                            ("regular-org", "root-cohort", None, {"fair_sharing_weight": "0.25"})],
                           [("team-i", "important-org", 0), ("team-r", "regular-org", 0)])
    t = tree(inv)
    assert entitlements(t, "h100", {"team-i": 12, "team-r": 12}) == pytest.approx({"team-i": 9.0, "team-r": 3.0})
    schedule = simulate(team_jobs("team-i", 12) + team_jobs("team-r", 12), t, {"h100": 12})
    running = {x: sum(1 for s in schedule if s.job.tenant == x and s.first_start == 0.0) for x in ("team-i", "team-r")}
    assert running == {"team-i": 9, "team-r": 3}


def test_a_cohorts_lending_limit_keeps_its_budget_from_the_other_department():
    # d1 holds 4 and lends at most 1 to the root; d2's team (nominal 0, nothing above it but the root) gets that 1
    inv = budget_inventory([("org", None, None, {}), ("d1", "org", 4, {"quota": {"lending_limit": {GPU: 1}}}),
                            ("d2", "org", None, {})], [("t1", "d1", 0), ("t2", "d2", 0)])
    t = tree(inv)
    starts = sorted(s.first_start for s in simulate(team_jobs("t2", 3), t, {"h100": 8}))
    assert starts == [0.0, 10.0, 20.0]
    # d1's own team still has all 4
    starts = sorted(s.first_start for s in simulate(team_jobs("t1", 5), t, {"h100": 8}))
    assert starts == [0.0] * 4 + [10.0]


def test_a_cohorts_borrowing_limit_caps_what_its_subtree_borrows():
    # d1 holds 2 and may borrow 1 more; d2 holds 4, idle: d1's team runs 3 at once
    inv = budget_inventory([("org", None, None, {}), ("d1", "org", 2, {"quota": {"borrowing_limit": {GPU: 1}}}),
                            ("d2", "org", 4, {})], [("t1", "d1", 0), ("t2", "d2", 0)])
    t = tree(inv)
    starts = sorted(s.first_start for s in simulate(team_jobs("t1", 4), t, {"h100": 8}))
    assert starts == [0.0] * 3 + [10.0]


def test_what_is_borrowed_from_a_cohort_budget_is_lent_by_no_tenant():
    # team-a (0) borrows 4 for 10 minutes; lenders: team-b's idle 2 and the cohort's own 2, in proportion: team-b lent 2
    t = tree(budget_inventory([("dept", None, 2, {})], [("team-a", "dept", 0), ("team-b", "dept", 2)]))
    figs = figures.tenant_figures(simulate(team_jobs("team-a", 4), t, {"h100": 4}), t, horizon=30.0)
    assert figs["team-a"]["borrowed_gpu_hours"] == round(4 * 10 / 60, 3)
    assert figs["team-b"]["lent_gpu_hours"] == round(2 * 10 / 60, 3)
