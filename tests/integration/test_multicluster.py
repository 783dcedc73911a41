# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MultiKueue fleet on two labs (issue 27): the manager is the lab of LAB_DIR, the worker the lab of
GPUAAS_WORKER_LAB_DIR (its own ports: ``make lab-up LAB_DIR=… LAB_PORT_OFFSET=…``). Both run the real kube-apiserver
and the real Kueue (v0.19.2, MultiKueue is beta and on by default); the worker's pods run on KWOK nodes.

The objects go the collection's data path: inventory -> ``TenantModel`` -> ``manifests/multikueue.py`` ->
``ApplyEngine`` (server-side apply, one field manager) on each cluster with the connection options of
``gpuaas_clusters``. Not part of ``make test`` (it needs a second lab).
"""
from __future__ import annotations

import base64
import os
import statistics
import time
import uuid
from pathlib import Path

import pytest
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import _dynamic_client, _lab_from_env, wait_until  # pylint: disable=import-error

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import get_client
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue

WORKER_LAB_DIR = os.environ.get("GPUAAS_WORKER_LAB_DIR")
pytestmark = pytest.mark.skipif(not WORKER_LAB_DIR, reason="needs a worker lab beside the manager lab: "
                                                           "GPUAAS_WORKER_LAB_DIR=<its LAB_DIR> (docs/multicluster.md)")
TENANT = "mk-vision"
NAMESPACE = "mk-vision"
FLAVOR = "mk-h100"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# How many jobs the dispatch latency is measured over (one after the other: the latency of one, not of a queue).
LATENCY_JOBS = int(os.environ.get("GPUAAS_MK_LATENCY_JOBS", "10"))


@pytest.fixture(scope="module")
def worker_lab():
    return _lab_from_env(Path(WORKER_LAB_DIR))


@pytest.fixture(scope="module")
def worker_kube(worker_lab):
    return _dynamic_client(worker_lab)


@pytest.fixture(scope="module")
def model(lab, worker_lab):
    return TenantModel.from_inventory({
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_tenants": [{"name": TENANT, "namespaces": [NAMESPACE],
                            "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 4, "cpu": 16, "memory": "64Gi"}}]}],
        "gpuaas_clusters": {
            "manager": {"name": "lab-manager", "auth": {"kubeconfig": lab.kubeconfig, "context": lab.admin_context}},
            "workers": [{"name": "lab-worker1", "api_server": worker_lab.apiserver,
                         "auth": {"kubeconfig": worker_lab.kubeconfig, "context": worker_lab.admin_context},
                         # the two H100 KWOK nodes of lab/topology.yaml
                         "flavors": [{"name": FLAVOR, "capacity": {"nvidia.com/gpu": 16, "cpu": 448, "memory": "4Ti"}}]}],
        },
    })


def _token_secret(kube, worker):
    secret = kube.resources.get(api_version="v1", kind="Secret").get(
        name=multikueue.WORKER_TOKEN_SECRET, namespace=worker.kueue_namespace).to_dict()
    data = secret.get("data") or {}
    return data if data.get("token") and data.get("ca.crt") else None


def converge(model, worker_kubes):
    """One fleet run: each worker (tenancy + MultiKueue's identity), its token into a kubeconfig, then the manager."""
    changed = {}
    kubeconfigs = {}
    for worker in model.fleet.workers:
        # MultiKueue watches every framework the MANAGER's Kueue integrates (the lab's: every one): the worker role
        # must allow exactly those, or the MultiKueueCluster stays ClientConnectionFailed (measured on the lab)
        result = ApplyEngine(get_client(params=worker.auth)).reconcile(
            multikueue.worker_objects(model, worker, frameworks=multikueue.MULTIKUEUE_FRAMEWORKS))
        changed[worker.name] = result.changed
        data = wait_until(lambda w=worker: _token_secret(worker_kubes[w.name], w), 30, "the token of %s" % worker.name)
        kubeconfigs[worker.name] = multikueue.worker_kubeconfig(worker, worker.api_server, data["ca.crt"],
                                                                base64.b64decode(data["token"]).decode())
    manager = model.fleet.manager
    result = ApplyEngine(get_client(params=manager.auth)).reconcile(multikueue.manager_objects(model, kubeconfigs))
    changed[manager.name] = result.changed
    return changed, kubeconfigs


def _condition(kube, api_version, kind, name, ctype="Active"):
    obj = kube.resources.get(api_version=api_version, kind=kind).get(name=name).to_dict()
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return cond
    return None


@pytest.fixture(scope="module")
def fleet(model, kube, worker_kube):
    changed, kubeconfigs = converge(model, {"lab-worker1": worker_kube})
    yield {"first": changed, "kubeconfigs": kubeconfigs}
    # Leave both labs as found: a ClusterQueue still carrying the MultiKueue check would be inactive (and fail the
    # validate suites) once the worker lab is gone.
    manager_objs = multikueue.manager_objects(model, kubeconfigs)
    worker_objs = [o for w in model.fleet.workers
                   for o in multikueue.worker_objects(model, w, frameworks=multikueue.MULTIKUEUE_FRAMEWORKS)]
    for client, objs in ((kube, manager_objs), (worker_kube, worker_objs)):
        for obj in reversed(objs):
            meta = obj["metadata"]
            try:
                client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).delete(
                    name=meta["name"], namespace=meta.get("namespace"))
            except NotFoundError:
                pass


def test_the_fleet_connects(fleet, kube):
    assert fleet["first"]  # created on both clusters
    cond = wait_until(lambda: (_condition(kube, multikueue.KUEUE_V, "MultiKueueCluster", "lab-worker1") or {}).get(
        "status") == "True" and _condition(kube, multikueue.KUEUE_V, "MultiKueueCluster", "lab-worker1"), 60,
        "MultiKueueCluster lab-worker1 Active")
    assert cond["reason"] == "Active", cond
    assert wait_until(lambda: (_condition(kube, multikueue.KUEUE_V, "AdmissionCheck", multikueue.ADMISSION_CHECK_NAME)
                               or {}).get("status") == "True", 60, "the AdmissionCheck Active")
    assert wait_until(lambda: (_condition(kube, multikueue.KUEUE_V, "ClusterQueue", TENANT) or {}).get("status")
                      == "True", 60, "the manager's ClusterQueue Active")


def test_a_second_run_changes_nothing_anywhere(fleet, model, worker_kube):
    changed, _kubeconfigs = converge(model, {"lab-worker1": worker_kube})
    assert changed == {"lab-worker1": False, "lab-manager": False}


def _job(name):
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"},
                                              "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def test_a_tenant_job_submitted_on_the_manager_runs_on_the_worker(fleet, kube, worker_kube):
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    worker_jobs = worker_kube.resources.get(api_version="batch/v1", kind="Job")
    latencies = []
    for _index in range(LATENCY_JOBS):
        name = "mk-%s" % uuid.uuid4().hex[:8]
        start = time.monotonic()
        jobs.create(body=_job(name), namespace=NAMESPACE)

        def remote():
            try:
                return worker_jobs.get(name=name, namespace=NAMESPACE).to_dict()
            except Exception:  # pylint: disable=broad-except  # NotFoundError until MultiKueue copies the Job
                return None
        remote_job = wait_until(remote, 60, "the copy of %s on the worker" % name, interval=0.05)
        latencies.append(time.monotonic() - start)
        # the copy is MultiKueue's (its origin label) and its pod is the worker's (KWOK), never the manager's
        assert remote_job["metadata"]["labels"].get("kueue.x-k8s.io/multikueue-origin"), remote_job["metadata"]
        local = jobs.get(name=name, namespace=NAMESPACE).to_dict()
        assert local["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue", local["spec"]
        # the status flows back: the manager's Job completes when the worker's does
        wait_until(lambda: (jobs.get(name=name, namespace=NAMESPACE).to_dict().get("status") or {}).get("succeeded"),
                   90, "%s succeeded on the manager" % name)
        pods = kube.resources.get(api_version="v1", kind="Pod").get(
            namespace=NAMESPACE, label_selector="job-name=%s" % name).items
        assert not pods, "a dispatched Job must not run pods on the manager"
    latencies.sort()
    report = "dispatch latency (manager Job created -> worker copy exists), n=%d: p50 %.2fs, max %.2fs, mean %.2fs" % (
        len(latencies), statistics.median(latencies), latencies[-1], statistics.mean(latencies))
    print(report)
    out = os.environ.get("GPUAAS_MK_LATENCY_REPORT")
    if out:
        Path(out).write_text(report + "\n" + "\n".join("%.3f" % x for x in latencies) + "\n")


def _as_service_account(worker_lab, token):
    from kubernetes import client, dynamic  # pylint: disable=import-outside-toplevel

    configuration = client.Configuration()
    configuration.host = worker_lab.apiserver
    configuration.ssl_ca_cert = worker_lab.ca
    configuration.api_key = {"authorization": "Bearer %s" % token}
    return dynamic.DynamicClient(client.ApiClient(configuration))


def test_the_worker_credential_cannot_write_outside_the_tenants_namespaces(fleet, worker_lab, worker_kube):
    """Adversarial: with the token the manager holds for the worker, write where MultiKueue never writes."""
    from kubernetes.dynamic.exceptions import ForbiddenError  # pylint: disable=import-outside-toplevel

    token = fleet["kubeconfigs"]["lab-worker1"]["users"][0]["user"]["token"]
    sa = _as_service_account(worker_lab, token)
    sa_jobs = sa.resources.get(api_version="batch/v1", kind="Job")
    for namespace in ("kube-system", "default", "kueue-system"):
        with pytest.raises(ForbiddenError):
            sa_jobs.create(body=dict(_job("escape"), metadata={"name": "escape", "namespace": namespace}),
                           namespace=namespace, query_params=[("dryRun", "All")])
    with pytest.raises(ForbiddenError):
        sa.resources.get(api_version="v1", kind="Secret").get(namespace="kueue-system")
    with pytest.raises(ForbiddenError):
        sa.resources.get(api_version="v1", kind="ConfigMap").get(namespace=NAMESPACE)
    # what MultiKueue does is allowed: create a Job in the tenant's namespace (dry run), list Workloads everywhere
    sa_jobs.create(body=_job("allowed"), namespace=NAMESPACE, query_params=[("dryRun", "All")])
    sa.resources.get(api_version=multikueue.KUEUE_V, kind="Workload").get()
