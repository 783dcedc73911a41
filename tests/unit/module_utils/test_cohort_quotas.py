# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpuaas_cohorts[].quotas`` (issue 26): a cohort's shared quota, from the inventory to the Cohort's
``spec.resourceGroups``, its validation (every problem at once), the capacity check, the refusal on a cluster that
cannot hold it, and the way back (kueue_import).

Expected objects and messages are written by hand from Kueue v0.19.2's Cohort API and webhook
(pkg/webhooks/cohort_webhook.go: limits only with a parent; no lending <= nominal rule for a Cohort).
"""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.openshift_ai import max_count
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import kueue_versions
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils import kueue_options as kueue
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_import, tenancy

from .fake_kube import FakeClient

GPU = "nvidia.com/gpu"
NODES = [{"name": "gpu-%d" % i, "labels": {"pool": "h100"}, "allocatable": {GPU: "8"}} for i in range(2)]


def department_inventory() -> dict:
    """KEP-1714's organisation -> departments -> teams: departments hold the budgets, teams hold nothing."""
    team_quota = [{"flavor": "h100", "resources": {GPU: 0, "cpu": 0}}]
    return {
        "gpuaas_flavors": [{"name": "h100", "node_labels": {"pool": "h100"}}],
        "gpuaas_cohorts": [
            {"name": "org"},
            {"name": "nlp", "parent": "org",
             "quotas": [{"flavor": "h100", "resources": {GPU: 10, "cpu": 200}, "borrowing_limit": {GPU: 0}}]},
            {"name": "vision", "parent": "org",
             "quotas": [{"flavor": "h100", "resources": {GPU: 6}, "lending_limit": {GPU: 2}}]},
        ],
        "gpuaas_tenants": [
            {"name": "nlp-a", "namespaces": ["nlp-a"], "cohort": "nlp", "quotas": copy.deepcopy(team_quota)},
            {"name": "nlp-b", "namespaces": ["nlp-b"], "cohort": "nlp", "quotas": copy.deepcopy(team_quota)},
            {"name": "vision-a", "namespaces": ["vision-a"], "cohort": "vision",
             "quotas": [{"flavor": "h100", "resources": {GPU: 0}}]},
        ],
    }


def problems(inventory, nodes=None):
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inventory, nodes)
    return info.value.problems


def cohort_objects(inventory):
    model = TenantModel.from_inventory(inventory)
    return {o["metadata"]["name"]: o for o in tenancy.shared_objects(model) if o["kind"] == "Cohort"}


def test_department_budgets_become_the_cohorts_resource_groups():
    cohorts = cohort_objects(department_inventory())
    assert cohorts["org"]["spec"] == {}
    assert cohorts["nlp"]["spec"] == {"parentName": "org", "resourceGroups": [
        {"coveredResources": [GPU, "cpu"], "flavors": [{"name": "h100", "resources": [
            {"name": GPU, "nominalQuota": "10", "borrowingLimit": "0"},
            {"name": "cpu", "nominalQuota": "200"}]}]}]}
    assert cohorts["vision"]["spec"] == {"parentName": "org", "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [
            {"name": GPU, "nominalQuota": "6", "lendingLimit": "2"}]}]}]}


def test_every_problem_of_every_cohort_is_reported_at_once():
    inv = department_inventory()
    inv["gpuaas_cohorts"][0]["quotas"] = [                                    # org: a root
        {"flavor": "h100", "resources": {GPU: 4}, "borrowing_limit": {GPU: 1}},
        {"flavor": "a100", "resources": {GPU: 2}},
    ]
    inv["gpuaas_cohorts"][1]["quotas"][0]["resources"][GPU] = -2
    inv["gpuaas_cohorts"][1]["quotas"][0]["lending_limit"] = {"memory": "1Gi"}
    inv["gpuaas_cohorts"][2]["quotas"][0]["lending_limit"] = {GPU: 7}         # vision's subtree holds 6 + 0
    inv["gpuaas_cohorts"][2]["quotas"].append({"flavor": "h100", "resources": {GPU: 1}})
    found = problems(inv)
    assert found == [
        "gpuaas_cohorts[0].quotas[0].borrowing_limit: borrowing_limit needs the cohort to have a parent: a Cohort's "
        "limits bound what its subtree borrows from and lends to its parent, and Kueue refuses them on a root Cohort "
        "(set gpuaas_cohorts[].parent)",
        "gpuaas_cohorts[0].quotas[1].flavor: unknown flavor 'a100' (did you mean 'h100'?); defined: h100",
        "gpuaas_cohorts[1].quotas[0].resources.nvidia.com/gpu: must not be negative, got -2",
        # the invalid nominal is left out, so its limit has nothing to limit either
        "gpuaas_cohorts[1].quotas[0].borrowing_limit.nvidia.com/gpu: resource 'nvidia.com/gpu' has no nominal quota "
        "in resources",
        "gpuaas_cohorts[1].quotas[0].lending_limit.memory: resource 'memory' has no nominal quota in resources",
        "gpuaas_cohorts[2].quotas[1].flavor: flavor 'h100' is listed twice (also quotas[0]); merge the resources",
        "gpuaas_cohorts[2].quotas[0].lending_limit.nvidia.com/gpu: lending limit 7 is above what cohort vision's "
        "subtree holds of nvidia.com/gpu on flavor h100 (6: its own nominal quota plus its members'); lower it, or "
        "raise the quotas it lends",
    ]


def test_a_cohort_may_lend_its_members_quota_beyond_its_own_nominal():
    # Kueue's webhook checks lending <= nominal on ClusterQueues only: a Cohort's lending limit bounds its subtree.
    inv = department_inventory()
    inv["gpuaas_tenants"][2]["quotas"][0]["resources"][GPU] = 3              # vision's subtree: 6 + 3 = 9
    inv["gpuaas_cohorts"][2]["quotas"][0]["lending_limit"] = {GPU: 9}
    spec = cohort_objects(inv)["vision"]["spec"]
    assert spec["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": GPU, "nominalQuota": "6", "lendingLimit": "9"}]
    inv["gpuaas_cohorts"][2]["quotas"][0]["lending_limit"] = {GPU: 10}
    assert [p.split(":")[0] for p in problems(inv)] == ["gpuaas_cohorts[2].quotas[0].lending_limit.nvidia.com/gpu"]
    # the ClusterQueue keeps Kueue's rule
    inv = department_inventory()
    inv["gpuaas_tenants"][2]["quotas"][0]["lending_limit"] = {GPU: 1}
    assert problems(inv) == ["gpuaas_tenants[2].quotas[0].lending_limit.nvidia.com/gpu: lending limit 1 is above the "
                             "nominal quota 0"]


def test_cohort_builder_follows_kueue_lending_rule_per_kind():
    groups = [{"flavors": [{"name": "h100", "resources": {GPU: {"nominal_quota": 0, "lending_limit": 4}}}]}]
    assert kueue.cohort("dept", parent="org", resource_groups=groups)["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"] == [{"name": GPU, "nominalQuota": "0", "lendingLimit": "4"}]
    with pytest.raises(GpuaasError, match="lending_limit 4 is above nominal_quota 0"):
        kueue.cluster_queue("team", resource_groups=groups, cohort="dept")


def test_cohort_quota_counts_against_the_flavor_capacity():
    inv = department_inventory()                                              # 10 + 6 = 16 GPUs on 2 x 8
    model = TenantModel.from_inventory(inv, NODES)
    assert model.capacity == {"h100": {GPU: "16"}}
    inv["gpuaas_tenants"][0]["quotas"][0]["resources"][GPU] = 1               # one more GPU, held by a team
    assert problems(inv, NODES) == [
        "gpuaas_flavors[0]: quotas ask for 17 nvidia.com/gpu on flavor 'h100' (nlp-a=1, nlp-b=0, vision-a=0, "
        "cohort nlp=10, cohort vision=6) but the matching nodes offer 16; lower the quotas, add nodes, check the "
        "flavor's node_labels, or set gpuaas_allow_overcommit: true"]
    inv["gpuaas_allow_overcommit"] = True
    assert any("allowed by gpuaas_allow_overcommit" in w for w in TenantModel.from_inventory(inv, NODES).warnings)


def test_cohort_quotas_are_refused_in_a_multikueue_fleet():
    inv = department_inventory()
    inv["gpuaas_clusters"] = {
        "manager": {"name": "hub", "auth": {"kubeconfig": "/etc/gpuaas/hub.kubeconfig"}},
        "workers": [{"name": "east", "auth": {"kubeconfig": "/etc/gpuaas/fleet.kubeconfig", "context": "east"},
                     "flavors": [{"name": "h100", "capacity": {GPU: 16, "cpu": 256}}]}]}
    found = problems(inv)
    assert [p.split(":")[0] for p in found] == ["gpuaas_cohorts[1].quotas", "gpuaas_cohorts[2].quotas"]
    assert "not supported with gpuaas_clusters" in found[0]


def test_the_lab_inventory_builds_the_same_cohorts_without_quotas():
    inv = department_inventory()
    for cohort in inv["gpuaas_cohorts"]:
        cohort.pop("quotas", None)
    for tenant in inv["gpuaas_tenants"]:
        tenant["quotas"][0]["resources"][GPU] = 4
    assert all("resourceGroups" not in c["spec"] for c in cohort_objects(inv).values())


# -- the cluster's Kueue ------------------------------------------------------------------------------------------

def crd_client(spec_properties):
    client = FakeClient()
    client.kinds["apiextensions.k8s.io/v1"] = {"CustomResourceDefinition": ("customresourcedefinitions", False)}
    client.store[("CustomResourceDefinition", "", "cohorts.kueue.x-k8s.io")] = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "cohorts.kueue.x-k8s.io"},
        "spec": {"versions": [{"name": "v1beta2", "schema": {"openAPIV3Schema": {"properties": {"spec": {
            "properties": spec_properties}}}}}]}}
    return client


def test_which_clusters_can_hold_cohort_quota():
    assert kueue_versions.cohort_quota_unsupported(FakeClient(), "v1beta2") is None
    assert kueue_versions.cohort_quota_unsupported(
        crd_client({"parentName": {}, "resourceGroups": {}, "fairSharing": {}}), "v1beta2") is None
    pruned = kueue_versions.cohort_quota_unsupported(crd_client({"parentName": {}}), "v1beta2")
    assert pruned and "no spec.resourceGroups" in pruned
    old = FakeClient(("v1beta1",))
    del old.kinds["kueue.x-k8s.io/v1beta1"]["Cohort"]                         # Kueue before v0.9: no Cohort kind
    reason = kueue_versions.cohort_quota_unsupported(old, "v1beta1")
    assert reason and "serves no Kueue Cohort API" in reason
    # the v1beta1 Cohort of Kueue v0.11-v0.15 (the lab variant's v0.14 CRDs) holds resourceGroups as v1beta2 does
    beta1 = FakeClient(("v1beta1",))
    assert kueue_versions.cohort_quota_unsupported(beta1, "v1beta1") is None
    converted = kueue_versions.convert_for_version(cohort_objects(department_inventory())["nlp"], "v1beta1")
    assert converted["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert converted["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": GPU, "nominalQuota": "10", "borrowingLimit": "0"}


# -- the way back: kueue_import ------------------------------------------------------------------------------------

def test_imported_cohort_budgets_come_back_as_quotas():
    inv = department_inventory()
    client = FakeClient()
    model = TenantModel.from_inventory(inv)
    ApplyEngine(client).reconcile([o for o in tenancy.desired_objects(model)
                                   if o["kind"] in kueue_import.IMPORTED_KUEUE_KINDS + ("Namespace",)])
    objects = {kind: [copy.deepcopy(o) for (k, _ns, _n), o in sorted(client.store.items()) if k == kind]
               for kind in kueue_import.IMPORTED_KUEUE_KINDS + ("Namespace", "RoleBinding")}
    result = kueue_import.import_inventory(objects)
    assert result.inventory["gpuaas_cohorts"] == [
        {"name": "nlp", "parent": "org",
         "quotas": [{"flavor": "h100", "resources": {GPU: "10", "cpu": "200"}, "borrowing_limit": {GPU: "0"}}]},
        {"name": "org"},
        {"name": "vision", "parent": "org",
         "quotas": [{"flavor": "h100", "resources": {GPU: "6"}, "lending_limit": {GPU: "2"}}]},
    ]
    assert not [w for w in result.warnings if "Cohort" in w or "cohort" in w], result.warnings


def test_a_flavor_only_a_cohort_names_is_imported_too():
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
              "metadata": {"name": "dept", "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
              "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                  {"name": "l40s", "resources": [{"name": GPU, "nominalQuota": 3}]}]}]}}
    result = kueue_import.import_inventory({"Cohort": [cohort]})
    assert result.inventory["gpuaas_cohorts"] == [{"name": "dept", "quotas": [{"flavor": "l40s", "resources": {GPU: "3"}}]}]
    assert result.inventory["gpuaas_flavors"] == [{"name": "l40s"}]
    TenantModel.from_inventory(result.inventory)


def test_the_department_budgets_example_fits_four_h100_nodes_and_not_three():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    path = os.path.join(root, "playbooks", "inventory", "examples", "department-budgets", "group_vars", "all", "tenants.yml")
    with open(path) as handle:
        inv = yaml.safe_load(handle)
    node = {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "allocatable": {GPU: "8"}}
    nodes = [dict(node, name="h100-%d" % i) for i in range(4)]
    model = TenantModel.from_inventory(inv, nodes)                            # research 20 + production 12 = 32
    assert model.capacity == {"h100": {GPU: "32"}}
    assert all(q.resources[GPU] == "0" for x in model.tenants for q in x.quotas)
    found = problems(inv, nodes[:3])
    assert len(found) == 1 and "quotas ask for 32 nvidia.com/gpu" in found[0] and "offer 24" in found[0]


def test_a_zero_quota_team_can_get_its_departments_budget_in_one_workload():
    # OpenShift AI HardwareProfile maxCount: nlp-a has 0 of its own; its department nlp holds 10 (all of it) and the
    # other department vision holds 6 of which it lends at most 2: 0 + 10 + 2 = 12.
    model = TenantModel.from_inventory(department_inventory())
    cohorts = {c.name: c for c in model.cohorts}
    assert max_count(model.tenants[0], "h100", GPU, model.tenants, cohorts) == 12
    # vision-a: its department's 6 and all of nlp's 10 (nlp sets no lending limit)
    assert max_count(model.tenants[2], "h100", GPU, model.tenants, cohorts) == 16
