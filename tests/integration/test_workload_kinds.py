# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The seed's workload kinds are first-class (issue 12, part 2): the lab serves the upstream CRDs of Ray (RayCluster,
RayJob) and Kubeflow Training (PyTorchJob) from their Go modules, the lab's Kueue (the configuration roles/kueue
renders) has their integrations on, and Kueue suspends and admits each against a tenant's quota.

No Ray or Kubeflow operator runs in the lab, so these objects never get pods: what is shown is Kueue's part —
the object is suspended on creation, gets a Workload, is unsuspended when the Workload is admitted within the
tenant's quota, and one that does not fit stays suspended until quota frees up. KServe InferenceService and
Kubeflow Notebook have no Kueue integration of their own: Kueue manages the Deployment / StatefulSet they create
(tests/integration/test_autoscaling.py runs both shapes).
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
from conftest import h100_tenant_play, wait_until

KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
S = uuid.uuid4().hex[:5]
NS = TENANT = "wk-" + S
FLAVOR = "wk-h100-" + S
IMAGE = "registry.invalid/lab/worker:1"


def gpu_pod(name, gpus):
    return {"spec": {"containers": [{"name": name, "image": IMAGE,
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def ray_cluster_spec(workers):
    return {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "head", "image": IMAGE}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
                                  "rayStartParams": {}, "template": gpu_pod("worker", 1)}]}


def raycluster(name, gpus):
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": ray_cluster_spec(gpus)}


def rayjob(name, gpus):
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": ray_cluster_spec(gpus)}}


def pytorchjob(name, gpus):
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "Never",
                                                        "template": gpu_pod("pytorch", gpus)}}}}


KINDS = {"RayCluster": (raycluster, "spec.suspend"), "RayJob": (rayjob, "spec.suspend"),
         "PyTorchJob": (pytorchjob, "spec.runPolicy.suspend")}
# Kueue unsuspends an admitted RayJob only once the KubeRay operator has reported it stopped (rayjob_controller.go
# IsActive: a RayJob without status.jobDeploymentStatus counts as active); no operator runs in the lab, so for
# RayJob the admission is checked on its Workload only.
UNSUSPENDED_WITHOUT_OPERATOR = {"RayCluster", "PyTorchJob"}


def suspended(obj, path):
    node = obj
    for key in path.split("."):
        node = (node or {}).get(key)
    return node


# RayJob adds a submitter pod (cpu, memory)
PLAYBOOK = h100_tenant_play(FLAVOR, TENANT, NS, {"nvidia.com/gpu": 2, "cpu": 8, "memory": "16Gi"})


@pytest.fixture(scope="module")
def tenant(lab, kube, run_playbook):
    run = run_playbook(PLAYBOOK)
    assert run.rc == 0, run.explain()
    yield kube
    try:
        kube.resources.get(api_version="v1", kind="Namespace").delete(name=NS)
    except NotFoundError:
        pass
    wait_until(lambda: not kube.resources.get(api_version="v1", kind="Namespace").get(
        label_selector="kubernetes.io/metadata.name=%s" % NS).items, 180, "the namespace to be gone")
    for kind, name in (("ClusterQueue", TENANT), ("ResourceFlavor", FLAVOR)):
        try:
            kube.resources.get(api_version=KUEUE, kind=kind).delete(name=name)
        except NotFoundError:
            pass


def workload_of(kube, uid):
    for wl in kube.resources.get(api_version=KUEUE, kind="Workload").get(namespace=NS).items:
        wl = wl.to_dict()
        if any(o.get("uid") == uid for o in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def cond(obj, ctype):
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_kueue_suspends_and_admits_each_kind_against_the_tenants_quota(tenant, kind):
    kube = tenant
    build, path = KINDS[kind]
    body = build("x", 1)
    try:
        api = kube.resources.get(api_version=body["apiVersion"], kind=kind)
    except ResourceNotFoundError:
        pytest.fail("the lab serves no %s CRD (lab/build/crds.sh loads the upstream CRDs)" % kind)
    small, big = kind.lower() + "-fits", kind.lower() + "-waits"

    def create(name, gpus):
        obj = build(name, gpus)
        obj["metadata"] = {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: "default"}}
        created = api.create(body=obj, namespace=NS).to_dict()
        return created

    def get(name):
        return api.get(name=name, namespace=NS).to_dict()

    def admitted(uid):
        w = workload_of(kube, uid)
        return w if cond(w, "Admitted").get("status") == "True" else None

    def evaluated(uid):
        w = workload_of(kube, uid)
        return w if cond(w, "QuotaReserved") else None

    first = create(small, 1)
    assert suspended(first, path) is True, "Kueue's webhook suspends a %s on creation" % kind
    wl = wait_until(lambda: admitted(first["metadata"]["uid"]), 60, "the %s's Workload to be admitted" % kind)
    assert wl["status"]["admission"]["clusterQueue"] == TENANT
    if kind in UNSUSPENDED_WITHOUT_OPERATOR:
        wait_until(lambda: suspended(get(small), path) is False, 30, "Kueue to unsuspend the admitted %s" % kind)

    second = create(big, 2)  # 1 + 2 > the tenant's 2 GPUs
    wl2 = wait_until(lambda: evaluated(second["metadata"]["uid"]), 60, "Kueue to evaluate the second %s" % kind)
    assert cond(wl2, "QuotaReserved")["status"] == "False"
    assert suspended(get(big), path) is True

    api.delete(name=small, namespace=NS)
    wait_until(lambda: cond(workload_of(kube, second["metadata"]["uid"]), "Admitted").get("status") == "True", 60,
               "the waiting %s to be admitted once quota frees" % kind)
    if kind in UNSUSPENDED_WITHOUT_OPERATOR:
        wait_until(lambda: suspended(get(big), path) is False, 30, "Kueue to unsuspend the second %s" % kind)
    api.delete(name=big, namespace=NS)
    wait_until(lambda: not list(kube.resources.get(api_version=KUEUE, kind="Workload").get(namespace=NS).items),
               60, "the Workloads to be gone")
