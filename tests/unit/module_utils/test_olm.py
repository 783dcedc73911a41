# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.olm import (
    alm_examples,
    merge_spec,
    operand_mode,
    operand_object,
    operator_group_mode,
    operator_group_plan,
    resolution_error,
    subscription_condition,
    subscription_config_problems,
    expected_csv,
    object_differs,
    operator_group_object,
    plan_decision,
    subscription_object,
    subset_differs,
)


def plan(names, approved=False, name="install-1"):
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterServiceVersionNames": names, "approved": approved, "approval": "Manual"}}


def sub(installed=None, current=None):
    status = {}
    if installed:
        status["installedCSV"] = installed
    if current:
        status["currentCSV"] = current
    return {"metadata": {"name": "s"}, "status": status}


def test_subscription_object_fields():
    obj = subscription_object("gpu", "nvidia-gpu-operator", "gpu-operator-certified", "v25.3", "certified-operators",
                              "openshift-marketplace", "gpu-operator-certified.v25.3.0", "Manual")
    assert obj["spec"] == {"name": "gpu-operator-certified", "channel": "v25.3", "source": "certified-operators",
                           "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Manual",
                           "startingCSV": "gpu-operator-certified.v25.3.0"}
    assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
    no_pin = subscription_object("k", "ns", "kueue-operator", None, "redhat-operators", "openshift-marketplace",
                                 None, "Automatic")
    assert "startingCSV" not in no_pin["spec"] and "channel" not in no_pin["spec"]


def test_operator_group_all_namespaces_vs_own():
    assert operator_group_object("og", "ns", [])["spec"] == {}
    assert operator_group_object("og", "ns", ["ns"])["spec"] == {"targetNamespaces": ["ns"]}


def test_subset_differs_ignores_server_defaults():
    desired = {"spec": {"name": "p", "installPlanApproval": "Automatic"}}
    live = {"spec": {"name": "p", "installPlanApproval": "Automatic", "config": {}}, "status": {"x": 1}}
    assert not subset_differs(desired, live)
    assert subset_differs({"spec": {"name": "q"}}, live)
    assert not subset_differs({}, {"upgradeStrategy": {"name": "Default"}})
    assert subset_differs({"a": [1, 2]}, {"a": [1]})


def test_object_differs_on_missing_labels_and_absent_object():
    desired = operator_group_object("og", "ns", ["ns"])
    assert object_differs(desired, None)
    live = {"metadata": {"labels": {}}, "spec": {"targetNamespaces": ["ns"], "upgradeStrategy": "Default"}}
    assert object_differs(desired, live)
    live["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuaas.platform", "other": "x"}
    assert not object_differs(desired, live)
    # AllNamespaces (no targetNamespaces) vs OwnNamespace, with the CRD's defaulted upgradeStrategy
    all_ns = operator_group_object("og", "ns", [])
    defaulted = {"metadata": live["metadata"], "spec": {"upgradeStrategy": {"name": "Default"}}}
    assert not object_differs(all_ns, defaulted)
    assert object_differs(all_ns, live)
    assert object_differs(desired, defaulted)


def test_expected_csv_prefers_pin_then_installed_then_current():
    assert expected_csv("a.v1", sub(installed="a.v0")) == "a.v1"
    assert expected_csv(None, sub(installed="a.v0", current="a.v2")) == "a.v0"
    assert expected_csv(None, sub(current="a.v2")) == "a.v2"
    assert expected_csv(None, None) is None


def test_plan_decision_pinned():
    assert plan_decision(plan(["a.v1"]), sub(current="a.v1"), "a.v1")[0] == "approve"
    action, reason = plan_decision(plan(["a.v2"]), sub(current="a.v2"), "a.v1")
    assert action == "hold" and "a.v2" in reason and "a.v1" in reason
    assert plan_decision(plan(["a.v1", "b.v1"]), sub(), "a.v1")[0] == "hold"
    assert plan_decision(plan(["a.v1"], approved=True), sub(), "a.v1")[0] == "none"


def test_plan_decision_unpinned_first_install_only():
    assert plan_decision(plan(["a.v1"]), sub(current="a.v1"), None)[0] == "approve"
    action, reason = plan_decision(plan(["a.v2"]), sub(installed="a.v1", current="a.v2"), None)
    assert action == "hold" and "upgrade" in reason
    assert plan_decision(plan(["x.v1"]), sub(current="a.v1"), None)[0] == "hold"


def test_alm_examples_parsing():
    csv = {"metadata": {"name": "c", "annotations": {"alm-examples": json.dumps(
        [{"kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"}}, "junk"])}}}
    assert alm_examples(csv) == [{"kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"}}]
    assert alm_examples({"metadata": {"name": "c"}}) == []
    with pytest.raises(GpuaasError) as err:
        alm_examples({"metadata": {"name": "c", "annotations": {"alm-examples": "[{"}}})
    assert "not valid JSON" in str(err.value) and err.value.hint


# ---- brownfield -------------------------------------------------------------------------------------------------
OWNED = {"app.kubernetes.io/managed-by": "gpuaas.platform"}


def og(name, targets=None, labels=None):
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "spec": {"targetNamespaces": targets} if targets else {}}


@pytest.mark.parametrize("value,mode", [(True, "auto"), (False, "none"), ("false", "none"), ("Reuse", "reuse"),
                                        (None, "auto"), ("create", "create")])
def test_operator_group_mode(value, mode):
    assert operator_group_mode(value) == mode


def test_operator_group_plan_per_mode():
    console = og("ns-7xk2p", ["ns"])
    ours = og("ns", ["ns"], OWNED)
    assert operator_group_plan("auto", "ns", "ns", ["ns"], []) == {"action": "apply", "name": "ns", "warnings": []}
    assert operator_group_plan("auto", "ns", "ns", ["ns"], [console])["action"] == "reuse"
    assert operator_group_plan("auto", "ns", "ns", ["ns"], [ours])["action"] == "apply"
    # a group named like ours but not labelled ours is someone else's: reused, never taken over
    assert operator_group_plan("auto", "ns", "ns", ["ns"], [og("ns", ["ns"])])["action"] == "reuse"
    assert operator_group_plan("reuse", "ns", "ns", ["ns"], [ours]) == {"action": "reuse", "name": "ns", "warnings": []}
    assert operator_group_plan("none", "ns", "ns", ["ns"], [console])["action"] == "skip"
    with pytest.raises(GpuaasError, match="already has OperatorGroup ns-7xk2p"):
        operator_group_plan("create", "ns", "ns", ["ns"], [console])
    with pytest.raises(GpuaasError, match="no OperatorGroup to reuse"):
        operator_group_plan("reuse", "ns", "ns", ["ns"], [])
    with pytest.raises(GpuaasError, match="2 OperatorGroups"):
        operator_group_plan("auto", "ns", "ns", ["ns"], [console, ours])
    warned = operator_group_plan("auto", "ns", "ns", [], [console])
    assert warned["action"] == "reuse" and "target namespaces (ns) differ from the requested (all namespaces)" \
        in warned["warnings"][0]


def test_subscription_config_fields():
    assert subscription_config_problems({"env": [], "nodeSelector": {}, "tolerations": [], "resources": {}}) == []
    assert subscription_config_problems({"replicas": 1, "env": []}) == [
        "subscription_config.replicas is not a Subscription spec.config field (one of selector, nodeSelector, "
        "tolerations, resources, envFrom, env, volumes, volumeMounts, nodeAffinity, podAffinity, podAntiAffinity)"]


def test_resolution_condition_and_error():
    cond = {"type": "ResolutionFailed", "status": "True", "reason": "ConstraintsNotSatisfiable",
            "message": "constraints not satisfiable: no operators found in package nope in the catalog referenced "
                       "by subscription nope, subscription nope exists"}
    sub = {"status": {"conditions": [dict(cond, type="CatalogSourcesUnhealthy", status="False"), cond]}}
    assert subscription_condition(sub, "ResolutionFailed") == cond
    assert subscription_condition(sub, "CatalogSourcesUnhealthy") is None
    assert subscription_condition({"status": {"conditions": [dict(cond, status="False")]}}, "ResolutionFailed") is None
    err = resolution_error("nope", None, "redhat-operators", "openshift-marketplace", "ns", "nope", cond, 31.0,
                           channels=["stable", "v1"], default_channel="stable")
    text = str(err)
    assert "package nope, channel <the catalog's default>, catalog source openshift-marketplace/redhat-operators" in text
    assert cond["message"] in text
    assert "the catalog's channels of nope: stable, v1 (default stable)" in text
    assert "oc get packagemanifest nope -n openshift-marketplace -o jsonpath='{.status.defaultChannel}" in err.hint
    assert "held for 31 s" in err.hint


def test_merge_spec_is_recursive_and_copies():
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    over = {"a": {"c": [2]}, "e": {"f": 1}}
    merged = merge_spec(base, over)
    assert merged == {"a": {"b": 1, "c": [2]}, "d": 1, "e": {"f": 1}}
    merged["a"]["b"] = 9
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1}


def test_operand_mode_and_object():
    foreign = {"metadata": {"name": "p"}}
    owned = {"metadata": {"name": "p", "labels": OWNED}}
    assert [operand_mode(None, False), operand_mode(owned, False), operand_mode(foreign, True),
            operand_mode(foreign, False)] == ["create", "owned", "adopt", "merge"]
    example = {"spec": {"driver": {"enabled": True}, "mig": {"strategy": "single"}}}
    created = operand_object("nvidia.com/v1", "ClusterPolicy", "p", None, {"driver": {"enabled": False}}, example,
                             "create")
    assert created == {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                       "metadata": {"name": "p", "labels": OWNED},
                       "spec": {"driver": {"enabled": False}, "mig": {"strategy": "single"}}}
    merged = operand_object("nvidia.com/v1", "ClusterPolicy", "p", None, {"driver": {"enabled": False}}, example,
                            "merge")
    assert merged == {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"},
                      "spec": {"driver": {"enabled": False}}}
