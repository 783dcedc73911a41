# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import olm_runner

sys.path.insert(0, os.path.dirname(__file__))
from fake_kube import FakeKube  # noqa: E402  pylint: disable=wrong-import-position
from module_utils.fake_kube import api_exception  # noqa: E402  pylint: disable=wrong-import-position

OLM = "operators.coreos.com/v1alpha1"
SERVED = [(OLM, "Subscription"), (OLM, "InstallPlan"), (OLM, "ClusterServiceVersion"),
          ("operators.coreos.com/v1", "OperatorGroup")]


def params(**over):
    base = dict(state="present", package="gpu-operator-certified", name=None, namespace="nvidia-gpu-operator",
                create_namespace=True, namespace_labels={}, channel="v25.3", source="certified-operators",
                source_namespace="openshift-marketplace", starting_csv=None, install_plan_approval="Automatic",
                subscription_config=None, operator_group="auto", operator_group_name=None,
                target_namespaces=["nvidia-gpu-operator"], wait=True, wait_timeout=5, resolution_grace=30,
                operand=None, delete_namespace=False)
    base.update(over)
    return base


def module(check=False, **over):
    return types.SimpleNamespace(params=params(**over), check_mode=check)


class FakeOlm:
    """Does what OLM does, synchronously on writes: Subscription -> InstallPlan -> (approved) CSV Succeeded."""

    def __init__(self, kube, resolves_to="gpu-operator-certified.v25.3.0"):
        self.kube = kube
        self.resolves_to = resolves_to
        kube.hooks.append(self.hook)

    def hook(self, kind, obj):
        ns = obj["metadata"].get("namespace")
        if kind == "Subscription" and not (obj.get("status") or {}).get("installPlanRef"):
            csv = obj["spec"].get("startingCSV") or self.resolves_to
            approval = obj["spec"]["installPlanApproval"]
            self.kube.add({"apiVersion": OLM, "kind": "InstallPlan", "metadata": {"name": "install-1", "namespace": ns},
                           "spec": {"clusterServiceVersionNames": [csv], "approval": approval,
                                    "approved": approval == "Automatic"}})
            obj["status"] = {"installPlanRef": {"name": "install-1"}, "currentCSV": csv}
            if approval == "Automatic":
                self.install(ns, csv, obj)
        if kind == "InstallPlan" and obj["spec"].get("approved"):
            self.install(ns, obj["spec"]["clusterServiceVersionNames"][0],
                         self.kube.objects[("Subscription", ns, "gpu-operator-certified")])

    def install(self, ns, csv, sub):
        self.kube.add({"apiVersion": OLM, "kind": "ClusterServiceVersion",
                       "metadata": {"name": csv, "namespace": ns,
                                    "annotations": {"alm-examples": '[{"kind": "ClusterPolicy", "spec": {"a": 1}}]'}},
                       "spec": {"version": csv.split(".v", 1)[1]}, "status": {"phase": "Succeeded"}})
        sub["status"]["installedCSV"] = csv


def test_install_automatic_then_idempotent():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    op = olm_runner.OlmOperator(module(), kube)
    result = op.present()
    assert op.changed
    assert result["csv"] == {"name": "gpu-operator-certified.v25.3.0", "phase": "Succeeded", "version": "25.3.0"}
    assert result["alm_examples"] == [{"kind": "ClusterPolicy", "spec": {"a": 1}}]
    assert ("OperatorGroup", "nvidia-gpu-operator", "nvidia-gpu-operator") in kube.objects
    assert kube.objects[("Namespace", None, "nvidia-gpu-operator")]["metadata"]["labels"]
    second = olm_runner.OlmOperator(module(), kube)
    second.present()
    assert not second.changed, second.actions


def test_manual_approves_exactly_the_pinned_plan():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    op = olm_runner.OlmOperator(module(install_plan_approval="Manual",
                                       starting_csv="gpu-operator-certified.v25.3.0"), kube)
    result = op.present()
    assert result["install_plan"]["action"] == "approve"
    assert any(a.startswith("approved InstallPlan nvidia-gpu-operator/install-1") for a in op.actions)
    assert result["csv"]["phase"] == "Succeeded"


def test_manual_refuses_a_plan_for_another_csv():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    # the Subscription is pinned to v25.3.0, but the (fake) catalog's plan installs v25.10.0
    kube.hooks.insert(0, lambda kind, obj: obj["spec"].update(startingCSV="gpu-operator-certified.v25.10.0")
                      if kind == "Subscription" and "status" not in obj else None)
    op = olm_runner.OlmOperator(module(install_plan_approval="Manual",
                                       starting_csv="gpu-operator-certified.v25.3.0"), kube)
    with pytest.raises(GpuaasError) as err:
        op.present()
    assert "not the pinned gpu-operator-certified.v25.3.0" in str(err.value)
    assert kube.objects[("InstallPlan", "nvidia-gpu-operator", "install-1")]["spec"]["approved"] is False
    assert ("ClusterServiceVersion", "nvidia-gpu-operator", "gpu-operator-certified.v25.10.0") not in kube.objects


def test_check_mode_writes_nothing():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    op = olm_runner.OlmOperator(module(check=True), kube)
    result = op.present()
    assert op.changed
    assert kube.objects == {}
    assert all(c[-1] is True for c in kube.calls if c[0] == "apply")
    assert result["csv"]["phase"] is None


def refused_before_any_write(kube, **options) -> GpuaasError:
    """The error of a present() run with these options, asserting that it wrote nothing."""
    with pytest.raises(GpuaasError) as err:
        olm_runner.OlmOperator(module(**options), kube).present()
    assert kube.writes == []
    return err.value


def test_create_refuses_a_second_operator_group_before_any_write():
    kube = FakeKube(SERVED)
    kube.add({"kind": "Namespace", "metadata": {"name": "nvidia-gpu-operator"}})
    kube.add({"kind": "OperatorGroup", "metadata": {"name": "someone-elses", "namespace": "nvidia-gpu-operator"}})
    err = refused_before_any_write(kube, operator_group="create")
    assert "someone-elses" in str(err) and "operator_group: auto or reuse" in str(err)


def test_absent_removes_subscription_csv_and_own_operator_group_only():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    olm_runner.OlmOperator(module(), kube).present()
    op = olm_runner.OlmOperator(module(state="absent"), kube)
    op.absent()
    kinds = {k[0] for k in kube.objects}
    assert kinds == {"Namespace", "InstallPlan"}
    assert op.changed
    again = olm_runner.OlmOperator(module(state="absent"), kube)
    again.absent()
    assert not again.changed


def test_timeout_explains_what_to_check():
    kube = FakeKube(SERVED)  # no OLM behind it: nothing ever happens
    op = olm_runner.OlmOperator(module(wait_timeout=0), kube)
    olm_runner.POLL = 0.01
    with pytest.raises(GpuaasError) as err:
        op.present()
    assert "timed out" in str(err.value) and "certified-operators" in err.value.hint


# ---- brownfield: the namespace's OperatorGroup, Subscription, labels ---------------------------------------------
NS = "nvidia-gpu-operator"
CONSOLE_OG = {"kind": "OperatorGroup", "metadata": {"name": NS + "-7xk2p", "namespace": NS},
              "spec": {"targetNamespaces": [NS]}}


def console_namespace(kube, labels=None):
    kube.add({"kind": "Namespace", "metadata": {"name": NS, "labels": dict(labels or {})}})


def test_auto_reuses_the_consoles_operator_group_untouched():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    console_namespace(kube)
    kube.add(CONSOLE_OG)
    op = olm_runner.OlmOperator(module(), kube)
    result = op.present()
    assert result["operator_group"] == {"name": NS + "-7xk2p", "action": "reuse"}
    groups = [k for k in kube.objects if k[0] == "OperatorGroup"]
    assert groups == [("OperatorGroup", NS, NS + "-7xk2p")]
    assert kube.objects[groups[0]] == dict(CONSOLE_OG, metadata=dict(CONSOLE_OG["metadata"]))  # not written
    assert result["csv"]["phase"] == "Succeeded" and op.warnings == []
    again = olm_runner.OlmOperator(module(), kube)
    again.present()
    assert not again.changed, again.actions


def test_reused_operator_group_with_other_targets_is_a_warning_not_a_change():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    console_namespace(kube)
    kube.add(dict(CONSOLE_OG, spec={}))  # AllNamespaces
    op = olm_runner.OlmOperator(module(), kube)
    op.present()
    assert len(op.warnings) == 1 and "all namespaces" in op.warnings[0] and NS in op.warnings[0]
    assert kube.objects[("OperatorGroup", NS, NS + "-7xk2p")]["spec"] == {}


@pytest.mark.parametrize("mode", [False, "none", "false"])
def test_operator_group_none_never_reads_or_writes_them(mode):
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    console_namespace(kube)
    olm_runner.OlmOperator(module(operator_group=mode), kube).present()
    assert not [c for c in kube.calls if c[1] == "OperatorGroup"]


def test_every_problem_is_reported_at_once_and_nothing_is_written():
    kube = FakeKube(SERVED)
    console_namespace(kube)
    kube.add(CONSOLE_OG)
    kube.add(dict(CONSOLE_OG, metadata={"name": "second", "namespace": NS}))
    kube.add({"kind": "Subscription", "metadata": {"name": "gpu-operator-certified-console", "namespace": NS},
              "spec": {"name": "gpu-operator-certified"}})
    err = refused_before_any_write(kube, subscription_config={"nodeSelector": {}, "replicas": 2})
    text = str(err)
    assert len(err.problems) == 3, err.problems
    assert "subscription_config.replicas" in text
    assert "2 OperatorGroups" in text and "second" in text
    assert "gpu-operator-certified-console" in text and "name: gpu-operator-certified-console" in text


def test_an_unknown_operator_group_mode_is_refused():
    kube = FakeKube(SERVED)
    assert "'adopt' is not one of auto, create, reuse, none" in str(refused_before_any_write(kube, operator_group="adopt"))


def test_reuse_without_an_operator_group_is_refused():
    kube = FakeKube(SERVED)
    console_namespace(kube)
    assert "no OperatorGroup to reuse" in str(refused_before_any_write(kube, operator_group="reuse"))


def test_labels_on_a_foreign_namespace_do_not_take_it_over():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    console_namespace(kube, {"team": "gpu"})
    labels = {"openshift.io/cluster-monitoring": "true"}
    op = olm_runner.OlmOperator(module(namespace_labels=labels), kube)
    op.present()
    live = kube.objects[("Namespace", None, NS)]["metadata"]["labels"]
    assert live == {"team": "gpu", "openshift.io/cluster-monitoring": "true"}  # no managed-by label
    assert any(a == "labelled Namespace %s" % NS for a in op.actions)
    again = olm_runner.OlmOperator(module(namespace_labels=labels), kube)
    again.present()
    assert not again.changed, again.actions
    # state=absent delete_namespace=true never deletes a namespace the collection did not create
    olm_runner.OlmOperator(module(state="absent", delete_namespace=True), kube).absent()
    assert ("Namespace", None, NS) in kube.objects


def test_new_namespace_gets_the_labels_and_the_ownership_label():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    olm_runner.OlmOperator(module(namespace_labels={"openshift.io/cluster-monitoring": "true"}), kube).present()
    assert kube.objects[("Namespace", None, NS)]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpuaas.platform", "openshift.io/cluster-monitoring": "true"}


# ---- ResolutionFailed ---------------------------------------------------------------------------------------------
UNSATISFIABLE = ("constraints not satisfiable: no operators found in channel v0.0 of package gpu-operator-certified "
                 "in the catalog referenced by subscription gpu-operator-certified, subscription "
                 "gpu-operator-certified exists")


class UnresolvableOlm:
    """OLM for a channel its catalog lacks: the Subscription gets ResolutionFailed=True and nothing else."""

    def __init__(self, kube):
        kube.hooks.append(self.hook)

    @staticmethod
    def hook(kind, obj):
        if kind == "Subscription":
            obj["status"] = {"conditions": [
                {"type": "CatalogSourcesUnhealthy", "status": "False", "reason": "AllCatalogSourcesHealthy"},
                {"type": "ResolutionFailed", "status": "True", "reason": "ConstraintsNotSatisfiable",
                 "message": UNSATISFIABLE}]}


def test_resolution_failed_stops_after_the_grace_not_the_wait_timeout(monkeypatch):
    kube = FakeKube(SERVED)
    UnresolvableOlm(kube)
    clock = [1000.0]
    monkeypatch.setattr(olm_runner.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(olm_runner.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    op = olm_runner.OlmOperator(module(channel="v0.0", wait_timeout=1200), kube)
    with pytest.raises(GpuaasError) as err:
        op.present()
    assert 30 <= clock[0] - 1000.0 <= 30 + olm_runner.POLL  # the grace, not the 1,200 s wait_timeout
    text = str(err.value)
    for word in ("gpu-operator-certified", "channel v0.0", "openshift-marketplace/certified-operators",
                 "ResolutionFailed ConstraintsNotSatisfiable", UNSATISFIABLE,
                 "oc get packagemanifest gpu-operator-certified -n openshift-marketplace -o jsonpath="):
        assert word in text, word
    assert err.value.details["reason"] == "ResolutionFailed"


def test_a_resolution_failure_that_clears_within_the_grace_is_waited_out(monkeypatch):
    op = olm_runner.OlmOperator(module(), FakeKube(SERVED))
    failed = {"status": {"conditions": [{"type": "ResolutionFailed", "status": "True", "message": "m"}]}}
    clock = [0.0]
    monkeypatch.setattr(olm_runner.time, "monotonic", lambda: clock[0])
    for now, sub in ((0, failed), (25, failed), (27, {}), (28, failed), (57, failed)):
        clock[0] = now
        op.check_resolution(sub)  # cleared at 27 s: the grace starts again at 28 s
    clock[0] = 58.0
    with pytest.raises(GpuaasError):
        op.check_resolution(failed)


def test_the_timeout_message_carries_olms_words():
    kube = FakeKube(SERVED)
    UnresolvableOlm(kube)
    op = olm_runner.OlmOperator(module(channel="v0.0", wait_timeout=0, resolution_grace=3600), kube)
    olm_runner.POLL = 0.01
    with pytest.raises(GpuaasError) as err:
        op.present()
    assert "timed out" in str(err.value) and UNSATISFIABLE in str(err.value)


# ---- operands ---------------------------------------------------------------------------------------------------
POLICY = ("nvidia.com/v1", "ClusterPolicy")
EXAMPLE = {"driver": {"enabled": True}, "dcgm": {"enabled": True}, "operator": {"defaultRuntime": "crio"}}


class OperandOlm(FakeOlm):
    def install(self, ns, csv, sub):
        super().install(ns, csv, sub)
        key = ("ClusterServiceVersion", ns, csv)
        self.kube.objects[key]["metadata"]["annotations"]["alm-examples"] = json.dumps(
            [{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"},
              "spec": EXAMPLE}])


def operand(**over):
    base = dict(api_version="nvidia.com/v1", kind="ClusterPolicy", name="gpu-cluster-policy", namespace=None,
                spec={"driver": {"enabled": False}}, from_example=True, adopt=False,
                adopt_variable="gpuaas_gpu_operator_cluster_policy_adopt")
    base.update(over)
    return base


def hand_made_policy(kube, spec):
    kube.add({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {
        "name": "gpu-cluster-policy", "managedFields": [
            {"manager": "Mozilla", "operation": "Update", "apiVersion": "nvidia.com/v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {k: {} for k in spec}}}]}, "spec": spec})


def policy(kube):
    return kube.objects[("ClusterPolicy", None, "gpu-cluster-policy")]


def test_operand_created_from_the_example_with_the_settings_over_it_then_unchanged():
    kube = FakeKube(SERVED + [POLICY])
    OperandOlm(kube)
    result = olm_runner.OlmOperator(module(operand=operand()), kube).present()
    assert result["operand"]["mode"] == "create" and result["operand"]["action"] == "created"
    assert policy(kube)["spec"] == dict(EXAMPLE, driver={"enabled": False})
    assert policy(kube)["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
    again = olm_runner.OlmOperator(module(operand=operand()), kube)
    assert again.present()["operand"] == {"kind": "ClusterPolicy", "name": "gpu-cluster-policy", "namespace": None,
                                          "mode": "owned", "action": "unchanged"}
    assert not again.changed, again.actions


def test_someone_elses_operand_gets_only_the_settings_and_keeps_its_fields():
    kube = FakeKube(SERVED + [POLICY])
    OperandOlm(kube)
    hand_made_policy(kube, {"dcgm": {"enabled": False}, "daemonsets": {"priorityClassName": "tuned"}})
    op = olm_runner.OlmOperator(module(operand=operand()), kube)
    result = op.present()
    assert result["operand"]["mode"] == "merge" and result["operand"]["action"] == "updated"
    # the hand-tuned fields and the example's other fields: untouched; the setting: merged; no ownership label
    assert policy(kube)["spec"] == {"dcgm": {"enabled": False}, "daemonsets": {"priorityClassName": "tuned"},
                                    "driver": {"enabled": False}}
    assert "labels" not in policy(kube)["metadata"]
    apply_calls = [c for c in kube.calls if c[0] == "apply" and c[1] == "ClusterPolicy"]
    assert len(apply_calls) == 1
    again = olm_runner.OlmOperator(module(operand=operand()), kube)
    assert again.present()["operand"]["action"] == "unchanged"
    assert not again.changed, again.actions


def test_a_conflict_on_someone_elses_operand_names_the_fields_and_the_adopt_variable():
    kube = FakeKube(SERVED + [POLICY])
    OperandOlm(kube)
    hand_made_policy(kube, {"driver": {"enabled": True}})
    before = dict(policy(kube))
    kube.fail_apply["gpu-cluster-policy"] = api_exception(
        409, "Conflict", 'Apply failed with 1 conflict: conflict with "Mozilla" using nvidia.com/v1: .spec.driver.enabled',
        [{"type": "FieldManagerConflict", "message": 'conflict with "Mozilla" using nvidia.com/v1',
          "field": ".spec.driver.enabled"}])
    with pytest.raises(GpuaasError) as err:
        olm_runner.OlmOperator(module(operand=operand()), kube).present()
    assert err.value.problems == ['.spec.driver.enabled: conflict with "Mozilla" using nvidia.com/v1']
    assert "gpuaas_gpu_operator_cluster_policy_adopt: true" in err.value.hint
    assert "nothing was written" in err.value.message
    assert policy(kube) == before


def test_adopt_labels_the_operand_and_applies_the_example_with_the_settings():
    kube = FakeKube(SERVED + [POLICY])
    OperandOlm(kube)
    hand_made_policy(kube, {"driver": {"enabled": True}, "daemonsets": {"priorityClassName": "tuned"}})
    op = olm_runner.OlmOperator(module(operand=operand(adopt=True)), kube)
    assert op.present()["operand"]["mode"] == "adopt"
    assert policy(kube)["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
    assert policy(kube)["spec"]["driver"] == {"enabled": False}
    assert policy(kube)["spec"]["operator"] == {"defaultRuntime": "crio"}
    assert any(a.startswith("adopted ClusterPolicy gpu-cluster-policy") for a in op.actions)


def test_operand_in_check_mode_before_the_operator_is_installed_is_skipped():
    kube = FakeKube(SERVED + [POLICY])
    OperandOlm(kube)
    result = olm_runner.OlmOperator(module(check=True, operand=operand()), kube).present()
    assert result["operand"]["action"] == "skipped"
    assert kube.objects == {}
