# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local lab itself: what every other integration test stands on (issue: local GPU lab)."""
from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import create_namespace, promql, wait_until as _wait_until

PREFIX = "itlab-"
REPO = Path(__file__).resolve().parents[2]


def kubectl(lab, *args: str, context: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig]
    if context:
        cmd += ["--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=check, timeout=120)


def wait_until(predicate, timeout: float, what: str, interval: float = 1.0):
    return _wait_until(predicate, timeout, what, interval)  # this file polls every 1.0 s


@pytest.fixture
def namespace(kube):
    name = PREFIX + uuid.uuid4().hex[:6]
    ns = kube.resources.get(api_version="v1", kind="Namespace")
    # gpuaas.io/platform: these tests exercise the lab itself, so the tenants' admission policy (which refuses GPU
    # pods outside tenant namespaces once a tenancy is on the lab) leaves the namespace alone (issue 11)
    create_namespace(kube, name, {"gpuaas.io/platform": "lab-test"})
    yield name
    ns.delete(name=name)


def test_gpu_nodes_have_allocatable_gpus(kube):
    nodes = {n.metadata.name: n for n in kube.resources.get(api_version="v1", kind="Node").get().items}
    for name in ("gpu-h100-0", "gpu-h100-1"):
        node = nodes[name]
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in [t.to_dict() for t in node.spec.taints]
        ready = [c for c in node.status.conditions if c.type == "Ready"][0]
        assert ready.status == "True"
    mig = nodes["gpu-a100-mig-0"]
    assert mig.status.allocatable["nvidia.com/mig-1g.10gb"] == "7"
    assert mig.metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert "nvidia.com/gpu" not in nodes["cpu-0"].status.allocatable


def test_upstream_crds_are_served(lab):
    out = kubectl(lab, "api-resources", "-o", "name").stdout.split()
    for resource in ("clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
                     "scaledobjects.keda.sh", "triggerauthentications.keda.sh", "clusterpolicies.nvidia.com",
                     "nvidiadrivers.nvidia.com", "subscriptions.operators.coreos.com",
                     "clusterserviceversions.operators.coreos.com", "servicemonitors.monitoring.coreos.com",
                     "prometheusrules.monitoring.coreos.com", "nodefeaturerules.nfd.k8s-sigs.io",
                     "provisioningrequests.autoscaling.x-k8s.io"):
        assert resource in out, resource
    versions = kubectl(lab, "api-versions").stdout.split()
    assert ("kueue.x-k8s.io/v1beta2" in versions) == (lab.kueue_api == "v1beta2")
    assert "kueue.x-k8s.io/v1beta1" in versions
    if lab.flavor == "openshift":
        assert "config.openshift.io/v1" in versions


def test_gpu_job_runs_on_a_gpu_node_and_completes(kube, namespace):
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    jobs.create(namespace=namespace, body={
        "metadata": {"name": "gpu-job"},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "2s"}},
            "spec": {"restartPolicy": "Never",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})

    def succeeded():
        j = jobs.get(namespace=namespace, name="gpu-job")
        return j if (j.status.succeeded or 0) >= 1 else None

    job = wait_until(succeeded, 90, "the GPU job to complete")
    assert job.status.succeeded == 1
    pods = kube.resources.get(api_version="v1", kind="Pod").get(namespace=namespace, label_selector="job-name=gpu-job").items
    assert pods and pods[0].spec.nodeName.startswith("gpu-h100-")


def test_job_without_toleration_never_lands_on_gpu_nodes(kube, namespace):
    pods = kube.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace=namespace, body={
        "metadata": {"name": "no-toleration"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    time.sleep(3)
    pod = pods.get(namespace=namespace, name="no-toleration")
    assert not pod.spec.nodeName
    assert pod.status.phase == "Pending"


def test_dcgm_series_per_gpu_and_annotated_utilization(kube, lab, namespace):
    series = wait_until(lambda: promql(lab, "DCGM_FI_DEV_GPU_UTIL"), 60, "DCGM series in Prometheus")
    # 2 × 8 H100 + 7 MIG slices of the A100
    assert len(series) == 23
    uuids = {s["metric"]["UUID"] + s["metric"].get("GPU_I_ID", "") for s in series}
    assert len(uuids) == 23
    pods = kube.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace=namespace, body={
        "metadata": {"name": "busy", "annotations": {"lab.gpuaas.io/gpu-util": "85", "lab.gpuaas.io/fb-used-mib": "40000"}},
        "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                 "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                 "containers": [{"name": "trainer", "image": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})
    q = 'DCGM_FI_DEV_GPU_UTIL{namespace="%s",pod="busy"}' % namespace

    def both_gpus():
        r = promql(lab, q)
        return r if len(r) == 2 else None

    busy = wait_until(both_gpus, 60, "the busy pod's GPUs in Prometheus")
    for s in busy:
        assert float(s["value"][1]) == 85.0
        assert s["metric"]["container"] == "trainer"
        assert s["metric"]["Hostname"].startswith("gpu-h100-")
        assert s["metric"]["modelName"] == "NVIDIA H100 80GB HBM3"
    fb = promql(lab, 'DCGM_FI_DEV_FB_USED{namespace="%s",pod="busy"}' % namespace)
    assert sorted(float(s["value"][1]) for s in fb) == [40000.0, 40000.0]


def test_tenant_user_write_outside_its_rights_is_refused_and_audited(lab, audit_writes):
    name = PREFIX + "forbidden-" + uuid.uuid4().hex[:6]
    with audit_writes() as window:
        res = kubectl(lab, "create", "namespace", name, context=lab.tenant_context, check=False)
    assert res.returncode != 0
    assert "forbidden" in res.stderr.lower()
    refused = [e for e in window.events if e["user"]["username"] == "alice" and e["verb"] == "create"
               and e["objectRef"]["resource"] == "namespaces"]
    assert len(refused) == 1, window.describe()
    assert refused[0]["responseStatus"]["code"] == 403
    assert "nlp-team" in refused[0]["user"]["groups"]


def test_variant_lab_is_openshift_flavoured_with_kueue_installed_through_olm(variant_lab, variant_kube):
    versions = kubectl(variant_lab, "api-versions").stdout.split()
    # Kueue v0.19's API, as the Red Hat build of Kueue 1.4 (Kueue 0.18) serves it; its real controller runs there
    assert "kueue.x-k8s.io/v1beta2" in versions
    assert variant_lab.kueue_api == "v1beta2"
    # lab.sh status with the variant's own environment (its ports, flavour)
    status = subprocess.run(["bash", "-c", 'source "$1/env" && bash "$2" status', "status", str(variant_lab.dir),
                             str(REPO / "lab" / "lab.sh")], capture_output=True, text=True, check=False, timeout=120)
    assert "kueue: healthy" in status.stdout and "system:serviceaccount:openshift-kueue-operator:kueue-controller-manager" in status.stdout, status.stdout
    # installed the OpenShift way: the Red Hat operator's Subscription (answered by the OLM SIMULATOR) and its operand
    subs = kubectl(variant_lab, "get", "subscriptions.operators.coreos.com", "-n", "openshift-kueue-operator", "-o", "name").stdout
    assert "subscription.operators.coreos.com/kueue-operator" in subs.split(), subs
    assert {"config.openshift.io/v1", "machine.openshift.io/v1beta1", "operators.coreos.com/v1alpha1"} <= set(versions)
    cv = variant_kube.resources.get(api_version="config.openshift.io/v1", kind="ClusterVersion").get(name="version")
    assert cv.status.desired.version.startswith("4.")
    nodes = variant_kube.resources.get(api_version="v1", kind="Node").get().items
    assert sum(int(n.status.allocatable.get("nvidia.com/gpu", "0") or 0) for n in nodes) == 16
