# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node pools grown through Kueue's ProvisioningRequest admission check (issue 23): the inventory parser, the
ProvisioningRequestConfig / AdmissionCheck builders, the ClusterQueues' checks and the v1beta1 conversion.

Expected objects are written from the Kueue v0.19.2 API (apis/kueue/v1beta2 provisioningrequestconfig_types.go,
admissioncheck_types.go, clusterqueue_types.go), not from the builders' output."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import convert_for_version
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as NP
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy

LABELS = {"app.kubernetes.io/managed-by": "gpuaas.platform", "gpuaas.io/component": "node-pools"}
POOL_LABELS = {"gpuaas.io/pool": "h100"}


def pr_pool(**extra):
    pool = {"name": "h100", "flavor": "h100-elastic", "target": {"kind": "MachineSet", "name": "gpu-h100-a"},
            "max_nodes": 4, "gpus_per_node": 8, "node_labels": POOL_LABELS, "scale_by": "provisioning_request"}
    pool.update(extra)
    return pool


def inventory(pools, prometheus=None):
    return {
        "gpuaas_flavors": [{"name": "h100-elastic", "node_labels": POOL_LABELS},
                           {"name": "a100", "node_labels": {"gpuaas.io/pool": "a100"}}],
        "gpuaas_tenants": [
            {"name": "nlp", "namespaces": ["nlp"],
             "quotas": [{"flavor": "h100-elastic", "resources": {"nvidia.com/gpu": 32}},
                        {"flavor": "a100", "resources": {"nvidia.com/gpu": 0}}]},
            {"name": "vision", "namespaces": ["vision"],
             "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 0}}]}],
        "gpuaas_prometheus": prometheus or {},
        "gpuaas_node_pools": pools,
    }


def problems(inv):
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inv)
    return info.value.problems


# -- the inventory -----------------------------------------------------------------------------------------

def test_keda_stays_the_default():
    pool = TenantModel.from_inventory(inventory([pr_pool(scale_by="keda")])).node_pools[0]
    assert pool.scale_by == "keda" and pool.provisioning is None
    del_scale_by = pr_pool()
    del del_scale_by["scale_by"]
    assert TenantModel.from_inventory(inventory([del_scale_by])).node_pools[0].scale_by == "keda"


def test_a_provisioning_request_pool_parses_with_kueues_defaults():
    pool = TenantModel.from_inventory(inventory([pr_pool()])).node_pools[0]
    settings = pool.provisioning
    assert pool.scale_by == "provisioning_request"
    assert settings.provisioning_class == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert settings.managed_resources == ["nvidia.com/gpu"]  # the pool's GPU resource, not "every resource"
    assert (settings.backoff_limit_count, settings.backoff_base_seconds, settings.backoff_max_seconds) == (3, 60, 1800)
    assert settings.parameters == {}


def test_check_capacity_and_explicit_settings():
    pool = TenantModel.from_inventory(inventory([pr_pool(gpu_resource="amd.com/gpu", provisioning={
        "class": "check-capacity.autoscaling.x-k8s.io", "managed_resources": ["amd.com/gpu", "example.com/nic"],
        "parameters": {"maxRunDurationSeconds": "3600"},
        "retry": {"backoff_limit_count": 0, "backoff_base_seconds": 5, "backoff_max_seconds": 5}})])).node_pools[0]
    settings = pool.provisioning
    assert settings.provisioning_class == "check-capacity.autoscaling.x-k8s.io"
    assert settings.managed_resources == ["amd.com/gpu", "example.com/nic"]
    assert settings.parameters == {"maxRunDurationSeconds": "3600"}
    assert (settings.backoff_limit_count, settings.backoff_base_seconds, settings.backoff_max_seconds) == (0, 5, 5)


def test_every_provisioning_problem_is_reported_at_once_with_its_path():
    found = problems(inventory([pr_pool(idle_seconds=60, polling_interval=5, provisioning={
        "class": "queued-provisioning.gke.io", "managed_resources": ["nvidia.com/gpu", "nvidia.com/gpu", "bad key!"],
        "parameters": {"maxRunDurationSeconds": 3600},
        "retry": {"backoff_limit_count": -1, "backoff_base_seconds": 600, "backoff_max_seconds": 60,
                  "backof_max": 1},
        "clas": "x"}), pr_pool(name="keda", flavor="a100", node_labels={"gpuaas.io/pool": "a100"},
                               target={"name": "gpu-a100"}, scale_by="karpenter",
                               provisioning={"class": "check-capacity.autoscaling.x-k8s.io"})]))
    assert sorted(found) == sorted([
        "gpuaas_node_pools[0].idle_seconds: is only read with scale_by: keda: the cluster autoscaler sizes this pool "
        "and removes its unneeded nodes itself (its --scale-down-unneeded-time); remove the key",
        "gpuaas_node_pools[0].polling_interval: is only read with scale_by: keda: the cluster autoscaler sizes this "
        "pool and removes its unneeded nodes itself (its --scale-down-unneeded-time); remove the key",
        "gpuaas_node_pools[0].provisioning.clas: unknown key (did you mean 'class'?)",
        "gpuaas_node_pools[0].provisioning.class: 'queued-provisioning.gke.io' is not one of the cluster autoscaler's "
        "classes best-effort-atomic-scale-up.autoscaling.x-k8s.io, check-capacity.autoscaling.x-k8s.io",
        "gpuaas_node_pools[0].provisioning.managed_resources[1]: 'nvidia.com/gpu' is listed twice",
        "gpuaas_node_pools[0].provisioning.managed_resources[2]: 'bad key!' is not a resource name (e.g. nvidia.com/gpu)",
        "gpuaas_node_pools[0].provisioning.parameters.maxRunDurationSeconds: must be a string of at most 255 "
        "characters (quote numbers), got 3600",
        "gpuaas_node_pools[0].provisioning.retry.backof_max: unknown key (did you mean 'backoff_max_seconds'?)",
        "gpuaas_node_pools[0].provisioning.retry.backoff_limit_count: must be at least 0, got -1",
        "gpuaas_node_pools[0].provisioning.retry.backoff_max_seconds: must be at least backoff_base_seconds (600)",
        "gpuaas_node_pools[1].scale_by: 'karpenter' is not one of keda, provisioning_request",
        "gpuaas_node_pools[1].provisioning: is only read with scale_by: provisioning_request (this pool has "
        "scale_by: keda)",
    ])


def test_the_pools_of_one_flavor_grow_one_way_with_one_config():
    second = dict(target={"name": "gpu-h100-b"}, name="h100-b")
    found = problems(inventory([pr_pool(), pr_pool(scale_by="keda", **second)]))
    assert found == ["gpuaas_node_pools[1].scale_by: keda, but gpuaas_node_pools[0] (h100) on the same flavor "
                     "'h100-elastic' has scale_by: provisioning_request; the pools of one flavor grow one way"]
    found = problems(inventory([pr_pool(), pr_pool(provisioning={"retry": {"backoff_limit_count": 1}}, **second)]))
    assert found == ["gpuaas_node_pools[1].provisioning: differs from gpuaas_node_pools[0] (h100) on the same flavor "
                     "'h100-elastic': Kueue checks a flavor with one ProvisioningRequestConfig; give both pools the "
                     "same provisioning settings"]
    # two pools (two zones' MachineSets) with the same settings: one check for the flavor
    model = TenantModel.from_inventory(inventory([pr_pool(), pr_pool(**second)]))
    objs = NP.desired_objects(model, LABELS)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("ProvisioningRequestConfig", "gpuaas-provisioning-h100-elastic"),
        ("AdmissionCheck", "gpuaas-provisioning-h100-elastic")]


def test_the_pools_maximum_still_counts_as_the_flavors_capacity():
    model = TenantModel.from_inventory(inventory([pr_pool()]), nodes=[])
    assert model.capacity["h100-elastic"] == {"nvidia.com/gpu": "32"}
    inv = inventory([pr_pool()])
    inv["gpuaas_tenants"][0]["quotas"][0]["resources"]["nvidia.com/gpu"] = 40
    with pytest.raises(InventoryError, match="quotas ask for 40 nvidia.com/gpu on flavor 'h100-elastic'"):
        TenantModel.from_inventory(inv, nodes=[])


# -- the objects ---------------------------------------------------------------------------------------------

def test_a_provisioning_request_pool_gets_config_and_check_and_no_scaled_object():
    model = TenantModel.from_inventory(inventory([pr_pool()]))  # no Prometheus at all
    objs = NP.desired_objects(model, LABELS, prometheus_token="t0ken")
    assert objs == [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
         "metadata": {"name": "gpuaas-provisioning-h100-elastic", "labels": LABELS},
         "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                  "managedResources": ["nvidia.com/gpu"],
                  "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
         "metadata": {"name": "gpuaas-provisioning-h100-elastic", "labels": LABELS},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                 "name": "gpuaas-provisioning-h100-elastic"}}},
    ]


def test_parameters_go_to_the_config():
    model = TenantModel.from_inventory(inventory([pr_pool(provisioning={"parameters": {"ValidUntilSeconds": "600"}})]))
    config = NP.desired_objects(model, LABELS)[0]
    assert config["spec"]["parameters"] == {"ValidUntilSeconds": "600"}


def test_a_keda_pool_beside_keeps_its_scaled_object_and_credential():
    keda_pool = pr_pool(name="a100", flavor="a100", target={"name": "gpu-a100"}, scale_by="keda",
                        node_labels={"gpuaas.io/pool": "a100"})
    model = TenantModel.from_inventory(inventory([pr_pool(), keda_pool], prometheus={"url": "http://prom:9090"}))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in NP.desired_objects(model, LABELS, prometheus_token="t0ken")]
    assert kinds == [("Secret", "gpuaas-prometheus-node-pools"),
                     ("ClusterTriggerAuthentication", "gpuaas-prometheus-node-pools"),
                     ("ScaledObject", "gpuaas-pool-a100"),
                     ("ProvisioningRequestConfig", "gpuaas-provisioning-h100-elastic"),
                     ("AdmissionCheck", "gpuaas-provisioning-h100-elastic")]


def cluster_queues(model):
    return {o["metadata"]["name"]: o for o in tenancy.desired_objects(model) if o["kind"] == "ClusterQueue"}


def test_only_cluster_queues_with_quota_on_the_flavor_get_the_check_on_that_flavor():
    cqs = cluster_queues(TenantModel.from_inventory(inventory([pr_pool()])))
    assert cqs["nlp"]["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "gpuaas-provisioning-h100-elastic", "onFlavors": ["h100-elastic"]}]}
    assert "admissionChecksStrategy" not in cqs["vision"]["spec"]  # a100 only: not held by the h100 check


def test_without_provisioning_pools_the_cluster_queues_are_unchanged():
    keda_pool = pr_pool(scale_by="keda")
    with_keda = cluster_queues(TenantModel.from_inventory(inventory([keda_pool], prometheus={"url": "http://p:9090"})))
    without = cluster_queues(TenantModel.from_inventory(inventory([])))
    assert with_keda == without
    assert all("admissionChecksStrategy" not in cq["spec"] for cq in without.values())


def test_the_check_survives_the_v1beta1_conversion_with_its_flavor():
    cq = cluster_queues(TenantModel.from_inventory(inventory([pr_pool()])))["nlp"]
    old = convert_for_version(copy.deepcopy(cq), "v1beta1")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert old["spec"]["admissionChecksStrategy"] == cq["spec"]["admissionChecksStrategy"]
    assert "admissionChecks" not in old["spec"]


def test_the_tenants_role_documents_every_provisioning_key():
    import os
    import yaml
    from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import node_pools as inv
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    with open(os.path.join(root, "roles", "tenants", "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]["gpuaas_node_pools"]["options"]
    assert spec["scale_by"]["choices"] == list(inv.SCALE_BY)
    assert sorted(spec["provisioning"]["options"]) == sorted(inv.PROVISIONING_KEYS)
    assert spec["provisioning"]["options"]["class"]["choices"] == list(inv.PROVISIONING_CLASSES)
    retry = spec["provisioning"]["options"]["retry"]["options"]
    assert {k: v["default"] for k, v in retry.items()} == inv.DEFAULT_RETRY
