# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PyTorchJobs with the REAL Kubeflow training operator and the real Kueue on the lab (issue 25).

lab/components/training_operator.sh runs the training operator v1.9.3 (built from its Go module) as
system:serviceaccount:kubeflow:training-operator, the identity the tenants' admission policy trusts for the
kubeflow.org frameworks. KWOK runs the pods the operator creates (Running/Ready, no container): a PyTorchJob's master
and workers exist as real Pods bound to the lab's H100 nodes under the tenant's quota, but no PyTorch process runs in
them (docs/lab-controllers.md).

Two tenants made by the collection's tenants module share one cohort: ``owner`` (2 H100 GPUs nominal, reclaims them
from the cohort: ``reclaim_within_cohort: Any``) and ``borrower`` (2 GPUs nominal, borrows what the owner leaves
unused). Each PyTorchJob is one master and one worker of 1 GPU each (2 GPUs).
"""
from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from conftest import audit_events_after, local_play, require_component, suite_component, wait_until

KUEUE = "kueue.x-k8s.io/v1beta2"
PYTORCHJOB = "kubeflow.org/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
OPERATOR_IDENTITY = "system:serviceaccount:kubeflow:training-operator"
S = uuid.uuid4().hex[:5]
FLAVOR = "pt-h100-" + S
COHORT = "pt-" + S
OWNER = "pt-owner-" + S
BORROWER = "pt-borrower-" + S
IMAGE = "registry.invalid/lab/pytorch:2.9.0"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
JOB_GPUS = 2  # master + worker, 1 GPU each

PLAYBOOK = local_play("""
  tasks:
    - gpuaas.platform.resource_flavor:
        name: "{{ flavor }}"
        node_labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
        state: "{{ pt_state }}"
      when: pt_state == 'present'
    - gpuaas.platform.cohort:
        name: "{{ cohort }}"
        state: present
      when: pt_state == 'present'
    - gpuaas.platform.tenants:
        flavors: [{name: "{{ flavor }}"}]
        cohorts: [{name: "{{ cohort }}"}]
        tenants: "{{ pt_tenants | map('combine', {'state': pt_state}) | list }}"
        limit_tenants: "{{ pt_tenants | map(attribute='name') | list }}"
        delete_namespaces: true
        check_capacity: false
        drain_timeout: 120
    - gpuaas.platform.cohort:
        name: "{{ cohort }}"
        state: absent
      when: pt_state == 'absent'
    - gpuaas.platform.resource_flavor:
        name: "{{ flavor }}"
        state: absent
      when: pt_state == 'absent'
""")


def tenant(name: str, reclaim: bool) -> dict:
    t = {"name": name, "namespaces": [name], "cohort": COHORT,
         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 2, "cpu": 16, "memory": "32Gi"}}]}
    if reclaim:
        t["preemption"] = {"reclaim_within_cohort": "Any"}
    return t


INVENTORY = {"flavor": FLAVOR, "cohort": COHORT, "pt_tenants": [tenant(OWNER, True), tenant(BORROWER, False)]}


def api(kube, api_version: str, kind: str):
    return kube.resources.get(api_version=api_version, kind=kind)


def replica(gpus: int) -> dict:
    limits = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    # the operator's default container name is "pytorch": it finds the container to configure by it
    return {"replicas": 1, "restartPolicy": "OnFailure",
            "template": {"spec": {"tolerations": [TOLERATION], "containers": [
                {"name": "pytorch", "image": IMAGE, "resources": {"requests": dict(limits), "limits": limits}}]}}}


def pytorchjob(name: str, namespace: str) -> dict:
    return {"apiVersion": PYTORCHJOB, "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(1)}}}


def submit(kube, name: str, namespace: str) -> dict:
    return api(kube, PYTORCHJOB, "PyTorchJob").create(body=pytorchjob(name, namespace), namespace=namespace).to_dict()


def get_job(kube, name: str, namespace: str) -> dict:
    return api(kube, PYTORCHJOB, "PyTorchJob").get(name=name, namespace=namespace).to_dict()


def suspended(kube, name: str, namespace: str) -> bool:
    return bool((get_job(kube, name, namespace)["spec"].get("runPolicy") or {}).get("suspend"))


def pods_of(kube, name: str, namespace: str) -> list[dict]:
    return [p.to_dict() for p in api(kube, "v1", "Pod").get(
        namespace=namespace, label_selector="training.kubeflow.org/job-name=%s" % name).items]


def cond(obj: dict | None, ctype: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def workload_of(kube, uid: str, namespace: str) -> dict | None:
    return next((w for w in (x.to_dict() for x in api(kube, KUEUE, "Workload").get(namespace=namespace).items)
                 if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])), None)


def running(kube, name: str, namespace: str) -> list[dict] | None:
    """The job's master and worker pods once both exist, are bound to an H100 node and are Running and Ready."""
    pods = [p for p in pods_of(kube, name, namespace) if not p["metadata"].get("deletionTimestamp")]
    types = sorted(p["metadata"]["labels"].get("training.kubeflow.org/replica-type", "") for p in pods)
    if types != ["master", "worker"]:
        return None
    if not all(p["status"].get("phase") == "Running" and cond(p, "Ready").get("status") == "True" for p in pods):
        return None
    return pods


def gpus_used(kube, cluster_queue: str) -> str:
    cq = api(kube, KUEUE, "ClusterQueue").get(name=cluster_queue).to_dict()
    return next((r["total"] for fu in (cq.get("status") or {}).get("flavorsUsage") or [] for r in fu["resources"]
                 if r["name"] == "nvidia.com/gpu"), "0")


def pod_creators(audit_log: str, offset: int, namespace: str) -> list[str]:
    """Who created each pod in ``namespace`` since byte ``offset`` of the apiserver's audit log (successful creates)."""
    return [ev["user"]["username"] for ev in audit_events_after(audit_log, offset)
            if ev.get("verb") == "create" and (ev.get("objectRef") or {}).get("resource") == "pods"
            and not ev["objectRef"].get("subresource") and ev["objectRef"].get("namespace") == namespace
            and (ev.get("responseStatus") or {}).get("code") == 201 and ev.get("stage") in (None, "ResponseComplete")]


@pytest.fixture(scope="module")
def training_operator(lab):
    """The real training operator for this module (``suite_component``)."""
    yield from suite_component(lab, "training_operator", "the training operator")


@pytest.fixture(scope="module")
def tenants(lab, kube, run_playbook, training_operator):  # pylint: disable=unused-argument,redefined-outer-name
    require_component(lab, "kueue")
    if lab.kueue_api == "v1beta1":
        pytest.skip("a LAB_KUEUE_API=v1beta1 lab runs no Kueue controller")
    run = run_playbook(PLAYBOOK, extra_vars=dict(INVENTORY, pt_state="present"), timeout=300)
    assert run.rc == 0 and run.failed == 0, run.explain()
    yield kube
    run = run_playbook(PLAYBOOK, extra_vars=dict(INVENTORY, pt_state="absent"), timeout=300)
    assert run.rc == 0 and run.failed == 0, run.explain()


def test_pytorchjob_fits_waits_is_reclaimed_and_resumes(lab, tenants):
    kube = tenants
    first, borrowed, waiting, owners = "pt-first", "pt-borrowed", "pt-waiting", "pt-owners"
    offset = os.path.getsize(lab.audit_log)

    # 1. fits: the borrower's first job (its nominal 2 GPUs) is suspended by Kueue's webhook, admitted, and then the
    #    operator creates its master and worker; KWOK runs them on H100 nodes
    created = submit(kube, first, BORROWER)
    assert created["spec"]["runPolicy"].get("suspend") is True, "Kueue's webhook did not suspend the PyTorchJob"
    wl = wait_until(lambda: cond(workload_of(kube, created["metadata"]["uid"], BORROWER), "Admitted").get("status")
                    == "True" and workload_of(kube, created["metadata"]["uid"], BORROWER), 60,
                    "Kueue to admit the first PyTorchJob")
    assert {p["name"]: p["count"] for p in wl["spec"]["podSets"]} == {"master": 1, "worker": 1}, wl["spec"]["podSets"]
    first_pods = wait_until(lambda: running(kube, first, BORROWER), 120, "the first PyTorchJob's pods to run")
    for p in first_pods:
        assert p["spec"]["nodeName"].startswith("gpu-h100-"), (p["metadata"]["name"], p["spec"].get("nodeName"))
        assert p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    wait_until(lambda: gpus_used(kube, BORROWER) == "2", 10, "the borrower's GPU usage to show 2")

    # 2. the second job borrows the owner's unused GPUs (admitted after the first: the later admission)
    job2 = submit(kube, borrowed, BORROWER)
    wait_until(lambda: running(kube, borrowed, BORROWER), 120, "the borrowing PyTorchJob's pods to run")
    wait_until(lambda: gpus_used(kube, BORROWER) == "4", 10, "the borrower's GPU usage to show 4 (2 borrowed)")
    wait_until(lambda: len(pod_creators(lab.audit_log, offset, BORROWER)) >= 2 * JOB_GPUS, 10,
               "the audit events of the pods' creation")
    creators = pod_creators(lab.audit_log, offset, BORROWER)
    assert creators == [OPERATOR_IDENTITY] * (2 * JOB_GPUS), creators

    # 3. does not fit: the cohort's 4 GPUs are used; the third job's Workload is pending and the operator creates
    #    no pod for the still-suspended job
    job3 = submit(kube, waiting, BORROWER)
    wl3 = wait_until(lambda: cond(workload_of(kube, job3["metadata"]["uid"], BORROWER), "QuotaReserved")
                     and workload_of(kube, job3["metadata"]["uid"], BORROWER), 60, "Kueue to evaluate the third job")
    assert cond(wl3, "QuotaReserved")["status"] == "False", wl3["status"]
    time.sleep(5)  # the operator reconciles a new job at once: give it time to (wrongly) create pods
    assert suspended(kube, waiting, BORROWER)
    assert not pods_of(kube, waiting, BORROWER), "the operator created pods for a PyTorchJob Kueue has not admitted"
    api(kube, PYTORCHJOB, "PyTorchJob").delete(name=waiting, namespace=BORROWER)
    wait_until(lambda: workload_of(kube, job3["metadata"]["uid"], BORROWER) is None, 60, "the third job's Workload to go")

    # 4. reclaim: the owner's job needs its nominal GPUs back; Kueue evicts the borrower's most recently admitted job
    #    (its preemption order), the operator deletes its pods, the job is suspended again and waits
    first_uids = sorted(p["metadata"]["uid"] for p in first_pods)
    owners_job = submit(kube, owners, OWNER)
    wait_until(lambda: suspended(kube, borrowed, BORROWER) and not pods_of(kube, borrowed, BORROWER), 120,
               "the borrowing job to be suspended and its pods deleted")
    wl2 = workload_of(kube, job2["metadata"]["uid"], BORROWER)
    assert cond(wl2, "Evicted").get("reason") == "Preempted", wl2["status"]
    assert cond(wl2, "Preempted").get("reason") == "InCohortReclamation", cond(wl2, "Preempted")
    wait_until(lambda: running(kube, owners, OWNER), 120, "the owner's job to run on its reclaimed GPUs")
    wait_until(lambda: gpus_used(kube, OWNER) == "2" and gpus_used(kube, BORROWER) == "2", 10,
               "the GPU usage to show 2 for each tenant")
    assert sorted(p["metadata"]["uid"] for p in running(kube, first, BORROWER) or []) == first_uids, \
        "the job within the borrower's nominal quota was touched"
    time.sleep(3)
    assert suspended(kube, borrowed, BORROWER) and not pods_of(kube, borrowed, BORROWER), \
        "the reclaimed job came back while the owner still uses its GPUs"

    # 5. resume: the owner's job goes; the borrowed job is re-admitted and the operator creates its pods again
    api(kube, PYTORCHJOB, "PyTorchJob").delete(name=owners, namespace=OWNER)
    wait_until(lambda: workload_of(kube, owners_job["metadata"]["uid"], OWNER) is None, 60,
               "the owner's Workload to go")
    resumed = wait_until(lambda: running(kube, borrowed, BORROWER), 120, "the reclaimed job to resume")
    assert not suspended(kube, borrowed, BORROWER)
    assert cond(workload_of(kube, job2["metadata"]["uid"], BORROWER), "Admitted").get("status") == "True"
    assert all(p["spec"]["nodeName"].startswith("gpu-h100-") for p in resumed)
    creators = pod_creators(lab.audit_log, offset, BORROWER) + pod_creators(lab.audit_log, offset, OWNER)
    # the first, the borrowing, the owner's and the resumed job: 4 x 2 pods, every one created by the operator
    assert creators == [OPERATOR_IDENTITY] * (4 * JOB_GPUS), json.dumps(creators)
