# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kueue API version selection and v1beta2 <-> v1beta1 conversion (mirrors apis/kueue/v1beta1/*_conversion.go)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.kube import kueue_versions as ka
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

from .fake_kube import FakeClient

CQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
    "spec": {
        "cohortName": "research",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "b"}]},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        "resourceGroups": [],
    },
}


def test_version_selection():
    assert ka.kueue_api_version(FakeClient(("v1beta2", "v1beta1"))) == "v1beta2"
    assert ka.kueue_api_version(FakeClient(("v1beta1",))) == "v1beta1"
    with pytest.raises(GpuaasError, match="is Kueue installed"):
        ka.kueue_api_version(FakeClient(()))


def test_cluster_queue_downgrade():
    out = ka.convert_for_version(CQ, "v1beta1")
    assert out["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert out["spec"] == {"cohort": "research", "admissionChecks": ["a", "b"], "resourceGroups": [],
                           "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}
    assert CQ["spec"]["cohortName"] == "research"  # input untouched


def test_admission_checks_with_flavors_keep_the_strategy():
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
           "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a", "onFlavors": ["f"]}]}}}
    assert ka.convert_for_version(obj, "v1beta1")["spec"] == obj["spec"]


def test_round_trip_back_to_v1beta2():
    assert ka.convert_from_version(ka.convert_for_version(CQ, "v1beta1")) == CQ


def test_try_next_flavor_is_kept():
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
           "spec": {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}}}
    assert ka.convert_for_version(obj, "v1beta1")["spec"] == obj["spec"]


def test_cohort_parent_for_old_releases():
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "c"},
              "spec": {"parentName": "root", "fairSharing": {"weight": "1"}}}
    assert ka.convert_for_version(cohort, "v1beta1")["spec"] == {"parentName": "root", "fairSharing": {"weight": "1"}}
    assert ka.convert_for_version(cohort, "v1beta1", cohort_parent_field="parent")["spec"]["parent"] == "root"
    alpha = ka.convert_for_version(cohort, "v1alpha1")
    assert alpha["apiVersion"] == "kueue.x-k8s.io/v1alpha1" and alpha["spec"] == {"parent": "root"}
    assert ka.convert_from_version(alpha)["spec"] == {"parentName": "root"}


def test_cohort_api_version_falls_back_to_v1alpha1():
    client = FakeClient(("v1beta1",))
    del client.kinds["kueue.x-k8s.io/v1beta1"]["Cohort"]
    client.kinds["kueue.x-k8s.io/v1alpha1"] = {"Cohort": ("cohorts", False)}
    assert ka.cohort_api_version(client, "v1beta1") == "v1alpha1"
    assert ka.cohort_api_version(FakeClient(("v1beta1",)), "v1beta1") == "v1beta1"


def test_non_kueue_objects_are_untouched():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    assert ka.convert_for_version(ns, "v1beta1") == ns


def test_local_queue_status_rename_on_read():
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "q"},
          "status": {"flavorUsage": [{"name": "f"}]}}
    assert ka.convert_from_version(lq)["status"] == {"flavorsUsage": [{"name": "f"}]}
