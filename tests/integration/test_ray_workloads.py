# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ray workloads with the REAL KubeRay operator and the real Kueue on the lab (issue 25).

lab/components/kuberay.sh runs KubeRay v1.6.2 (built from its Go module) as
system:serviceaccount:ray-system:kuberay-operator, the identity the tenants' admission policy trusts for the ray.io
frameworks. KWOK runs the pods KubeRay creates (Running/Ready, no container): the head and the GPU workers of a
RayCluster exist as real Pods bound to the lab's nodes under the tenant's quota, but no Ray process runs in them
(docs/lab-controllers.md says what that leaves out: the dashboard, so RayJob submission cannot succeed).

The tenant (one ClusterQueue of 2 H100 GPUs) is made by the collection's tenants module; the RayClusters are created
by the lab's tenant user (context lab-tenant: alice, group nlp-team), the way a data scientist would.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from conftest import h100_tenant_play, kwok_job, local_play, require_component, suite_component, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUBERAY_IDENTITY = "system:serviceaccount:ray-system:kuberay-operator"
S = uuid.uuid4().hex[:5]
NS = TENANT = "ray-" + S
FLAVOR = "ray-h100-" + S
IMAGE = "registry.invalid/lab/ray:2.52.0"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPUS = 2  # the tenant's nominal H100 GPUs

PLAYBOOK = h100_tenant_play(FLAVOR, TENANT, NS, {"nvidia.com/gpu": GPUS, "cpu": 16, "memory": "32Gi"},
                            access={"users": ["nlp-team"]})

# Who may write Ray objects in the tenant namespace. The tenants role binds users to `edit`, which does not
# aggregate ray.io (KubeRay ships no aggregate-to-edit roles): a cluster admin grants it, as here.
RAY_USER_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ray-user", "namespace": NS},
    "rules": [{"apiGroups": ["ray.io"], "resources": ["rayclusters", "rayjobs"],
               "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}
RAY_USER_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
    "metadata": {"name": "ray-user", "namespace": NS},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ray-user"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "nlp-team"}]}


def container(name: str, gpus: int = 0) -> dict:
    limits = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": IMAGE, "resources": {"requests": dict(limits), "limits": limits}}


def cluster_spec(workers: int) -> dict:
    """A head (1 CPU) and one GPU worker group "gpu" of ``workers`` replicas with 1 GPU each."""
    return {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": 0, "maxReplicas": 4,
                                  "rayStartParams": {},
                                  "template": {"spec": {"tolerations": [TOLERATION],
                                                        "containers": [container("ray-worker", 1)]}}}]}


def raycluster(name: str, workers: int) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: "default"}},
            "spec": cluster_spec(workers)}


def kubectl(lab, *args: str, context: str = "lab-admin", stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def as_tenant(lab, obj: dict) -> dict:
    out = kubectl(lab, "create", "-o", "json", "-f", "-", context=lab.tenant_context, stdin=json.dumps(obj))
    assert out.returncode == 0, "alice could not create %s: %s" % (obj["metadata"]["name"], out.stderr)
    return json.loads(out.stdout)


def api(kube, api_version: str, kind: str):
    return kube.resources.get(api_version=api_version, kind=kind)


def get_cluster(kube, name: str, namespace: str = NS) -> dict | None:
    try:
        return api(kube, "ray.io/v1", "RayCluster").get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


def pods_of(kube, cluster: str, node_type: str | None = None, namespace: str = NS) -> list[dict]:
    selector = "ray.io/cluster=%s" % cluster + (",ray.io/node-type=%s" % node_type if node_type else "")
    return [p.to_dict() for p in api(kube, "v1", "Pod").get(namespace=namespace, label_selector=selector).items]


def workloads_of(kube, uid: str, namespace: str = NS) -> list[dict]:
    return [w for w in (x.to_dict() for x in api(kube, KUEUE, "Workload").get(namespace=namespace).items)
            if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])]


def cond(obj: dict | None, ctype: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def admitted_workload(kube, uid: str, namespace: str = NS) -> dict | None:
    return next((w for w in workloads_of(kube, uid, namespace) if cond(w, "Admitted").get("status") == "True"), None)


def pod_ready(pod: dict) -> bool:
    return pod["status"].get("phase") == "Running" and cond(pod, "Ready").get("status") == "True"


def running(kube, name: str, workers: int, namespace: str = NS) -> dict | None:
    """The RayCluster when KubeRay reports it ready with its head and ``workers`` GPU workers Running and Ready."""
    rc = get_cluster(kube, name, namespace)
    head, work = pods_of(kube, name, "head", namespace), pods_of(kube, name, "worker", namespace)
    if not rc or (rc.get("status") or {}).get("state") != "ready":
        return None
    if len(head) != 1 or len(work) != workers or not all(pod_ready(p) for p in head + work):
        return None
    return rc


def pod_creators(lab) -> list[str]:
    """Who created each pod created so far in the tenant namespace, from the apiserver's audit log (KubeRay names
    its pods with generateName, so the request's objectRef has no name: every successful create is counted)."""
    out = []
    with open(lab.audit_log, encoding="utf-8") as f:
        for line in f:
            if '"pods"' not in line or NS not in line:
                continue
            ev = json.loads(line)
            ref = ev.get("objectRef") or {}
            if (ev.get("verb") == "create" and ref.get("resource") == "pods" and not ref.get("subresource")
                    and ref.get("namespace") == NS and (ev.get("responseStatus") or {}).get("code") == 201):
                out.append(ev["user"]["username"])
    return out


@pytest.fixture(scope="module")
def kuberay(lab):
    """The real KubeRay operator for this module (``suite_component``)."""
    yield from suite_component(lab, "kuberay", "KubeRay")


@pytest.fixture(scope="module")
def tenant(lab, kube, run_playbook, kuberay):  # pylint: disable=unused-argument,redefined-outer-name
    require_component(lab, "kueue")
    run = run_playbook(PLAYBOOK)
    assert run.rc == 0, run.explain()
    for obj in (RAY_USER_ROLE, RAY_USER_BINDING):
        out = kubectl(lab, "apply", "--server-side", "--field-manager=itray", "-f", "-", stdin=json.dumps(obj))
        assert out.returncode == 0, out.stderr
    yield kube
    try:
        api(kube, "v1", "Namespace").delete(name=NS)
    except NotFoundError:
        pass
    wait_until(lambda: not api(kube, "v1", "Namespace").get(
        label_selector="kubernetes.io/metadata.name=%s" % NS).items, 180, "the namespace to be gone")
    for kind, name in (("ClusterQueue", TENANT), ("ResourceFlavor", FLAVOR)):
        try:
            api(kube, KUEUE, kind).delete(name=name)
        except NotFoundError:
            pass


def test_a_tenants_raycluster_runs_head_and_gpu_workers_under_quota_and_the_next_waits(lab, tenant):
    kube = tenant
    first, second = "rc-first-" + S, "rc-second-" + S

    # 1. alice's RayCluster of 2 GPU workers (the tenant's whole quota) is suspended by Kueue's webhook on creation
    created = as_tenant(lab, raycluster(first, GPUS))
    assert created["spec"].get("suspend") is True, "Kueue's webhook did not suspend the RayCluster on creation"
    uid = created["metadata"]["uid"]
    wl = wait_until(lambda: admitted_workload(kube, uid), 60, "Kueue to admit the first RayCluster's Workload")
    assert wl["status"]["admission"]["clusterQueue"] == TENANT
    counts = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
    assert counts == {"head": 1, "gpu": GPUS}, counts

    # 2. admitted: KubeRay creates the head and the GPU workers; KWOK runs them; KubeRay reports the cluster ready
    rc = wait_until(lambda: running(kube, first, GPUS), 120, "the first RayCluster ready with %d GPU workers" % GPUS)
    assert rc["spec"]["suspend"] is False
    workers = pods_of(kube, first, "worker")
    for p in workers:
        # Kueue's flavor (the H100 nodes) was injected into the template KubeRay built the pod from
        assert p["spec"]["nodeName"].startswith("gpu-h100-"), (p["metadata"]["name"], p["spec"].get("nodeName"))
        assert p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    creators = wait_until(lambda: pod_creators(lab) if len(pod_creators(lab)) >= GPUS + 1 else None, 10,
                          "the audit events of the pods' creation")
    assert creators == [KUBERAY_IDENTITY] * (GPUS + 1), creators
    cq = api(kube, KUEUE, "ClusterQueue").get(name=TENANT).to_dict()
    used = {r["name"]: r["total"] for fu in cq["status"]["flavorsUsage"] for r in fu["resources"]}
    assert used.get("nvidia.com/gpu") == str(GPUS), cq["status"]["flavorsUsage"]

    # 4. a second RayCluster (1 GPU worker) does not fit: its Workload is pending and KubeRay creates no pod for it
    created2 = as_tenant(lab, raycluster(second, 1))
    uid2 = created2["metadata"]["uid"]
    wl2 = wait_until(lambda: next((w for w in workloads_of(kube, uid2) if cond(w, "QuotaReserved")), None), 60,
                     "Kueue to evaluate the second RayCluster")
    assert cond(wl2, "QuotaReserved")["status"] == "False", wl2["status"]
    assert "insufficient" in cond(wl2, "QuotaReserved")["message"], cond(wl2, "QuotaReserved")
    time.sleep(5)  # KubeRay reconciles a new RayCluster at once: give it time to (wrongly) create pods
    assert get_cluster(kube, second)["spec"]["suspend"] is True
    assert not pods_of(kube, second), "KubeRay created pods for a RayCluster Kueue has not admitted"

    # 5. the first RayCluster is deleted: its pods go, the second is admitted and runs
    api(kube, "ray.io/v1", "RayCluster").delete(name=first, namespace=NS)
    wait_until(lambda: admitted_workload(kube, uid2), 120, "the second RayCluster's Workload to be admitted")
    wait_until(lambda: running(kube, second, 1), 120, "the second RayCluster ready with its GPU worker")
    wait_until(lambda: not pods_of(kube, first), 60, "the deleted RayCluster's pods to be gone")
    api(kube, "ray.io/v1", "RayCluster").delete(name=second, namespace=NS)
    wait_until(lambda: not pods_of(kube, second) and not workloads_of(kube, uid2), 120,
               "the second RayCluster's pods and Workload to be gone")


def rayjob(name: str, workers: int, namespace: str = NS) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"entrypoint": "python -c 'import ray; ray.init()'", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": cluster_spec(workers)}}


def get_rayjob(kube, name: str, namespace: str = NS) -> dict:
    return api(kube, "ray.io/v1", "RayJob").get(name=name, namespace=namespace).to_dict()


def test_a_rayjob_runs_cluster_and_submitter_under_quota_and_the_next_waits_until_it_ends(lab, tenant):
    """RayJob: Kueue admits it whole (head, GPU workers and KubeRay's submitter pod); KubeRay creates its RayCluster
    and, once that is ready, the submitter Job. In the lab the submitter pod "completes" by KWOK's stage but nothing
    answers on the head's dashboard, so KubeRay marks the RayJob Failed 30 s later (DefaultSubmitterFinishedTimeout,
    "did not reach terminal state") and deletes its cluster (shutdownAfterJobFinishes): a real Ray would end it
    Complete. Either way the Workload finishes, the quota is released and the waiting RayJob is admitted."""
    kube = tenant
    first, second = "rj-first-" + S, "rj-second-" + S

    # The RayJobs are deleted whatever happens: a failure here must not leave them holding the tenant's GPUs for the
    # tests after it (in CI a failed run of this test also failed the elastic test that follows).
    try:
        created = as_tenant(lab, rayjob(first, GPUS))
        assert created["spec"].get("suspend") is True, "Kueue's webhook did not suspend the RayJob on creation"
        uid = created["metadata"]["uid"]
        wl = wait_until(lambda: admitted_workload(kube, uid), 60, "Kueue to admit the first RayJob's Workload")
        counts = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
        assert counts == {"head": 1, "gpu": GPUS, "submitter": 1}, counts

        cluster = wait_until(lambda: get_rayjob(kube, first).get("status", {}).get("rayClusterName"), 60,
                             "KubeRay to create the RayJob's RayCluster")
        wait_until(lambda: running(kube, cluster, GPUS), 120, "the RayJob's cluster ready with %d GPU workers" % GPUS)
        submitter = wait_until(lambda: [p.to_dict() for p in api(kube, "v1", "Pod").get(
            namespace=NS, label_selector="job-name=%s" % first).items], 120, "KubeRay's submitter Job to get a pod")
        assert not submitter[0]["spec"]["containers"][0]["resources"].get("limits", {}).get("nvidia.com/gpu")

        created2 = as_tenant(lab, rayjob(second, 1))
        uid2 = created2["metadata"]["uid"]
        wl2 = wait_until(lambda: next((w for w in workloads_of(kube, uid2) if cond(w, "QuotaReserved")), None), 60,
                         "Kueue to evaluate the second RayJob")
        assert cond(wl2, "QuotaReserved")["status"] == "False", wl2["status"]
        assert not (get_rayjob(kube, second).get("status") or {}).get("rayClusterName"), \
            "KubeRay created a RayCluster for a RayJob Kueue has not admitted"

        def first_ended():
            job = get_rayjob(kube, first)
            return job if job.get("status", {}).get("jobDeploymentStatus") in ("Complete", "Failed") else None

        ended = wait_until(first_ended, 150, "the first RayJob to end")
        # the lab's limit, stated rather than hidden: no Ray job exists behind the KWOK head pod
        assert ended["status"]["jobDeploymentStatus"] == "Failed", ended["status"]
        wait_until(lambda: cond(next(iter(workloads_of(kube, uid)), None), "Finished").get("status") == "True", 60,
                   "the first RayJob's Workload to finish")
        wait_until(lambda: admitted_workload(kube, uid2), 120, "the second RayJob to be admitted once quota frees")
        cluster2 = wait_until(lambda: get_rayjob(kube, second).get("status", {}).get("rayClusterName"), 60,
                              "KubeRay to create the second RayJob's RayCluster")
        wait_until(lambda: running(kube, cluster2, 1), 120, "the second RayJob's cluster ready")
    finally:
        for name in (first, second):
            try:
                api(kube, "ray.io/v1", "RayJob").delete(name=name, namespace=NS)
            except NotFoundError:
                pass


ELASTIC = "kueue.x-k8s.io/elastic-job"  # Kueue's annotation (and pod scheduling gate) of elastic jobs
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"


def scale_workers(lab, name: str, replicas: int) -> None:
    """What an idle-reclaim mechanism would do: set the GPU worker group's replicas (as the tenant user here)."""
    out = kubectl(lab, "-n", NS, "patch", "raycluster", name, "--type=json", "-p",
                  json.dumps([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}]),
                  context=lab.tenant_context)
    assert out.returncode == 0, out.stderr


def active_workloads(kube, uid: str) -> list[dict]:
    return [w for w in workloads_of(kube, uid) if cond(w, "Finished").get("status") != "True"]


def shrunk_workload(kube, uid: str) -> dict | None:
    """The admitted Workload of ``uid`` once it counts 0 GPU workers."""
    wl = admitted_workload(kube, uid)
    return wl if wl and {p["name"]: p["count"] for p in wl["spec"]["podSets"]}.get("gpu") == 0 else None


def gpu_usage(kube) -> str:
    cq = api(kube, KUEUE, "ClusterQueue").get(name=TENANT).to_dict()
    return next((r["total"] for fu in cq["status"].get("flavorsUsage") or [] for r in fu["resources"]
                 if r["name"] == "nvidia.com/gpu"), "0")


def test_an_elastic_raycluster_gives_its_gpu_quota_back_at_zero_workers_and_wakes_through_a_new_slice(lab, tenant):
    """Kueue v0.19.2's elastic jobs (ElasticJobsViaWorkloadSlices, beta, on by default) with the real KubeRay: the
    building block of idle reclaim (issue 25). Scaling the GPU worker group to 0 shrinks the admitted Workload in
    place (same Workload, still admitted, GPU usage 0: the head keeps running and keeps its CPU quota); the freed GPUs
    admit another RayCluster; scaling back up creates a new Workload slice that waits for quota like any workload
    and, once admitted, replaces the old one; the head pod is never restarted."""
    kube = tenant
    sleeper, other = "rc-elastic-" + S, "rc-other-" + S
    body = raycluster(sleeper, GPUS)
    body["metadata"]["annotations"] = {ELASTIC: "true"}
    uid = as_tenant(lab, body)["metadata"]["uid"]
    wl = wait_until(lambda: admitted_workload(kube, uid), 60, "Kueue to admit the elastic RayCluster")
    wait_until(lambda: running(kube, sleeper, GPUS), 120, "the elastic RayCluster ready with %d GPU workers" % GPUS)
    head = pods_of(kube, sleeper, "head")[0]
    assert gpu_usage(kube) == str(GPUS)

    # idle: workers to 0 -> the same Workload, still admitted, now counts 0 GPU workers; the GPUs are free
    scale_workers(lab, sleeper, 0)
    wait_until(lambda: not pods_of(kube, sleeper, "worker"), 60, "KubeRay to delete the GPU workers")
    shrunk = wait_until(lambda: shrunk_workload(kube, uid), 60, "the Workload to shrink in place")
    assert shrunk["metadata"]["uid"] == wl["metadata"]["uid"], "the Workload was replaced, not shrunk"
    wait_until(lambda: gpu_usage(kube) == "0", 30, "the tenant's GPU usage to drop to 0")

    # the freed GPUs admit another RayCluster
    other_uid = as_tenant(lab, raycluster(other, GPUS))["metadata"]["uid"]
    wait_until(lambda: admitted_workload(kube, other_uid), 60, "the other RayCluster to be admitted on the freed GPUs")
    wait_until(lambda: running(kube, other, GPUS), 120, "the other RayCluster ready")

    # demand returns: workers back to 2 -> a new slice, pending while the GPUs are taken; its pods stay gated
    scale_workers(lab, sleeper, GPUS)
    pending = wait_until(lambda: next((w for w in active_workloads(kube, uid)
                                       if w["metadata"].get("annotations", {}).get(REPLACEMENT_FOR)), None), 60,
                         "Kueue to create a new Workload slice for the scale-up")
    wait_until(lambda: cond(next((w for w in workloads_of(kube, uid) if w["metadata"]["uid"] ==
                                  pending["metadata"]["uid"]), None), "QuotaReserved").get("status") == "False", 60,
               "the new slice to wait for quota")
    gated = wait_until(lambda: [p for p in pods_of(kube, sleeper, "worker")
                                if ELASTIC in [g["name"] for g in p["spec"].get("schedulingGates") or []]], 60,
                       "KubeRay's new workers, held by Kueue's elastic-job gate")
    # NOT tested here (limit_tenants reconciles no shared object, so this lab module runs without the admission
    # policy): that the tenant cannot lift the elastic-job gate herself (admission rule 6, KUEUE_GATES).
    assert gated
    time.sleep(3)
    for p in pods_of(kube, sleeper, "worker"):
        assert not p["spec"].get("nodeName"), "a worker of an unadmitted slice was bound: %s" % p["metadata"]["name"]

    # the GPUs free up: the slice is admitted, the workers run, the head is the same pod
    api(kube, "ray.io/v1", "RayCluster").delete(name=other, namespace=NS)
    start = time.monotonic()
    wait_until(lambda: running(kube, sleeper, GPUS), 120, "the elastic RayCluster's workers back")
    woke = time.monotonic() - start
    [now] = active_workloads(kube, uid)
    assert now["metadata"]["uid"] == pending["metadata"]["uid"] and cond(now, "Admitted").get("status") == "True"
    head_now = pods_of(kube, sleeper, "head")[0]
    assert head_now["metadata"]["uid"] == head["metadata"]["uid"], "the head pod was replaced"
    assert not any(c.get("restartCount") for c in head_now["status"].get("containerStatuses") or [])
    print("elastic wake after the GPUs were freed: %.1f s" % woke)
    api(kube, "ray.io/v1", "RayCluster").delete(name=sleeper, namespace=NS)


# Preemption by reclaim (issue 25): two tenants of one cohort, made by the tenants module. The lender owns the cohort's
# 2 H100 GPUs and reclaims them (reclaim_within_cohort: Any); the borrower has none of its own, so its RayJob runs
# only on the lender's unused GPUs.
LENDER, BORROWER = "rj-lender-" + S, "rj-borrower-" + S
RECLAIM_FLAVOR, RECLAIM_COHORT = "rj-h100-" + S, "rj-co-" + S
RECLAIM_INVENTORY = {
    "rj_flavor": RECLAIM_FLAVOR, "rj_cohort": RECLAIM_COHORT,
    "rj_tenants": [
        {"name": LENDER, "namespaces": [LENDER], "cohort": RECLAIM_COHORT, "preemption": {"reclaim_within_cohort": "Any"},
         "quotas": [{"flavor": RECLAIM_FLAVOR, "resources": {"nvidia.com/gpu": GPUS, "cpu": 4, "memory": "8Gi"}}]},
        {"name": BORROWER, "namespaces": [BORROWER], "cohort": RECLAIM_COHORT,
         "quotas": [{"flavor": RECLAIM_FLAVOR, "resources": {"nvidia.com/gpu": 0, "cpu": 8, "memory": "16Gi"}}]}]}
RECLAIM_PLAY = local_play("""
  tasks:
    - gpuaas.platform.resource_flavor:
        name: "{{ rj_flavor }}"
        node_labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    - gpuaas.platform.tenants:
        flavors: [{name: "{{ rj_flavor }}"}]
        cohorts: [{name: "{{ rj_cohort }}"}]
        tenants: "{{ rj_tenants }}"
        limit_tenants: "{{ rj_tenants | map(attribute='name') | list }}"
""")


@pytest.fixture(scope="module")
def cohort_tenants(lab, kube, run_playbook, kuberay):  # pylint: disable=unused-argument,redefined-outer-name
    require_component(lab, "kueue")
    run = run_playbook(RECLAIM_PLAY, extra_vars=RECLAIM_INVENTORY)
    assert run.rc == 0, run.explain()
    yield kube
    for ns in (LENDER, BORROWER):
        try:
            api(kube, "v1", "Namespace").delete(name=ns)
        except NotFoundError:
            pass
    wait_until(lambda: not any(api(kube, "v1", "Namespace").get(label_selector="kubernetes.io/metadata.name=%s" % ns).items
                               for ns in (LENDER, BORROWER)), 180, "the namespaces to be gone")
    for kind, name in (("ClusterQueue", LENDER), ("ClusterQueue", BORROWER), ("Cohort", RECLAIM_COHORT),
                       ("ResourceFlavor", RECLAIM_FLAVOR)):
        try:
            api(kube, KUEUE, kind).delete(name=name)
        except NotFoundError:
            pass


def long_rayjob(name: str, workers: int, namespace: str) -> dict:
    """A RayJob whose submitter pod keeps running (KWOK completes it after an hour): the lab's head answers no
    dashboard, so a submitter that ended would make KubeRay fail the job 30 s later (see the test above); with this
    one KubeRay keeps the RayJob Running, as a real Ray job would be while it works."""
    job = rayjob(name, workers, namespace)
    limits = {"cpu": "500m", "memory": "256Mi"}
    job["spec"]["submitterPodTemplate"] = {
        "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "ray-job-submitter", "image": IMAGE, "resources": {"requests": dict(limits), "limits": limits}}]}}
    return job


def test_a_borrowing_rayjob_is_preempted_by_reclaim_and_resumes_when_readmitted(lab, cohort_tenants):
    kube = cohort_tenants
    name = "rj-borrowed"

    def deployment_status() -> str | None:
        return (get_rayjob(kube, name, BORROWER).get("status") or {}).get("jobDeploymentStatus")

    def submitter_pods() -> list[dict]:
        return [p.to_dict() for p in api(kube, "v1", "Pod").get(namespace=BORROWER, label_selector="job-name=%s" % name).items
                if not p.metadata.deletionTimestamp]

    def gpus_used(cluster_queue: str) -> int:
        status = api(kube, KUEUE, "ClusterQueue").get(name=cluster_queue).to_dict().get("status") or {}
        return sum(int(r["total"]) for fu in status.get("flavorsUsage") or [] for r in fu["resources"]
                   if r["name"] == "nvidia.com/gpu")

    # 1. the borrower's RayJob (2 GPU workers) is admitted on the lender's unused GPUs and runs: head, workers, and
    #    a submitter that keeps running
    created = api(kube, "ray.io/v1", "RayJob").create(body=long_rayjob(name, GPUS, BORROWER), namespace=BORROWER).to_dict()
    uid = created["metadata"]["uid"]
    wl = wait_until(lambda: admitted_workload(kube, uid, BORROWER), 60, "Kueue to admit the borrowing RayJob")
    assert wl["status"]["admission"]["clusterQueue"] == BORROWER
    first_cluster = wait_until(lambda: (get_rayjob(kube, name, BORROWER).get("status") or {}).get("rayClusterName"),
                               60, "KubeRay to create the RayJob's RayCluster")
    wait_until(lambda: running(kube, first_cluster, GPUS, BORROWER), 120, "the RayJob's cluster ready with its workers")
    wait_until(lambda: [p for p in submitter_pods() if pod_ready(p)], 120, "the RayJob's submitter pod running")
    wait_until(lambda: deployment_status() == "Running", 60, "KubeRay to report the RayJob Running")
    wait_until(lambda: gpus_used(BORROWER) == GPUS, 30, "the borrower's ClusterQueue to count the 2 borrowed GPUs")
    first_pods = {p["metadata"]["uid"] for p in pods_of(kube, first_cluster, namespace=BORROWER)}

    # 2. the lender's 1-GPU Job arrives: Kueue reclaims its quota by evicting the whole RayJob (InCohortReclamation),
    #    suspends it, and KubeRay deletes its cluster and submitter; the lender's Job runs
    lender_job = kwok_job({"nvidia.com/gpu": "1"}, name="lender", tolerations=[TOLERATION])
    api(kube, "batch/v1", "Job").create(body=lender_job, namespace=LENDER)
    wait_until(lambda: get_rayjob(kube, name, BORROWER)["spec"].get("suspend") is True, 60,
               "Kueue to suspend the borrowing RayJob")
    evicted = workloads_of(kube, uid, BORROWER)
    assert len(evicted) == 1 and evicted[0]["metadata"]["uid"] == wl["metadata"]["uid"], evicted
    assert cond(evicted[0], "Evicted").get("reason") == "Preempted", evicted[0]["status"]
    assert cond(evicted[0], "Preempted").get("reason") == "InCohortReclamation", cond(evicted[0], "Preempted")
    wait_until(lambda: deployment_status() == "Suspended", 120, "KubeRay to report the RayJob Suspended")
    wait_until(lambda: get_cluster(kube, first_cluster, BORROWER) is None
               and not pods_of(kube, first_cluster, namespace=BORROWER) and not submitter_pods(), 120,
               "KubeRay to delete the preempted RayJob's cluster, pods and submitter")
    wait_until(lambda: [p for p in api(kube, "v1", "Pod").get(namespace=LENDER, label_selector="job-name=lender").items
                        if p.status.phase == "Running"], 60, "the lender's Job to run on its reclaimed GPU")
    assert gpus_used(LENDER) == 1 and gpus_used(BORROWER) == 0
    # it waits while the lender holds a GPU: 1 GPU is free, the RayJob needs 2
    time.sleep(5)
    assert get_rayjob(kube, name, BORROWER)["spec"].get("suspend") is True
    assert not pods_of(kube, first_cluster, namespace=BORROWER) and not submitter_pods()
    assert cond(workloads_of(kube, uid, BORROWER)[0], "QuotaReserved").get("status") == "False"

    # 3. the lender's Job goes: the same Workload is admitted again, KubeRay builds a new cluster and submitter, the
    #    RayJob runs again (KubeRay restarts a preempted RayJob from its spec: the Ray job itself starts over)
    api(kube, "batch/v1", "Job").delete(name="lender", namespace=LENDER, body={"propagationPolicy": "Background"})
    again = wait_until(lambda: admitted_workload(kube, uid, BORROWER), 120, "the RayJob to be re-admitted")
    assert again["metadata"]["uid"] == wl["metadata"]["uid"], "the RayJob's Workload was replaced"
    wait_until(lambda: not get_rayjob(kube, name, BORROWER)["spec"].get("suspend"), 60, "Kueue to resume the RayJob")
    cluster = wait_until(lambda: (get_rayjob(kube, name, BORROWER).get("status") or {}).get("rayClusterName"), 120,
                         "KubeRay to create the resumed RayJob's cluster")
    wait_until(lambda: running(kube, cluster, GPUS, BORROWER), 120, "the resumed RayJob's cluster ready")
    wait_until(lambda: [p for p in submitter_pods() if pod_ready(p)], 120, "the resumed RayJob's submitter running")
    wait_until(lambda: deployment_status() == "Running", 60, "KubeRay to report the resumed RayJob Running")
    resumed = pods_of(kube, cluster, namespace=BORROWER)
    assert not first_pods & {p["metadata"]["uid"] for p in resumed}, "a pod of the preempted run survived"
    assert all(p["spec"]["nodeName"].startswith("gpu-h100-") for p in resumed)
    wait_until(lambda: gpus_used(BORROWER) == GPUS, 30, "the borrower's ClusterQueue to count its 2 GPUs again")
    api(kube, "ray.io/v1", "RayJob").delete(name=name, namespace=BORROWER)
