# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kueue_import (issue 17): the inverse of the tenancy builders. What the collection built imports back to the
inventory it was built from; what the inventory cannot express is a warning; the output always validates."""

from __future__ import annotations

import copy
import os

import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import engine as ae
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import MANAGED_BY_LABEL
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_import, tenancy

from .fake_kube import FakeClient
from .fake_kube import foreign_object as hand_made

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LAB_INVENTORY = os.path.join(ROOT, "playbooks", "inventory", "lab", "group_vars", "all", "tenants.yml")
KINDS = ("Namespace", "RoleBinding") + kueue_import.IMPORTED_KUEUE_KINDS

# An inventory in the canonical form of the import (lists by name, quantities as text, defaults left out), using
# every key the import reads: a cohort tree, several flavors, two flavors in one resource group (the builder fills
# the missing resource with 0), borrowing and lending limits, preemption, extra queues, access, labels.
CANONICAL = {
    "gpuaas_flavors": [
        {"name": "a100", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        {"name": "cpu"},
        {"name": "h100", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
         "node_taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    ],
    "gpuaas_cohorts": [
        {"name": "org"},
        {"name": "research", "parent": "org", "fair_sharing_weight": "2"},
        {"name": "serving", "parent": "org"},
    ],
    "gpuaas_priorities": [
        {"name": "high", "value": 1000, "description": "production"},
        {"name": "low", "value": 10},
    ],
    "gpuaas_tenants": [
        {"name": "nlp", "namespaces": ["nlp-serve", "nlp-train"], "cohort": "research", "fair_sharing_weight": "3",
         "queueing_strategy": "StrictFIFO",
         "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "8", "cpu": "96"},
                     "borrowing_limit": {"nvidia.com/gpu": "4"}, "lending_limit": {"nvidia.com/gpu": "2"}},
                    {"flavor": "a100", "resources": {"nvidia.com/gpu": "4"}},
                    {"flavor": "cpu", "resources": {"memory": "1Ti"}}],
         "preemption": {"reclaim_within_cohort": "Any", "within_cluster_queue": "LowerPriority",
                        "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 100}},
         "queues": [{"name": "batch"}, {"name": "interactive", "namespaces": ["nlp-serve"]}],
         "access": {"admins": ["nlp-admins"], "users": ["nlp-users", "user:alice"]},
         "labels": {"cost-center": "c42"},
         "allowed_priorities": ["high", "low"]},
        {"name": "vision", "namespaces": ["vision"], "cohort": "serving",
         "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": "2"}}],
         "default_queue": False, "queues": [{"name": "serve"}]},
    ],
}


def converge(inventory, client=None):
    """The cluster state the tenants module would leave (the kinds the import reads), on the unit fake."""
    client = client or FakeClient()
    model = TenantModel.from_inventory(inventory)
    objects = [o for o in tenancy.desired_objects(model) if o["kind"] in KINDS]
    ae.ApplyEngine(client).reconcile(objects)
    return client


def live_objects(client):
    out = {kind: [] for kind in KINDS}
    for (kind, _ns, _name), obj in sorted(client.store.items()):
        if kind in out:
            out[kind].append(copy.deepcopy(obj))
    return out


def kueue_specs(client):
    return {key: {k: v for k, v in obj.items() if k not in ("metadata",)}
            for key, obj in client.store.items() if key[0] in kueue_import.IMPORTED_KUEUE_KINDS}


def test_what_the_collection_built_imports_back_to_its_inventory():
    client = converge(CANONICAL)
    result = kueue_import.import_inventory(live_objects(client))
    assert result.inventory == CANONICAL
    assert result.warnings == []
    assert result.adopt == []  # all its own


def test_import_of_the_import_is_the_same_inventory_and_builds_the_same_objects():
    with open(LAB_INVENTORY) as handle:
        lab = yaml.safe_load(handle)
    inventory = {k: lab[k] for k in ("gpuaas_flavors", "gpuaas_cohorts", "gpuaas_priorities", "gpuaas_tenants",
                                     "gpuaas_prometheus")}
    first_client = converge(inventory)
    first = kueue_import.import_inventory(live_objects(first_client))
    TenantModel.from_inventory(first.inventory)  # the whole-inventory validation
    second_client = converge(first.inventory)
    assert kueue_specs(second_client) == kueue_specs(first_client)
    assert kueue_import.import_inventory(live_objects(second_client)).inventory == first.inventory


def test_kueue_defaults_on_the_live_queue_are_not_imported():
    client = converge(CANONICAL)
    cq = client.store[("ClusterQueue", "", "vision")]
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"  # the fake defaults like Kueue's webhook
    vision = kueue_import.import_inventory(live_objects(client)).inventory["gpuaas_tenants"][1]
    assert "queueing_strategy" not in vision and "preemption" not in vision


def group(*flavors):
    return {"coveredResources": sorted({r["name"] for f in flavors for r in f["resources"]}), "flavors": list(flavors)}


def flavor_quota(name, **resources):
    return {"name": name, "resources": [dict({"name": r}, **v) for r, v in resources.items()]}


def brownfield():
    selector = {"matchLabels": {"gpuaas.io/tenant": "team-a"}}
    return {
        "ResourceFlavor": [hand_made("ResourceFlavor", "h100", spec={"nodeLabels": {"pool": "h100"}})],
        "Cohort": [hand_made("Cohort", "root", spec={"resourceGroups": [group(flavor_quota("h100", **{"nvidia.com/gpu": {"nominalQuota": "4"}}))]})],
        "WorkloadPriorityClass": [hand_made("WorkloadPriorityClass", "urgent", value=500)],
        "ClusterQueue": [
            hand_made("ClusterQueue", "team-a", spec={
                "cohortName": "root", "namespaceSelector": selector, "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [group(flavor_quota("h100", **{"nvidia.com/gpu": {"nominalQuota": "8", "borrowingLimit": "2"}}))]}),
            hand_made("ClusterQueue", "team-b", spec={
                "cohortName": "implicit", "namespaceSelector": {}, "stopPolicy": "Hold",
                "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
                "resourceGroups": [group(flavor_quota("l40s", **{"nvidia.com/gpu": {"nominalQuota": "1"}}))]}),
            hand_made("ClusterQueue", "lonely", spec={"namespaceSelector": {}}),
        ],
        "LocalQueue": [
            hand_made("LocalQueue", "default", "team-a-ns", {"clusterQueue": "team-a"}),
            hand_made("LocalQueue", "q", "team-b-ns", {"clusterQueue": "team-b", "fairSharing": {"weight": "2"}}),
            hand_made("LocalQueue", "stray", "team-a-ns", {"clusterQueue": "team-b"}),
            hand_made("LocalQueue", "sys", "kube-system", {"clusterQueue": "team-a"}),
            hand_made("LocalQueue", "orphan", "x", {"clusterQueue": "gone"}),
        ],
        "Namespace": [hand_made("Namespace", "team-a-ns", api_version="v1", labels={"gpuaas.io/tenant": "team-a"}),
                      hand_made("Namespace", "team-b-ns", api_version="v1")],
    }


def test_a_hand_made_setup_imports_to_a_valid_inventory_and_every_loss_is_a_warning():
    result = kueue_import.import_inventory(brownfield())
    TenantModel.from_inventory(result.inventory)  # passes the whole-inventory validation
    inv = result.inventory
    assert [x["name"] for x in inv["gpuaas_tenants"]] == ["team-a", "team-b"]
    team_a = inv["gpuaas_tenants"][0]
    assert team_a == {"name": "team-a", "namespaces": ["team-a-ns"], "cohort": "root",
                      "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "8"},
                                  "borrowing_limit": {"nvidia.com/gpu": "2"}}]}
    assert inv["gpuaas_tenants"][1]["default_queue"] is False
    assert inv["gpuaas_tenants"][1]["queues"] == [{"name": "q"}]
    # the root Cohort's own quota comes back as its quotas (issue 26; it was a warning before)
    assert inv["gpuaas_cohorts"] == [{"name": "implicit"},
                                     {"name": "root", "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "4"}}]}]
    assert inv["gpuaas_flavors"] == [{"name": "h100", "node_labels": {"pool": "h100"}}, {"name": "l40s"}]
    assert inv["gpuaas_priorities"] == [{"name": "urgent", "value": 500}]
    text = "\n".join(result.warnings)
    for expected in ("ClusterQueue team-b: spec.stopPolicy cannot be expressed",
                     "ClusterQueue team-b: spec.admissionChecksStrategy cannot be expressed",
                     "ClusterQueue team-b admits workloads of the namespaces selected by {}",
                     "LocalQueue team-b-ns/q: spec.fairSharing cannot be expressed",
                     "LocalQueue team-a-ns/stray points at ClusterQueue team-b, but namespace team-a-ns already belongs",
                     "LocalQueue kube-system/sys is in the system namespace kube-system",
                     "LocalQueue x/orphan points at ClusterQueue gone, which is not imported",
                     "ClusterQueue lonely has no LocalQueue",
                     "ResourceFlavor l40s is named by a ClusterQueue but does not exist",
                     "cohort implicit has no Cohort object",
                     "ClusterQueue team-b: the imported inventory builds a different spec"):
        assert expected in text, expected
    assert "ClusterQueue team-a admits" not in text  # its selector is the tenant label: nothing to say
    assert "Cohort root" not in text  # its quota is imported, and builds the same spec
    assert "ClusterQueue team-a: the imported inventory builds a different spec" not in text
    # team-a-ns carries the tenant label already (handed over); team-b-ns does not
    assert sorted(result.adopt) == ["ClusterQueue/lonely", "ClusterQueue/team-a", "ClusterQueue/team-b", "Cohort/root",
                                    "LocalQueue/kube-system/sys", "LocalQueue/team-a-ns/default",
                                    "LocalQueue/team-a-ns/stray", "LocalQueue/team-b-ns/q", "LocalQueue/x/orphan",
                                    "Namespace/team-b-ns", "ResourceFlavor/h100", "WorkloadPriorityClass/urgent"]


def test_a_zero_that_holds_a_resource_group_together_is_kept():
    # one group covering gpu and cpu, each flavor with a quota for one only: leaving the zeros out would build two groups
    spec = {"cohortName": "c", "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": "t"}}, "resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [
            flavor_quota("f1", **{"nvidia.com/gpu": {"nominalQuota": "8"}, "cpu": {"nominalQuota": "0"}}),
            flavor_quota("f2", **{"nvidia.com/gpu": {"nominalQuota": "0"}, "cpu": {"nominalQuota": "16"}})]}]}
    objects = {"ClusterQueue": [hand_made("ClusterQueue", "t", spec=spec)], "Cohort": [hand_made("Cohort", "c")],
               "ResourceFlavor": [hand_made("ResourceFlavor", "f1"), hand_made("ResourceFlavor", "f2")],
               "LocalQueue": [hand_made("LocalQueue", "default", "t-ns", {"clusterQueue": "t"})]}
    result = kueue_import.import_inventory(objects)
    assert result.inventory["gpuaas_tenants"][0]["quotas"] == [
        {"flavor": "f1", "resources": {"nvidia.com/gpu": "8", "cpu": "0"}},
        {"flavor": "f2", "resources": {"nvidia.com/gpu": "0", "cpu": "16"}}]
    assert not [w for w in result.warnings if "different spec" in w]


def test_v1beta1_objects_are_read_in_v1beta2_shape():
    v1 = "kueue.x-k8s.io/v1beta1"
    cq_spec = {"cohort": "c", "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": "t"}},
               "resourceGroups": [group(flavor_quota("f", cpu={"nominalQuota": "4"}))]}
    objects = {"ClusterQueue": [hand_made("ClusterQueue", "t", api_version=v1, spec=cq_spec)],
               "Cohort": [hand_made("Cohort", "c", api_version="kueue.x-k8s.io/v1alpha1", spec={"parent": "root"})],
               "ResourceFlavor": [hand_made("ResourceFlavor", "f", api_version=v1)],
               "LocalQueue": [hand_made("LocalQueue", "default", "t-ns", {"clusterQueue": "t"}, api_version=v1)]}
    inv = kueue_import.import_inventory(objects).inventory
    assert inv["gpuaas_tenants"][0]["cohort"] == "c"
    assert inv["gpuaas_cohorts"] == [{"name": "c", "parent": "root"}, {"name": "root"}]


def test_owned_objects_need_no_adoption_and_removed_labels_still_count_as_ours():
    client = converge(CANONICAL)
    objects = live_objects(client)
    del objects["ClusterQueue"][0]["metadata"]["labels"][MANAGED_BY_LABEL]  # still written by our field manager
    assert kueue_import.import_inventory(objects).adopt == []


def test_autoscaling_of_the_collection_is_reported_not_dropped_silently():
    client = converge(CANONICAL)
    objects = live_objects(client)
    objects["ScaledObject"] = [{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                "metadata": {"name": "vllm", "namespace": "nlp-serve",
                                             "labels": {MANAGED_BY_LABEL: "gpuaas.platform", "gpuaas.io/tenant": "nlp"}}}]
    warnings = kueue_import.import_inventory(objects).warnings
    assert len(warnings) == 1 and "tenant nlp has 1 ScaledObject" in warnings[0] and "nlp-serve/vllm" in warnings[0]


def test_local_queue_default_stop_policy_is_no_warning_but_hold_is():
    spec = {"namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": "t"}}}
    objects = {"ClusterQueue": [hand_made("ClusterQueue", "t", spec=spec)],
               "LocalQueue": [hand_made("LocalQueue", "default", "t-ns", {"clusterQueue": "t", "stopPolicy": "None"}),
                              hand_made("LocalQueue", "held", "t-ns", {"clusterQueue": "t", "stopPolicy": "Hold"})]}
    warnings = kueue_import.import_inventory(objects).warnings
    assert [w.split(":")[0] for w in warnings] == ["LocalQueue t-ns/held"]
    assert "spec.stopPolicy cannot be expressed" in warnings[0]
