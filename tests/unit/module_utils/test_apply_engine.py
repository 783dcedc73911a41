# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply engine: comparison on owned fields, idempotence without per-object requests, check mode, diff, prune,
ordering, Kueue conversion, errors."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.kube import compare, ownership, results
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import engine as ae
from ansible_collections.gpuaas.platform.plugins.module_utils import kueue_options as kb
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

from .fake_kube import FakeClient, api_exception


def flavor(name="h100"):
    return kb.resource_flavor(name, node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                              tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])


def cq(name="team-a", gpus=8, cohort="research", memory="1Ti", **kw):
    return kb.cluster_queue(name, cohort=cohort, namespace_selector={},
                            resource_groups=[{"flavors": [{"name": "h100", "resources": [
                                {"name": "nvidia.com/gpu", "nominal_quota": gpus, "borrowing_limit": 4},
                                {"name": "memory", "nominal_quota": memory}]}]}], **kw)


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def lq(name, namespace, cluster_queue):
    return kb.local_queue(name, namespace, cluster_queue=cluster_queue)


# -- comparison ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,equal", [
    ("1Ti", "1099511627776", True),
    ("8", 8, True),
    (8, "8", True),
    ("500m", "0.5", True),
    ("1Gi", "1G", False),
    ("8", "9", False),
    (True, 1, False),
    ("abc", "abc", True),
    ("abc", "abd", False),
    (None, None, True),
])
def test_scalar_equal_quantities(a, b, equal):
    assert compare.scalar_equal(a, b) is equal


def test_is_subset_ignores_crd_defaults():
    desired = {"spec": {"cohortName": "x", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}}
    live = {"spec": {"cohortName": "x", "queueingStrategy": "BestEffortFIFO", "resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}]}}
    assert compare.is_subset(desired, live)
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "9"
    assert not compare.is_subset(desired, live)


def test_is_subset_atomic_list_length_matters_unless_associative():
    assert not compare.is_subset({"a": [1]}, {"a": [1, 2]})
    fields = {"f:a": {'k:{"name":"x"}': {".": {}}}}
    assert compare.is_subset({"a": [{"name": "x"}]}, {"a": [{"name": "y"}, {"name": "x", "v": 1}]}, fields)
    assert not compare.is_subset({"a": [{"name": "z"}]}, {"a": [{"name": "y"}, {"name": "x"}]}, fields)


def test_fields_covered_detects_removed_field():
    fields = {"f:spec": {"f:a": {}, "f:b": {}}}
    assert compare.fields_covered(fields, {"spec": {"a": 1, "b": 2}})
    assert not compare.fields_covered(fields, {"spec": {"a": 1}})
    listed = {"f:spec": {"f:items": {'k:{"name":"x"}': {".": {}, "f:v": {}}}}}
    assert compare.fields_covered(listed, {"spec": {"items": [{"name": "x", "v": 1}]}})
    assert not compare.fields_covered(listed, {"spec": {"items": [{"name": "x"}]}})
    assert not compare.fields_covered(listed, {"spec": {"items": [{"name": "y", "v": 1}]}})


def test_project_keeps_only_owned_fields():
    obj = {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"a": 1, "defaulted": True}}
    fields = {"f:metadata": {"f:labels": {"f:x": {}}}, "f:spec": {"f:a": {}}}
    assert compare.project(obj, fields) == {"metadata": {"labels": {"x": "1"}}, "spec": {"a": 1}}


# -- reconcile ----------------------------------------------------------------------------------------------

def desired_set():
    return [ns("team-a"), flavor(), cq("team-a"), lq("default", "team-a", "team-a")]


def test_create_then_rerun_is_unchanged_with_only_lists():
    client = FakeClient()
    engine = ae.ApplyEngine(client)
    first = engine.reconcile(desired_set(), tenant="team-a")
    assert first.changed
    created = sorted(r.ref.kind for r in first.by_action("created"))
    assert created == ["ClusterQueue", "LocalQueue", "Namespace", "ResourceFlavor"]
    cq_live = client.store[("ClusterQueue", "", "team-a")]
    assert cq_live["spec"]["queueingStrategy"] == "BestEffortFIFO"  # defaulted by the "CRD"
    assert cq_live["metadata"]["labels"] == {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY_VALUE, ownership.TENANT_LABEL: "team-a"}

    client.reset_calls()
    second = ae.ApplyEngine(client).reconcile(desired_set(), tenant="team-a")
    assert not second.changed
    assert second.to_module_result()["summary"] == {"created": 0, "updated": 0, "unchanged": 4, "deleted": 0}
    assert client.count("apply") == 0 and client.count("get") == 0
    assert client.count("list") == 4  # one LIST per kind, none per object
    assert client.writes == []


def test_many_objects_need_one_list_per_kind():
    client = FakeClient()
    desired = [flavor()]
    for i in range(300):
        desired += [ns("t%d" % i), cq("t%d" % i), lq("default", "t%d" % i, "t%d" % i)]
    ae.ApplyEngine(client, concurrency=4).reconcile(desired)
    assert client.count("apply") == 901
    client.reset_calls()
    result = ae.ApplyEngine(client).reconcile(desired)
    assert not result.changed
    assert client.count("list") == 4 and client.count("apply") == 0


def test_new_objects_above_threshold_use_one_unfiltered_list_instead_of_gets():
    client = FakeClient()
    desired = [ns("n%d" % i) for i in range(ae.GET_THRESHOLD + 5)]
    ae.ApplyEngine(client).reconcile(desired)
    assert client.count("get") == 0
    assert client.count("list") == 2


def test_quantity_spelling_is_not_drift():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([cq(memory="1Ti")])
    result = ae.ApplyEngine(client).reconcile([cq(memory="1099511627776")])
    assert not result.changed


def test_update_reports_diff_of_owned_fields():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([cq(gpus=8)])
    result = ae.ApplyEngine(client).reconcile([cq(gpus=16)])
    assert [r.ref.name for r in result.by_action("updated")] == ["team-a"]
    diff = result.to_module_result(diff=True)["diff"][0]
    before_q = diff["before"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    after_q = diff["after"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert (before_q, after_q) == ("8", "16")
    assert "queueingStrategy" not in diff["before"]["spec"]  # CRD default, not ours
    assert diff["before_header"] == "ClusterQueue team-a (live)"


def test_removed_option_is_a_change_and_gets_removed():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([cq(stop_policy="Hold")])
    assert client.store[("ClusterQueue", "", "team-a")]["spec"]["stopPolicy"] == "Hold"
    result = ae.ApplyEngine(client).reconcile([cq()])
    assert result.changed
    # the fake re-defaults stopPolicy after our field is released
    assert client.store[("ClusterQueue", "", "team-a")]["spec"]["stopPolicy"] == "None"
    assert not ae.ApplyEngine(client).reconcile([cq()]).changed


def test_object_not_owned_yet_is_taken_over():
    client = FakeClient()
    obj = cq()
    obj["metadata"]["labels"] = {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY_VALUE}
    client.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue").apply(obj, "kubectl")
    result = ae.ApplyEngine(client).reconcile([cq()])
    assert [r.action for r in result.results] == ["updated"]
    assert not ae.ApplyEngine(client).reconcile([cq()]).changed


def test_check_mode_uses_dry_run_and_writes_nothing():
    client = FakeClient()
    result = ae.ApplyEngine(client, check_mode=True).reconcile([flavor(), cq()])
    assert result.changed
    assert client.writes == []
    assert client.store == {}
    assert all(c[-1] is True for c in client.calls if c[0] == "apply")
    diff = result.to_module_result(diff=True)["diff"]
    assert {d["after"]["kind"] for d in diff} == {"ResourceFlavor", "ClusterQueue"}
    assert all(d["before"] == {} for d in diff)


def test_check_mode_in_new_namespace_is_simulated():
    client = FakeClient(strict_namespaces=True)
    result = ae.ApplyEngine(client, check_mode=True).reconcile([ns("new"), lq("default", "new", "q")])
    lq_result = result.find("LocalQueue", "default", "new")
    assert lq_result.action == "created" and lq_result.simulated
    assert client.writes == []
    assert ("apply", "LocalQueue", "new", "default", True) not in client.calls


def test_apply_order_follows_dependencies():
    client = FakeClient()
    ae.ApplyEngine(client, concurrency=8).reconcile(list(reversed(desired_set())))
    kinds = [c[1] for c in client.calls if c[0] == "apply"]
    assert kinds.index("Namespace") < kinds.index("ResourceFlavor") < kinds.index("ClusterQueue") < kinds.index(
        "LocalQueue")


def test_prune_deletes_only_owned_objects_of_the_scope():
    client = FakeClient()
    engine = ae.ApplyEngine(client)
    engine.reconcile([cq("a"), cq("b")], tenant="t1")
    engine.reconcile([cq("c")], tenant="t2")
    foreign = cq("d")
    client.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue").apply(foreign, "kubectl")  # no managed-by label
    unlabelled_tenant = cq("e")
    unlabelled_tenant["metadata"]["labels"] = {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY_VALUE}
    client.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue").apply(unlabelled_tenant, "kubectl")

    scope = results.PruneScope([("kueue.x-k8s.io/v1beta2", "ClusterQueue")], tenant="t1")
    check = ae.ApplyEngine(client, check_mode=True).reconcile([cq("a")], tenant="t1", prune=scope)
    assert [r.ref.name for r in check.by_action("deleted")] == ["b"]
    assert ("ClusterQueue", "", "b") in client.store

    result = ae.ApplyEngine(client).reconcile([cq("a")], tenant="t1", prune=scope)
    assert [r.ref.name for r in result.by_action("deleted")] == ["b"]
    assert sorted(k[2] for k in client.store) == ["a", "c", "d", "e"]

    any_tenant = results.PruneScope([("kueue.x-k8s.io/v1beta2", "ClusterQueue")])
    result = ae.ApplyEngine(client).reconcile([], prune=any_tenant)
    assert sorted(r.ref.name for r in result.by_action("deleted")) == ["a", "c"]
    assert sorted(k[2] for k in client.store) == ["d", "e"]


def test_prune_deletes_dependents_first():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile(desired_set(), tenant="x")
    client.reset_calls()
    scope = results.PruneScope([("v1", "Namespace"), ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
                                ("kueue.x-k8s.io/v1beta2", "LocalQueue"), ("kueue.x-k8s.io/v1beta2", "ResourceFlavor")],
                               tenant="x")
    ae.ApplyEngine(client).reconcile([], prune=scope)
    order = [c[1] for c in client.calls if c[0] == "delete"]
    assert order == ["LocalQueue", "ClusterQueue", "ResourceFlavor", "Namespace"]


def test_delete_absent_is_not_a_change_and_check_mode_keeps_object():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([cq()])
    ref = results.ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "team-a")
    dry = ae.ApplyEngine(client, check_mode=True).delete([ref])
    assert dry.changed and ("ClusterQueue", "", "team-a") in client.store
    assert dry.to_module_result(diff=True)["diff"][0]["after"] == {}
    real = ae.ApplyEngine(client).delete([ref])
    assert real.changed and client.store == {}
    assert not ae.ApplyEngine(client).delete([ref]).changed


def test_duplicate_desired_object_is_an_error():
    with pytest.raises(GpuaasError, match="desired twice"):
        ae.ApplyEngine(FakeClient()).reconcile([cq(), cq()])


def test_namespaced_object_without_namespace_is_an_error():
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(GpuaasError, match="namespaced"):
        ae.ApplyEngine(FakeClient()).reconcile([bad])


def test_missing_crd_says_install_kueue():
    client = FakeClient(kueue_versions=())
    with pytest.raises(GpuaasError) as err:
        ae.ApplyEngine(client).reconcile([cq()])
    assert "is Kueue installed?" in str(err.value)
    assert "gpuaas.platform.kueue role" in err.value.hint


def test_v1beta1_cluster_gets_converted_objects():
    client = FakeClient(kueue_versions=("v1beta1",))
    obj = cq(flavor_fungibility={"when_can_borrow": "MayStopSearch"}, admission_checks=[{"name": "prov"}])
    result = ae.ApplyEngine(client).reconcile([obj])
    live = client.store[("ClusterQueue", "", "team-a")]
    assert live["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert live["spec"]["cohort"] == "research" and "cohortName" not in live["spec"]
    assert live["spec"]["admissionChecks"] == ["prov"]
    assert live["spec"]["flavorFungibility"]["whenCanBorrow"] == "Borrow"
    assert result.api_versions == {"kueue.x-k8s.io": "v1beta1"}
    assert not ae.ApplyEngine(client).reconcile([obj]).changed


def test_apply_errors_name_the_object_and_explain():
    client = FakeClient()
    client.fail_apply["team-a"] = api_exception(
        422, "Invalid", 'ClusterQueue.kueue.x-k8s.io "team-a" is invalid',
        [{"field": "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
          "message": "borrowingLimit must be nil when cohort is empty"}])
    with pytest.raises(GpuaasError) as err:
        ae.ApplyEngine(client).reconcile([cq()])
    text = str(err.value)
    assert "ClusterQueue team-a" in text and "borrowingLimit must be nil" in text
    assert err.value.hint


@pytest.mark.parametrize("status,reason,message,needle", [
    (403, "Forbidden", 'clusterqueues.kueue.x-k8s.io "a" is forbidden: User "alice" cannot patch', "RBAC"),
    (409, "Conflict", "Apply failed with 1 conflict: conflict with \"kubectl\"", "force_conflicts"),
    (404, "NotFound", 'namespaces "x" not found', "namespace does not exist"),
    (403, "Forbidden", "unable to create new content in namespace x because it is being terminated",
     "namespace is being deleted"),
    (500, "InternalError", 'Internal error occurred: failed calling webhook "vclusterqueue.kb.io"', "webhook"),
])
def test_error_translation(status, reason, message, needle):
    client = FakeClient()
    client.fail_apply["team-a"] = api_exception(status, reason, message)
    with pytest.raises(GpuaasError) as err:
        ae.ApplyEngine(client).reconcile([cq()])
    assert needle in (err.value.hint or "")
    assert "ClusterQueue team-a" in str(err.value)


def test_several_failures_are_listed_together():
    client = FakeClient()
    for name in ("a", "b"):
        client.fail_apply[name] = api_exception(403, "Forbidden", "forbidden")
    with pytest.raises(GpuaasError) as err:
        ae.ApplyEngine(client).reconcile([cq("a"), cq("b")])
    assert "2 objects failed" in str(err.value)
    assert len(err.value.problems) == 2


def test_wait_ready_times_out_with_condition_details():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([cq()])
    client.store[("ClusterQueue", "", "team-a")]["status"] = {"conditions": [
        {"type": "Active", "status": "False", "reason": "FlavorNotFound", "message": "Can't admit new workloads"}]}
    engine = ae.ApplyEngine(client)
    result = engine.reconcile([cq()])
    with pytest.raises(GpuaasError) as err:
        engine.wait_ready(result.results, timeout=0, sleep=0)
    assert "FlavorNotFound" in str(err.value)
    client.store[("ClusterQueue", "", "team-a")]["status"]["conditions"][0]["status"] = "True"
    engine.wait_ready(result.results, timeout=0, sleep=0)


def test_none_values_are_dropped():
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "annotations": None}, "spec": None}
    d = ae.ApplyEngine(FakeClient()).prepare(obj)
    assert d.obj == {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": "x", "labels": {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY_VALUE}}}


def test_prune_scope_with_v1beta2_kinds_works_on_v1beta1_clusters():
    client = FakeClient(kueue_versions=("v1beta1",))
    ae.ApplyEngine(client).reconcile([cq("a"), cq("b")], tenant="t1")
    scope = results.PruneScope([("kueue.x-k8s.io/v1beta2", "ClusterQueue")], tenant="t1")
    result = ae.ApplyEngine(client).reconcile([cq("a")], tenant="t1", prune=scope)
    assert [(r.ref.api_version, r.ref.name) for r in result.by_action("deleted")] == [("kueue.x-k8s.io/v1beta1", "b")]


def test_delete_only_owned_refuses_foreign_objects():
    client = FakeClient()
    client.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue").apply(cq("foreign"), "kubectl")
    ref = results.ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "foreign")
    with pytest.raises(GpuaasError, match="not managed by gpuaas.platform"):
        ae.ApplyEngine(client).delete([ref], only_owned=True)
    assert ("ClusterQueue", "", "foreign") in client.store
    many = [results.ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", n) for n in ("foreign", "gone-1", "gone-2")]
    result = ae.ApplyEngine(client, concurrency=3).delete(many)
    assert [r.ref.name for r in result.by_action("deleted")] == ["foreign"]
    assert client.store == {}
