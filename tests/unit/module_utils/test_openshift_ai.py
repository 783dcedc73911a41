# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenShift AI coexistence (issue 23): HardwareProfiles from the inventory and OpenShift AI's trusted controllers.

Every expected value below is worked out by hand from the inventory it is built from (the example
playbooks/inventory/examples/openshift-ai, or the small inventories written here), not copied from the output.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission as admission_builders
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import openshift_ai, tenancy
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import TenancyRunner

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "playbooks" / "inventory" / "examples" / "openshift-ai" / "group_vars" / "all" / "tenants.yml"
OWNED = {"app.kubernetes.io/managed-by": "gpuaas.platform", "gpuaas.io/component": "tenants"}


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def plans_of(model: TenantModel):
    return [(p.name, p.namespace, p.tenant, p.local_queue, p.priority_class,
             [(i.identifier, i.resource_type, i.min_count, i.default_count, i.max_count) for i in p.identifiers])
            for p in model.hardware_profiles]


# llm-finetune: h100 8 GPUs + borrowing_limit 4 = 12; cpu 96 and memory 1Ti have no borrowing limit, so in cohort ai
# they add what fraud-ml (same cohort, no lending limit) has: cpu 96 + 64 = 160, memory 1Ti + 512Gi = 1536Gi.
# CPU/memory min/default from gpuaas_openshift_ai: 1/4 and 8Gi/32Gi.
LLM_IDS = [("nvidia.com/gpu", "Accelerator", 1, 1, 12), ("cpu", "CPU", 1, 4, 160),
           ("memory", "Memory", "8Gi", "32Gi", "1536Gi")]
# data-science: 7 MIG slices, nobody else has a100-mig-1g: 7; cpu 56; memory 280Gi.
DS_IDS = [("nvidia.com/mig-1g.10gb", "Accelerator", 1, 1, 7), ("cpu", "CPU", 1, 4, 56),
          ("memory", "Memory", "8Gi", "32Gi", "280Gi")]


def test_example_plans_one_profile_per_tenant_flavor_priority_and_project():
    model = TenantModel.from_inventory(example())
    assert plans_of(model) == [
        ("gpuaas-h100-batch", "llm-train", "llm-finetune", "default", "batch", LLM_IDS),
        ("gpuaas-h100-batch", "llm-notebooks", "llm-finetune", "default", "batch", LLM_IDS),
        ("gpuaas-h100-production", "llm-train", "llm-finetune", "default", "production", LLM_IDS),
        ("gpuaas-h100-production", "llm-notebooks", "llm-finetune", "default", "production", LLM_IDS),
        # no allowed_priorities: every class allowed, the profile names none (the workload's default priority)
        ("gpuaas-a100-mig-1g", "ds-notebooks", "data-science", "default", None, DS_IDS),
        # fraud-ml: hardware_profiles: false on the tenant
    ]


def test_rendered_profile_is_queue_scheduled_owned_by_the_tenant_and_has_no_node_scheduling():
    objs = tenancy.desired_objects(TenantModel.from_inventory(example()), "openshift")
    profiles = [o for o in objs if o["kind"] == "HardwareProfile"]
    assert len(profiles) == 5
    batch = next(o for o in profiles if o["metadata"]["name"] == "gpuaas-h100-batch"
                 and o["metadata"]["namespace"] == "llm-train")
    assert batch["apiVersion"] == "infrastructure.opendatahub.io/v1"
    assert batch["metadata"]["labels"] == dict(OWNED, **{"gpuaas.io/tenant": "llm-finetune"})
    assert batch["spec"] == {
        "identifiers": [
            {"displayName": "GPU", "identifier": "nvidia.com/gpu", "minCount": 1, "defaultCount": 1, "maxCount": 12,
             "resourceType": "Accelerator"},
            {"displayName": "CPU", "identifier": "cpu", "minCount": 1, "defaultCount": 4, "maxCount": 160,
             "resourceType": "CPU"},
            {"displayName": "Memory", "identifier": "memory", "minCount": "8Gi", "defaultCount": "32Gi",
             "maxCount": "1536Gi", "resourceType": "Memory"}],
        "scheduling": {"type": "Queue", "kueue": {"localQueueName": "default", "priorityClass": "batch"}}}
    notes = batch["metadata"]["annotations"]
    assert notes["opendatahub.io/display-name"] == "h100 GPU, priority batch (tenant llm-finetune)"
    assert notes["opendatahub.io/disabled"] == "false"
    assert "LocalQueue default" in notes["opendatahub.io/description"]
    mig = next(o for o in profiles if o["metadata"]["namespace"] == "ds-notebooks")
    assert mig["spec"]["scheduling"] == {"type": "Queue", "kueue": {"localQueueName": "default"}}
    # the one shared object: tenants may read (never write) the profiles of their projects
    (reader,) = [o for o in objs if o["metadata"]["name"] == openshift_ai.PROFILE_READER_ROLE]
    assert reader["rules"] == [{"apiGroups": ["infrastructure.opendatahub.io"], "resources": ["hardwareprofiles"],
                                "verbs": ["get", "list", "watch"]}]
    assert reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"


def test_no_section_no_profile_and_the_other_objects_are_the_same():
    inv = example()
    without = copy.deepcopy(inv)
    del without["gpuaas_openshift_ai"]
    for tenant in without["gpuaas_tenants"]:
        tenant.pop("hardware_profiles", None)
    plain = tenancy.desired_objects(TenantModel.from_inventory(without), "openshift")
    with_profiles = tenancy.desired_objects(TenantModel.from_inventory(inv), "openshift")
    assert not [o for o in plain if o["kind"] == "HardwareProfile"]
    assert [o for o in with_profiles if o["kind"] != "HardwareProfile"
            and o["metadata"]["name"] != openshift_ai.PROFILE_READER_ROLE] == plain


def test_global_scope_puts_tenant_named_profiles_in_the_applications_namespace():
    inv = example()
    inv["gpuaas_openshift_ai"].update(profiles_scope="global", applications_namespace="odh-apps")
    names = [(n, ns, q, prio) for n, ns, _t, q, prio, _ids in plans_of(TenantModel.from_inventory(inv))]
    assert names == [("gpuaas-llm-finetune-h100-batch", "odh-apps", "default", "batch"),
                     ("gpuaas-llm-finetune-h100-production", "odh-apps", "default", "production"),
                     ("gpuaas-data-science-a100-mig-1g", "odh-apps", "default", None)]


def test_project_scope_follows_each_namespace_queue_and_global_needs_one_queue_everywhere():
    inv = example()
    llm = inv["gpuaas_tenants"][0]
    llm.update(default_queue=False, queues=[{"name": "train", "namespaces": ["llm-train"]},
                                            {"name": "nb", "namespaces": ["llm-notebooks"]}])
    queues = {(n, ns): q for n, ns, _t, q, _p, _ids in plans_of(TenantModel.from_inventory(inv))}
    assert queues[("gpuaas-h100-batch", "llm-train")] == "train"
    assert queues[("gpuaas-h100-batch", "llm-notebooks")] == "nb"
    inv["gpuaas_openshift_ai"]["profiles_scope"] = "global"
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inv)
    assert [p.split(":")[0] for p in info.value.problems] == ["gpuaas_tenants[0].queues"]


def test_borrowing_bound_counts_the_whole_cohort_tree_and_lending_limits():
    inv = {
        "gpuaas_flavors": [{"name": "f"}],
        "gpuaas_cohorts": [{"name": "root"}, {"name": "left", "parent": "root"}, {"name": "right", "parent": "root"},
                           {"name": "other"}],
        "gpuaas_tenants": [
            {"name": "a", "namespaces": ["a1"], "cohort": "left", "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": 4}}]},
            {"name": "b", "namespaces": ["b1"], "cohort": "right", "hardware_profiles": False,
             "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": 6}, "lending_limit": {"nvidia.com/gpu": 2}}]},
            {"name": "c", "namespaces": ["c1"], "cohort": "left", "hardware_profiles": False,
             "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": 3}}]},
            {"name": "d", "namespaces": ["d1"], "cohort": "other", "hardware_profiles": False,
             "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": 10}}]},
            {"name": "gone", "namespaces": ["g1"], "cohort": "left", "state": "absent", "hardware_profiles": False,
             "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": 50}}]},
        ],
        "gpuaas_openshift_ai": {"hardware_profiles": True},
    }
    (plan,) = TenantModel.from_inventory(inv).hardware_profiles
    # a: own 4 + b's lending limit 2 (right, same root) + c's nominal 3 (left); d is another tree, gone is absent
    assert (plan.tenant, plan.identifiers[0].max_count) == ("a", 9)
    assert plan.identifiers[0].identifier == "nvidia.com/gpu" and len(plan.identifiers) == 1  # no cpu/memory quota


def test_two_accelerator_resources_in_one_flavor_get_one_profile_each_and_zero_gets_none():
    inv = {
        "gpuaas_flavors": [{"name": "a100"}, {"name": "spare"}],
        "gpuaas_tenants": [{"name": "t", "namespaces": ["t1"], "quotas": [
            {"flavor": "a100", "resources": {"nvidia.com/gpu": 2, "nvidia.com/mig-3g.40gb": 4}},
            {"flavor": "spare", "resources": {"nvidia.com/gpu": 0}}]}],
        "gpuaas_openshift_ai": {"hardware_profiles": True},
    }
    model = TenantModel.from_inventory(inv)
    assert [(n, ids[0][0], ids[0][4]) for n, _ns, _t, _q, _p, ids in plans_of(model)] == [
        ("gpuaas-a100-gpu", "nvidia.com/gpu", 2), ("gpuaas-a100-mig-3g.40gb", "nvidia.com/mig-3g.40gb", 4)]
    assert any("spare offers no whole nvidia.com/gpu" in w for w in model.warnings)


def test_every_bad_setting_is_reported_at_once_before_anything_is_built():
    inv = example()
    inv["gpuaas_openshift_ai"] = {"hardware_profiles": "yes", "profiles_scope": "cluster",
                                  "applications_namespace": "Bad_NS", "cpu": {"min": 4, "default": 2},
                                  "memory": {"default": "lots"}, "hardware_profile": True}
    inv["gpuaas_tenants"][2]["hardware_profiles"] = "no"
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inv)
    assert sorted(p.split(":")[0] for p in info.value.problems) == sorted([
        "gpuaas_openshift_ai.hardware_profile",  # unknown key (did you mean hardware_profiles?)
        "gpuaas_openshift_ai.hardware_profiles", "gpuaas_openshift_ai.profiles_scope",
        "gpuaas_openshift_ai.applications_namespace", "gpuaas_openshift_ai.cpu",
        "gpuaas_openshift_ai.memory.default", "gpuaas_tenants[2].hardware_profiles"])
    assert "did you mean 'hardware_profiles'" in " ".join(info.value.problems)


def test_a_default_above_what_the_tenant_can_get_is_an_error_naming_tenant_and_flavor():
    inv = example()
    inv["gpuaas_openshift_ai"]["cpu"] = {"min": 1, "default": 100}  # llm-finetune can get 160, data-science 56
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inv)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("gpuaas_tenants[1].quotas: tenant 'data-science' can get at most 56 of "
                                             "cpu in flavor a100-mig-1g")


def test_memory_and_cpu_counts_keep_their_units():
    assert openshift_ai.HWP_V == "infrastructure.opendatahub.io/v1"
    from decimal import Decimal
    from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.openshift_ai import profile_count
    assert profile_count(Decimal(3 * 2 ** 40), "memory") == "3Ti"
    assert profile_count(Decimal(1536 * 2 ** 20), "memory") == "1536Mi"
    assert profile_count(Decimal("1.5"), "cpu") == "1500m"
    assert profile_count(Decimal(12), "nvidia.com/gpu") == 12


# -- trusted controllers -------------------------------------------------------------------------------------------

KUBERAY = "system:serviceaccount:redhat-ods-applications:kuberay-operator"
TRAINING = "system:serviceaccount:redhat-ods-applications:kubeflow-training-operator"
CODEFLARE = "system:serviceaccount:redhat-ods-applications:codeflare-operator-controller-manager"
NOTEBOOK = "system:serviceaccount:redhat-ods-applications:notebook-controller-service-account"


def test_openshift_ai_controllers_are_trusted_only_for_frameworks_kueue_manages():
    ns = "redhat-ods-applications"
    assert openshift_ai.trusted_controllers(ns, ["batch/job", "pod"]) == []
    assert openshift_ai.trusted_controllers(ns, ["ray.io/raycluster"]) == [KUBERAY]
    assert openshift_ai.trusted_controllers(ns, ["kubeflow.org/pytorchjob", "statefulset"]) == [TRAINING, NOTEBOOK]
    assert openshift_ai.trusted_controllers(ns, ["workload.codeflare.dev/appwrapper"]) == [CODEFLARE]
    assert openshift_ai.trusted_controllers("odh", ["ray.io/rayjob"]) == [
        "system:serviceaccount:odh:kuberay-operator"]


class _Client:
    def __init__(self, served=()):
        self._served = set(served)

    def served(self, gv):
        return gv in self._served

    def resource(self, api_version, kind):  # every framework CRD served (kueue_frameworks auto)
        return object()


def _settings(platform, inventory, kueue_frameworks=None):
    runner = TenancyRunner(_Client(), {"admission": {}, "kueue_frameworks": kueue_frameworks})
    return runner.admission_settings(platform, TenantModel.from_inventory(inventory))


def test_runner_adds_them_on_openshift_or_with_the_section_and_the_policy_trusts_exactly_those():
    base = {k: v for k, v in example().items() if k != "gpuaas_openshift_ai"}
    assert not set(_settings("kubernetes", base).workload_controllers) & {KUBERAY, TRAINING, CODEFLARE, NOTEBOOK}
    on_openshift = _settings("openshift", base, ["batch/job", "ray.io/rayjob"])
    assert [u for u in on_openshift.workload_controllers if "redhat-ods-applications" in u] == [KUBERAY]
    with_section = _settings("kubernetes", dict(base, gpuaas_openshift_ai={"applications_namespace": "odh"}),
                             ["statefulset"])
    assert [u for u in with_section.workload_controllers if ":odh:" in u] == [
        "system:serviceaccount:odh:notebook-controller-service-account"]
    off = _settings("openshift", dict(base, gpuaas_openshift_ai={"trusted_controllers": False}))
    assert not [u for u in off.workload_controllers if "redhat-ods-applications" in u]
    # the policy's byController list: KubeRay when Ray is managed, never the training operator (PyTorchJob is not)
    policy = admission_builders.admission_policy(on_openshift, None, OWNED, on_openshift.integrations())[0]
    by_controller = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == "byController")
    assert "'%s'" % KUBERAY in by_controller and TRAINING not in by_controller


def test_profiles_on_a_cluster_without_the_api_stop_before_anything_is_read():
    runner = TenancyRunner(_Client(), {})
    with pytest.raises(Exception) as info:
        runner.check_hardware_profiles_served(TenantModel.from_inventory(example()))
    assert "does not serve infrastructure.opendatahub.io/v1" in str(info.value)
    TenancyRunner(_Client({"infrastructure.opendatahub.io/v1"}), {}).check_hardware_profiles_served(
        TenantModel.from_inventory(example()))


def test_node_pools_validates_the_same_section_as_tenants():
    """The tenants role runs node_pools first on the same inventory: with the section it must reach the same verdict
    (a tenant's hardware_profiles: true planned with the section's counts, not the defaults)."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inputs import inventory_from_params
    from ansible_collections.gpuaas.platform.plugins.modules.node_pools import NODE_POOLS_ARGUMENT_SPEC
    inv = example()
    inv["gpuaas_openshift_ai"]["cpu"] = {"min": 1, "default": 56}  # exactly data-science's 56: fine; default 2 too
    params = {"flavors": inv["gpuaas_flavors"], "cohorts": inv["gpuaas_cohorts"], "priorities": inv["gpuaas_priorities"],
              "tenants": inv["gpuaas_tenants"], "openshift_ai": inv["gpuaas_openshift_ai"], "node_pools": []}
    assert "openshift_ai" in NODE_POOLS_ARGUMENT_SPEC
    model = TenantModel.from_inventory(inventory_from_params(params, node_pools=True))
    assert {i.default_count for p in model.hardware_profiles for i in p.identifiers if i.identifier == "cpu"} == {56}
