# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Brownfield (issue 17): the tenants module refuses to take over objects it does not own before its first write
(not even the lock), adopts what ``adopt`` names and reports the GPU workloads of adopted namespaces."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

import test_tenants  # noqa: E402  (tests/unit/modules, on sys.path through conftest)
from test_tenants import KV, params, run
from module_utils.fake_kube import foreign_object  # noqa: E402  (the shared fake, on sys.path through test_tenants)

WORKLOAD_KINDS = {"Pod": "v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


def workloads_cluster():
    """The tenants fake, also serving the workload kinds an adopted namespace is scanned for."""
    return test_tenants.cluster(served=[(api_version, kind) for kind, api_version in WORKLOAD_KINDS.items()])


def hand_made(client, kind, name, namespace=None, labels=None, manager="kubectl-create", spec=None):
    """An object ``manager`` created (it owns the spec), stored in ``client``; returns the stored object."""
    api_version = WORKLOAD_KINDS.get(kind) or ("v1" if kind == "Namespace" else KV)
    obj = foreign_object(kind, name, namespace, spec=spec or {}, labels=labels, api_version=api_version,
                         manager=manager)
    obj["metadata"]["uid"] = "uid-hand-%s" % name
    obj["metadata"]["managedFields"][0]["fieldsV1"] = {"f:spec": {}}
    client.add(obj)
    return client.objects[(kind, namespace, name)]


def gpu_deployment(name, namespace, labels=None):
    return {"template": {"metadata": {"labels": labels or {}}, "spec": {"containers": [
        {"name": "vllm", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}


@pytest.mark.parametrize("check", [False, True])
def test_hand_made_cluster_queue_fails_the_run_before_anything_is_written(check):
    client = workloads_cluster()
    hand_made(client, "ClusterQueue", "nlp", manager="kubectl-client-side-apply")
    with pytest.raises(GpuaasError) as info:
        run(client, params(), check=check)
    err = info.value
    assert client.side_effects() == []  # no apply, no dry run, no lock
    assert "ClusterQueue/nlp" in err.message
    assert err.problems == ["ClusterQueue/nlp is not managed by gpuaas.platform; field managers: "
                            "kubectl-client-side-apply (Update)"]
    assert "gpuaas_tenants_adopt" in err.hint
    assert ("Namespace", None, "nlp-train") not in client.objects


def test_adopting_the_cluster_queue_converges_and_reports_it():
    client = workloads_cluster()
    hand_made(client, "ClusterQueue", "nlp")
    preview = run(client, params(adopt=["ClusterQueue/nlp"]), check=True)
    assert [a["name"] for a in preview["adopted"]] == ["nlp"]  # would adopt
    assert client.writes == []
    result = run(client, params(adopt=["ClusterQueue/nlp"]))
    assert result["adopted"] == [{"apiVersion": KV, "kind": "ClusterQueue", "name": "nlp",
                                  "managers": ["kubectl-create (Update)"], "reason": "adopt list"}]
    assert {"apiVersion": KV, "kind": "ClusterQueue", "name": "nlp"} in result["updated"]
    labels = client.objects[("ClusterQueue", None, "nlp")]["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "gpuaas.platform" and labels["gpuaas.io/tenant"] == "nlp"
    again = run(client, params())  # owned now: no adopt needed
    assert again["changed"] is False and again["adopted"] == []


def test_adopted_namespace_reports_the_gpu_workloads_the_policy_would_refuse():
    client = workloads_cluster()
    hand_made(client, "Namespace", "nlp-serve")
    hand_made(client, "Deployment", "vllm", namespace="nlp-serve", spec=gpu_deployment("vllm", "nlp-serve"))
    queued = hand_made(client, "Deployment", "queued", namespace="nlp-serve", spec=gpu_deployment("queued", "nlp-serve"))
    queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "default"
    hand_made(client, "Deployment", "elsewhere", namespace="vision-dev", spec=gpu_deployment("x", "vision-dev"))
    rec = test_tenants.TenancyRunner(client, params(adopt=["Namespace/nlp-serve"]), sleep=lambda s: None,
                                     clock=lambda: 0.0)
    result = rec.run()
    assert [a["name"] for a in result["adopted"]] == ["nlp-serve"]
    assert result["adopted_namespace_workloads"] == [
        {"kind": "Deployment", "namespace": "nlp-serve", "name": "vllm", "resources": ["nvidia.com/gpu"]}]
    warning = [w for w in rec.warnings if "admission policy" in w]
    assert len(warning) == 1 and "Deployment nlp-serve/vllm" in warning[0] and "kueue.x-k8s.io/queue-name" in warning[0]
    assert any(w.startswith("adopted 1 object") and "Namespace/nlp-serve" in w for w in rec.warnings)


def test_a_namespace_an_admin_labelled_for_the_tenant_needs_no_adopt_entry():
    client = workloads_cluster()
    hand_made(client, "Namespace", "nlp-train", labels={"gpuaas.io/tenant": "nlp"})
    result = run(client, params())
    assert [(a["name"], a["reason"]) for a in result["adopted"]] == [("nlp-train", "labelled gpuaas.io/tenant=nlp")]


def test_an_object_of_a_tenant_outside_limit_tenants_is_not_checked():
    client = workloads_cluster()
    run(client, params())
    hand_made(client, "ClusterQueue", "intruder")  # no inventory object has this name
    p = params(limit_tenants=["vision"])
    del client.objects[("ClusterQueue", None, "nlp")]
    hand_made(client, "ClusterQueue", "nlp")  # nlp is not reconciled by this limited run
    result = run(client, p)
    assert result["adopted"] == []
    assert "app.kubernetes.io/managed-by" not in client.objects[("ClusterQueue", None, "nlp")]["metadata"]["labels"]


def test_workloads_that_cannot_be_listed_are_a_warning_not_a_failure():
    client = workloads_cluster()
    client.forbid("list", "Pod")  # an account that may not list Pods (a least-privilege tenants account)
    hand_made(client, "Namespace", "analytics")
    hand_made(client, "Deployment", "vllm", namespace="analytics", spec=gpu_deployment("vllm", "analytics"))
    rec = test_tenants.TenancyRunner(client, params(adopt=["*"]), sleep=lambda s: None, clock=lambda: 0.0)
    result = rec.run()
    assert [w["name"] for w in result["adopted_namespace_workloads"]] == ["vllm"]  # the other kinds were read
    assert any(w.startswith("cannot list Pod in analytics (forbidden)") for w in rec.warnings)


def test_the_guard_needs_no_credential_and_the_credential_is_still_read_under_the_lock(tmp_path):
    missing = str(tmp_path / "no-such-token")
    client = workloads_cluster()
    hand_made(client, "ClusterQueue", "nlp")
    p = params(prometheus={"url": "http://prom:9090", "token_file": missing})
    with pytest.raises(GpuaasError) as info:
        run(client, p)
    assert "ClusterQueue/nlp" in info.value.message  # refused before the token file is read
    assert client.side_effects() == []
    client = workloads_cluster()
    with pytest.raises(GpuaasError) as info:
        run(client, p)
    assert "cannot read token_file" in info.value.message
    assert ("create", "Lease") in client.verbs()  # read while holding the lock, as a slow file system would be
