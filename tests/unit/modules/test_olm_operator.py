# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os
import sys
import types

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.modules import olm_operator

sys.path.insert(0, os.path.dirname(__file__))
from fake_kube import FakeKube  # noqa: E402  pylint: disable=wrong-import-position

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
    op = olm_operator.OlmOperator(module(), kube)
    result = op.present()
    assert op.changed
    assert result["csv"] == {"name": "gpu-operator-certified.v25.3.0", "phase": "Succeeded", "version": "25.3.0"}
    assert result["alm_examples"] == [{"kind": "ClusterPolicy", "spec": {"a": 1}}]
    assert ("OperatorGroup", "nvidia-gpu-operator", "nvidia-gpu-operator") in kube.objects
    assert kube.objects[("Namespace", None, "nvidia-gpu-operator")]["metadata"]["labels"]
    second = olm_operator.OlmOperator(module(), kube)
    second.present()
    assert not second.changed, second.actions


def test_manual_approves_exactly_the_pinned_plan():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    op = olm_operator.OlmOperator(module(install_plan_approval="Manual",
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
    op = olm_operator.OlmOperator(module(install_plan_approval="Manual",
                                         starting_csv="gpu-operator-certified.v25.3.0"), kube)
    with pytest.raises(GpuaasError) as err:
        op.present()
    assert "not the pinned gpu-operator-certified.v25.3.0" in str(err.value)
    assert kube.objects[("InstallPlan", "nvidia-gpu-operator", "install-1")]["spec"]["approved"] is False
    assert ("ClusterServiceVersion", "nvidia-gpu-operator", "gpu-operator-certified.v25.10.0") not in kube.objects


def test_check_mode_writes_nothing():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    op = olm_operator.OlmOperator(module(check=True), kube)
    result = op.present()
    assert op.changed
    assert kube.objects == {}
    assert all(c[-1] is True for c in kube.calls if c[0] == "apply")
    assert result["csv"]["phase"] is None


def test_create_refuses_a_second_operator_group_before_any_write():
    kube = FakeKube(SERVED)
    kube.add({"kind": "Namespace", "metadata": {"name": "nvidia-gpu-operator"}})
    kube.add({"kind": "OperatorGroup", "metadata": {"name": "someone-elses", "namespace": "nvidia-gpu-operator"}})
    with pytest.raises(GpuaasError) as err:
        olm_operator.OlmOperator(module(operator_group="create"), kube).present()
    assert "someone-elses" in str(err.value) and "operator_group: auto or reuse" in str(err.value)
    assert kube.writes == []


def test_absent_removes_subscription_csv_and_own_operator_group_only():
    kube = FakeKube(SERVED)
    FakeOlm(kube)
    olm_operator.OlmOperator(module(), kube).present()
    op = olm_operator.OlmOperator(module(state="absent"), kube)
    op.absent()
    kinds = {k[0] for k in kube.objects}
    assert kinds == {"Namespace", "InstallPlan"}
    assert op.changed
    again = olm_operator.OlmOperator(module(state="absent"), kube)
    again.absent()
    assert not again.changed


def test_timeout_explains_what_to_check():
    kube = FakeKube(SERVED)  # no OLM behind it: nothing ever happens
    op = olm_operator.OlmOperator(module(wait_timeout=0), kube)
    olm_operator.POLL = 0.01
    with pytest.raises(GpuaasError) as err:
        op.present()
    assert "timed out" in str(err.value) and "certified-operators" in err.value.hint
