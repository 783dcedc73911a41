# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's ownership guard (brownfield, issue 17): objects of a desired name that the collection does not own
are refused before any apply (also a dry run), unless adopted; adopted objects are reported and become owned."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.kube import ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import engine as ae
from ansible_collections.gpuaas.platform.plugins.module_utils import kueue_options as kb
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

from .fake_kube import FakeClient

KV = "kueue.x-k8s.io/v1beta2"


def hand_made(client, kind, name, namespace="", labels=None, manager="kubectl-client-side-apply", spec=None):
    """An object created outside the collection: another field manager, no managed-by label."""
    meta = {"name": name, "labels": dict(labels or {}), "uid": "uid-hand-%s" % name,
            "managedFields": [{"manager": manager, "operation": "Update", "apiVersion": KV, "fieldsV1": {"f:spec": {}}}]}
    if namespace:
        meta["namespace"] = namespace
    api_version = "v1" if kind == "Namespace" else KV
    client.store[(kind, namespace, name)] = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec or {}}


def cq(name="team-a"):
    return kb.cluster_queue(name, cohort="research", namespace_selector={},
                            resource_groups=[{"flavors": [{"name": "h100", "resources": [
                                {"name": "nvidia.com/gpu", "nominal_quota": 8}]}]}])


def desired():
    return [kb.resource_flavor("h100"), cq("team-a"), cq("team-b")]


def applies(client):
    return [c for c in client.calls if c[0] in ("apply", "delete")]


@pytest.mark.parametrize("check_mode", [False, True])
def test_hand_made_object_is_refused_before_any_apply(check_mode):
    client = FakeClient()
    hand_made(client, "ClusterQueue", "team-b", manager="kubectl-create")
    engine = ae.ApplyEngine(client, check_mode=check_mode, guard_ownership=True)
    with pytest.raises(GpuaasError) as info:
        engine.reconcile(desired())
    err = info.value
    assert applies(client) == []  # not even a dry run of the objects that are ours to create
    assert "ClusterQueue/team-b" in err.message and "gpuaas.platform" in err.message
    assert err.problems == ["ClusterQueue/team-b is not managed by gpuaas.platform; field managers: kubectl-create (Update)"]
    assert "adopt" in err.hint and '["ClusterQueue/team-b"]' in err.hint
    assert err.details["reason"] == "NotOwned"
    assert [(o["kind"], o["name"]) for o in err.details["not_owned"]] == [("ClusterQueue", "team-b")]
    assert "app.kubernetes.io/managed-by" not in client.store[("ClusterQueue", "", "team-b")]["metadata"]["labels"]


def test_every_foreign_object_is_listed_at_once():
    client = FakeClient()
    hand_made(client, "ResourceFlavor", "h100", manager="helm")
    hand_made(client, "ClusterQueue", "team-a")
    with pytest.raises(GpuaasError) as info:
        ae.ApplyEngine(client, guard_ownership=True).reconcile(desired())
    listed = sorted(p.split(" ")[0] for p in info.value.problems)
    assert listed == ["ClusterQueue/team-a", "ResourceFlavor/h100"]
    assert any("helm (Update)" in p for p in info.value.problems)


def test_guard_off_keeps_the_take_over_behaviour_of_single_object_modules():
    client = FakeClient()
    hand_made(client, "ClusterQueue", "team-a")
    result = ae.ApplyEngine(client).reconcile([cq("team-a")])
    assert [r.ref.name for r in result.by_action("updated")] == ["team-a"]
    assert "adopted" not in result.to_module_result()
    assert ownership.is_owned(client.store[("ClusterQueue", "", "team-a")])


@pytest.mark.parametrize("adopt", [["ClusterQueue/team-b"], ["clusterqueue/team-b"], ["*"]])
def test_adopted_object_is_reported_labelled_and_then_owned(adopt):
    client = FakeClient()
    hand_made(client, "ClusterQueue", "team-b", manager="kubectl-edit")
    result = ae.ApplyEngine(client, guard_ownership=True, adopt=adopt).reconcile(desired())
    assert result.adopted == [{"apiVersion": KV, "kind": "ClusterQueue", "name": "team-b",
                               "managers": ["kubectl-edit (Update)"], "reason": "adopt list"}]
    assert result.to_module_result()["adopted"] == result.adopted
    live = client.store[("ClusterQueue", "", "team-b")]
    assert live["metadata"]["labels"][ownership.MANAGED_BY_LABEL] == ownership.MANAGED_BY_VALUE
    again = ae.ApplyEngine(client, guard_ownership=True).reconcile(desired())
    assert again.adopted == [] and not again.changed


def test_adopt_names_only_what_it_lists():
    client = FakeClient()
    hand_made(client, "ClusterQueue", "team-a")
    hand_made(client, "ClusterQueue", "team-b")
    with pytest.raises(GpuaasError) as info:
        ae.ApplyEngine(client, guard_ownership=True, adopt=["ClusterQueue/team-a", "ResourceFlavor/team-b"]).reconcile(desired())
    assert [o["name"] for o in info.value.details["not_owned"]] == ["team-b"]
    assert [o["name"] for o in info.value.details["adoptable"]] == ["team-a"]
    assert applies(client) == []


def test_namespaced_objects_are_adopted_by_kind_namespace_and_name():
    client = FakeClient()
    hand_made(client, "LocalQueue", "default", namespace="team-a-train")
    lq = kb.local_queue("default", "team-a-train", cluster_queue="team-a")
    with pytest.raises(GpuaasError) as info:
        ae.ApplyEngine(client, guard_ownership=True, adopt=["LocalQueue/default"]).reconcile([lq])
    assert info.value.problems[0].startswith("LocalQueue/team-a-train/default ")
    result = ae.ApplyEngine(client, guard_ownership=True, adopt=["LocalQueue/team-a-train/default"]).reconcile([lq])
    assert [a["namespace"] for a in result.adopted] == ["team-a-train"]


def test_a_namespace_labelled_for_the_tenant_is_handed_over_and_for_another_is_refused():
    client = FakeClient()
    hand_made(client, "Namespace", "a-train", labels={ownership.TENANT_LABEL: "a"})
    hand_made(client, "Namespace", "b-train", labels={ownership.TENANT_LABEL: "someone-else"})
    ns_a = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a-train", "labels": {ownership.TENANT_LABEL: "a"}}}
    ns_b = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b-train", "labels": {ownership.TENANT_LABEL: "b"}}}
    with pytest.raises(GpuaasError) as info:
        ae.ApplyEngine(client, guard_ownership=True).reconcile([ns_a, ns_b])
    assert [o["name"] for o in info.value.details["not_owned"]] == ["b-train"]
    result = ae.ApplyEngine(client, guard_ownership=True).reconcile([ns_a])
    assert result.adopted[0]["name"] == "a-train"
    assert result.adopted[0]["reason"] == "labelled gpuaas.io/tenant=a"


def test_an_object_our_field_manager_wrote_is_ours_even_without_the_label():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([cq("team-a")])
    del client.store[("ClusterQueue", "", "team-a")]["metadata"]["labels"][ownership.MANAGED_BY_LABEL]
    result = ae.ApplyEngine(client, guard_ownership=True).reconcile([cq("team-a")])
    assert result.adopted == []
    assert ownership.is_owned(client.store[("ClusterQueue", "", "team-a")])


def test_preflight_reads_only_and_many_missing_objects_are_still_checked():
    client = FakeClient()
    flavors = [kb.resource_flavor("f%02d" % i) for i in range(ae.GET_THRESHOLD + 4)]  # one unfiltered LIST path
    hand_made(client, "ResourceFlavor", "f07")
    engine = ae.ApplyEngine(client, guard_ownership=True)
    with pytest.raises(GpuaasError) as info:
        engine.check_ownership(flavors)
    assert [o["name"] for o in info.value.details["not_owned"]] == ["f07"]
    assert {c[0] for c in client.calls} <= {"list", "get"}
    assert ae.ApplyEngine(client, guard_ownership=True, adopt=["ResourceFlavor/f07"]).check_ownership(flavors)[0]["name"] == "f07"
    assert client.writes == []


# -- helpers of ownership.py ---------------------------------------------------------------------------------

def test_adoption_names_and_matching():
    assert ownership.adoption_name("ClusterQueue", "nlp") == "ClusterQueue/nlp"
    assert ownership.adoption_name("LocalQueue", "default", "nlp-train") == "LocalQueue/nlp-train/default"
    assert ownership.adopt_requested([" clusterqueue/nlp "], "ClusterQueue", "nlp") is True
    assert ownership.adopt_requested(["ClusterQueue/nlp"], "ResourceFlavor", "nlp") is False
    assert ownership.adopt_requested([], "ClusterQueue", "nlp") is False


def test_field_managers_once_each_in_order():
    obj = {"metadata": {"managedFields": [{"manager": "kubectl", "operation": "Update"},
                                          {"manager": "kueue", "operation": "Update", "subresource": "status"},
                                          {"manager": "kubectl", "operation": "Update"},
                                          {"manager": "helm", "operation": "Apply"}]}}
    assert ownership.field_managers(obj) == ["kubectl (Update)", "kueue (Update, status)", "helm (Apply)"]
    assert ownership.field_managers({"metadata": {}}) == []


# -- existing GPU workloads of an adopted namespace ------------------------------------------------------------

def workload(kind, name, resources, labels=None, init=False, owner=False):
    container = {"name": "c", "image": "x", "resources": resources}
    pod_spec = {"initContainers" if init else "containers": [container]}
    if init:
        pod_spec["containers"] = [{"name": "main", "image": "x"}]
    meta = {"name": name, "namespace": "ns", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    spec = pod_spec if kind == "Pod" else {"template": {"spec": pod_spec}}
    return {"kind": kind, "metadata": meta, "spec": spec}


def test_gpu_workloads_without_a_queue_label_are_reported():
    objects = [
        workload("Deployment", "vllm", {"limits": {"nvidia.com/gpu": "1"}}),
        workload("StatefulSet", "queued", {"limits": {"nvidia.com/gpu": "1"}}, labels={tenancy.QUEUE_LABEL: "default"}),
        workload("Job", "cpu-only", {"requests": {"cpu": "2", "memory": "1Gi"}}),
        workload("Job", "mig-init", {"requests": {"nvidia.com/mig-1g.10gb": "1"}}, init=True),
        workload("Pod", "of-a-replicaset", {"limits": {"nvidia.com/gpu": "1"}}, owner=True),
        workload("Pod", "bare", {"limits": {"amd.com/gpu": "2"}}),
    ]
    assert tenancy.workloads_refused_on_update(objects) == [
        {"kind": "Deployment", "namespace": "ns", "name": "vllm", "resources": ["nvidia.com/gpu"]},
        {"kind": "Job", "namespace": "ns", "name": "mig-init", "resources": ["nvidia.com/mig-1g.10gb"]},
        {"kind": "Pod", "namespace": "ns", "name": "bare", "resources": ["amd.com/gpu"]},
    ]


def test_adoption_scans_the_builtin_kinds_kueue_gates():
    assert sorted(k for _v, k in tenancy.ADOPTION_WORKLOAD_KINDS) == ["Deployment", "Job", "Pod", "StatefulSet"]
