# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node_pools module's reconcile on the unit fake of the API server: apply, idempotence, prune, template check."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_runner import NodePoolsRunner

import fake_kube  # noqa: E402  (tests/unit/modules/fake_kube.py, on sys.path through conftest)
from fake_kube import FakeKube
from module_utils.fake_kube import api_exception  # noqa: E402  (the shared fake, on sys.path through fake_kube)

fake_kube.NAMESPACED.add("MachineSet")
MS_V = "machine.openshift.io/v1beta1"
SERVED = [("v1", "Secret"), ("v1", "Node"), ("keda.sh/v1alpha1", "ScaledObject"),
          ("keda.sh/v1alpha1", "ClusterTriggerAuthentication"), (MS_V, "MachineSet")]


def machineset(labels):
    return {"apiVersion": MS_V, "kind": "MachineSet", "metadata": {"name": "gpu-a", "namespace": "openshift-machine-api"},
            "spec": {"replicas": 0, "template": {"spec": {"metadata": {"labels": labels}}}}}


def params(pools=True):
    return {"flavors": [{"name": "h100-elastic", "node_labels": {"gpuaas.io/pool": "h100"}}],
            "tenants": [{"name": "nlp", "namespaces": ["nlp"],
                         "quotas": [{"flavor": "h100-elastic", "resources": {"nvidia.com/gpu": 32}}]}],
            "prometheus": {"url": "http://prom:9090"}, "check_capacity": True, "check_templates": True,
            "node_pools": [{"name": "h100", "flavor": "h100-elastic", "target": {"name": "gpu-a"}, "max_nodes": 4,
                            "gpus_per_node": 8, "node_labels": {"gpuaas.io/pool": "h100"}}] if pools else []}


def test_apply_then_nothing_then_prune():
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    first = NodePoolsRunner(kube, params()).run()
    assert first["changed"] and [c["name"] for c in first["created"]] == ["gpuaas-pool-h100"]
    assert first["capacity"] == {"h100-elastic": {"nvidia.com/gpu": "32"}}  # no node at all: the pool's maximum
    so = kube.objects[("ScaledObject", "openshift-machine-api", "gpuaas-pool-h100")]
    assert so["metadata"]["labels"]["gpuaas.io/component"] == "node-pools"
    second = NodePoolsRunner(kube, params()).run()
    assert not second["changed"] and second["summary"]["unchanged"] == 1
    inv = params(pools=False)
    inv["allow_overcommit"] = True
    # safe mode: a pool missing from the inventory is kept and reported, not pruned
    kept = NodePoolsRunner(kube, inv).run()
    assert not kept["changed"] and kept["deleted"] == []
    assert [(d["kind"], d["name"]) for d in kept["drift"]] == [("ScaledObject", "gpuaas-pool-h100")]
    assert ("ScaledObject", "openshift-machine-api", "gpuaas-pool-h100") in kube.objects
    third = NodePoolsRunner(kube, dict(inv, prune=True)).run()
    assert [d["name"] for d in third["deleted"]] == ["gpuaas-pool-h100"] and third["drift"] == []
    assert ("ScaledObject", "openshift-machine-api", "gpuaas-pool-h100") not in kube.objects


def test_check_mode_writes_nothing():
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    out = NodePoolsRunner(kube, params(), check_mode=True).run()
    assert out["changed"]
    assert ("ScaledObject", "openshift-machine-api", "gpuaas-pool-h100") not in kube.objects


def test_live_template_without_the_flavors_labels_is_refused():
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "a100"}))
    with pytest.raises(GpuaasError) as info:
        NodePoolsRunner(kube, params()).run()
    assert info.value.problems == [
        "gpuaas_node_pools[0]: the template of MachineSet openshift-machine-api/gpu-a does not give its nodes the node "
        "labels of flavor 'h100-elastic': gpuaas.io/pool=h100 (Kueue would place the flavor's workloads on nodes this "
        "pool never creates)"]
    assert not any(k[0] == "ScaledObject" for k in kube.objects)


def test_missing_target_is_refused():
    kube = FakeKube(SERVED)
    with pytest.raises(GpuaasError) as info:
        NodePoolsRunner(kube, params()).run()
    assert info.value.problems == ["gpuaas_node_pools[0].target: MachineSet openshift-machine-api/gpu-a does not exist"]


def test_pools_need_prometheus():
    inv = params()
    inv["prometheus"] = {}
    with pytest.raises(GpuaasError, match="gpuaas_node_pools need gpuaas_prometheus.url"):
        NodePoolsRunner(FakeKube(SERVED), inv).run()


def test_prometheus_credentials_are_read_only_for_pools(tmp_path):
    """Without pools the token file is not read (the tenants module reads it under its run lock); with pools it is."""
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    missing = str(tmp_path / "no-such-token")
    no_pools = dict(params(pools=False), allow_overcommit=True,
                    prometheus={"url": "http://prom:9090", "token_file": missing})
    out = NodePoolsRunner(kube, no_pools).run()
    assert out["created"] == [] and not out["changed"]
    with pytest.raises(GpuaasError, match="token_file"):
        NodePoolsRunner(kube, dict(params(), prometheus=no_pools["prometheus"])).run()


LEASE_KEY = ("Lease", "kube-system", "gpuaas-tenants")


def held_lease(holder="awx-job-41@runner-7"):
    """The tenants run lock as another run holds it right now (renewed a moment ago)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gpuaas-tenants", "namespace": "kube-system", "resourceVersion": "7", "uid": "u-1"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                     "acquireTime": "2026-12-02T10:00:00.000000Z", "renewTime": "2026-12-02T10:00:00.000000Z"}}


def test_pools_run_holds_the_tenants_run_lock_and_gives_it_back():
    """Issue 22 item 5: node_pools writes ScaledObjects and a credential beside the tenants run: same Lease."""
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    out = NodePoolsRunner(kube, params()).run()
    assert out["lock"]["lease"] == "Lease kube-system/gpuaas-tenants" and out["lock"]["took_over"] is None
    creates = [c for c in kube.calls if c[0] == "create" and c[1] == "Lease"]
    assert len(creates) == 1
    first_apply = next(i for i, c in enumerate(kube.calls) if c[0] == "apply" and not c[4])
    assert kube.calls.index(creates[0]) < first_apply  # held before the first write
    assert LEASE_KEY not in kube.objects  # released at the end


def test_pools_run_waits_for_another_runs_lock_and_writes_nothing():
    """A tenants run of another automation job holds the Lease: the pools run fails after lock_wait, nothing written."""
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    kube.add(held_lease())
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        # the other run keeps renewing: its record moves, so it is never taken over
        lease = kube.objects[LEASE_KEY]
        lease["metadata"]["resourceVersion"] = str(int(lease["metadata"]["resourceVersion"]) + 1)

    runner = NodePoolsRunner(kube, dict(params(), lock_wait=5), sleep=sleep, clock=lambda: now[0])
    with pytest.raises(GpuaasError) as info:
        runner.run()
    assert "awx-job-41@runner-7" in info.value.message
    assert not [w for w in kube.writes if w[1][0] != "Lease"]
    assert kube.objects[LEASE_KEY]["spec"]["holderIdentity"] == "awx-job-41@runner-7"  # not released by us


def test_pools_check_mode_warns_about_a_holder_and_takes_no_lock():
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    kube.add(held_lease())
    runner = NodePoolsRunner(kube, params(), check_mode=True)
    out = runner.run()
    assert "lock" not in out and kube.writes == []
    assert any("holds the lock" in w for w in runner.warnings)


def test_pools_run_without_lock_rights_says_so():
    """An account without rights on the Lease runs unguarded, with the same warning as the tenants run."""
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    lease_res = kube.resource("coordination.k8s.io/v1", "Lease")

    def forbidden(*_args, **_kwargs):
        raise api_exception(403, "Forbidden", 'leases.coordination.k8s.io "gpuaas-tenants" is forbidden')

    lease_res.get = forbidden
    runner = NodePoolsRunner(kube, params())
    out = runner.run()
    assert "lock" not in out and out["changed"]
    assert any("could not be taken (forbidden)" in w for w in runner.warnings)


def test_a_run_without_pools_and_without_prune_takes_no_lock():
    """It only reports drift: no write at all, not even the Lease (the tenants run after it may refuse with nothing
    written — tests/integration/test_brownfield.py checks that on the audit log)."""
    kube = FakeKube(SERVED)
    out = NodePoolsRunner(kube, dict(params(pools=False), allow_overcommit=True)).run()
    assert "lock" not in out and kube.writes == []
    assert not [c for c in kube.calls if c[1] == "Lease"]


def test_a_run_without_pools_that_prunes_takes_the_lock_only_before_it_deletes():
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    NodePoolsRunner(kube, params()).run()  # a pool's objects, then the pool leaves the inventory
    nothing_to_do = dict(params(pools=False), allow_overcommit=True, prune=True)
    kube.reset_calls()
    out = NodePoolsRunner(kube, nothing_to_do).run()
    assert [d["name"] for d in out["deleted"]] == ["gpuaas-pool-h100"] and out["lock"]
    creates = [i for i, c in enumerate(kube.calls) if c[0] == "create" and c[1] == "Lease"]
    deletes = [i for i, c in enumerate(kube.calls) if c[0] == "delete" and c[1] == "ScaledObject" and not c[4]]
    assert creates and deletes and creates[0] < deletes[0]
    kube.reset_calls()
    again = NodePoolsRunner(kube, nothing_to_do).run()  # nothing left to prune: no write, no lock
    assert "lock" not in again and not [c for c in kube.calls if c[1] == "Lease"]
