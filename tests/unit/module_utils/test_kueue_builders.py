# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kueue builders: v1beta2 manifests from snake_case options, and validation that lists every mistake."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils import kueue_options as kb
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import quantity_value


def gpu_group(**resource):
    res = {"name": "nvidia.com/gpu", "nominal_quota": 8}
    res.update(resource)
    return [{"covered_resources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [res]}]}]


def problems_of(fn, *args, **kwargs):
    with pytest.raises(ValidationError) as err:
        fn(*args, **kwargs)
    return err.value.problems


def test_cluster_queue_full_manifest():
    obj = kb.cluster_queue(
        "nlp", cohort="research", namespace_selector={"match_labels": {"gpuaas.io/tenant": "nlp"}},
        resource_groups=[{"covered_resources": ["nvidia.com/gpu", "cpu"], "flavors": [
            {"name": "h100", "resources": [{"name": "cpu", "nominal_quota": 96},
                                           {"name": "nvidia.com/gpu", "nominal_quota": 8, "borrowing_limit": 8,
                                            "lending_limit": 4}]}]}],
        queueing_strategy="StrictFIFO",
        preemption={"reclaim_within_cohort": "Any", "within_cluster_queue": "LowerPriority",
                    "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 100}},
        fair_sharing_weight=2, stop_policy="Hold",
        flavor_fungibility={"when_can_borrow": "Borrow", "when_can_preempt": "TryNextFlavor"},
        admission_checks=["prov", {"name": "other", "on_flavors": ["h100"]}],
        labels={"team": "nlp"})
    assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2" and obj["kind"] == "ClusterQueue"
    spec = obj["spec"]
    assert spec["cohortName"] == "research"
    assert spec["namespaceSelector"] == {"matchLabels": {"gpuaas.io/tenant": "nlp"}}
    group = spec["resourceGroups"][0]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu"]
    # resources are reordered like coveredResources, quantities are strings
    assert group["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "4"},
        {"name": "cpu", "nominalQuota": "96"}]
    assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
                                  "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    assert spec["fairSharing"] == {"weight": "2"}
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"},
                                                                   {"name": "other", "onFlavors": ["h100"]}]}
    assert obj["metadata"] == {"name": "nlp", "labels": {"team": "nlp"}}


def test_camel_case_and_mapping_shorthand_are_accepted():
    obj = kb.cluster_queue("q", namespace_selector={},
                           resource_groups=[{"flavors": [{"name": "f", "resources": {"cpu": 4, "memory": {
                               "nominalQuota": "16Gi"}}}]}])
    group = obj["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"][0]["resources"][1] == {"name": "memory", "nominalQuota": "16Gi"}
    assert obj["spec"]["namespaceSelector"] == {}


def test_namespace_selector_none_is_omitted():
    assert "namespaceSelector" not in kb.cluster_queue("q", resource_groups=gpu_group())["spec"]


def test_borrowing_and_lending_without_cohort_are_explained():
    problems = problems_of(kb.cluster_queue, "q", resource_groups=gpu_group(borrowing_limit=2, lending_limit=1))
    assert any("borrowing_limit is set but the ClusterQueue has no cohort" in p for p in problems)
    assert any("lending_limit is set but" in p for p in problems)


def test_lending_above_nominal():
    problems = problems_of(kb.cluster_queue, "q", cohort="c", resource_groups=gpu_group(lending_limit="9"))
    assert problems == ["ClusterQueue q resource_groups[0] flavor h100 resource nvidia.com/gpu: lending_limit 9 is "
                        "above nominal_quota 8; a queue can only lend what it has"]


def test_flavor_missing_a_covered_resource_and_every_problem_listed():
    groups = [{"covered_resources": ["nvidia.com/gpu", "cpu"], "flavors": [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominal_quota": 8}]},
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominal_quota": "x"},
                                       {"name": "cpu", "nominal_quota": -1},
                                       {"name": "memory", "nominal_quota": 1}]}]}]
    with pytest.raises(ValidationError) as err:
        kb.cluster_queue("Bad_Name", resource_groups=groups, queueing_strategy="LIFO")
    problems = err.value.problems
    text = "\n".join(problems)
    assert "flavor 'h100' has no quota for cpu" in text
    assert "'x' is not a Kubernetes quantity" in text
    assert "must not be negative" in text
    assert "sets memory, which the group does not cover" in text
    assert "'Bad_Name' is not a valid name" in text
    assert "'LIFO' is not one of BestEffortFIFO, StrictFIFO" in text
    assert len(problems) == 6
    assert "6 problems" in str(err.value)


def test_flavor_or_resource_in_two_groups():
    groups = [{"flavors": [{"name": "f", "resources": {"cpu": 1}}]},
              {"flavors": [{"name": "f", "resources": {"cpu": 1}}]}]
    text = "\n".join(problems_of(kb.cluster_queue, "q", resource_groups=groups))
    assert "flavor 'f' is already used in resource_groups[0]" in text
    assert "resource 'cpu' is already covered by resource_groups[0]" in text


def test_preemption_and_fungibility_rules():
    text = "\n".join(problems_of(
        kb.cluster_queue, "q", resource_groups=gpu_group(),
        preemption={"borrow_within_cohort": {"policy": "LowerPriority"}},
        flavor_fungibility={"when_can_borrow": "MayStopSearch", "preference": "BorrowingOverPreemption"}))
    assert "needs reclaim_within_cohort other than Never" in text
    assert "preference needs when_can_borrow and when_can_preempt both set to TryNextFlavor" in text


def test_resource_flavor_and_limits():
    obj = kb.resource_flavor("h100", node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                             node_taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                             tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert obj["spec"] == {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "nodeTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    labels = {"l%d" % i: "v" for i in range(9)}
    text = "\n".join(problems_of(kb.resource_flavor, "f", node_labels=labels,
                                 tolerations=[{"operator": "Equal", "toleration_seconds": 5, "effect": "NoSchedule"}],
                                 node_taints=[{"key": "k", "effect": "Sometimes"}]))
    assert "node_labels has 9 labels; Kueue allows at most 8" in text
    # the toleration rules are kueue_rules.toleration_problems, shared with gpuaas_flavors: field, then reason
    assert "tolerations[0].operator: must be Exists when key is empty" in text
    assert "tolerations[0].toleration_seconds: needs effect NoExecute" in text
    assert "'Sometimes' is not one of" in text


def test_label_value_must_be_a_string():
    text = "\n".join(problems_of(kb.resource_flavor, "f", node_labels={"a": 8}))
    assert "quote numbers" in text


def test_cohort_limits_need_parent():
    groups = [{"flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominal_quota": 4,
                                                           "lending_limit": 2}]}]}]
    text = "\n".join(problems_of(kb.cohort, "c", resource_groups=groups))
    assert "apply towards its parent" in text
    obj = kb.cohort("c", parent="root", resource_groups=groups, fair_sharing_weight="0.5")
    assert obj["spec"]["parentName"] == "root"
    assert obj["spec"]["fairSharing"] == {"weight": "0.5"}
    assert problems_of(kb.cohort, "c", parent="c") == ["Cohort c cannot be its own parent"]


def test_local_queue_and_priority_class():
    assert kb.local_queue("default", "nlp", cluster_queue="nlp", stop_policy="Hold") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "nlp"}, "spec": {"clusterQueue": "nlp", "stopPolicy": "Hold"}}
    assert "cluster_queue is required" in problems_of(kb.local_queue, "default", "nlp")[0]
    wpc = kb.workload_priority_class("prod", 1000, description="production")
    assert wpc["value"] == 1000 and wpc["description"] == "production" and "spec" not in wpc
    assert "32-bit" in problems_of(kb.workload_priority_class, "p", 2 ** 31)[0]


@pytest.mark.parametrize("value,expected", [("1Ti", 2 ** 40), ("500m", 0.5), ("1e3", 1000), (8, 8), ("64Gi", 64 * 2 ** 30),
                                            ("2k", 2000)])
def test_quantity_value(value, expected):
    assert float(quantity_value(value)) == expected


def test_unknown_option_is_reported():
    assert problems_of(kb.cluster_queue, "q", resource_groups=gpu_group(), cohorts="x") == ["unknown options: cohorts"]
