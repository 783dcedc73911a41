# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants module's reconciler against an in-memory fake API (server-side apply simulated)."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import TenancyRunner

# tests/unit/modules/fake_kube.py (on sys.path through conftest) puts the shared fake on sys.path
from fake_kube import FakeKube  # noqa: E402  (the one unit fake of the API server, server-side apply simulated)
from module_utils.fake_kube import node  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "playbooks", "inventory", "lab", "group_vars", "all", "tenants.yml")

KV = "kueue.x-k8s.io/v1beta2"
RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"
KEDA = "keda.sh/v1alpha1"
# the kinds a tenants run reads and writes (Nodes for the capacity check, a Lease for its lock)
SERVED = [("v1", "Namespace"), ("v1", "Node"), ("v1", "Secret"), ("coordination.k8s.io/v1", "Lease"),
          (KV, "ResourceFlavor"), (KV, "Cohort"), (KV, "WorkloadPriorityClass"), (KV, "ClusterQueue"), (KV, "AdmissionCheck"),
          (KV, "LocalQueue"), (KV, "ProvisioningRequestConfig"), (RBAC, "ClusterRole"), (RBAC, "ClusterRoleBinding"), (RBAC, "RoleBinding"),
          (ADMISSION, "ValidatingAdmissionPolicy"), (ADMISSION, "ValidatingAdmissionPolicyBinding"),
          (KEDA, "ScaledObject"), (KEDA, "ClusterTriggerAuthentication")]

NODES = (
    node("gpu-h100-0", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"}),
    node("gpu-h100-1", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"}),
    node("gpu-a100-mig-0", {"nvidia.com/mig.config": "all-1g.10gb"}, {"nvidia.com/mig-1g.10gb": "7"}),
)


def cluster(served=(), nodes=NODES, unserved=()):
    """A fake API server serving the tenants run's kinds (plus ``served``, but not the kinds in ``unserved``), with
    ``nodes``."""
    kube = FakeKube([gvk for gvk in SERVED if gvk[1] not in unserved] + list(served))
    for obj in nodes:
        kube.add(obj)
    return kube


def tenancy_writes(client):
    """The writes of the runs so far apart from their lock (the Lease is created and deleted by every real run)."""
    return [w for w in client.writes if w[1][0] != "Lease"]


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
    rec = TenancyRunner(client, p, check_mode=check, diff=diff, sleep=lambda s: None,
                        clock=clock or (lambda: 0.0))
    return rec.run()


@pytest.fixture
def converged():
    client = cluster()
    result = run(client, params())
    return client, result


def test_converge_then_noop(converged):
    client, result = converged
    assert result["changed"] is True
    assert result["summary"]["created"] == result["objects"] == 43  # + gpuaas-namespace-labels policy and binding
    assert result["capacity"]["h100"] == {"nvidia.com/gpu": "16"}
    assert result["tenants"]["nlp"] == ["nlp-train", "nlp-serve"]
    client.reset_calls()
    again = run(client, params())
    assert again["changed"] is False
    assert again["summary"] == {"created": 0, "updated": 0, "unchanged": 43, "deleted": 0}
    assert tenancy_writes(client) == []
    # a no-op costs LISTs only: no GET and no apply per object (the one GET is the lock's Lease)
    assert not [c for c in client.calls if c[0] == "get" and c[1] != "Lease"]
    assert again["lock"]["lease"] == "Lease kube-system/gpuaas-tenants"
    assert ("Lease", "kube-system", "gpuaas-tenants") not in client.objects  # released at the end


def test_check_mode_diff_shows_quota_change_and_writes_nothing(converged):
    client = converged[0]
    p = params()
    p["tenants"][0]["quotas"][0]["resources"]["nvidia.com/gpu"] = 6
    client.reset_calls()
    result = run(client, p, check=True, diff=True)
    assert result["changed"] is True
    assert result["updated"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "nlp"}]
    assert client.writes == []
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
    client.reset_calls()
    with pytest.raises(InventoryError) as info:
        run(client, p)
    assert len(info.value.problems) == 3
    assert client.writes == [] and client.count("apply") == 0  # not even a dry run


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

    result = run(client, dict(p, prune=True), clock=clock)
    assert result["offboarded"] == ["vision"]
    assert ("apply", "ClusterQueue", None, "vision", False) in client.calls  # the drain
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
    released = client.objects[("ClusterQueue", None, "vision")]
    # the run no longer applies the field, so the API server defaults it again (Kueue's CRD default is None)
    assert released["spec"]["stopPolicy"] == "None"
    assert not [e for e in released["metadata"]["managedFields"] if "f:stopPolicy" in e["fieldsV1"].get("f:spec", {})]


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
        run(cluster(), params(limit_tenants=["nobody"]))
    assert "limit_tenants names nobody" in info.value.message


def test_secret_data_is_redacted_in_diff():
    client = cluster()
    p = params()
    p["prometheus"] = {"url": "https://prom:9091", "token": "s3cret"}
    result = run(client, p, diff=True)
    secrets = [d for d in result["diff"] if d["after"].get("kind") == "Secret"]
    assert secrets and secrets[0]["after"]["data"] == {"bearerToken": "<redacted>"}


def test_token_secret_is_read_and_copied_to_keda_namespace():
    import base64
    client = cluster()
    client.add({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prom-reader", "namespace": "monitoring-ro"},
        "data": {"token": base64.b64encode(b"tok").decode()}})
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
    client.reset_calls()
    result = run(client, p, check=True)
    assert result["recreated_local_queues"] == ["vision-prod/default"]
    assert {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "name": "default",
            "namespace": "vision-prod"} in result["created"]
    assert client.writes == []
    assert client.objects[("LocalQueue", "vision-prod", "default")]["spec"]["clusterQueue"] == "vision"


# -- safe mode (issue 11): nothing is removed for being missing from the inventory unless prune is on -------------

def test_missing_tenant_is_kept_and_reported_as_drift_without_prune(converged):
    client = converged[0]
    before = copy.deepcopy(dict(client.objects))
    p = params()
    p["tenants"] = [x for x in p["tenants"] if x["name"] != "vision"]
    client.reset_calls()
    result = run(client, p)
    assert result["changed"] is False and result["deleted"] == [] and result["offboarded"] == []
    assert tenancy_writes(client) == []
    assert result["drift"]["unmanaged_tenants"] == ["vision"]
    drift = {(o["kind"], o.get("namespace"), o["name"]) for o in result["drift"]["unmanaged_objects"]}
    assert ("ClusterQueue", None, "vision") in drift and ("LocalQueue", "vision-dev", "default") in drift
    assert not [d for d in drift if d[0] != "ClusterQueue" and d[1] and not d[1].startswith("vision")]
    assert result["kept_namespaces"] == []  # the unmanaged tenant's namespaces are drift, not "kept"
    assert {k: v for k, v in client.objects.items() if k[0] != "Lease"} == before
    # check mode with prune shows what prune would do, still writing nothing
    check = run(client, dict(p, prune=True), check=True)
    assert check["offboarded"] == ["vision"]
    assert ("ClusterQueue", None, "vision") in {(d["kind"], d.get("namespace"), d["name"]) for d in check["deleted"]}
    assert check["drift"]["unmanaged_tenants"] == []
    assert tenancy_writes(client) == []


def test_state_absent_removes_the_tenant_without_prune(converged):
    client = converged[0]
    p = params()
    p["tenants"][1]["state"] = "absent"
    result = run(client, p)
    assert result["offboarded"] == ["vision"]
    assert ("ClusterQueue", None, "vision") not in client.objects
    assert result["drift"]["unmanaged_tenants"] == []


def test_empty_tenant_list_writes_nothing_and_reports_every_tenant(converged):
    client = converged[0]
    before = copy.deepcopy(dict(client.objects))
    client.reset_calls()
    rec = TenancyRunner(client, params(tenants=[], flavors=[], cohorts=[], priorities=[], prometheus={}),
                        sleep=lambda s: None, clock=lambda: 0.0)
    result = rec.run()
    assert dict(client.objects) == before
    assert client.side_effects() == []  # not even the lock
    assert result["changed"] is False and result["drift"]["skipped_writes"] is True
    assert result["drift"]["unmanaged_tenants"] == ["analytics", "nlp", "vision"]
    drift = {(o["kind"], o.get("namespace"), o["name"]) for o in result["drift"]["unmanaged_objects"]}
    assert {("ClusterQueue", None, "nlp"), ("ResourceFlavor", None, "h100"), ("LocalQueue", "nlp-train", "default"),
            ("Cohort", None, "research")} <= drift
    assert any("the tenant list is empty but the cluster has 3 tenants" in w for w in rec.warnings)


def test_empty_tenant_list_with_prune_is_refused_unless_allowed(converged):
    client = converged[0]
    before = copy.deepcopy(dict(client.objects))
    with pytest.raises(GpuaasError) as info:
        run(client, params(tenants=[], prune=True))
    assert "refusing to prune with an empty tenant list" in info.value.message
    assert "gpuaas_tenants_allow_empty" in info.value.hint
    assert dict(client.objects) == before
    result = run(client, params(tenants=[], prune=True, allow_empty=True))
    assert sorted(result["offboarded"]) == ["analytics", "nlp", "vision"]
    assert not [k for k in client.objects if k[0] == "ClusterQueue"]


def test_limit_tenants_is_unchanged_by_safe_mode(converged):
    client = converged[0]
    p = params(limit_tenants=["vision"])
    p["tenants"][1]["state"] = "absent"
    result = run(client, p)
    assert result["offboarded"] == ["vision"]
    assert ("ClusterQueue", None, "nlp") in client.objects


def test_another_runs_lock_fails_with_holder_and_since(converged):
    client = converged[0]
    from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import LeaseLock, format_time, utcnow
    other = LeaseLock(client, "gpuaas-tenants", "kube-system", identity="awx-node/pid-1/awx-job-7")
    other.acquire()
    p = params()
    p["tenants"][1]["state"] = "absent"
    ticks = iter(range(0, 1000, 5))
    before = copy.deepcopy(dict(client.objects))
    with pytest.raises(GpuaasError) as info:
        run(client, dict(p, lock_wait=20), clock=lambda: float(next(ticks)))
    since = client.objects[("Lease", "kube-system", "gpuaas-tenants")]["spec"]["acquireTime"]
    assert info.value.message.startswith("another run (holder awx-node/pid-1/awx-job-7) holds the lock "
                                         "Lease kube-system/gpuaas-tenants since %s" % since)
    assert dict(client.objects) == before  # nothing drained or pruned
    assert format_time(utcnow())[:4] == since[:4]


def test_forbidden_lock_warns_that_the_run_is_unguarded(converged):
    client = converged[0]
    client.forbid("get", "Lease")
    p = params()
    p["tenants"][1]["state"] = "absent"
    rec = TenancyRunner(client, p, sleep=lambda s: None, clock=lambda: 0.0)
    result = rec.run()
    assert result["offboarded"] == ["vision"] and "lock" not in result
    assert any("could not be taken (forbidden): this run is not guarded" in w and "leases.coordination.k8s.io in "
               "kube-system" in w for w in rec.warnings), rec.warnings


def test_check_mode_takes_no_lock_but_warns_about_a_holder(converged):
    client = converged[0]
    from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import LeaseLock
    LeaseLock(client, "gpuaas-tenants", "kube-system", identity="other-run").acquire()
    client.reset_calls()
    rec = TenancyRunner(client, params(), check_mode=True, sleep=lambda s: None, clock=lambda: 0.0)
    rec.run()
    assert not [c for c in client.side_effects() if c[1] == "Lease"]
    assert any("another run (holder other-run) holds the lock" in w for w in rec.warnings), rec.warnings


def test_a_tenant_namespace_in_the_custom_platform_list_is_refused_before_any_request():
    """Issue 22 item 6: gpuaas_admission.platform_namespaces and the tenants' namespaces are cross-checked."""
    client = cluster()
    p = params(admission={"platform_namespaces": ["gpu-operator", "nlp-serve"]})
    with pytest.raises(InventoryError) as info:
        run(client, p)
    assert info.value.problems == [
        "gpuaas_tenants: namespace 'nlp-serve' of tenant 'nlp' is also a platform namespace in "
        "gpuaas_admission.platform_namespaces, where the admission policy does not apply; remove it from one of the "
        "two lists"]
    assert client.side_effects() == []
