# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KEDA builders (manifests/keda.py) and the autoscaling part of the inventory model (issue 12).

The ScaledObjects these build run against the real KEDA, Kueue and Prometheus in
tests/integration/test_autoscaling.py; here: pod matching, trigger semantics and validation.
"""

from __future__ import annotations

import math
import re

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import (
    InventoryError,
    TenantModel,
    parse_autoscaling,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda

PROM = "http://prometheus:9090"


def model(tenants, cohorts=(), priorities=(), prometheus=PROM):
    inv = {"gpuaas_flavors": [{"name": "h100"}], "gpuaas_cohorts": [dict(c) for c in cohorts],
           "gpuaas_priorities": [dict(p) for p in priorities], "gpuaas_tenants": tenants}
    if prometheus:
        inv["gpuaas_prometheus"] = {"url": prometheus}
    return TenantModel.from_inventory(inv)


def tenant(name, auto=None, cohort="co", gpus=4, **extra):
    out = {"name": name, "namespaces": [name + "-ns"], "cohort": cohort,
           "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": gpus}}]}
    if auto is not None:
        out["autoscaling"] = auto if isinstance(auto, list) else [auto]
    if cohort is None:
        del out["cohort"]
    out.update(extra)
    return out


def serving(**extra):
    out = {"name": "vllm", "target": {"kind": "Deployment", "name": "vllm"}, "max_replicas": 4,
           "idle_scale_to_zero": {"after_seconds": 20, "wake_query": "sum(rate(requests_total[1m]))"},
           "load": {"target_per_replica": "10"}}
    out.update(extra)
    return out


def scaled(auto_entry, namespace="a-ns", authenticated=False):
    auto, _warnings = parse_autoscaling(auto_entry, namespace, PROM)
    return keda.autoscaling_object(auto, TenantModel().prometheus.__class__(url=PROM), authenticated, {})


def triggers_by_name(obj):
    return {t["name"]: t for t in obj["spec"]["triggers"]}


def hpa_replicas(value: float, threshold: str, lo: int, hi: int) -> int:
    """What the HPA does with an AverageValue external metric: ceil(value / target), within [lo, hi]."""
    return max(lo, min(hi, math.ceil(value / float(threshold))))


# -- pod matching ---------------------------------------------------------------------------------

# Pod names of the shape the Deployment controller generates (pod-template-hash + 5-character suffix, both from
# the generated-name alphabet); the integration test matches the lab's real pods.
VLLM_PODS = ["vllm-7d9f8b6c4d-x2k7p", "vllm-5c8b7f9d46-qrwzt", "vllm-68d4c5b9f7-2hv8l"]
NOT_VLLM = ["vllm-canary-7d9f8b6c4d-x2k7p", "vllm-canary-0", "vllm-0", "vllm-2-7d9f8b6c4d-x2k7p",
            "vllm", "vllm-7d9f8b6c4d", "xvllm-7d9f8b6c4d-x2k7p", "vllm-7d9f8b6c4d-x2k7pa",
            "vllm-abc-x2k7p"]  # 'a' never appears in a generated name


@pytest.mark.parametrize("pod", VLLM_PODS)
def test_deployment_regex_matches_its_own_pods(pod):
    assert re.fullmatch(keda.pod_name_regex("Deployment", "vllm"), pod)


@pytest.mark.parametrize("pod", NOT_VLLM)
def test_deployment_regex_does_not_match_other_workloads(pod):
    """The old prefix `vllm-.*` matched vllm-canary's pods: a busy canary kept an idle vllm up (and the reverse)."""
    assert not re.fullmatch(keda.pod_name_regex("Deployment", "vllm"), pod)


def test_statefulset_and_lws_regexes():
    sts = keda.pod_name_regex("StatefulSet", "nb")
    assert re.fullmatch(sts, "nb-0") and re.fullmatch(sts, "nb-12")
    assert not any(re.fullmatch(sts, p) for p in ("nb-1-0", "nb-x2k7p", "nb-7d9f8b6c4d-x2k7p", "nbb-0"))
    lws = keda.pod_name_regex("LeaderWorkerSet", "llm")
    assert re.fullmatch(lws, "llm-0") and re.fullmatch(lws, "llm-0-3")
    assert not re.fullmatch(lws, "llm-canary-0")
    assert keda.pod_name_regex("MachineSet", "x") is None


def test_dots_in_names_are_literal():
    rx = keda.pod_name_regex("StatefulSet", "a.b")
    assert re.fullmatch(rx, "a.b-0") and not re.fullmatch(rx, "axb-0")


def test_idle_query_reads_both_dcgm_label_styles_and_escapes_for_promql():
    q = keda.gpu_idle_query("ns1", keda.pod_name_regex("StatefulSet", "a.b"), 20)
    assert 'namespace="ns1",pod=~"a\\\\.b-[0-9]+"' in q  # PromQL string "a\\.b" is the regex a\.b
    assert 'exported_namespace="ns1",exported_pod=~"a\\\\.b-[0-9]+"' in q
    assert "[20s]" in q and q.endswith("or vector(0)")
    assert "[15m]" in keda.gpu_idle_query("ns1", "x", 900)


# -- the ScaledObject of an autoscaling entry ----------------------------------------------------

def test_serving_deployment_idle_wake_and_load_reach_max():
    obj = scaled(serving())
    spec = obj["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 4)
    assert spec["initialCooldownPeriod"] == 20 and spec["cooldownPeriod"] == 60
    assert "idleReplicaCount" not in spec
    trig = triggers_by_name(obj)
    assert set(trig) == {"gpu-busy", "load"}  # wake query == load query: one trigger wakes and scales
    busy, load = trig["gpu-busy"], trig["load"]
    assert busy["metricType"] == load["metricType"] == "AverageValue"
    assert busy["metadata"]["activationThreshold"] == "1"
    assert 'pod=~"vllm-[' in busy["metadata"]["query"]
    assert load["metadata"]["query"] == "sum(rate(requests_total[1m]))"
    assert load["metadata"]["activationThreshold"] == "0"
    # Under load the HPA asks for ceil(value / threshold): 4x the per-replica target reaches max ...
    assert hpa_replicas(40, load["metadata"]["threshold"], 1, 4) == 4
    # ... while the GPU trigger, a percentage against 100, never asks for more than one replica
    assert hpa_replicas(100, busy["metadata"]["threshold"], 1, 4) == 1


def test_separate_wake_and_load_queries():
    obj = scaled(serving(idle_scale_to_zero={"after_minutes": 5, "wake_query": "sum(queue_depth)", "wake_threshold": 2},
                         load={"query": "sum(rate(tokens_total[1m]))", "target_per_replica": "500"}))
    trig = triggers_by_name(obj)
    assert set(trig) == {"gpu-busy", "wake", "load"}
    assert trig["wake"]["metadata"]["query"] == "(sum(queue_depth)) > bool 2"
    assert trig["wake"]["metadata"]["threshold"] == "1"  # 0/1 against 1: one replica, never more
    assert trig["load"]["metadata"]["threshold"] == "500"
    assert obj["spec"]["initialCooldownPeriod"] == 300


def test_wake_without_load_asks_for_one_replica():
    obj = scaled(serving(load=None, max_replicas=2))
    trig = triggers_by_name(obj)
    assert set(trig) == {"gpu-busy", "wake"}
    assert trig["wake"]["metadata"]["query"] == "(sum(rate(requests_total[1m]))) > bool 0"


def test_statefulset_is_zero_or_n():
    obj = scaled({"name": "nb", "target": {"kind": "StatefulSet", "name": "alice"}, "max_replicas": 2,
                  "idle_scale_to_zero": {"after_seconds": 30, "wake_query": "sum(notebook_requests)"}})
    spec = obj["spec"]
    assert (spec["idleReplicaCount"], spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 2, 2)
    assert 'pod=~"alice-[0-9]+"' in triggers_by_name(obj)["gpu-busy"]["metadata"]["query"]


def test_statefulset_refuses_load_scaling():
    with pytest.raises(InventoryError) as info:
        parse_autoscaling({"name": "nb", "target": {"kind": "StatefulSet", "name": "alice"}, "max_replicas": 2,
                           "idle_scale_to_zero": {"wake_query": "x"}, "load": {"target_per_replica": 1}}, "ns", PROM)
    assert any("only between 0 and N" in p for p in info.value.problems)


def test_inference_service_scales_its_predictor_deployment():
    obj = scaled({"name": "isvc", "target": {"kind": "InferenceService", "name": "llama"}, "max_replicas": 2,
                  "idle_scale_to_zero": {"wake_query": "sum(x)"}})
    assert obj["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-predictor"}
    rx = re.search(r'pod=~"([^"]+)"', triggers_by_name(obj)["gpu-busy"]["metadata"]["query"]).group(1)
    assert re.fullmatch(rx, "llama-predictor-7d9f8b6c4d-x2k7p")


@pytest.mark.parametrize("kind,words", [("RayCluster", "ray_idle_reclaim"), ("Workload", "owns it"),
                                        ("RayJob", "no /scale")])
def test_kinds_without_scale_are_refused_with_what_to_do(kind, words):
    with pytest.raises(InventoryError) as info:
        parse_autoscaling({"name": "x", "target": {"kind": kind, "name": "y", "api_version": "ray.io/v1"},
                           "idle_scale_to_zero": {"wake_query": "x"}}, "ns", PROM)
    assert any(words in p for p in info.value.problems)


def test_other_scale_kinds_need_their_pod_regex():
    entry = {"name": "ms", "target": {"kind": "Rollout", "name": "web", "api_version": "argoproj.io/v1alpha1"},
             "idle_scale_to_zero": {"wake_query": "x"}}
    with pytest.raises(InventoryError) as info:
        parse_autoscaling(entry, "ns", PROM)
    assert any("pod_regex" in p and "is required" in p for p in info.value.problems)
    entry["idle_scale_to_zero"]["pod_regex"] = 'web-[a-z0-9]+-\\w{5}'
    query = triggers_by_name(scaled(entry))["gpu-busy"]["metadata"]["query"]
    assert 'pod=~"web-[a-z0-9]+-\\\\w{5}"' in query


def test_window_options():
    for idle, problem in (({"after_minutes": 1, "after_seconds": 30}, "not both"),
                          ({"after_seconds": 5}, "at least 10"),
                          ({"after_minutes": 0}, "at least 1")):
        with pytest.raises(InventoryError) as info:
            parse_autoscaling(serving(idle_scale_to_zero=idle), "ns", PROM)
        assert any(problem in p for p in info.value.problems), (idle, info.value.problems)
    auto, _warnings = parse_autoscaling(serving(idle_scale_to_zero={}, load=None), "ns", PROM)
    assert auto.idle_window_seconds == 900 and auto.idle_after_minutes == 15


def test_load_needs_a_target_and_a_query():
    with pytest.raises(InventoryError) as info:
        parse_autoscaling({"name": "x", "target": {"name": "y"}, "min_replicas": 1, "max_replicas": 3,
                           "load": {"target_per_replica": 0}}, "ns", PROM)
    text = "\n".join(info.value.problems)
    assert "load.query: is required" in text and "must be above 0" in text


def test_load_only_keeps_min_replicas():
    obj = scaled({"name": "x", "target": {"name": "y"}, "min_replicas": 1, "max_replicas": 3,
                  "load": {"query": "sum(q)", "target_per_replica": 5}})
    assert (obj["spec"]["minReplicaCount"], obj["spec"]["maxReplicaCount"]) == (1, 3)
    assert list(triggers_by_name(obj)) == ["load"]
    assert "initialCooldownPeriod" not in obj["spec"]


def test_idle_without_wake_is_a_warning():
    _auto, warnings = parse_autoscaling(serving(idle_scale_to_zero={"after_minutes": 5}, load=None), "ns", PROM)
    assert any("nothing brings Deployment vllm back from zero" in w for w in warnings)


def test_authenticated_triggers_keep_the_cluster_credential():
    auto, _warnings = parse_autoscaling(serving(), "ns", PROM)
    obj = keda.autoscaling_object(auto, TenantModel().prometheus.__class__(url=PROM), True, {"a": "b"})
    for trig in obj["spec"]["triggers"]:
        assert trig["metadata"]["authModes"] == "bearer"
        assert trig["authenticationRef"]["kind"] == "ClusterTriggerAuthentication"
    assert obj["metadata"]["labels"] == {"a": "b"}


# -- the guarantee: a tenant that goes to zero must be able to reclaim --------------------------

def reclaim_warnings(a_extra=None, b_extra=None, cohorts=({"name": "co"},), priorities=()):
    a = tenant("a", serving(), **(a_extra or {}))
    b = tenant("b", None, gpus=0, **(b_extra or {}))
    return [w for w in model([a, b], cohorts, priorities).warnings if "reclaim_within_cohort" in w]


def test_default_reclaim_never_breaks_the_guarantee_and_names_the_fix():
    (warning,) = reclaim_warnings()
    assert "gpuaas_tenants[0].preemption.reclaim_within_cohort" in warning
    assert "Never (Kueue's default)" in warning and "(b)" in warning
    assert "reclaim_within_cohort: Any" in warning and "lending_limit: 0" in warning


def test_reclaim_any_is_fine():
    assert reclaim_warnings({"preemption": {"reclaim_within_cohort": "Any"}}) == []


def test_lending_limit_zero_is_fine_without_reclaim():
    quotas = [{"flavor": "h100", "resources": {"nvidia.com/gpu": 4}, "lending_limit": {"nvidia.com/gpu": 0}}]
    assert reclaim_warnings({"quotas": quotas}) == []


def test_no_cohort_nobody_borrows():
    assert [w for w in model([tenant("a", serving(), cohort=None)]).warnings if "reclaim" in w] == []


PRIOS = ({"name": "high", "value": 1000}, {"name": "low", "value": 10})


def test_lower_priority_against_equal_priority_borrowers_warns():
    (warning,) = reclaim_warnings({"preemption": {"reclaim_within_cohort": "LowerPriority"}}, priorities=PRIOS)
    assert "LowerPriority" in warning


def test_lower_priority_against_lower_priority_borrowers_is_fine():
    assert reclaim_warnings({"preemption": {"reclaim_within_cohort": "LowerPriority"}, "allowed_priorities": ["high"]},
                            {"allowed_priorities": ["low"]}, priorities=PRIOS) == []


def test_borrowers_anywhere_in_the_cohort_tree_count():
    cohorts = ({"name": "root"}, {"name": "left", "parent": "root"}, {"name": "right", "parent": "root"})
    warnings = reclaim_warnings({"cohort": "left"}, {"cohort": "right"}, cohorts=cohorts)
    assert len(warnings) == 1 and "cohort root" in warnings[0]
