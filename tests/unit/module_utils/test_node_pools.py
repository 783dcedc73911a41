# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuaas_node_pools (issue 13): inventory model, ScaledObject builder, safe scale-down planner, role contract."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import model as M
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as NP

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
POOL_LABELS = {"gpuaas.io/pool": "h100", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def inventory(quota=32, pools=None, flavor_labels=None):
    return {
        "gpuaas_flavors": [{"name": "h100-elastic", "node_labels": flavor_labels or {"gpuaas.io/pool": "h100"}}],
        "gpuaas_tenants": [{"name": "nlp", "namespaces": ["nlp"],
                            "quotas": [{"flavor": "h100-elastic", "resources": {"nvidia.com/gpu": quota}}]}],
        "gpuaas_prometheus": {"url": "http://prometheus:9090"},
        "gpuaas_node_pools": pools if pools is not None else [{
            "name": "h100", "flavor": "h100-elastic", "target": {"kind": "MachineSet", "name": "gpu-h100-a"},
            "max_nodes": 4, "gpus_per_node": 8, "node_labels": POOL_LABELS, "idle_seconds": 300}],
    }


def problems(inv, nodes=None):
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inv, nodes)
    return info.value.problems


# -- model -------------------------------------------------------------------------------------------------

def test_a_pool_parses_with_its_defaults():
    pool = TenantModel.from_inventory(inventory()).node_pools[0]
    assert (pool.target_kind, pool.target_api_version, pool.target_namespace) == (
        "MachineSet", "machine.openshift.io/v1beta1", "openshift-machine-api")
    assert (pool.min_nodes, pool.max_nodes, pool.gpus_per_node, pool.gpu_resource) == (0, 4, 8, "nvidia.com/gpu")
    assert (pool.idle_seconds, pool.provisioning_seconds, pool.polling_interval, pool.include_pending) == (300, 600, 15, False)


def test_a_pools_own_timings_are_kept():
    # provisioning_seconds 0 (a lab pool whose nodes are used at once) must not fall back to the default 600: the
    # merge of scale_by once overwrote it (caught by test_least_privilege's scale-down on the lab)
    inv = inventory()
    inv["gpuaas_node_pools"][0].update(provisioning_seconds=0, idle_seconds=0, polling_interval=5)
    pool = TenantModel.from_inventory(inv).node_pools[0]
    assert (pool.provisioning_seconds, pool.idle_seconds, pool.polling_interval) == (0, 0, 5)
    inv["gpuaas_node_pools"][0]["provisioning_seconds"] = 120
    assert TenantModel.from_inventory(inv).node_pools[0].provisioning_seconds == 120


def test_quota_for_the_pools_maximum_validates_at_zero_nodes():
    model = TenantModel.from_inventory(inventory(quota=32), nodes=[])
    assert model.capacity == {"h100-elastic": {"nvidia.com/gpu": "32"}}


def test_quota_above_the_pools_maximum_is_an_error():
    found = problems(inventory(quota=40), nodes=[])
    assert len(found) == 1
    assert "quotas ask for 40 nvidia.com/gpu on flavor 'h100-elastic' (nlp=40) but the matching nodes offer 32" in found[0]


def test_live_pool_nodes_are_not_counted_twice():
    nodes = [{"name": "n%d" % i, "labels": POOL_LABELS, "allocatable": {"nvidia.com/gpu": "8"}} for i in range(3)]
    assert TenantModel.from_inventory(inventory(quota=32), nodes).capacity["h100-elastic"]["nvidia.com/gpu"] == "32"


def test_without_the_pool_the_same_quota_is_refused():
    found = problems(inventory(quota=32, pools=[]), nodes=[])
    assert "but the matching nodes offer 0" in found[0]


def test_a_pool_whose_nodes_lack_the_flavors_labels_is_an_error():
    inv = inventory(flavor_labels={"gpuaas.io/pool": "h100", "cloud.example/zone": "a"})
    found = problems(inv)
    assert found == ["gpuaas_node_pools[0].node_labels: the pool's node template does not give its nodes the node labels "
                     "of flavor 'h100-elastic' (cloud.example/zone=a (has nothing)): Kueue would place the pool's workloads "
                     "on nodes the pool never creates; set them in the MachineSet/MachineDeployment template and in "
                     "node_labels"]


@pytest.mark.parametrize("change,path,text", [
    ({"flavor": "h200"}, "gpuaas_node_pools[0].flavor", "unknown flavor 'h200'"),
    ({"min_nodes": 5}, "gpuaas_node_pools[0].max_nodes", "must be at least min_nodes (5)"),
    ({"max_nodes": None}, "gpuaas_node_pools[0].max_nodes", "is required"),
    ({"gpus_per_node": 0}, "gpuaas_node_pools[0].gpus_per_node", "must be at least 1"),
    ({"target": {"kind": "Deployment", "name": "x", "namespace": "y"}}, "gpuaas_node_pools[0].target.kind",
     "'Deployment' is not one of MachineSet, MachineDeployment"),
    ({"target": {"kind": "MachineDeployment", "name": "x"}}, "gpuaas_node_pools[0].target.namespace", "is required"),
    ({"max_node": 4}, "gpuaas_node_pools[0].max_node", "unknown key (did you mean 'max_nodes'?)"),
    ({"gpu_resource": "cpu"}, "gpuaas_node_pools[0].gpu_resource", "not an accelerator resource"),
])
def test_pool_problems_have_paths(change, path, text):
    pool = dict(inventory()["gpuaas_node_pools"][0], **change)
    if change.get("max_nodes", 1) is None:
        pool.pop("max_nodes")
    found = problems(inventory(pools=[pool]))
    assert any(p.startswith(path + ":") and text in p for p in found), found


def test_two_pools_on_one_target_are_refused():
    pool = inventory()["gpuaas_node_pools"][0]
    found = problems(inventory(pools=[pool, dict(pool, name="h100-b")]))
    assert found == ["gpuaas_node_pools[1].target: MachineSet openshift-machine-api/gpu-h100-a is already the target of "
                     "gpuaas_node_pools[0]"]


# -- builders ----------------------------------------------------------------------------------------------

def test_scaled_object_scales_the_machineset_from_reserved_quota():
    model = TenantModel.from_inventory(inventory())
    objs = NP.desired_objects(model, {"app.kubernetes.io/managed-by": "gpuaas.platform"})
    assert len(objs) == 1  # no token, no CA: no credential objects
    so = objs[0]
    assert so["metadata"]["name"] == "gpuaas-pool-h100" and so["metadata"]["namespace"] == "openshift-machine-api"
    assert so["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuaas.platform", "gpuaas.io/node-pool": "h100"}
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "gpu-h100-a"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["cooldownPeriod"], spec["pollingInterval"]) == (0, 4, 300, 15)
    trigger = spec["triggers"][0]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"] == {
        "serverAddress": "http://prometheus:9090",
        "query": 'sum(kueue_cluster_queue_resource_reservation{flavor="h100-elastic",resource="nvidia.com/gpu",'
                 'replica_role!="follower"}) or vector(0)',
        "threshold": "8", "activationThreshold": "0"}
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"] == {"selectPolicy": "Disabled"}
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0


def test_pending_gpus_of_the_flavors_queues_are_added_on_request():
    inv = inventory()
    inv["gpuaas_node_pools"][0]["include_pending"] = True
    inv["gpuaas_tenants"].append({"name": "cv", "namespaces": ["cv"],
                                  "quotas": [{"flavor": "h100-elastic", "resources": {"nvidia.com/gpu": 0}}]})
    inv["gpuaas_tenants"].append({"name": "other", "namespaces": ["other"], "quotas": []})
    so = NP.desired_objects(TenantModel.from_inventory(inv), {})[0]
    query = so["spec"]["triggers"][0]["metadata"]["query"]
    assert query == ('(sum(kueue_cluster_queue_resource_reservation{flavor="h100-elastic",resource="nvidia.com/gpu",'
                     'replica_role!="follower"}) or vector(0)) + (sum(kueue_cluster_queue_resource_pending{'
                     'cluster_queue=~"cv|nlp",resource="nvidia.com/gpu",replica_role!="follower"}) or vector(0))')


def test_authenticated_prometheus_gets_the_pools_own_credential():
    model = TenantModel.from_inventory(inventory())
    objs = NP.desired_objects(model, {}, prometheus_token="s3cret", keda_namespace="openshift-keda")
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds == [("Secret", "gpuaas-prometheus-node-pools"),
                     ("ClusterTriggerAuthentication", "gpuaas-prometheus-node-pools"),
                     ("ScaledObject", "gpuaas-pool-h100")]
    assert objs[1]["spec"]["secretTargetRef"][0]["name"] == "gpuaas-prometheus-node-pools"
    trigger = objs[2]["spec"]["triggers"][0]
    assert trigger["authenticationRef"] == {"name": "gpuaas-prometheus-node-pools", "kind": "ClusterTriggerAuthentication"}
    assert trigger["metadata"]["authModes"] == "bearer"


def test_no_pools_no_objects():
    assert NP.desired_objects(TenantModel.from_inventory(inventory(pools=[])), {}) == []


def test_template_labels_capi_propagates_only_node_domains():
    md = {"kind": "MachineDeployment", "spec": {"template": {"metadata": {"labels": {
        "node.cluster.x-k8s.io/pool": "h100", "node-role.kubernetes.io/gpu": "", "cluster.x-k8s.io/deployment-name": "md",
        "gpuaas.io/pool": "h100"}}}}}
    assert NP.template_node_labels(md) == {"node.cluster.x-k8s.io/pool": "h100", "node-role.kubernetes.io/gpu": ""}
    ms = {"kind": "MachineSet", "spec": {"template": {"metadata": {"labels": {"a": "b"}},
                                                      "spec": {"metadata": {"labels": {"gpuaas.io/pool": "h100"}}}}}}
    assert NP.template_node_labels(ms) == {"gpuaas.io/pool": "h100"}


# -- safe scale-down planner -------------------------------------------------------------------------------

NOW = 1_800_000_000.0


def stamp(seconds_before_now: float) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(NOW - seconds_before_now, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def machine(name, node=None):
    out = {"metadata": {"name": name}, "status": {}}
    if node:
        out["status"]["nodeRef"] = {"kind": "Node", "name": node}
    return out


def node(name, age=3600):
    return {"metadata": {"name": name, "creationTimestamp": stamp(age)}}


def pod(name, node_name=None, phase="Running", gpus=8, finished_ago=None, daemon=False, selector=None):
    p = {"metadata": {"name": name, "ownerReferences": [{"kind": "DaemonSet"}] if daemon else []},
         "spec": {"nodeName": node_name, "nodeSelector": selector or {},
                  "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}]},
         "status": {"phase": phase}}
    if finished_ago is not None:
        p["status"]["containerStatuses"] = [{"state": {"terminated": {"finishedAt": stamp(finished_ago)}}}]
    return p


def pool(**kw):
    inv = inventory()
    inv["gpuaas_node_pools"][0].update(kw)
    return TenantModel.from_inventory(inv).node_pools[0]


def four_nodes():
    machines = [machine("m%d" % i, "n%d" % i) for i in range(4)]
    nodes = {"n%d" % i: node("n%d" % i) for i in range(4)}
    return machines, nodes


def test_one_busy_three_idle_removes_exactly_the_idle_ones():
    machines, nodes = four_nodes()
    pods = [pod("busy", "n2")] + [pod("done%d" % i, "n%d" % i, "Succeeded", finished_ago=400) for i in (0, 1, 3)]
    plan = NP.plan_scale_down(pool(idle_seconds=300), machines, nodes, pods, NOW)
    assert sorted(x["node"] for x in plan["remove"]) == ["n0", "n1", "n3"]
    assert sorted(x["machine"] for x in plan["remove"]) == ["m0", "m1", "m3"]
    assert plan["busy"] == ["n2"]


def test_a_node_with_any_unfinished_pod_is_never_chosen():
    machines, nodes = four_nodes()
    pods = [pod("gpu", "n0"), pod("cpu-only", "n1", gpus=0), pod("starting", "n2", phase="Pending")]
    plan = NP.plan_scale_down(pool(idle_seconds=0), machines, nodes, pods, NOW)
    assert [x["node"] for x in plan["remove"]] == ["n3"]
    assert plan["busy"] == ["n0", "n1", "n2"]


def test_daemonset_pods_do_not_make_a_node_busy():
    machines, nodes = four_nodes()
    pods = [pod("dcgm-%d" % i, "n%d" % i, gpus=0, daemon=True) for i in range(4)]
    plan = NP.plan_scale_down(pool(idle_seconds=0), machines, nodes, pods, NOW)
    assert len(plan["remove"]) == 4


def test_recently_idle_nodes_wait_for_idle_seconds():
    machines, nodes = four_nodes()
    pods = [pod("a", "n0", "Succeeded", finished_ago=100), pod("b", "n1", "Succeeded", finished_ago=500)]
    plan = NP.plan_scale_down(pool(idle_seconds=300), machines, nodes, pods, NOW)
    assert sorted(x["node"] for x in plan["remove"]) == ["n1", "n2", "n3"]  # n2, n3 idle since creation (1 h)
    assert plan["idle_kept"] == ["n0"]


def test_new_unused_nodes_and_provisioning_machines_stay():
    machines = [machine("m0", "n0"), machine("m1")]
    nodes = {"n0": node("n0", age=60)}
    plan = NP.plan_scale_down(pool(idle_seconds=0, provisioning_seconds=600), machines, nodes, [], NOW)
    assert plan["remove"] == [] and plan["provisioning"] == ["m0", "m1"]


def test_idle_nodes_are_kept_for_unscheduled_pods_of_the_pool_and_for_min_nodes():
    machines, nodes = four_nodes()
    waiting = [pod("w%d" % i, None, "Pending", selector={"gpuaas.io/pool": "h100"}) for i in range(2)]
    elsewhere = [pod("x", None, "Pending", selector={"gpuaas.io/pool": "a100"})]
    plan = NP.plan_scale_down(pool(idle_seconds=0), machines, nodes, waiting + elsewhere, NOW)
    assert plan["waiting_gpus"] == 16 and len(plan["remove"]) == 2 and len(plan["idle_kept"]) == 2
    plan = NP.plan_scale_down(pool(idle_seconds=0, min_nodes=3), machines, nodes, [], NOW)
    assert len(plan["remove"]) == 1


# -- the role's contract -----------------------------------------------------------------------------------

def test_the_tenants_role_documents_every_pool_key():
    with open(os.path.join(ROOT, "roles", "tenants", "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]["gpuaas_node_pools"]
    assert sorted(spec["options"]) == sorted(M.NODE_POOL_KEYS)
    assert sorted(spec["options"]["target"]["options"]) == sorted(M.NODE_POOL_TARGET_KEYS)
    with open(os.path.join(ROOT, "roles", "tenants", "defaults", "main.yml")) as handle:
        assert yaml.safe_load(handle)["gpuaas_node_pools"] == []
