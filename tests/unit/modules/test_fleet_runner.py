# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet run (tenants module with option clusters, issue 27) on one fake API server per cluster: every cluster is
reached and prepared before the first write on any of them; a converged fleet is a no-op; offboarding removes the
tenant's share on every worker. The real MultiKueue connection is proven on the lab (tests/integration)."""

from __future__ import annotations

import base64

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import fleet_secrets
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.fleet_runner import FleetRunner

from test_tenants import KV, cluster, tenancy_writes  # noqa: E402  (tests/unit/modules, on sys.path)

# the kinds of a fleet run besides the tenancy's: MultiKueue on the manager, the workers' dispatch account
FLEET_SERVED = [("v1", "ServiceAccount"), (KV, "AdmissionCheck"), (KV, "MultiKueueConfig"), (KV, "MultiKueueCluster"),
                (KV, "Workload")]
TOKEN = "worker-sa-token-value"
CA = base64.b64encode(b"worker-ca").decode()


def token_controller(kind, obj):
    """The worker's token controller: a service-account-token Secret gets its token when it is written."""
    if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
        obj["data"] = {"token": base64.b64encode(TOKEN.encode()).decode(), "ca.crt": CA}


def fleet_cluster():
    """One cluster of the fleet: the tenants fake with the fleet's kinds and the token controller, no nodes."""
    kube = cluster(served=FLEET_SERVED, nodes=())
    kube.hooks.append(token_controller)
    return kube


def fleet_params(**extra):
    out = {"flavors": [{"name": "a100", "node_labels": {"gpu": "a100"}}], "cohorts": [], "priorities": [],
           "tenants": [{"name": "vision", "namespaces": ["vision"],
                        "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 12}}]}],
           "prometheus": None, "allow_overcommit": False, "check_capacity": True, "delete_namespaces": False,
           "drain_timeout": 30, "limit_tenants": None, "platform": "kubernetes", "keda_namespace": "keda",
           "concurrency": 4, "kueue_frameworks": ["batch/job"],
           "clusters": {"manager": {"name": "hub", "auth": {"kubeconfig": "/k", "context": "hub"}},
                        "workers": [{"name": "east", "api_server": "https://east.example:6443",
                                     "auth": {"kubeconfig": "/k", "context": "east"},
                                     "flavors": [{"name": "a100", "capacity": {"nvidia.com/gpu": 16}}]},
                                    {"name": "west", "api_server": "https://west.example:6443",
                                     "auth": {"host": "https://west.example:6443", "api_key": "west-secret-key"},
                                     "flavors": [{"name": "a100", "capacity": {"nvidia.com/gpu": 8}}]}]}}
    out.update(extra)
    return out


@pytest.fixture(name="fleet")
def _fleet():
    return {"hub": fleet_cluster(), "east": fleet_cluster(), "west": fleet_cluster()}


def run(fleet, p, check=False, diff=False):
    return FleetRunner(None, p, check_mode=check, diff=diff, sleep=lambda s: None, clock=lambda: 0.0,
                       clients=fleet).run()


def quota(cluster, name="vision"):
    cq = cluster.objects[("ClusterQueue", None, name)]
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"], cq["spec"]


def test_one_run_converges_the_manager_and_every_worker_then_changes_nothing(fleet):
    first = run(fleet, fleet_params())
    assert first["changed"] is True and set(first["clusters"]) == {"hub", "east", "west"}
    # the tenant's quota of 12 GPUs: all of it on the manager with the MultiKueue check, 16:8 on the workers
    nominal, spec = quota(fleet["hub"])
    assert nominal == "12" and spec["admissionChecksStrategy"]["admissionChecks"] == [{"name": "gpuaas-multikueue"}]
    assert (quota(fleet["east"])[0], quota(fleet["west"])[0]) == ("8", "4")
    assert "admissionChecksStrategy" not in quota(fleet["east"])[1]
    # the manager's kubeconfig of each worker carries that worker's token (read after the worker was written)
    secret = fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-east")]
    assert TOKEN in base64.b64decode(secret["data"]["kubeconfig"]).decode()
    assert ("MultiKueueCluster", None, "west") in fleet["hub"].objects
    # the MultiKueue writer binding in a tenant namespace belongs to the tenant (pruned with it)
    binding = fleet["east"].objects[("RoleBinding", "vision", "gpuaas-multikueue-reader".replace("reader", "writer"))]
    assert binding["metadata"]["labels"]["gpuaas.io/tenant"] == "vision"

    for cluster in fleet.values():
        cluster.reset_calls()
    assert run(fleet, fleet_params(), check=True)["changed"] is False
    second = run(fleet, fleet_params())
    assert second["changed"] is False and second["summary"]["created"] == second["summary"]["updated"] == 0
    assert not [w for c in fleet.values() for w in tenancy_writes(c)]


def test_check_mode_writes_nothing_anywhere_and_diffs_name_the_cluster(fleet):
    result = run(fleet, fleet_params(), check=True, diff=True)
    assert result["changed"] is True
    assert not [c for cluster in fleet.values() for c in cluster.verbs() if c[0] in ("apply", "delete", "create")]
    assert {d["after_header"].split(":")[0] for d in result["diff"]} == {"hub", "east", "west"}
    assert {r["cluster"] for r in result["created"]} == {"hub", "east", "west"}


def test_an_unreachable_worker_stops_the_run_before_any_write_and_is_named(fleet):
    fleet["west"].reachable = False
    with pytest.raises(GpuaasError) as err:
        run(fleet, fleet_params())
    assert "nothing was written on any cluster" in err.value.message
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith("worker 'west'"), err.value.problems
    assert "gpuaas_clusters" in err.value.hint
    assert not [c for cluster in fleet.values() for c in cluster.calls if c[0] != "request"]


def test_a_refusal_on_one_worker_stops_the_run_before_any_write_on_the_others(fleet):
    # a hand-made ClusterQueue of the tenant's name on east: the ownership guard refuses east
    fleet["east"].objects[("ClusterQueue", None, "vision")] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "vision"}, "spec": {}}
    with pytest.raises(GpuaasError) as err:
        run(fleet, fleet_params())
    assert "before writing on any cluster" in err.value.message
    assert any(p.startswith("worker 'east'") for p in err.value.problems), err.value.problems
    assert not [w for c in fleet.values() for w in tenancy_writes(c)]
    assert not [c for cluster in fleet.values() for c in cluster.side_effects() if c[1] == "Lease"]


def test_offboarding_removes_the_tenant_share_on_every_worker(fleet):
    run(fleet, fleet_params())
    gone = fleet_params(tenants=[{"name": "vision", "state": "absent"}], limit_tenants=["vision"])
    result = run(fleet, gone)
    assert result["offboarded"] == ["vision"]
    for name, cluster in fleet.items():
        assert ("ClusterQueue", None, "vision") not in cluster.objects, name
        assert ("LocalQueue", "vision", "default") not in cluster.objects, name
    assert ("RoleBinding", "vision", "gpuaas-multikueue-writer") not in fleet["east"].objects
    # the fleet's shared objects stay (a limited run neither applies nor prunes them)
    assert ("MultiKueueCluster", None, "east") in fleet["hub"].objects


def test_a_busy_worker_queue_refuses_the_offboarding_with_nothing_deleted(fleet):
    run(fleet, fleet_params())
    fleet["west"].objects[("ClusterQueue", None, "vision")]["status"] = {"admittedWorkloads": 1}
    gone = fleet_params(tenants=[{"name": "vision", "state": "absent"}], limit_tenants=["vision"], drain_timeout=0)
    with pytest.raises(GpuaasError) as err:
        run(fleet, gone)
    assert "still hold" in err.value.message
    assert ("ClusterQueue", None, "vision") in fleet["west"].objects
    assert ("ClusterQueue", None, "vision") in fleet["hub"].objects  # the manager is written after the workers


def test_every_fleet_credential_is_registered_as_a_secret():
    clusters = fleet_params()["clusters"]
    clusters["manager"]["auth"] = {"kubeconfig": {"users": [{"name": "u", "user": {"token": "inline-token"}}]}}
    secrets = fleet_secrets(clusters)
    assert "west-secret-key" in secrets and "inline-token" in secrets
    assert "/k" not in secrets and "east" not in secrets


def without_west(**extra):
    p = fleet_params(**extra)
    p["clusters"]["workers"] = p["clusters"]["workers"][:1]
    return p


def retiring_west(**extra):
    p = fleet_params(**extra)
    p["clusters"]["workers"][1] = {"name": "west", "state": "absent",
                                   "auth": {"host": "https://west.example:6443", "api_key": "west-secret-key"}}
    return p


def config_clusters(fleet):
    return fleet["hub"].objects[("MultiKueueConfig", None, "gpuaas-multikueue")]["spec"]["clusters"]


def test_a_worker_gone_from_the_inventory_is_kept_and_reported_without_prune_workers(fleet):
    run(fleet, fleet_params())
    runner = FleetRunner(None, without_west(), sleep=lambda s: None, clock=lambda: 0.0, clients=fleet)
    result = runner.run()
    # still dispatched to: the config lists it, its MultiKueueCluster and Secret stay
    assert config_clusters(fleet) == ["east", "west"]
    assert ("MultiKueueCluster", None, "west") in fleet["hub"].objects
    assert ("Secret", "kueue-system", "gpuaas-multikueue-west") in fleet["hub"].objects
    assert result["workers"]["kept"] == ["west"] and result["workers"]["removed"] == []
    assert [w for w in runner.warnings if "'west'" in w and "gpuaas_fleet_prune_workers" in w], runner.warnings


def test_a_worker_to_remove_that_holds_a_workload_refuses_the_run_with_nothing_written(fleet):
    run(fleet, fleet_params())
    fleet["hub"].objects[("Workload", "vision", "job-train-1")] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-train-1", "namespace": "vision"}, "status": {"clusterName": "west"}}
    for cluster in fleet.values():
        cluster.reset_calls()
    with pytest.raises(GpuaasError) as err:
        run(fleet, retiring_west(prune_workers=True, tenants=[{
            "name": "vision", "namespaces": ["vision"],
            "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 10}}]}]))
    assert err.value.details["reason"] == "WorkerNotDrained"
    assert err.value.problems == ["worker 'west' cannot be removed: 1 workload dispatched to it has not finished: "
                                  "vision/job-train-1"]
    assert "workerLostTimeout" in err.value.hint
    assert not [w for c in fleet.values() for w in tenancy_writes(c)]
    assert config_clusters(fleet) == ["east", "west"]


def test_prune_workers_removes_a_drained_retired_worker_and_only_what_the_collection_made(fleet):
    run(fleet, fleet_params())
    foreign = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "team-own"}}
    fleet["west"].objects[("ClusterRole", None, "team-own")] = foreign
    # the collection's, but of another component (a Kueue it installed there): not the tenancy's to remove
    kueue_secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "kueue-webhook-server-cert", "namespace": "kueue-system",
        "labels": {"app.kubernetes.io/managed-by": "gpuaas.platform", "gpuaas.io/component": "kueue"}}}
    fleet["west"].objects[("Secret", "kueue-system", "kueue-webhook-server-cert")] = kueue_secret
    finished = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "done", "namespace": "vision"},
                "status": {"clusterName": "west", "conditions": [{"type": "Finished", "status": "True"}]}}
    fleet["hub"].objects[("Workload", "vision", "done")] = finished

    check = run(fleet, retiring_west(prune_workers=True), check=True)
    assert check["changed"] is True and ("MultiKueueCluster", None, "west") in fleet["hub"].objects

    result = run(fleet, retiring_west(prune_workers=True))
    assert result["workers"]["removed"] == ["west"]
    assert config_clusters(fleet) == ["east"]
    assert ("MultiKueueCluster", None, "west") not in fleet["hub"].objects
    assert ("Secret", "kueue-system", "gpuaas-multikueue-west") not in fleet["hub"].objects
    assert ("MultiKueueCluster", None, "east") in fleet["hub"].objects
    # on west: nothing of the collection's is left; what it did not make (and the namespace) stays
    left = sorted(key for key, obj in fleet["west"].objects.items()
                  if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "gpuaas.platform"
                  and key[0] != "Namespace")
    assert left == [("Secret", "kueue-system", "kueue-webhook-server-cert")], left
    assert ("ClusterRole", None, "team-own") in fleet["west"].objects
    deleted = {(r["cluster"], r["kind"], r["name"]) for r in result["deleted"]}
    assert {("hub", "MultiKueueCluster", "west"), ("west", "ClusterQueue", "vision"),
            ("west", "ServiceAccount", "gpuaas-multikueue")} <= deleted, deleted
    # the share of the remaining worker is the whole quota now (east alone)
    assert quota(fleet["east"])[0] == "12"
    # a second run changes nothing
    assert run(fleet, retiring_west(prune_workers=True))["changed"] is False


def test_reachable_only_converges_the_others_and_leaves_the_unreachable_worker_as_it_is(fleet):
    run(fleet, fleet_params())
    secret_before = dict(fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-west")])
    fleet["west"].reachable = False
    fleet["west"].reset_calls()
    grown = fleet_params(reachable_only=True, tenants=[{
        "name": "vision", "namespaces": ["vision"], "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 15}}]}])
    runner = FleetRunner(None, grown, sleep=lambda s: None, clock=lambda: 0.0, clients=fleet)
    result = runner.run()
    assert list(result["workers"]["skipped"]) == ["west"] and "west" not in result["clusters"]
    assert [w for w in runner.warnings if w.startswith("reachable_only: 1 worker skipped")], runner.warnings
    assert quota(fleet["hub"])[0] == "15" and quota(fleet["east"])[0] == "10"  # east's share of 15 over 16:8
    assert fleet["west"].calls == [("request", "GET", "/version")] * len(fleet["west"].calls)  # only the probe
    assert fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-west")] == secret_before
    assert config_clusters(fleet) == ["east", "west"]


def test_reachable_only_never_skips_the_manager(fleet):
    fleet["hub"].reachable = False
    with pytest.raises(GpuaasError) as err:
        run(fleet, fleet_params(reachable_only=True))
    assert "nothing was written on any cluster" in err.value.message and "manager must be reachable" in err.value.hint


def test_a_new_worker_url_or_token_updates_only_that_workers_kubeconfig_secret_redacted(fleet):
    run(fleet, fleet_params())
    moved = fleet_params()
    moved["clusters"]["workers"][0]["api_server"] = "https://east-new.example:6443"
    result = run(fleet, moved, diff=True)
    assert {(r["cluster"], r["kind"], r["name"]) for r in result["updated"]} == {
        ("hub", "Secret", "gpuaas-multikueue-east")}, result["updated"]
    secret = fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-east")]
    assert "https://east-new.example:6443" in base64.b64decode(secret["data"]["kubeconfig"]).decode()
    assert TOKEN not in repr(result["diff"]) and base64.b64encode(TOKEN.encode()).decode() not in repr(result["diff"])
    # the token rotated on the worker (its token Secret re-issued): the manager's Secret follows, then is stable
    token = fleet["east"].objects[("Secret", "kueue-system", "gpuaas-multikueue-token")]
    token["data"] = dict(token["data"], token=base64.b64encode(b"rotated-token-value").decode())
    runner = FleetRunner(None, moved, sleep=lambda s: None, clock=lambda: 0.0, clients=fleet)
    seen = []
    runner.secret_sink = seen.append
    rotated = runner.run()
    assert [(r["cluster"], r["name"]) for r in rotated["updated"]] == [("hub", "gpuaas-multikueue-east")]
    assert "rotated-token-value" in seen  # registered as a no_log value before anything is returned
    secret = fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-east")]
    assert "rotated-token-value" in base64.b64decode(secret["data"]["kubeconfig"]).decode()
    assert run(fleet, moved)["changed"] is False
