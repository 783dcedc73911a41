# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""utilization.py: PromQL building, DCGM label variants, per GPU/namespace/tenant figures, Kueue, advice."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import monitoring
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import promql
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import recommendations
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import tuning
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import report as report_rendering
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import utilization as u

T0 = 1_800_000_000.0
STEP = 5.0
POINTS = 12  # 60 s window
TIMES = [T0 + i * STEP for i in range(POINTS)]
END = TIMES[-1]
START = TIMES[0]

TENANTS = [
    {"name": "nlp", "namespaces": ["nlp-train", "nlp-serve"]},
    {"name": "vision", "namespaces": ["vision-dev", "vision-prod"]},
    {"name": "analytics", "namespaces": ["analytics"]},
    {"name": "gone", "namespaces": ["gone-ns"], "state": "absent"},
]


def _gpu_labels(node, index, variant, workload=None):
    labels = {"gpu": str(index), "UUID": "GPU-%s-%d" % (node, index), "device": "nvidia%d" % index,
              "modelName": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:%02X:00.0" % (index + 1)}
    labels["Hostname" if variant == "honored" else "hostname"] = node
    if variant == "exported":
        # scrape did not honour labels: namespace/pod are the exporter's own
        labels.update({"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-abcde", "container": "exporter"})
        if workload:
            labels.update({"exported_namespace": workload[0], "exported_pod": workload[1], "exported_container": "main"})
    elif workload:
        labels.update({"namespace": workload[0], "pod": workload[1], "container": "main"})
    return labels


def lab_matrix(variant="honored"):
    """16 H100s on two nodes: known holders and utilizations over a 60 s window sampled every 5 s."""
    util, fb = [], []
    holders = {
        ("gpu-h100-0", 0): (("nlp-train", "train-0"), [85.0] * POINTS, 40000.0),
        ("gpu-h100-0", 1): (("nlp-train", "train-0"), [85.0] * POINTS, 42000.0),
        ("gpu-h100-0", 2): (("vision-dev", "notebook-0"), [0.0] * POINTS, 1000.0),
        ("gpu-h100-0", 3): (("analytics", "etl-0"), [0.0] * 6 + [90.0] * 6, 5000.0),
        ("gpu-h100-1", 0): (("scratch", "debug-0"), [10.0] * POINTS, 10.0),
    }
    for node in ("gpu-h100-0", "gpu-h100-1"):
        for index in range(8):
            holder = holders.get((node, index))
            if holder:
                workload, values, mem = holder
                util.append((_gpu_labels(node, index, variant, workload), list(zip(TIMES, values))))
                fb.append((_gpu_labels(node, index, variant, workload), [(ts, mem) for ts in TIMES]))
            else:
                util.append((_gpu_labels(node, index, variant), [(ts, 0.0) for ts in TIMES]))
                fb.append((_gpu_labels(node, index, variant), [(ts, 0.0) for ts in TIMES]))
    return util, fb


def report_for(variant="honored", **kwargs):
    util, fb = lab_matrix(variant)
    kwargs.setdefault("idle_for", 30.0)
    return u.gpu_report(util, fb, START, END, STEP, tenants=TENANTS, **kwargs)


# --- PromQL --------------------------------------------------------------------------------------
def test_dcgm_query_dedupes_and_keeps_every_label_variant():
    q = promql.dcgm_query("DCGM_FI_DEV_GPU_UTIL", '{job="gpu-metrics"}')
    assert q.startswith("max by (Hostname, hostname, kubernetes_node, node, gpu, UUID, ")
    for label in ("namespace", "pod", "exported_namespace", "exported_pod", "GPU_I_ID", "modelName"):
        assert label in q
    assert q.endswith('(DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics"})')
    assert promql.dcgm_query("DCGM_FI_DEV_FB_USED").endswith("(DCGM_FI_DEV_FB_USED)")


def test_kueue_queries_skip_follower_replicas_and_add_selector():
    qs = promql.kueue_queries('cluster_queue=~"nlp|vision"')
    assert qs["nominal"] == ('max by (cohort, cluster_queue, flavor, resource) '
                             '(kueue_cluster_queue_nominal_quota{replica_role!="follower",cluster_queue=~"nlp|vision"})')
    assert qs["pending"] == 'sum by (cluster_queue) (kueue_pending_workloads{replica_role!="follower",cluster_queue=~"nlp|vision"})'
    assert set(qs) == {"nominal", "borrowing_limit", "usage", "pending", "admitted", "status"}
    for q in qs.values():
        metric = q.split("(")[-1].split("{")[0]
        assert metric in promql.KUEUE_METRICS


def test_range_bounds_give_exact_point_count():
    start, end = promql.range_bounds(END, 60, 5)
    assert (start, end) == (START, END)
    assert int((end - start) / 5) + 1 == 12
    assert promql.auto_step(3600) == 15.0
    assert promql.auto_step(86400) == 360.0
    with pytest.raises(ValueError):
        promql.range_bounds(END, 0, 5)


def test_quantile_matches_promql_linear_interpolation():
    assert u.quantile([float(x) for x in range(1, 11)], 0.95) == pytest.approx(9.55)
    assert u.quantile([85.0] * 12, 0.95) == 85.0
    assert u.quantile([], 0.95) is None
    assert u.quantile([3.0], 0.5) == 3.0


# --- labels --------------------------------------------------------------------------------------
def test_label_helpers():
    assert u.node_of({"hostname": "n1"}) == "n1"
    assert u.node_of({"Hostname": "N", "hostname": "n"}) == "N"
    assert u.node_of({"instance": "10.0.0.1:9400"}) == "10.0.0.1:9400"
    assert u.workload_of({"namespace": "a", "pod": "p"}) == ("a", "p", "")
    assert u.workload_of({"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x"}) is None
    assert u.workload_of({"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x", "exported_namespace": "a",
                          "exported_pod": "p", "exported_container": "c"}) == ("a", "p", "c")
    assert u.workload_of({"namespace": "a", "pod": ""}) is None
    assert u.gpu_key({"Hostname": "n", "gpu": "0", "GPU_I_ID": "3"}) == ("n", "0", "3")


@pytest.mark.parametrize("variant", ["honored", "exported"])
def test_exact_figures_for_both_label_variants(variant):
    report = report_for(variant)
    assert report["label_variant"] == ("namespace/pod" if variant == "honored" else "exported_*")
    cluster = report["cluster"]
    assert cluster["gpus"] == 16
    assert cluster["allocated_gpus"] == 5
    assert cluster["unallocated_gpus"] == 11
    assert cluster["idle_gpus"] == 1
    # allocated samples: 2 GPUs x 12 x 85, 12 x 0, 6 x 0 + 6 x 90, 12 x 10 over 60 samples
    assert cluster["avg_utilization_allocated"] == round((24 * 85 + 6 * 90 + 12 * 10) / 60, 2)
    assert cluster["gpu_hours_allocated"] == round(5 * 60 / 3600, 4)
    assert cluster["gpu_hours_total"] == round(16 * 60 / 3600, 4)
    assert cluster["gpu_hours_unallocated"] == round(11 * 60 / 3600, 4)

    tenants = {x["tenant"]: x for x in report["tenants"]}
    assert list(tenants) == ["nlp", "vision", "analytics", u.UNASSIGNED]  # absent tenant left out
    nlp = tenants["nlp"]
    assert (nlp["gpus"], nlp["idle_gpus"], nlp["avg_utilization"], nlp["p95_utilization"]) == (2, 0, 85.0, 85.0)
    assert nlp["memory_used_mib"] == 82000.0
    assert nlp["gpu_hours"] == round(2 * 60 / 3600, 4)
    assert nlp["busy_gpu_hours"] == round(2 * 60 * 0.85 / 3600, 4)
    assert nlp["pods"] == ["nlp-train/train-0"]
    vision = tenants["vision"]
    assert (vision["gpus"], vision["idle_gpus"], vision["avg_utilization"]) == (1, 1, 0.0)
    analytics = tenants["analytics"]
    assert (analytics["gpus"], analytics["idle_gpus"], analytics["avg_utilization"], analytics["p95_utilization"]) == (1, 0, 45.0, 90.0)
    other = tenants[u.UNASSIGNED]
    assert other["namespaces"] == ["scratch"] and other["avg_utilization"] == 10.0

    namespaces = {x["namespace"]: x for x in report["namespaces"]}
    assert sorted(namespaces) == ["analytics", "nlp-train", "scratch", "vision-dev"]
    assert namespaces["nlp-train"]["tenant"] == "nlp" and namespaces["scratch"]["tenant"] == u.UNASSIGNED

    gpu = next(g for g in report["gpus"] if (g["node"], g["gpu"]) == ("gpu-h100-0", "2"))
    assert gpu["state"] == "idle" and gpu["uuid"] == "GPU-gpu-h100-0-2" and gpu["model"] == "NVIDIA H100 80GB HBM3"
    assert gpu["namespace"] == "vision-dev" and gpu["pod"] == "notebook-0" and gpu["tenant"] == "vision"
    assert gpu["idle_seconds"] == 60.0
    assert [(g["node"], g["gpu"]) for g in report["idle_gpus"]] == [("gpu-h100-0", "2")]
    assert len(report["unallocated_gpus"]) == 11
    assert ("gpu-h100-0", "4") in [(g["node"], g["gpu"]) for g in report["unallocated_gpus"]]
    # GPUs in natural order: node, then index
    assert [g["gpu"] for g in report["gpus"][:8]] == [str(i) for i in range(8)]


def test_mixed_scrapes_of_both_variants_count_each_gpu_once():
    honored = lab_matrix("honored")[0]
    exported = lab_matrix("exported")[0]
    report = u.gpu_report(honored + exported, [], START, END, STEP, tenants=TENANTS, idle_for=30.0)
    assert report["label_variant"] == "mixed"
    assert (report["cluster"]["gpus"], report["cluster"]["allocated_gpus"], report["cluster"]["unallocated_gpus"]) == (16, 5, 11)
    nlp = next(x for x in report["tenants"] if x["tenant"] == "nlp")
    assert (nlp["gpus"], nlp["avg_utilization"], nlp["gpu_hours"]) == (2, 85.0, round(2 * 60 / 3600, 4))


def test_idle_needs_the_full_idle_duration():
    # analytics' GPU went busy, vision's has been idle 60 s: with idle_for 65 s nothing is idle yet
    assert report_for(idle_for=65.0)["cluster"]["idle_gpus"] == 0
    assert report_for(idle_for=60.0)["cluster"]["idle_gpus"] == 1
    # a threshold of 11% also catches the 10%-busy scratch pod
    idle = report_for(idle_threshold=11.0)["idle_gpus"]
    assert [(g["node"], g["gpu"], g["tenant"]) for g in idle] == [("gpu-h100-0", "2", "vision"), ("gpu-h100-1", "0", u.UNASSIGNED)]


def test_gpu_changing_hands_and_time_slicing():
    labels = _gpu_labels("n0", 0, "honored")
    a = dict(labels, namespace="nlp-train", pod="a")
    b = dict(labels, namespace="vision-dev", pod="b")
    # first half held by a (60%), second half shared by a and b (time-slicing: both see 80%)
    util = [
        (a, [(ts, 60.0 if i < 6 else 80.0) for i, ts in enumerate(TIMES)]),
        (b, [(ts, 80.0) for ts in TIMES[6:]]),
    ]
    report = u.gpu_report(util, [], START, END, STEP, tenants=TENANTS, idle_for=30)
    gpu = report["gpus"][0]
    assert gpu["state"] == "busy" and gpu["workloads"] == ["nlp-train/a", "vision-dev/b"]
    assert gpu["avg_utilization"] == 70.0 and gpu["samples"] == 12
    tenants = {x["tenant"]: x for x in report["tenants"]}
    # GPU-seconds: a 6*5 + 6*5/2 = 45, b 6*5/2 = 15; total equals the GPU's 60 s
    assert tenants["nlp"]["gpu_hours"] == round(45 / 3600, 4)
    assert tenants["vision"]["gpu_hours"] == round(15 / 3600, 4)
    assert report["cluster"]["gpu_hours_allocated"] == round(60 / 3600, 4)
    assert tenants["nlp"]["gpus"] == 1 and tenants["vision"]["gpus"] == 1


def test_gpu_released_during_window_is_unallocated_now():
    labels = _gpu_labels("n0", 0, "honored")
    held = dict(labels, namespace="analytics", pod="done")
    util = [(held, [(ts, 50.0) for ts in TIMES[:4]]), (labels, [(ts, 0.0) for ts in TIMES[4:]])]
    report = u.gpu_report(util, [], START, END, STEP, tenants=TENANTS)
    assert report["gpus"][0]["state"] == "unallocated" and report["gpus"][0]["gpu_hours"] == round(20 / 3600, 4)
    analytics = next(x for x in report["tenants"] if x["tenant"] == "analytics")
    assert analytics["gpus"] == 0 and analytics["avg_utilization"] == 50.0 and analytics["gpu_hours"] == round(20 / 3600, 4)


def test_mig_instances_are_separate_gpus():
    base = {"Hostname": "gpu-a100-mig-0", "gpu": "0", "UUID": "GPU-a100", "modelName": "NVIDIA A100-SXM4-80GB"}
    util = [
        (dict(base, GPU_I_ID="1", GPU_I_PROFILE="1g.10gb", namespace="vision-dev", pod="m1"), [(ts, 30.0) for ts in TIMES]),
        (dict(base, GPU_I_ID="2", GPU_I_PROFILE="1g.10gb"), [(ts, 0.0) for ts in TIMES]),
    ]
    report = u.gpu_report(util, [], START, END, STEP, tenants=TENANTS)
    assert [(g["mig_instance"], g["state"]) for g in report["gpus"]] == [("1", "busy"), ("2", "unallocated")]
    assert u.gpu_name(report["gpus"][0]) == "gpu-a100-mig-0 GPU 0 MIG 1 (1g.10gb)"
    assert [u.gpu_name(g) for g in report["unallocated_gpus"]] == ["gpu-a100-mig-0 GPU 0 MIG 2 (1g.10gb)"]
    assert "- gpu-a100-mig-0 GPU 0 MIG 2 (1g.10gb) (NVIDIA A100-SXM4-80GB, UUID GPU-a100)" in report_rendering.render_markdown(report)


def test_duplicate_series_count_once_and_nan_skipped():
    labels = _gpu_labels("n0", 0, "honored", ("nlp-train", "p"))
    util = [(labels, [(ts, 40.0) for ts in TIMES]), (dict(labels), [(ts, float("nan")) for ts in TIMES])]
    report = u.gpu_report(util, [], START, END, STEP, tenants=TENANTS)
    assert report["cluster"]["gpus"] == 1 and report["gpus"][0]["avg_utilization"] == 40.0


# --- Kueue ----------------------------------------------------------------------------------------
def _q(cq, flavor, resource, values, cohort="research"):
    return ({"cohort": cohort, "cluster_queue": cq, "flavor": flavor, "resource": resource}, list(zip(TIMES, values)))


def kueue_matrices():
    nominal = [_q("nlp", "h100", "nvidia.com/gpu", [8.0] * POINTS), _q("vision", "h100", "nvidia.com/gpu", [6.0] * POINTS),
               _q("analytics", "h100", "nvidia.com/gpu", [2.0] * POINTS, "org")]
    borrowing = [_q("nlp", "h100", "nvidia.com/gpu", [8.0] * POINTS), _q("vision", "h100", "nvidia.com/gpu", [4.0] * POINTS),
                 _q("analytics", "h100", "nvidia.com/gpu", [0.0] * POINTS, "org")]
    usage = [_q("nlp", "h100", "nvidia.com/gpu", [2.0] * POINTS),                  # far below 8
             _q("vision", "h100", "nvidia.com/gpu", [6.0] * 3 + [9.0] * 9),      # borrows 75% of the time
             _q("analytics", "h100", "nvidia.com/gpu", [2.0] * POINTS, "org")]   # full, and waiting
    pending = [({"cluster_queue": "analytics"}, list(zip(TIMES, [0.0] * 2 + [1.0] * 5 + [3.0] * 5)))]
    admitted = [({"cluster_queue": "nlp"}, [(ts, 1.0) for ts in TIMES])]
    status = [({"cluster_queue": "nlp", "status": "active"}, [(ts, 1.0) for ts in TIMES]),
              ({"cluster_queue": "vision", "status": "pending"}, [(ts, 1.0) for ts in TIMES[:3]]),
              ({"cluster_queue": "vision", "status": "active"}, [(ts, 1.0) for ts in TIMES[3:]])]
    return nominal, borrowing, usage, pending, admitted, status


def test_queue_report_from_metrics():
    queues = {q["cluster_queue"]: q for q in u.queue_report_from_metrics(*kueue_matrices())}
    assert sorted(queues) == ["analytics", "nlp", "vision"]
    nlp = queues["nlp"]
    assert nlp["status"] == "active" and nlp["cohort"] == "research" and nlp["admitted_workloads"] == 1
    assert nlp["resources"] == [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8.0, "borrowing_limit": 8.0,
                                 "usage": 2.0, "usage_avg": 2.0, "usage_max": 2.0, "borrowed": 0.0,
                                 "borrowing_fraction": 0.0}]
    vision = queues["vision"]["resources"][0]
    assert vision["borrowed"] == 3.0 and vision["borrowing_fraction"] == 0.75 and vision["usage_avg"] == 8.25
    assert queues["vision"]["status"] == "active"
    analytics = queues["analytics"]
    assert (analytics["pending_workloads"], analytics["pending_max"], analytics["pending_growth"]) == (3, 3, 3)
    assert analytics["pending_fraction"] == round(10 / 12, 2)


def test_queue_report_from_cluster_queue_objects():
    objs = [{
        "metadata": {"name": "vision"},
        "spec": {"cohortName": "research", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu", "memory"], "flavors": [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 6, "borrowingLimit": "4"},
                                           {"name": "memory", "nominalQuota": "512Gi"}]}]}]},
        "status": {
            "flavorsUsage": [{"name": "h100", "resources": [
                {"name": "nvidia.com/gpu", "total": "9", "borrowed": "3"}, {"name": "memory", "total": "1Gi"}]}],
            "pendingWorkloads": 2, "admittedWorkloads": 3,
            "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]},
    }, {"metadata": {"name": "old"}, "spec": {"cohort": "org"}, "status": {
        "conditions": [{"type": "Active", "status": "False", "reason": "FlavorNotFound"}]}}]
    queues = u.queue_report_from_objects(objs)
    assert [q["cluster_queue"] for q in queues] == ["old", "vision"]
    old, vision = queues
    assert old["cohort"] == "org" and old["status"] == "pending"
    gpu, mem = vision["resources"]
    assert (gpu["nominal"], gpu["borrowing_limit"], gpu["usage"], gpu["borrowed"], gpu["borrowing_fraction"]) == (6.0, 4.0, 9.0, 3.0, 1.0)
    assert mem["nominal"] == 512 * 2 ** 30 and mem["borrowing_limit"] is None and mem["usage"] == 2 ** 30
    assert (vision["pending_workloads"], vision["admitted_workloads"], vision["status"]) == (2, 3, "active")


def full_report(min_window=60.0, **thresholds):
    report = report_for()
    nominal, borrowing, usage, pending, admitted, status = kueue_matrices()
    u.attach_queues(report, u.queue_report_from_metrics(nominal, borrowing, usage, pending, admitted, status))
    pending_res = [({"cluster_queue": "analytics", "resource": "nvidia.com/gpu"}, list(zip(TIMES, [0.0] * 2 + [1.0] * 5 + [3.0] * 5)))]
    report["tuning"] = tuning.quota_analysis({"nominal": nominal, "borrowing_limit": borrowing, "usage": usage,
                                              "pending_resources": pending_res}, START, END, STEP, tenants=TENANTS,
                                             min_window=min_window)
    report["recommendations"] = recommendations.recommendations(report, tenants=TENANTS)
    report["violations"] = recommendations.evaluate_thresholds(report, **thresholds)
    return report


def test_attach_queues_to_tenants():
    tenants = {x["tenant"]: x for x in full_report()["tenants"]}
    assert (tenants["nlp"]["gpu_quota_nominal"], tenants["nlp"]["gpu_quota_used"]) == (8.0, 2.0)
    assert tenants["vision"]["gpu_quota_borrowed"] == 3.0
    assert tenants["analytics"]["pending_workloads"] == 3
    assert tenants[u.UNASSIGNED]["quota"] == [] and tenants[u.UNASSIGNED]["pending_workloads"] is None


def test_recommendations():
    recs = full_report()["recommendations"]
    kinds = {(r["tenant"], r["kind"]) for r in recs}
    # nlp: p95 demand 2 of 8 in cohort research, no lending limit -> its quota is lendable already: nothing;
    # vision: p95 usage 9 > 6 -> raise; analytics: usage 2 + pending (0,0,1x5,3x5) -> p95 5 > 2 -> raise
    assert kinds == {("vision", "raise_quota"), ("analytics", "raise_quota"), ("vision", "idle_gpus"),
                     (None, "unallocated_while_waiting")}
    vision = next(r for r in recs if r["kind"] == "raise_quota" and r["tenant"] == "vision")
    assert (vision["current"], vision["suggested"]) == (6.0, 9)
    assert vision["figures"]["borrow_fraction"] == 0.75 and vision["figures"]["borrowed_max"] == 3.0
    analytics = next(r for r in recs if r["kind"] == "raise_quota" and r["tenant"] == "analytics")
    assert (analytics["current"], analytics["suggested"]) == (2.0, 5)
    assert "p95 demand (usage + pending) 5" in analytics["message"] and "pending in 83% of the 1m" in analytics["message"]
    idle = next(r for r in recs if r["kind"] == "idle_gpus")
    assert "gpu-h100-0 GPU 2 by vision-dev/notebook-0" in idle["message"]


def test_short_window_says_insufficient_data():
    recs = full_report(min_window=120.0)["recommendations"]
    assert [r["kind"] for r in recs if r["kind"] not in ("idle_gpus", "unallocated_while_waiting")] == ["insufficient_data"]
    assert "the window 1m is shorter than the minimum 2m (min_window)" in recs[0]["message"]


def test_thresholds_name_tenant_gpu_and_reason():
    report = full_report(min_utilization=50, max_idle_gpus=0)
    by_check = {}
    for v in report["violations"]:
        by_check.setdefault(v["check"], []).append(v)
    low = {v["tenant"]: v for v in by_check["min_utilization"]}
    assert sorted(low) == ["analytics", "vision"]  # nlp at 85% passes; scratch (10%, no tenant) is not judged
    assert low["vision"]["value"] == 0.0 and low["analytics"]["value"] == 45.0
    assert ("tenant vision: average GPU utilization 0% over the last 1m is below the minimum 50% "
            "(gpuaas_validate_min_utilization); its GPUs: gpu-h100-0 GPU 2 (vision-dev/notebook-0) 0%") in low["vision"]["message"]
    idle = by_check["max_idle_gpus"][0]
    assert idle["value"] == 1 and idle["tenants"] == ["vision"]
    assert "gpu-h100-0 GPU 2 (UUID GPU-gpu-h100-0-2) held by vision-dev/notebook-0 of tenant vision, below 5% for 1m" in idle["message"]
    # thresholds the figures meet: no violation
    assert full_report(min_utilization=0, max_idle_gpus=1)["violations"] == []
    assert [v["tenant"] for v in full_report(min_utilization=1)["violations"]] == ["vision"]
    assert [v["check"] for v in full_report(max_unallocated_gpus=10)["violations"]] == ["max_unallocated_gpus"]
    assert full_report(max_unallocated_gpus=11)["violations"] == []


def test_rendering():
    report = full_report(min_utilization=50)
    report["result"] = "failed"
    lines = report_rendering.tenant_table(report)
    assert lines[0].split() == ["TENANT", "FLAVOR", "GPUS", "IDLE", "AVG%", "P95%", "MEM", "MiB", "GPU-h", "GPU", "QUOTA",
                                "used/nominal", "PENDING"]
    nlp = next(line for line in lines if line.startswith("nlp "))
    assert nlp.split()[:9] == ["nlp", "h100", "2", "0", "85", "85", "82000", "0.0333", "2/8"]
    assert "9/6 (+3 borrowed)" in next(line for line in lines if line.startswith("vision "))
    # 2700 utilization-points over 192 GPU samples = 14.06 %, over 60 allocated samples = 45 %
    assert lines[-1] == "cluster: 16 GPUs, 5 allocated, 1 idle, 11 unallocated, avg 14.06% (allocated: 45%)"
    health = [{"check": "kueue", "object": "ClusterQueue/nlp", "ok": True, "message": "active"},
              {"check": "keda", "object": "ScaledObject/a/b", "ok": False,
               "message": "ScaledObject a|b not Ready", "hint": "describe it"}]
    md = report_rendering.render_markdown(report, health=health)
    assert md.startswith("# GPU platform validation report\n")
    assert "**Result: FAILED**" in md
    assert "| kueue | ClusterQueue/nlp | ok | active |" in md
    assert "| keda | ScaledObject/a/b | FAILED | ScaledObject a\\|b not Ready (fix: describe it) |" in md
    assert "| nlp | h100 | 2 | 0 | 85 | 85 | 82000 | 0.0333 | 2/8 | 0 |" in md
    assert "## Idle allocated GPUs" in md and "| gpu-h100-0 GPU 2 | GPU-gpu-h100-0-2 |" in md
    assert "| vision | active | h100 | nvidia.com/gpu | 6 | 4 | 9 | 3 | 0 |" in md
    assert "## Threshold violations" in md and "- tenant vision: average GPU utilization 0%" in md
    assert "## Quota tuning" in md and "| analytics | h100 | nvidia.com/gpu | 2 | 5 |" in md


def test_tenant_mapping_rule_group():
    group = monitoring.tenant_mapping_rule_group(TENANTS)
    assert group["name"] == "gpuaas-tenants"
    assert [r["record"] for r in group["rules"]] == [monitoring.TENANT_INFO_METRIC] * 5
    assert group["rules"][0] == {"record": monitoring.TENANT_INFO_METRIC, "expr": "vector(1)",
                                 "labels": {"namespace": "nlp-train", "tenant": "nlp"}}
    assert "gone-ns" not in str(group)  # absent tenants are not mapped
    assert monitoring.tenant_mapping_rule_group([])["rules"] == [{"record": monitoring.TENANT_INFO_METRIC, "expr": "vector(1) == 0"}]


def test_table_one_line_per_tenant_and_flavor_only_resources_with_quota():
    # the demo's a100-mig-1g flavor covers nvidia.com/gpu (nominal 0) and nvidia.com/mig-1g.10gb (7): the old cell
    # read "0/0 a100-mig-1g, 0/7 a100-mig-1g, 0/6 h100, 0/0 h100"
    row = {"tenant": "vision", "gpus": 3, "idle_gpus": 1, "avg_utilization": 40.0, "p95_utilization": 90.0,
           "memory_used_mib": 10.0, "gpu_hours": 1.5, "pending_workloads": 2, "gpu_quota_nominal": 13.0, "quota": [
               {"flavor": "a100-mig-1g", "resource": "nvidia.com/gpu", "nominal": 0.0, "usage": 0.0, "borrowed": 0.0},
               {"flavor": "a100-mig-1g", "resource": "nvidia.com/mig-1g.10gb", "nominal": 7.0, "usage": 8.0, "borrowed": 1.0},
               {"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 6.0, "usage": 2.0, "borrowed": 0.0},
               {"flavor": "h100", "resource": "cpu", "nominal": 64.0, "usage": 1.0, "borrowed": 0.0},
               {"flavor": "h100", "resource": "nvidia.com/mig-1g.10gb", "nominal": 0.0, "usage": 0.0, "borrowed": 0.0}]}
    rows = report_rendering.table_rows({"tenants": [row, {"tenant": "empty", "quota": [], "gpus": 0}]})
    assert rows == [["vision", "a100-mig-1g", "3", "1", "40", "90", "10", "1.5", "8/7 (+1 borrowed)", "2"],
                    ["vision", "h100", "", "", "", "", "", "", "2/6", ""],
                    ["empty", "-", "0", "-", "-", "-", "-", "-", "-", "-"]]
