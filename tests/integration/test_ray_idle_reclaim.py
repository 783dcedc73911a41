# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idle RayCluster reclaim (issue 25) with the lab's REAL KubeRay v1.6.2, Kueue v0.19.2 and Prometheus (GPU
utilization from the simulated DCGM exporter, pod annotation lab.gpuaas.io/gpu-util, which KubeRay copies from the
worker template). The reclaim is the committed playbook playbooks/ray_idle_reclaim.yml (module
gpuaas.platform.ray_idle_reclaim), run here by hand where AWX would run it on a schedule.

One scenario, in order (the tests share it):

  tenants (one cohort)  rr-a: 3 GPUs, reclaim Any; alice's RayClusters `idle` (2 GPU workers, 0 %) and `busy`
                        (1 GPU worker, 80 %), both elastic, both opted in (window 10 s, cooldown 60 s)
                        rr-b: 0 GPUs of its own (borrows), a RayCluster `theirs` opted in by its own entry
  1. idle for the window -> `idle`'s GPU workers at 0, its Workload shrunk in place (same UID), rr-a's GPU usage
     drops by 2, the head pod is the same; `busy` and `theirs` untouched
  2. rr-b's two 1-GPU Jobs are admitted on the freed GPUs (borrowed)
  3. alice sets gpuaas.io/wake -> the workers come back: a new slice, admitted by reclaiming rr-b's Jobs; the head
     pod is the same and never restarted
  4. as alice: she cannot wake or scale rr-b's cluster (RBAC), and a forged reclaim record (on her cluster scaled
     to 0 by hand) cannot take more than the group's maxReplicas nor any GPU beyond her quota (the new slice waits,
     its pods stay gated)
  5. as the least-privilege account roles/automation_rbac makes for the AWX schedule: the playbook runs; the patch
     the module builds passes the fence, any other change of a RayCluster is refused, and outside the opted-in
     namespaces it can read nothing
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pytest
from conftest import kube_get as get, kube_items as items, kube_resource as res, wait_until
from test_ray_workloads import kuberay  # noqa: F401  pylint: disable=unused-import
from conftest import grant_tenant_users, idle_reclaim_account, lender_borrower_inventory, limited_tenancy
from conftest import require_component
from conftest import condition as cond, cq_gpu_usage, idle_reclaim_run, kwok_job, lab_kubectl as kubectl
from conftest import request_as_token as as_token

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
STATE = "gpuaas.io/idle-reclaim"
WAKE = "gpuaas.io/wake"
UTIL = "lab.gpuaas.io/gpu-util"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
IMAGE = "registry.invalid/lab/ray:2.52.0"
WINDOW, COOLDOWN, SCRAPE = 10, 60, 5  # the lab's Prometheus scrapes every 5 s (lab/lab.sh); the cooldown outlasts the test
WAKE_BOUND = 30  # issue 25: demand returns -> workers re-admitted within 30 s
WATCH = 45  # the scheduled run's watch_seconds (a one-minute schedule)

S = uuid.uuid4().hex[:5]
T_A, T_B = "rr-a-" + S, "rr-b-" + S
NS_A, NS_B = T_A, T_B
FLAVOR, COHORT = "rr-h100-" + S, "rr-co-" + S
IDLE, BUSY, THEIRS = "idle", "busy", "theirs"


def entry(name: str) -> dict:
    return {"name": name, "target": {"kind": "RayCluster", "name": name}, "worker_groups": ["gpu"],
            "idle_scale_to_zero": {"after_seconds": WINDOW, "utilization_threshold": 1}, "cooldown_period": COOLDOWN}


INVENTORY = lender_borrower_inventory(FLAVOR, COHORT, T_A, T_B, {"nvidia.com/gpu": 3, "cpu": 16, "memory": "32Gi"},
                                      [entry(IDLE), entry(BUSY)], [entry(THEIRS)])

RECLAIM_PLAYBOOK = os.path.join(REPO, "playbooks", "ray_idle_reclaim.yml")


def container(name: str, gpus: int = 0) -> dict:
    limits = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": IMAGE, "resources": {"requests": dict(limits), "limits": limits}}


def raycluster(name: str, namespace: str, workers: int, util: int) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"},
                         "annotations": {ELASTIC: "true"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": 0, "maxReplicas": 4,
                                           "rayStartParams": {},
                                           "template": {"metadata": {"annotations": {UTIL: str(util)}},
                                                        "spec": {"tolerations": [TOLERATION],
                                                                 "containers": [container("ray-worker", 1)]}}}]}}


def cluster(kube, name: str, namespace: str = NS_A) -> dict:
    return get(kube, "ray.io/v1", "RayCluster", name, namespace)


def gpu_replicas(kube, name: str, namespace: str = NS_A) -> int:
    return cluster(kube, name, namespace)["spec"]["workerGroupSpecs"][0]["replicas"]


def pods_of(kube, name: str, node_type: str, namespace: str = NS_A) -> list[dict]:
    return [p for p in items(kube, "v1", "Pod", namespace) if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == name
            and p["metadata"]["labels"].get("ray.io/node-type") == node_type and not p["metadata"].get("deletionTimestamp")]


def running(pod: dict) -> bool:
    return pod["status"].get("phase") == "Running" and cond(pod, "Ready").get("status") == "True"


def workloads_of(kube, uid: str, namespace: str = NS_A) -> list[dict]:
    return [w for w in items(kube, KUEUE, "Workload", namespace)
            if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])
            and cond(w, "Finished").get("status") != "True"]


def gpu_count(workload: dict) -> int:
    return {p["name"]: p["count"] for p in workload["spec"]["podSets"]}.get("gpu", -1)


def gpu_usage(kube, cq: str) -> int:
    return cq_gpu_usage(kube, KUEUE, cq)


def reclaim(run_playbook, lab) -> dict:
    """One scheduled run of the committed playbook; the module's per-cluster result by name."""
    return idle_reclaim_run(run_playbook, lab, INVENTORY, SCRAPE, [T_A, T_B])


@pytest.fixture(scope="module")
def scenario(lab, kube, run_playbook, kuberay):  # pylint: disable=redefined-outer-name,unused-argument
    require_component(lab, "kueue")
    state: dict = {}
    with limited_tenancy(lab, kube, run_playbook, INVENTORY):
        # alice (group nlp-team) may write Ray objects in her namespace only; the tenants role's `edit` does not
        # aggregate ray.io (KubeRay ships no aggregate-to-edit roles): a cluster admin grants it
        grant_tenant_users(lab, NS_A, "ray-user", "ray.io", "rayclusters", field_manager="itray")
        for name, workers, util in ((IDLE, 2, 0), (BUSY, 1, 80)):  # alice's clusters, made by alice
            out = kubectl(lab, "create", "-o", "json", "-f", "-", context=lab.tenant_context,
                          stdin=json.dumps(raycluster(name, NS_A, workers, util)))
            assert out.returncode == 0, out.stderr
            state[name] = json.loads(out.stdout)["metadata"]["uid"]
        # rr-b's cluster: a head and an empty GPU group (rr-b has no GPU of its own)
        out = kubectl(lab, "create", "-o", "json", "-f", "-", stdin=json.dumps(raycluster(THEIRS, NS_B, 0, 0)))
        assert out.returncode == 0, out.stderr
        wait_until(lambda: len([p for p in pods_of(kube, IDLE, "worker") if running(p)]) == 2
                   and len([p for p in pods_of(kube, BUSY, "worker") if running(p)]) == 1
                   and all(pods_of(kube, n, "head") and running(pods_of(kube, n, "head")[0]) for n in (IDLE, BUSY)),
                   120, "alice's RayClusters running with their GPU workers")
        wait_until(lambda: pods_of(kube, THEIRS, "head", NS_B) and running(pods_of(kube, THEIRS, "head", NS_B)[0]), 120,
                   "rr-b's RayCluster head running")
        state["head"] = pods_of(kube, IDLE, "head")[0]["metadata"]["uid"]
        state["theirs"] = cluster(kube, THEIRS, NS_B)
        yield state


def test_an_idle_raycluster_gives_its_gpus_back_and_a_busy_one_is_never_touched(scenario, lab, kube, run_playbook):
    uid = scenario[IDLE]
    [before] = workloads_of(kube, uid)
    assert gpu_count(before) == 2 and gpu_usage(kube, T_A) == 3
    busy_rv = cluster(kube, BUSY)["metadata"]["resourceVersion"]
    # the workers must have run (and been scraped) for a whole window before they count as idle
    first = reclaim(run_playbook, lab)
    if first[IDLE]["action"] != "reclaim":
        assert "less than the idle window" in first[IDLE]["reason"] or "no GPU utilization" in first[IDLE]["reason"], first
        time.sleep(WINDOW)
        first = reclaim(run_playbook, lab)
    assert first[IDLE]["action"] == "reclaim" and first[IDLE]["replicas"] == {"gpu": 2}, first
    assert first[BUSY]["action"] == "keep" and "busy: worker" in first[BUSY]["reason"], first[BUSY]
    assert first[THEIRS]["action"] == "keep", first[THEIRS]

    assert gpu_replicas(kube, IDLE) == 0
    wait_until(lambda: not pods_of(kube, IDLE, "worker"), 60, "KubeRay to delete the idle GPU workers")
    shrunk = wait_until(lambda: next((w for w in workloads_of(kube, uid) if gpu_count(w) == 0
                                      and cond(w, "Admitted").get("status") == "True"), None), 60,
                        "the Workload to shrink in place")
    assert shrunk["metadata"]["uid"] == before["metadata"]["uid"], "the Workload was replaced, not shrunk"
    wait_until(lambda: gpu_usage(kube, T_A) == 1, 30, "rr-a's GPU usage to drop to the busy cluster's 1")
    rc = cluster(kube, IDLE)
    assert json.loads(rc["metadata"]["annotations"][STATE])["reclaimed"] == {"gpu": {"replicas": 2, "minReplicas": 0}}
    assert "app.kubernetes.io/managed-by" not in rc["metadata"].get("labels", {})
    assert cluster(kube, BUSY)["metadata"]["resourceVersion"] == busy_rv, "the busy RayCluster was written"
    assert cluster(kube, THEIRS, NS_B)["spec"] == scenario["theirs"]["spec"]

    # idempotent: the next scheduled run changes nothing
    again = reclaim(run_playbook, lab)
    assert not any(c["changed"] for c in again.values()), again
    assert "set the annotation gpuaas.io/wake" in again[IDLE]["reason"]

    # another tenant's jobs are admitted on the freed GPUs (borrowed: rr-b has none of its own)
    for i in range(2):
        borrow = kwok_job({"nvidia.com/gpu": "1"}, name="borrow-%d" % i, tolerations=[TOLERATION], grace_seconds=0)
        res(kube, "batch/v1", "Job").create(body=borrow, namespace=NS_B)
    wait_until(lambda: len([w for w in items(kube, KUEUE, "Workload", NS_B)
                            if w["metadata"]["name"].startswith("job-borrow-") and cond(w, "Admitted").get("status") == "True"]) == 2,
               60, "rr-b's two Jobs to be admitted on the freed GPUs")
    wait_until(lambda: gpu_usage(kube, T_B) == 2, 30, "rr-b's ClusterQueue to count the 2 borrowed GPUs")


def test_wake_brings_the_workers_back_through_a_new_slice_and_the_head_never_restarts(scenario, lab, kube, run_playbook):
    """The wake arrives while a scheduled run is already going (watch_seconds, as the AWX schedule runs it): the
    run acts on it at its next pass, so the workers are back within WAKE_BOUND of the tenant's annotation."""
    uid = scenario[IDLE]
    watching: dict = {}
    runner = threading.Thread(target=lambda: watching.update(run=run_playbook(RECLAIM_PLAYBOOK, extra_vars=dict(
        INVENTORY, gpuaas_prometheus={"url": lab.prometheus_url}, gpuaas_ray_reclaim_scrape_interval=SCRAPE,
        gpuaas_ray_reclaim_tenants=[T_A, T_B], gpuaas_ray_reclaim_watch_seconds=WATCH,
        gpuaas_ray_reclaim_watch_interval=2))))
    runner.start()
    time.sleep(WATCH / 3)  # the run has started (ansible start-up) and is watching
    out = kubectl(lab, "-n", NS_A, "annotate", "raycluster", IDLE, "%s=%d" % (WAKE, time.time()), "--overwrite",
                  context=lab.tenant_context)
    assert out.returncode == 0, out.stderr
    start = time.monotonic()
    wait_until(lambda: gpu_replicas(kube, IDLE) == 2, WAKE_BOUND, "the watching run to restore the workers")
    runner.join(timeout=WATCH + 120)
    assert not runner.is_alive() and watching["run"].rc == 0, watching.get("run") and watching["run"].explain()
    [task] = watching["run"].task_results("Reclaim or wake")
    woke = {c["name"]: c for c in task["clusters"]}
    assert woke[IDLE]["action"] == "wake" and woke[IDLE]["replicas"] == {"gpu": 2}, woke
    assert task["passes"] > 1, task["passes"]
    assert gpu_replicas(kube, IDLE) == 2
    wait_until(lambda: len([p for p in pods_of(kube, IDLE, "worker") if running(p)]) == 2, WAKE_BOUND,
               "the GPU workers back within %d s of the wake run" % WAKE_BOUND)
    admitted = time.monotonic() - start
    [now] = workloads_of(kube, uid)
    assert now["metadata"]["annotations"].get(REPLACEMENT_FOR), "the wake did not go through a new Workload slice"
    assert gpu_count(now) == 2 and cond(now, "Admitted").get("status") == "True"
    # admitted by reclaim: rr-b's borrowed Jobs were preempted
    preempted = [cond(w, "Preempted").get("reason") for w in items(kube, KUEUE, "Workload", NS_B)
                 if cond(w, "Preempted").get("status") == "True"]
    assert preempted and set(preempted) == {"InCohortReclamation"}, preempted
    [head] = pods_of(kube, IDLE, "head")
    assert head["metadata"]["uid"] == scenario["head"], "the head pod was replaced"
    assert not any(c.get("restartCount") for c in head["status"].get("containerStatuses") or [])
    # in cooldown: an immediate run does not reclaim again although the GPUs are idle
    assert reclaim(run_playbook, lab)[IDLE]["action"] == "keep"
    print("wake (annotation during a watching run -> re-admission by reclaim -> workers Running): %.1f s" % admitted)


def test_a_tenant_user_cannot_wake_or_scale_another_tenants_cluster_nor_escape_her_quota(scenario, lab, kube, run_playbook):
    # 1. alice cannot give rr-b's cluster the wake signal, nor scale it herself
    for args in (("annotate", "raycluster", THEIRS, "%s=1" % WAKE),
                 ("patch", "raycluster", THEIRS, "--type=merge", "-p", json.dumps({"metadata": {"annotations": {
                     STATE: json.dumps({"reclaimed": {"gpu": {"replicas": 4}}})}}}))):
        out = kubectl(lab, "-n", NS_B, *args, context=lab.tenant_context)
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (args, out.stdout, out.stderr)
    # 2. on her own cluster she scales the GPU workers to 0 herself, forges a reclaim record of 50 workers and wakes
    #    it: the module restores at most the group's maxReplicas (4), and Kueue admits none of it beyond the tenant's
    #    quota (3 GPUs in the whole cohort, busy holds 1)
    forged = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
              {"op": "add", "path": "/metadata/annotations/gpuaas.io~1idle-reclaim",
               "value": json.dumps({"reclaimed": {"gpu": {"replicas": 50}}})},
              {"op": "add", "path": "/metadata/annotations/gpuaas.io~1wake", "value": "forged"}]
    out = kubectl(lab, "-n", NS_A, "patch", "raycluster", IDLE, "--type=json", "-p", json.dumps(forged),
                  context=lab.tenant_context)
    assert out.returncode == 0, out.stderr
    woke = reclaim(run_playbook, lab)
    assert woke[IDLE]["action"] == "wake" and woke[IDLE]["replicas"] == {"gpu": 4}, woke[IDLE]
    assert woke[THEIRS]["action"] == "keep" and not woke[THEIRS]["changed"]
    pending = wait_until(lambda: next((w for w in workloads_of(kube, scenario[IDLE]) if gpu_count(w) == 4), None), 60,
                         "Kueue to create the 4-worker slice")
    wait_until(lambda: cond(get(kube, KUEUE, "Workload", pending["metadata"]["name"], NS_A), "QuotaReserved").get("status")
               == "False", 60, "the 4-worker slice to wait for quota")
    gated = wait_until(lambda: [p for p in pods_of(kube, IDLE, "worker")
                                if ELASTIC in [g["name"] for g in p["spec"].get("schedulingGates") or []]], 60,
                       "KubeRay's new workers, held by Kueue's elastic-job gate")
    time.sleep(3)
    assert gpu_usage(kube, T_A) <= 3
    assert gated and not any(p["spec"].get("nodeName") for p in pods_of(kube, IDLE, "worker")), \
        [(p["metadata"]["name"], p["spec"].get("nodeName"), p["spec"].get("schedulingGates"))
         for p in pods_of(kube, IDLE, "worker")]
    assert cluster(kube, THEIRS, NS_B)["spec"] == scenario["theirs"]["spec"], "rr-b's cluster was changed"


RECLAIM_SA, RECLAIM_SA_NS = "rr-reclaim-" + S, "rr-sa-" + S
FENCE = "gpuaas-automation-ray-reclaim-fence"


@pytest.fixture
def reclaim_account(lab, run_playbook):
    """The ray_idle_reclaim account, made by playbooks/automation_rbac.yml from the test inventory (as the admin)."""
    with idle_reclaim_account(lab, run_playbook, INVENTORY, RECLAIM_SA, RECLAIM_SA_NS) as token:
        yield token


def test_the_reclaim_account_runs_the_schedule_and_may_change_only_the_worker_replicas(
        scenario, lab, kube, run_playbook, reclaim_account):  # pylint: disable=redefined-outer-name,unused-argument
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import ray_reclaim  # the built collection

    token = reclaim_account
    sa_env = {"K8S_AUTH_HOST": lab.apiserver, "K8S_AUTH_API_KEY": token, "K8S_AUTH_SSL_CA_CERT": lab.ca,
              "K8S_AUTH_VERIFY_SSL": "true", "K8S_AUTH_KUBECONFIG": "", "K8S_AUTH_CONTEXT": "",
              "KUBECONFIG": "/nonexistent/gpuaas-no-kubeconfig"}
    # 1. the scheduled run, as the account (check mode: what it reads and would write is authorized)
    run = run_playbook(RECLAIM_PLAYBOOK, check=True, diff=True, env=sa_env, extra_vars=dict(
        INVENTORY, gpuaas_prometheus={"url": lab.prometheus_url}, gpuaas_ray_reclaim_scrape_interval=SCRAPE,
        gpuaas_ray_reclaim_tenants=[T_A, T_B]))
    assert run.rc == 0, run.explain()
    # 2. the reclaim patch the module builds (replicas to 0, the record) passes the fence (server-side dry run)
    live = cluster(kube, BUSY)
    path = "/apis/ray.io/v1/namespaces/%s/rayclusters/%s" % (NS_A, BUSY)
    apply = path + "?fieldManager=gpuaas.platform&force=true&dryRun=All"
    patch = ray_reclaim.reclaim_patch(live, ray_reclaim.Decision("reclaim", "test", {"gpu": 1}), time.time())
    status, body = as_token(lab, token, "PATCH", apply, patch)
    assert status == 200, body
    assert json.loads(body)["spec"]["workerGroupSpecs"][0]["replicas"] == 0
    # 3. anything else in the same patch is refused by the fence, naming what it may change
    head_image = json.loads(json.dumps(patch))
    head_image["spec"]["headGroupSpec"] = json.loads(json.dumps(live["spec"]["headGroupSpec"]))
    head_image["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "registry.invalid/evil:1"
    worker_image = json.loads(json.dumps(patch))
    worker_image["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "registry.invalid/evil:1"
    requeue = json.loads(json.dumps(patch))
    requeue["metadata"]["labels"] = {"gpuaas.io/tenant": T_B}
    wake = json.loads(json.dumps(patch))
    wake["metadata"]["annotations"][WAKE] = "by-the-account"
    for name, attempt, message in (("head image", head_image, "may not change a RayCluster's head"),
                                   ("worker image", worker_image, "only the worker groups' replicas"),
                                   ("a label", requeue, "may not change a RayCluster's labels"),
                                   ("wake annotation", wake, "only the annotation gpuaas.io/idle-reclaim")):
        status, body = as_token(lab, token, "PATCH", apply, attempt)
        assert status in (403, 422) and FENCE in body and message in body, (name, status, body)
    # 4. RBAC: no delete, no create, nothing outside the opted-in namespaces, no Secrets
    assert as_token(lab, token, "DELETE", path + "?dryRun=All")[0] == 403
    assert as_token(lab, token, "GET", "/apis/ray.io/v1/namespaces/default/rayclusters")[0] == 403
    assert as_token(lab, token, "GET", "/apis/ray.io/v1/rayclusters")[0] == 403
    assert as_token(lab, token, "GET", "/api/v1/namespaces/%s/secrets" % NS_A)[0] == 403
    assert as_token(lab, token, "POST", "/api/v1/namespaces/%s/pods?dryRun=All" % NS_A,
                    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                     "spec": {"containers": [{"name": "x", "image": "x"}]}}, "application/json")[0] == 403
    # and the dry runs changed nothing
    assert cluster(kube, BUSY)["spec"] == live["spec"]
