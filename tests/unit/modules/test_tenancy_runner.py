# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One tenancy run, one pass over each input (issue 21): the inventory is parsed once, the desired set is built once,
and every kind is LISTed once — the ownership guard, the safe-mode decisions, the drain, the moved LocalQueues, the
reconcile and the drift report all work on that one read. Under the Lease lock the ClusterQueues are listed once more
and compared (generation, labels): the state is read again only when another run changed them in between."""

from __future__ import annotations

import collections

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import LeaseLock
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import node_pools_step, tenancy_runner

from test_tenants import cluster, params, run  # noqa: E402  (tests/unit/modules, on sys.path)
from test_tenancy_node_pools import pool_cluster, pool_params  # noqa: E402

PROM = {"url": "https://prom:9091", "token": "s3cret"}


@pytest.fixture
def counted(monkeypatch):
    """Calls of the parser, the builders (the tenancy's, the pools') and the Prometheus credential resolver."""
    counts = collections.Counter()
    parse, build = TenantModel.from_inventory, builders.desired_objects
    build_pools, credential = node_pools_step.builders.desired_objects, tenancy_runner.prometheus_credential

    def building_pools(*args, **kwargs):
        counts["build_pools"] += 1
        return build_pools(*args, **kwargs)

    def reading_credential(*args, **kwargs):
        counts["credential"] += 1
        return credential(*args, **kwargs)

    def parsing(*args, **kwargs):
        counts["parse"] += 1
        return parse(*args, **kwargs)

    def building(*args, **kwargs):
        counts["build"] += 1
        return build(*args, **kwargs)

    monkeypatch.setattr(tenancy_runner.TenantModel, "from_inventory", staticmethod(parsing))
    monkeypatch.setattr(tenancy_runner.builders, "desired_objects", building)
    monkeypatch.setattr(node_pools_step.builders, "desired_objects", building_pools)
    monkeypatch.setattr(tenancy_runner, "prometheus_credential", reading_credential)
    return counts


def lists(client):
    return collections.Counter(c[1] for c in client.calls if c[0] == "list")


def test_one_run_parses_once_builds_once_and_lists_each_kind_once(counted):
    client = cluster()
    run(client, params(prometheus=PROM))  # converge: every kind exists
    p = params(prometheus=PROM, prune=True)
    p["tenants"][1]["namespaces"] = ["vision-dev"]  # a LocalQueue, RoleBindings to prune, a namespace to keep
    client.reset_calls()
    counted.clear()
    check = run(client, p, check=True)
    assert (counted["parse"], counted["build"]) == (1, 1)
    assert set(lists(client).values()) == {1}, lists(client)  # no lock in check mode: one LIST per kind
    assert {"ClusterQueue", "LocalQueue", "Namespace", "RoleBinding", "Secret", "Node"} <= set(lists(client))
    assert check["summary"]["deleted"] >= 3 and check["kept_namespaces"] == ["vision-prod"]

    client.reset_calls()
    counted.clear()
    real = run(client, p)
    assert (counted["parse"], counted["build"]) == (1, 1)
    again = lists(client)
    assert again.pop("ClusterQueue") == 2  # the read, and the re-check under the lock
    assert set(again.values()) == {1}, again
    assert [d["name"] for d in real["deleted"]] == [d["name"] for d in check["deleted"]]
    assert real["kept_namespaces"] == ["vision-prod"]


def test_one_run_with_node_pools_parses_once_builds_once_and_lists_each_kind_once(counted):
    """The same with the node pools step (issue 21): the pools are parsed with the inventory, built once, their kinds
    (ScaledObject, Secret, ClusterTriggerAuthentication) LISTed once with the tenancy's, the credential read once."""
    client = pool_cluster()
    run(client, pool_params())  # converge: every kind exists, the pool's objects too
    p = pool_params(prune=True)
    p["tenants"][1]["namespaces"] = ["vision-dev"]
    p["node_pools"][0]["max_nodes"] = 5  # the pool's ScaledObject changes
    client.reset_calls()
    counted.clear()
    check = run(client, p, check=True)
    assert (counted["parse"], counted["build"], counted["build_pools"]) == (1, 1, 1)
    assert set(lists(client).values()) == {1}, lists(client)  # no lock in check mode: one LIST per kind
    assert {"ClusterQueue", "LocalQueue", "Namespace", "RoleBinding", "Secret", "Node", "ScaledObject",
            "ClusterTriggerAuthentication"} <= set(lists(client))
    assert [u["name"] for u in check["node_pools"]["updated"]] == ["gpuaas-pool-h100"]
    # both steps keep their Secret in the KEDA namespace: one LIST there, never cluster-wide (CombinedScope pins it)
    assert [c[2] for c in client.calls if c[0] == "list" and c[1] == "Secret"] == ["keda"]

    client.reset_calls()
    counted.clear()
    real = run(client, p)
    assert (counted["parse"], counted["build"], counted["build_pools"], counted["credential"]) == (1, 1, 1, 1)
    again = lists(client)
    assert again.pop("ClusterQueue") == 2  # the read, and the re-check under the lock
    assert set(again.values()) == {1}, again
    assert [c for c in client.calls if c[1] == "MachineSet"] == [("get", "MachineSet", "openshift-machine-api", "gpu-a")]
    assert client.objects[("ScaledObject", "openshift-machine-api", "gpuaas-pool-h100")]["spec"]["maxReplicaCount"] == 5
    assert "gpuaas-pool-h100" in [u["name"] for u in real["updated"]]  # in the run's list, not only node_pools'
    leases = [c for c in client.calls if c[1] == "Lease" and c[0] == "create"]
    assert len(leases) == 1  # one Lease for the tenancy and its pools


def test_state_read_again_under_the_lock_when_another_run_changed_a_cluster_queue(counted, monkeypatch):
    client = cluster()
    run(client, params())
    acquire = LeaseLock.acquire

    def another_run_finished_meanwhile(lock):
        client.objects[("ClusterQueue", None, "nlp")]["metadata"]["generation"] = 2  # its spec changed
        return acquire(lock)

    monkeypatch.setattr(LeaseLock, "acquire", another_run_finished_meanwhile)
    client.reset_calls()
    counted.clear()
    result = run(client, params())
    assert (counted["parse"], counted["build"]) == (1, 1)  # read again, not built again
    assert lists(client)["ClusterQueue"] == 3 and lists(client)["LocalQueue"] == 2
    assert result["changed"] is False


def test_a_status_update_meanwhile_is_no_reason_to_read_again(counted, monkeypatch):
    client = cluster()
    run(client, params())
    acquire = LeaseLock.acquire

    def kueue_wrote_a_status_meanwhile(lock):
        cq = client.objects[("ClusterQueue", None, "nlp")]
        cq["metadata"]["resourceVersion"] = "moved"
        cq["status"] = {"pendingWorkloads": 3}
        return acquire(lock)

    monkeypatch.setattr(LeaseLock, "acquire", kueue_wrote_a_status_meanwhile)
    client.reset_calls()
    run(client, params())
    assert lists(client)["ClusterQueue"] == 2 and lists(client)["LocalQueue"] == 1


def test_the_credential_fills_the_secret_it_is_read_for():
    client = cluster()
    run(client, params(prometheus=PROM))
    secret = client.objects[("Secret", "keda", "gpuaas-prometheus")]
    assert tenancy_runner.CREDENTIAL_STAND_IN not in str(secret)
    assert secret["data"] == {"bearerToken": "czNjcmV0"}  # base64 of s3cret


def test_an_empty_token_file_is_no_credential_after_all(counted, tmp_path):
    """The one case with a second build: the file named a credential, but held none (no Secret, plain triggers)."""
    empty = tmp_path / "token"
    empty.write_text("")
    client = cluster()
    run(client, params(prometheus={"url": "https://prom:9091", "token_file": str(empty)}))
    assert (counted["parse"], counted["build"]) == (1, 2)
    assert ("Secret", "keda", "gpuaas-prometheus") not in client.objects
    assert not any(tenancy_runner.CREDENTIAL_STAND_IN in str(o) for o in client.objects.values())
