# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node pools as a step of the tenancy run (issue 21), on the unit fake of the API server: module tenants with option
node_pools validates the pools with the inventory (capacity counts a pool's maximum), checks their templates before
any write, applies and prunes their objects under the same Lease, and reports them under ``node_pools``; without the
option it never touches a pool object."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.fleet_runner import FleetRunner

import fake_kube  # noqa: E402  (tests/unit/modules/fake_kube.py, on sys.path through conftest)
from test_tenants import cluster, params, run  # noqa: E402

fake_kube.NAMESPACED.add("MachineSet")
MS_V = "machine.openshift.io/v1beta1"
PROM = {"url": "https://prom:9091", "token": "s3cret"}
POOL_SO = ("ScaledObject", "openshift-machine-api", "gpuaas-pool-h100")
POOL_SECRET = ("Secret", "keda", "gpuaas-prometheus-node-pools")
POOL_CTA = ("ClusterTriggerAuthentication", None, "gpuaas-prometheus-node-pools")


def machineset(labels):
    return {"apiVersion": MS_V, "kind": "MachineSet", "metadata": {"name": "gpu-a", "namespace": "openshift-machine-api"},
            "spec": {"replicas": 0, "template": {"spec": {"metadata": {"labels": labels}}}}}


def pool_cluster(template_labels=None):
    """The tenants run's fake cluster with a MachineSet whose template gives its nodes ``template_labels``."""
    client = cluster(served=[(MS_V, "MachineSet")])
    client.add(machineset({"gpuaas.io/pool": "h100"} if template_labels is None else template_labels))
    return client


def pool_params(pools=True, **extra):
    """The lab inventory plus an elastic flavor fed by one pool: nlp has 32 GPUs of it, which no node offers
    (the capacity check passes only when it counts the pool's maximum, 4 nodes x 8 GPUs)."""
    p = params(prometheus=PROM, **extra)
    p["flavors"] = p["flavors"] + [{"name": "h100-elastic", "node_labels": {"gpuaas.io/pool": "h100"}}]
    p["tenants"] = copy.deepcopy(p["tenants"])
    p["tenants"][0]["quotas"].append({"flavor": "h100-elastic", "resources": {"nvidia.com/gpu": 32}})
    p["node_pools"] = [{"name": "h100", "flavor": "h100-elastic", "target": {"name": "gpu-a"}, "max_nodes": 4,
                        "gpus_per_node": 8, "node_labels": {"gpuaas.io/pool": "h100"}}] if pools else []
    p["check_templates"] = True
    return p


def test_pools_are_applied_with_the_tenancy_and_a_second_run_changes_nothing():
    client = pool_cluster()
    first = run(client, pool_params())
    assert POOL_SO in client.objects and POOL_SECRET in client.objects and POOL_CTA in client.objects
    so = client.objects[POOL_SO]
    assert so["metadata"]["labels"]["gpuaas.io/component"] == "node-pools"
    assert client.objects[POOL_SECRET]["data"] == {"bearerToken": "czNjcmV0"}  # base64 of s3cret, read once
    pool_created = {(c["kind"], c["name"]) for c in first["node_pools"]["created"]}
    assert pool_created == {("ScaledObject", "gpuaas-pool-h100"), ("Secret", "gpuaas-prometheus-node-pools"),
                            ("ClusterTriggerAuthentication", "gpuaas-prometheus-node-pools")}
    assert pool_created <= {(c["kind"], c["name"]) for c in first["created"]}  # in the run's lists too
    assert first["node_pools"]["pools"]["h100"]["target"] == "MachineSet openshift-machine-api/gpu-a"
    assert first["capacity"]["h100-elastic"] == {"nvidia.com/gpu": "32"}
    second = run(client, pool_params())
    assert second["changed"] is False and second["node_pools"]["changed"] is False
    assert second["node_pools"]["summary"] == {"created": 0, "updated": 0, "unchanged": 3, "deleted": 0}


def test_without_the_pools_the_capacity_check_refuses_the_pool_fed_quota():
    """The proof that the tenancy run's capacity check counts the pools: the same quota without them is refused."""
    p = pool_params()
    del p["node_pools"]
    with pytest.raises(InventoryError, match="h100-elastic"):
        run(pool_cluster(), p)


def test_a_pool_template_problem_stops_the_whole_run_before_any_write():
    client = pool_cluster(template_labels={"gpuaas.io/pool": "a100"})
    with pytest.raises(GpuaasError) as info:
        run(client, pool_params())
    assert info.value.problems == [
        "gpuaas_node_pools[0]: the template of MachineSet openshift-machine-api/gpu-a does not give its nodes the node "
        "labels of flavor 'h100-elastic': gpuaas.io/pool=h100 (Kueue would place the flavor's workloads on nodes this "
        "pool never creates)"]
    assert client.writes == []  # not a tenancy object, not the pools', not even the Lease


def test_a_missing_prometheus_url_with_pools_stops_the_run_before_any_write():
    client = pool_cluster()
    p = dict(pool_params(), prometheus={})
    for tenant in p["tenants"]:
        tenant.pop("autoscaling", None)  # the tenants' own triggers need the URL as well: only the pools' check is left
    with pytest.raises(GpuaasError, match="gpuaas_node_pools need gpuaas_prometheus.url"):
        run(client, p)
    assert client.writes == []


def test_tenants_without_the_option_never_lists_for_or_touches_pool_objects():
    client = pool_cluster()
    run(client, pool_params())
    before = {k: copy.deepcopy(client.objects[k]) for k in (POOL_SO, POOL_SECRET, POOL_CTA)}
    p = pool_params(prune=True)
    del p["node_pools"]
    p["allow_overcommit"] = True  # the pool-fed quota without its pool: over the (empty) capacity, accepted
    client.reset_calls()
    out = run(client, p)
    assert "node_pools" not in out
    assert {k: client.objects[k] for k in before} == before  # prune: true, and still untouched
    touched = [c for c in client.calls if c[0] in ("apply", "delete", "create", "replace") and (c[1], c[2], c[3]) in before]
    assert touched == []
    assert not [c for c in client.calls if c[1] == "MachineSet"]  # no template check either
    pool_names = {"gpuaas-pool-h100", "gpuaas-prometheus-node-pools"}
    assert not pool_names & {d["name"] for d in out["deleted"] + out["drift"]["unmanaged_objects"]}


@pytest.mark.parametrize("prune", [False, True])
def test_an_empty_pool_list_reports_or_prunes_the_pool_objects(prune):
    client = pool_cluster()
    run(client, pool_params())
    p = pool_params(pools=False, prune=prune, allow_overcommit=True)
    out = run(client, p)
    pools = out["node_pools"]
    names = {("ScaledObject", "gpuaas-pool-h100"), ("Secret", "gpuaas-prometheus-node-pools"),
             ("ClusterTriggerAuthentication", "gpuaas-prometheus-node-pools")}
    if prune:
        assert {(d["kind"], d["name"]) for d in pools["deleted"]} == names and pools["drift"] == []
        assert names <= {(d["kind"], d["name"]) for d in out["deleted"]}
        assert POOL_SO not in client.objects and POOL_SECRET not in client.objects
    else:
        assert pools["deleted"] == [] and {(d["kind"], d["name"]) for d in pools["drift"]} == names
        assert POOL_SO in client.objects and POOL_SECRET in client.objects
        assert out["changed"] is False  # the tenancy is as before: kept pool objects are no change


def test_check_mode_with_pools_writes_nothing_and_shows_the_pools_diff():
    client = pool_cluster()
    out = run(client, pool_params(), check=True, diff=True)
    assert out["changed"] and out["node_pools"]["changed"]
    assert client.writes == []
    headers = [d["after_header"] for d in out["diff"]]
    assert any("gpuaas-pool-h100" in h for h in headers)
    secret = next(d for d in out["diff"] if "gpuaas-prometheus-node-pools" in d["after_header"]
                  and d["after"].get("kind") == "Secret")
    assert "s3cret" not in str(secret) and "czNjcmV0" not in str(secret)  # redacted


def test_a_limited_run_counts_the_pools_but_touches_no_pool_object():
    # onboarding (limit_tenants): the pools are parsed - the pool-fed quota passes the capacity check, as in a full
    # run - but the pools' objects are shared by every tenant and only a full run reconciles them
    client = pool_cluster()
    out = run(client, dict(pool_params(), limit_tenants=["nlp"]))
    assert out["capacity"]["h100-elastic"] == {"nvidia.com/gpu": "32"}
    assert POOL_SO not in client.objects and POOL_SECRET not in client.objects and POOL_CTA not in client.objects
    assert not any(key in (POOL_SO, POOL_SECRET, POOL_CTA) for _verb, key in client.writes)
    assert "node_pools" not in out


def test_node_pools_with_a_fleet_is_refused_before_any_cluster_is_reached():
    fleet = {"manager": {"name": "hub", "auth": {"host": "https://hub.invalid"}},
             "workers": [{"name": "w1", "auth": {"host": "https://w1.invalid"}}]}
    with pytest.raises(GpuaasError, match="node_pools cannot be combined with clusters"):
        FleetRunner(None, dict(pool_params(), clusters=fleet)).run()
