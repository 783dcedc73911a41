# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quota tuning (issue 16): demand quantile, borrowed/lent, coverage, recommendations, the inventory patch (valid
for the tenants model, applied changes only), showback/CSV and the offline HTML report. Expected figures are worked
out by hand from the series given here."""

from __future__ import annotations

import csv
import html.parser
import io

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import html_report, recommendations, tuning

STEP = 60.0
T0 = 1_800_000_000.0
N = 20
TIMES = [T0 + i * STEP for i in range(N)]
START, END = TIMES[0], TIMES[-1]
GPU = "nvidia.com/gpu"
INF = float("inf")


def q(cq, values, cohort="pool", flavor="h100", resource=GPU):
    return ({"cohort": cohort, "cluster_queue": cq, "flavor": flavor, "resource": resource}, list(zip(TIMES, values)))


TENANTS = [
    {"name": "starved", "namespaces": ["starved-ns"], "cohort": "pool", "fair_sharing_weight": 1,
     "quotas": [{"flavor": "h100", "resources": {GPU: 2, "cpu": 16}}]},
    {"name": "idle", "namespaces": ["idle-ns"], "cohort": "pool",
     "quotas": [{"flavor": "h100", "resources": {GPU: 8}, "lending_limit": {GPU: 2}}]},
    {"name": "solo", "namespaces": ["solo-ns"], "quotas": [{"flavor": "h100", "resources": {GPU: 4}}]},
    {"name": "lender", "namespaces": ["lender-ns"], "cohort": "pool", "quotas": [{"flavor": "h100", "resources": {GPU: 4}}]},
]
FLAVORS = [{"name": "h100", "node_labels": {"gpu": "h100"}}]


def analysis(min_window=600.0, nominal_points=N, **kw):
    """starved: nominal 2, usage 2, pending 0 for 10 points then 3 (demand 2 -> 5);
    idle: nominal 8, lending limit 2, usage 1; lender: nominal 4, no lending limit, usage 1 (then 4 with 2 pending);
    solo (no cohort): nominal 4, usage 1. Borrowers: nobody borrows in the first 10 points, then 'starved' can't
    (it has no borrowing) - the 'bursty' helper queue 'burst' borrows 3 in the last 10 points."""
    nominal = [q("starved", [2.0] * N), q("idle", [8.0] * N), q("lender", [4.0] * N), q("solo", [4.0] * N, cohort=""),
               q("burst", [0.0] * N)]
    nominal[0] = (nominal[0][0], nominal[0][1][N - nominal_points:])
    usage = [q("starved", [2.0] * N), q("idle", [1.0] * N), q("lender", [1.0] * N), q("solo", [1.0] * N, cohort=""),
             q("burst", [0.0] * 10 + [3.0] * 10)]
    lending = [q("idle", [2.0] * N), q("lender", [INF] * N), q("starved", [INF] * N)]
    pending = [({"cluster_queue": "starved", "resource": GPU}, list(zip(TIMES, [0.0] * 10 + [3.0] * 10)))]
    return tuning.quota_analysis({"nominal": nominal, "usage": usage, "lending_limit": lending, "pending_resources": pending},
                                 START, END, STEP, tenants=TENANTS, min_window=min_window, **kw)


def rows():
    return {r["cluster_queue"]: r for r in analysis()["rows"]}


def test_demand_quantile_borrow_and_lend_figures():
    r = rows()
    s = r["starved"]
    # demand = 2 x10, 5 x10; p95: rank 0.95*19 = 18.05 -> 5
    assert (s["demand_quantile"], s["usage_quantile"], s["pending_quantile"], s["pending_fraction"]) == (5.0, 2.0, 3.0, 0.5)
    assert (s["points"], s["coverage"], s["sufficient"]) == (N, 1.0, True)
    # burst borrows 3 in 10 points; lendable: idle min(8-1, 2) = 2, lender 4-1 = 3, starved 0 -> lent 3*2/5, 3*3/5
    b = r["burst"]
    assert (b["borrow_fraction"], b["borrowed_max"], b["borrowed_hours"]) == (0.5, 3.0, round(3 * 10 * STEP / 3600, 4))
    assert r["idle"]["lent_max"] == 1.2 and r["idle"]["lent_hours"] == round(1.2 * 10 * STEP / 3600, 4)
    assert r["lender"]["lent_max"] == 1.8 and r["lender"]["lent_hours"] == round(1.8 * 10 * STEP / 3600, 4)
    assert r["solo"]["lent_hours"] == 0.0 and r["starved"]["lent_hours"] == 0.0
    assert r["idle"]["lending_limit"] == 2.0 and r["lender"]["lending_limit"] is None  # +Inf = unset


def test_pending_goes_to_the_flavor_with_the_largest_quota():
    nominal = [q("a", [2.0] * N, flavor="small"), q("a", [6.0] * N, flavor="big")]
    pending = [({"cluster_queue": "a", "resource": GPU}, list(zip(TIMES, [4.0] * N)))]
    res = {r["flavor"]: r for r in tuning.quota_analysis({"nominal": nominal, "pending_resources": pending}, START, END, STEP,
                                                         min_window=0)["rows"]}
    assert (res["big"]["pending_quantile"], res["small"]["pending_quantile"]) == (4.0, 0.0)
    assert res["big"]["pending_attributed"] and not res["small"]["pending_attributed"]


def recs(**kw):
    report = {"window": {"seconds": N * STEP}, "tenants": [{"tenant": "idle", "idle_gpu_hours": 0.3}], "tuning": analysis(**kw)}
    return recommendations.recommendations(report, tenants=TENANTS)


def test_recommendations_starved_grows_idle_lends_solo_lowers():
    out = {(r["tenant"], r["kind"]): r for r in recs()}
    assert set(out) == {("starved", "raise_quota"), ("idle", "lend"), ("solo", "lower_quota")}
    assert (out[("starved", "raise_quota")]["current"], out[("starved", "raise_quota")]["suggested"]) == (2.0, 5)
    assert "pending in 50% of the 20m" in out[("starved", "raise_quota")]["message"]
    lend = out[("idle", "lend")]
    assert (lend["current"], lend["suggested"]) == (2.0, 7)  # 8 - ceil(p95 demand 1)
    assert "0.3 GPU-hours allocated but idle" in lend["message"] and "cohort pool" in lend["message"]
    assert (out[("solo", "lower_quota")]["current"], out[("solo", "lower_quota")]["suggested"]) == (4.0, 1)
    # lender: demand 1 of 4 but no lending limit, its unused quota is lendable already -> no advice


def test_set_lending_limit_and_fair_sharing_weight():
    # lender lent while its own workloads waited; starved (demand fits) waited while a peer borrowed
    nominal = [q("lender", [4.0] * N), q("burst", [0.0] * N), q("starved", [2.0] * N)]
    usage = [q("lender", [1.0] * N), q("burst", [3.0] * N), q("starved", [2.0] * N)]
    pending = [({"cluster_queue": "lender", "resource": GPU}, list(zip(TIMES, [0.0] * 18 + [1.0] * 2))),
               ({"cluster_queue": "starved", "resource": GPU}, list(zip(TIMES, [0.0] * 20)))]
    a = tuning.quota_analysis({"nominal": nominal, "usage": usage, "pending_resources": pending}, START, END, STEP,
                              tenants=TENANTS, min_window=0)
    out = {(r["tenant"], r["kind"]): r for r in tuning.tuning_recommendations(a, TENANTS, window="20m")}
    # lender p95 demand: 1 x18, 2 x2 -> rank 18.05 -> 2; limit = 4 - 2
    assert out[("lender", "set_lending_limit")]["suggested"] == 2
    assert ("starved", "raise_fair_sharing_weight") not in out  # it never waited
    pending[1] = ({"cluster_queue": "starved", "resource": GPU}, list(zip(TIMES, [0.0] * 5 + [1.0] * 15)))
    nominal[2] = q("starved", [4.0] * N)
    a = tuning.quota_analysis({"nominal": nominal, "usage": usage, "pending_resources": pending}, START, END, STEP,
                              tenants=TENANTS, min_window=0)
    out = {(r["tenant"], r["kind"]): r for r in tuning.tuning_recommendations(a, TENANTS, window="20m")}
    weight = out[("starved", "raise_fair_sharing_weight")]
    assert (weight["current"], weight["suggested"]) == (1.0, 2.0) and "waited in 75% of the 20m" in weight["message"]


def test_insufficient_data_short_window_and_coverage():
    short = recs(min_window=N * STEP + 1)
    assert [r["kind"] for r in short] == ["insufficient_data"]
    assert "shorter than the minimum" in short[0]["message"]
    # the starved queue exists for the last 15 of 20 points only: 75 % < 90 % -> that queue alone is not judged
    out = recs(nominal_points=15)
    starved = [r for r in out if r["tenant"] == "starved"]
    assert [r["kind"] for r in starved] == ["insufficient_data"]
    assert "at 15 of 20 points (75%" in starved[0]["message"]
    assert {(r["tenant"], r["kind"]) for r in out} >= {("idle", "lend"), ("solo", "lower_quota")}
    # no Kueue history at all
    empty = tuning.quota_analysis({}, START, END, STEP, min_window=0)
    assert not empty["sufficient"] and "no Kueue quota series" in empty["insufficient_reasons"][0]
    # DCGM coverage
    a = analysis()
    tuning.add_dcgm_coverage(a, [({"gpu": "0"}, [(ts, 1.0) for ts in TIMES[:10]])], START, END, STEP)
    assert not a["sufficient"] and a["dcgm_coverage"] == 0.5


def test_patch_changes_only_recommended_entries_and_is_a_valid_inventory():
    out = recs()
    patch = tuning.inventory_patch(TENANTS, out)
    by = {t["name"]: t for t in patch["tenants"]}
    assert by["starved"]["quotas"][0]["resources"] == {GPU: 5, "cpu": 16}
    assert by["idle"]["quotas"][0] == {"flavor": "h100", "resources": {GPU: 8}, "lending_limit": {GPU: 7}}
    assert by["solo"]["quotas"][0]["resources"] == {GPU: 1}
    assert by["lender"] == TENANTS[3] and TENANTS[0]["quotas"][0]["resources"][GPU] == 2  # input untouched
    assert sorted((c["tenant"], c["field"], c["old"], c["new"]) for c in patch["changes"]) == [
        ("idle", "quotas[flavor=h100].lending_limit.nvidia.com/gpu", 2, 7),
        ("solo", "quotas[flavor=h100].resources.nvidia.com/gpu", 4, 1),
        ("starved", "quotas[flavor=h100].resources.nvidia.com/gpu", 2, 5)]
    text = tuning.patch_yaml(patch, ["window 20m"])
    assert "# - starved quotas[flavor=h100].resources.nvidia.com/gpu: 2 -> 5 (raise_quota)" in text
    loaded = yaml.safe_load(text)
    assert loaded == {"gpuaas_tenants_override": patch["tenants"]}
    # the patched inventory passes the tenants role's model
    TenantModel.from_inventory({"gpuaas_flavors": FLAVORS, "gpuaas_cohorts": [{"name": "pool"}],
                                "gpuaas_tenants": loaded["gpuaas_tenants_override"]})


def test_lowering_below_a_lending_limit_lowers_the_limit_too():
    tenants = [{"name": "solo", "namespaces": ["s"], "quotas": [{"flavor": "h100", "resources": {GPU: 8}, "lending_limit": {GPU: 6}}]}]
    rec = {"tenant": "solo", "kind": "lower_quota", "flavor": "h100", "resource": GPU, "message": "m",
           "change": {"path": "quotas[flavor=h100].resources.%s" % GPU, "value": 2}}
    quota = tuning.inventory_patch(tenants, [rec])["tenants"][0]["quotas"][0]
    assert quota == {"flavor": "h100", "resources": {GPU: 2}, "lending_limit": {GPU: 2}}


def test_showback_rows_cost_and_csv():
    report = {"usage_by_flavor": [
        {"tenant": "idle", "namespace": "idle-ns", "flavor": "h100", "gpu_hours": 2.0, "busy_gpu_hours": 0.0, "idle_gpu_hours": 2.0},
        {"tenant": "idle", "namespace": "idle-b", "flavor": "h100", "gpu_hours": 1.0, "busy_gpu_hours": 0.5, "idle_gpu_hours": 0.0},
        {"tenant": "(no tenant)", "namespace": "x", "flavor": "", "gpu_hours": 1.0, "busy_gpu_hours": 1.0, "idle_gpu_hours": 0.0}]}
    show = tuning.showback(report, analysis(), {"h100": 2.5}, "EUR")
    rows = {(r["level"], r["tenant"], r["namespace"]): r for r in show["rows"]}
    t = rows[("tenant", "idle", None)]
    assert (t["gpu_hours_allocated"], t["gpu_hours_busy"], t["gpu_hours_idle"], t["cost"]) == (3.0, 0.5, 2.0, 7.5)
    assert t["gpu_hours_lent"] == round(1.2 * 10 * STEP / 3600, 4) and t["gpu_hours_borrowed"] == 0.0
    assert rows[("namespace", "idle", "idle-ns")]["cost"] == 5.0 and rows[("namespace", "idle", "idle-ns")]["gpu_hours_lent"] is None
    assert rows[("namespace", "(no tenant)", "x")]["cost"] is None  # no price for an unknown flavor
    assert not [r for r in show["rows"] if r["tenant"] in ("burst", None)]  # a queue of no tenant is not shown back
    assert rows[("tenant", "lender", None)]["gpu_hours_lent"] == round(1.8 * 10 * STEP / 3600, 4)  # Kueue-only row
    assert rows[("tenant", "lender", None)]["gpu_hours_allocated"] == 0.0
    assert show["rows"][-1]["tenant"] == "(no tenant)"
    text = tuning.showback_csv(show)
    # issue 20: a CRLF file in the project tree failed `ansible-test sanity` after `make demo`
    assert "\r" not in text and text.endswith("\n") and text.count("\n") == len(show["rows"]) + 1
    parsed = list(csv.DictReader(io.StringIO(text)))
    line = next(r for r in parsed if r["level"] == "tenant" and r["tenant"] == "idle")
    assert (line["gpu_hours_allocated"], line["cost"], line["currency"], line["namespace"]) == ("3", "7.5", "EUR", "")


def test_node_flavors():
    nodes = [{"metadata": {"name": "n1", "labels": {"gpu": "h100", "x": "1"}}}, {"metadata": {"name": "n2", "labels": {}}}]
    assert tuning.node_flavors(nodes, [{"name": "empty"}] + FLAVORS) == {"n1": "h100"}


class _Parser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.svg_ids, self.series, self.bad = [], {}, []
        self.current = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "link", "img") or any(k in a for k in ("src", "href")):
            self.bad.append(tag)
        if tag == "svg":
            self.current = a["id"]
            self.svg_ids.append(a["id"])
            self.series[a["id"]] = []
        if tag == "polyline":
            self.series[self.current].append((a["data-series"], int(a["data-points"])))


def test_html_report_is_offline_with_one_svg_per_chart():
    report = {"window": {"seconds": N * STEP, "step": STEP, "end": END}, "result": "passed",
              "timeseries": {"tenants": {"idle": [[ts, 0.0, 1, 1] for ts in TIMES], "starved": [[ts, 90.0, 2, 0] for ts in TIMES]},
                             "cluster": [[ts, 3, 1] for ts in TIMES]},
              "tuning": analysis(), "recommendations": recs(),
              "showback": tuning.showback({"usage_by_flavor": []}, analysis(), {}, "")}
    text = html_report.render_html(report)
    parser = _Parser()
    parser.feed(text)
    assert parser.bad == [] and "http" not in text and "url(" not in text
    charts = html_report.charts(report)
    assert parser.svg_ids == [c["id"] for c in charts] and len(set(parser.svg_ids)) == len(charts)
    assert parser.series["tenant-utilization"] == [("idle", N), ("starved", N)]
    assert parser.series["idle-share"] == [("idle", N), ("starved", N), ("cluster", N)]
    assert parser.series["quota-starved-h100-nvidia.com-gpu"] == [("nominal quota", N), ("usage", N), ("pending", N)]
    assert "quota-burst-h100-nvidia.com-gpu" not in parser.svg_ids  # a queue of no tenant
    assert "raise the nominal quota from 2 to 5" in text


@pytest.mark.parametrize("value,expected", [(2.0, 2), (2.5, 2.5)])
def test_plain_numbers(value, expected):
    assert tuning._plain({"a": [value]}) == {"a": [expected]}
