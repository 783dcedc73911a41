# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants module's reconciler against an in-memory fake API (server-side apply simulated)."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.compare import project
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError
from ansible_collections.gpuaas.platform.plugins.modules.tenants import TenantsReconciler

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "playbooks", "inventory", "lab", "group_vars", "all", "tenants.yml")

NAMESPACED = {"Namespace": False, "Node": False, "ResourceFlavor": False, "Cohort": False,
              "WorkloadPriorityClass": False, "ClusterQueue": False, "LocalQueue": True, "ClusterRole": False,
              "ClusterRoleBinding": False, "RoleBinding": True, "ValidatingAdmissionPolicy": False,
              "ValidatingAdmissionPolicyBinding": False, "Secret": True, "ScaledObject": True,
              "ClusterTriggerAuthentication": False}
SERVED = {"v1", "kueue.x-k8s.io/v1beta2", "rbac.authorization.k8s.io/v1", "admissionregistration.k8s.io/v1",
          "keda.sh/v1alpha1"}


def fieldset(value):
    if isinstance(value, dict):
        return {"f:%s" % k: fieldset(v) for k, v in value.items()}
    return {}


def deep_merge(into, other):
    for key, value in other.items():
        if key not in into:
            into[key] = copy.deepcopy(value)
        elif isinstance(into[key], dict) and isinstance(value, dict):
            deep_merge(into[key], value)


def selector_matches(selector, labels):
    for part in (selector or "").split(","):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            if labels.get(k) != v:
                return False
        elif part not in labels:
            return False
    return True


class FakeResource:
    def __init__(self, api, api_version, kind):
        self.api = api
        self.api_version = api_version
        self.kind = kind
        self.namespaced = NAMESPACED[kind]

    def _key(self, name, namespace):
        return (self.kind, namespace if self.namespaced else None, name)

    def get(self, name, namespace=None):
        self.api.calls.append(("get", self.kind))
        obj = self.api.objects.get(self._key(name, namespace))
        return copy.deepcopy(obj)

    def list(self, namespace=None, label_selector=None, field_selector=None):
        self.api.calls.append(("list", self.kind))
        out = []
        for (kind, ns, _name), obj in self.api.objects.items():
            if kind != self.kind or (namespace and ns != namespace):
                continue
            if selector_matches(label_selector, obj["metadata"].get("labels") or {}):
                out.append(copy.deepcopy(obj))
        return out

    def apply(self, body, field_manager, force=False, dry_run=False):
        self.api.calls.append(("apply-dry" if dry_run else "apply", self.kind))
        meta = body["metadata"]
        key = self._key(meta["name"], meta.get("namespace"))
        live = copy.deepcopy(self.api.objects.get(key)) or {"metadata": {}}
        if self.kind == "LocalQueue" and live.get("spec") and live["spec"].get("clusterQueue") != body["spec"]["clusterQueue"]:
            raise GpuaasError("LocalQueue spec.clusterQueue: field is immutable")
        merged = copy.deepcopy(body)
        others = [m for m in live["metadata"].get("managedFields") or [] if m["manager"] != field_manager]
        for entry in others:  # fields other managers applied survive (server-side apply)
            deep_merge(merged, project(live, entry["fieldsV1"]))
        merged["metadata"]["managedFields"] = others + [{"manager": field_manager, "operation": "Apply",
                                                         "apiVersion": body["apiVersion"], "fieldsV1": fieldset(body)}]
        merged["metadata"]["uid"] = live["metadata"].get("uid", "uid-%d" % len(self.api.objects))
        if "status" in live:
            merged["status"] = live["status"]
        if not dry_run:
            self.api.objects[key] = merged
        return copy.deepcopy(merged)

    def delete(self, name, namespace=None, propagation_policy="Background", dry_run=False):
        self.api.calls.append(("delete-dry" if dry_run else "delete", self.kind))
        key = self._key(name, namespace)
        if key not in self.api.objects:
            return None
        if dry_run:
            return self.api.objects[key]
        return self.api.objects.pop(key)


class FakeClient:
    def __init__(self, nodes=None):
        self.objects = {}
        self.calls = []
        for node in nodes or []:
            self.objects[("Node", None, node["name"])] = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node["name"], "labels": node["labels"]},
                "status": {"allocatable": node["allocatable"]}}

    def served(self, group_version):
        return group_version in SERVED

    def resource(self, api_version, kind):
        if api_version not in SERVED:
            raise GpuaasError("%s %s is not served" % (api_version, kind))
        return FakeResource(self, api_version, kind)

    def writes(self):
        return [c for c in self.calls if c[0] in ("apply", "delete")]

    def names(self, kind):
        return sorted((ns, name) for (k, ns, name) in self.objects if k == kind)


NODES = [
    {"name": "gpu-h100-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "allocatable": {"nvidia.com/gpu": "8"}},
    {"name": "gpu-h100-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "allocatable": {"nvidia.com/gpu": "8"}},
    {"name": "gpu-a100-mig-0", "labels": {"nvidia.com/mig.config": "all-1g.10gb"}, "allocatable": {"nvidia.com/mig-1g.10gb": "7"}},
]


def params(**extra):
    with open(EXAMPLE) as handle:
        inv = yaml.safe_load(handle)
    out = {"flavors": inv["gpuaas_flavors"], "cohorts": inv["gpuaas_cohorts"], "priorities": inv["gpuaas_priorities"],
           "tenants": inv["gpuaas_tenants"], "prometheus": inv["gpuaas_prometheus"], "allow_overcommit": False,
           "check_capacity": True, "delete_namespaces": False, "drain_timeout": 30, "limit_tenants": None,
           "platform": "auto", "keda_namespace": "keda", "concurrency": 4}
    out.update(extra)
    return out


def run(client, p, check=False, diff=False, clock=None):
    rec = TenantsReconciler(client, p, check_mode=check, diff=diff, sleep=lambda s: None,
                            clock=clock or (lambda: 0.0))
    return rec.run()


@pytest.fixture
def converged():
    client = FakeClient(NODES)
    result = run(client, params())
    return client, result


def test_converge_then_noop(converged):
    client, result = converged
    assert result["changed"] is True
    assert result["summary"]["created"] == result["objects"] == 41
    assert result["capacity"]["h100"] == {"nvidia.com/gpu": "16"}
    assert result["tenants"]["nlp"] == ["nlp-train", "nlp-serve"]
    client.calls.clear()
    again = run(client, params())
    assert again["changed"] is False
    assert again["summary"] == {"created": 0, "updated": 0, "unchanged": 41, "deleted": 0}
    assert client.writes() == []
    # a no-op costs LISTs only: no GET and no apply per object
    assert not [c for c in client.calls if c[0] == "get"]


def test_check_mode_diff_shows_quota_change_and_writes_nothing(converged):
    client = converged[0]
    p = params()
    p["tenants"][0]["quotas"][0]["resources"]["nvidia.com/gpu"] = 6
    client.calls.clear()
    result = run(client, p, check=True, diff=True)
    assert result["changed"] is True
    assert result["updated"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "nlp"}]
    assert client.writes() == []
    (diff,) = result["diff"]
    before = diff["before"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    after = diff["after"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert (before["nominalQuota"], after["nominalQuota"]) == ("8", "6")


def test_broken_inventory_fails_before_any_request_that_writes(converged):
    client = converged[0]
    p = params()
    p["tenants"][0]["quotas"][0]["flavor"] = "h200"
    p["tenants"][1]["namespaces"] = ["nlp-train"]
    p["cohorts"].append({"name": "x", "parent": "x"})
    client.calls.clear()
    with pytest.raises(InventoryError) as info:
        run(client, p)
    assert len(info.value.problems) == 3
    assert client.writes() == [] and [c for c in client.calls if c[0].startswith("apply")] == []


def test_capacity_error_lists_flavor(converged):
    client = converged[0]
    p = params()
    p["tenants"][1]["quotas"][0]["resources"]["nvidia.com/gpu"] = 8
    with pytest.raises(InventoryError) as info:
        run(client, p)
    assert "quotas ask for 18 nvidia.com/gpu on flavor 'h100'" in info.value.problems[0]
    result = run(client, params(allow_overcommit=True, tenants=p["tenants"]))
    assert result["changed"] is True


def test_removing_a_tenant_drains_then_deletes_only_its_objects(converged):
    client = converged[0]
    client.objects[("ClusterQueue", None, "vision")]["status"] = {"admittedWorkloads": 1, "reservingWorkloads": 1}
    before_nlp = {k: copy.deepcopy(v) for k, v in client.objects.items()
                  if (v["metadata"].get("labels") or {}).get("gpuaas.io/tenant") == "nlp"}
    p = params()
    p["tenants"] = [x for x in p["tenants"] if x["name"] != "vision"]
    ticks = iter(range(0, 1000, 10))

    def clock():
        value = next(ticks)
        if value >= 20:  # the workload finished while we waited
            client.objects[("ClusterQueue", None, "vision")]["status"] = {"admittedWorkloads": 0, "reservingWorkloads": 0}
        return float(value)

    result = run(client, p, clock=clock)
    assert result["offboarded"] == ["vision"]
    assert ("apply", "ClusterQueue") in client.calls  # the drain
    deleted = {(d["kind"], d.get("namespace"), d["name"]) for d in result["deleted"]}
    assert ("ClusterQueue", None, "vision") in deleted
    assert ("LocalQueue", "vision-dev", "default") in deleted
    assert ("RoleBinding", "vision-prod", "gpuaas-users") in deleted
    assert not [d for d in deleted if d[0] == "Namespace"]
    assert result["kept_namespaces"] == ["vision-dev", "vision-prod"]
    assert ("Namespace", None, "vision-dev") in client.objects
    after_nlp = {k: v for k, v in client.objects.items() if (v["metadata"].get("labels") or {}).get("gpuaas.io/tenant") == "nlp"}
    assert after_nlp == before_nlp


def test_drain_timeout_deletes_nothing(converged):
    client = converged[0]
    client.objects[("ClusterQueue", None, "vision")]["status"] = {"admittedWorkloads": 2}
    p = params()
    p["tenants"][1]["state"] = "absent"
    ticks = iter(range(0, 1000, 10))
    with pytest.raises(GpuaasError) as info:
        run(client, p, clock=lambda: float(next(ticks)))
    assert "still holds workloads after 30s" in info.value.message
    assert info.value.problems == ["ClusterQueue vision: 2 admitted, 0 reserving"]
    assert ("ClusterQueue", None, "vision") in client.objects
    assert client.objects[("ClusterQueue", None, "vision")]["spec"]["stopPolicy"] == "HoldAndDrain"
    # back in the inventory: the drain stop policy is released
    client.objects[("ClusterQueue", None, "vision")]["status"] = {}
    run(client, params())
    assert "stopPolicy" not in client.objects[("ClusterQueue", None, "vision")]["spec"]


def test_delete_namespaces_and_limit(converged):
    client = converged[0]
    p = params(delete_namespaces=True, limit_tenants=["analytics"])
    p["tenants"][2]["state"] = "absent"
    result = run(client, p)
    deleted = {(d["kind"], d["name"]) for d in result["deleted"]}
    assert ("Namespace", "analytics") in deleted and ("ClusterQueue", "analytics") in deleted
    assert all(n[1] != "vision-dev" for n in deleted)
    assert ("ResourceFlavor", None, "h100") in client.objects
    assert result["tenants"] == {}


def test_moved_namespace_recreates_local_queue(converged):
    client = converged[0]
    p = params()
    p["tenants"][1]["namespaces"] = ["vision-dev"]
    p["tenants"][2]["namespaces"] = ["analytics", "vision-prod"]
    result = run(client, p)
    assert result["recreated_local_queues"] == ["vision-prod/default"]
    assert client.objects[("LocalQueue", "vision-prod", "default")]["spec"]["clusterQueue"] == "analytics"
    assert client.objects[("Namespace", None, "vision-prod")]["metadata"]["labels"]["gpuaas.io/tenant"] == "analytics"


def test_unknown_limit_tenant():
    with pytest.raises(GpuaasError) as info:
        run(FakeClient(NODES), params(limit_tenants=["nobody"]))
    assert "limit_tenants names nobody" in info.value.message


def test_secret_data_is_redacted_in_diff():
    client = FakeClient(NODES)
    p = params()
    p["prometheus"] = {"url": "https://prom:9091", "token": "s3cret"}
    result = run(client, p, diff=True)
    secrets = [d for d in result["diff"] if d["after"].get("kind") == "Secret"]
    assert secrets and secrets[0]["after"]["data"] == {"bearerToken": "<redacted>"}


def test_token_secret_is_read_and_copied_to_keda_namespace():
    import base64
    client = FakeClient(NODES)
    client.objects[("Secret", "monitoring-ro", "prom-reader")] = {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prom-reader", "namespace": "monitoring-ro"},
        "data": {"token": base64.b64encode(b"tok").decode()}}
    p = params()
    p["prometheus"] = {"url": "https://prom:9091", "token_secret": {"name": "prom-reader", "namespace": "monitoring-ro"}}
    run(client, p)
    copied = client.objects[("Secret", "keda", "gpuaas-prometheus")]
    assert base64.b64decode(copied["data"]["bearerToken"]) == b"tok"
    p["prometheus"]["token_secret"]["key"] = "missing"
    with pytest.raises(GpuaasError) as info:
        run(client, p)
    assert "has no key 'missing'" in info.value.message


def test_moved_namespace_in_check_mode_writes_nothing(converged):
    client = converged[0]
    p = params()
    p["tenants"][1]["namespaces"] = ["vision-dev"]
    p["tenants"][2]["namespaces"] = ["analytics", "vision-prod"]
    client.calls.clear()
    result = run(client, p, check=True)
    assert result["recreated_local_queues"] == ["vision-prod/default"]
    assert {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "name": "default",
            "namespace": "vision-prod"} in result["created"]
    assert client.writes() == []
    assert client.objects[("LocalQueue", "vision-prod", "default")]["spec"]["clusterQueue"] == "vision"
