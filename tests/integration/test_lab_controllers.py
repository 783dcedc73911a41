# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's real controllers act (issue 3): Kueue admits, queues, borrows and reclaims; KEDA scales 0 → N → 0.

These tests talk to the real Kueue and KEDA processes that `lab/components/{kueue,keda}.sh` run against the
lab, never to a mock: quota, preemption and autoscaling decisions are the controllers' own. Every object is
prefixed ``itctl-`` and removed at the end of its test. A component left out of LAB_COMPONENTS on purpose
(`make lab-up LAB_COMPONENTS=...`) skips its tests; a component that is listed but not working fails them.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from conftest import create_namespace, require_component
from conftest import kube_get as get, kube_items as items, kube_resource as res, promql, wait_until

PREFIX = "itctl-"
KUEUE = "kueue.x-k8s.io/v1beta2"
KEDA = "keda.sh/v1alpha1"
H100 = "NVIDIA-H100-80GB-HBM3"
H100_NODES = {"gpu-h100-0", "gpu-h100-1"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KWOK_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
UTIL_ANNOTATION = "lab.gpuaas.io/gpu-util"


# ---------------------------------------------------------------------------------------------- helpers


def delete_quietly(kube, api_version, kind, name, namespace=None):
    try:
        res(kube, api_version, kind).delete(name=name, namespace=namespace)
    except NotFoundError:
        pass


def cleanup(kube, namespaces=(), cluster_objects=(), timeout=180):
    """Delete the test's namespaces, then its cluster-scoped objects (ClusterQueues keep a finalizer while
    they have workloads, so they go after the namespaces), and wait for all to be gone. Every delete is
    issued even when an earlier wait times out (a busy namespace controller), so nothing is left behind."""
    for name in namespaces:
        delete_quietly(kube, "v1", "Namespace", name)
    errors = []
    try:
        wait_until(lambda: all(get(kube, "v1", "Namespace", n) is None for n in namespaces), timeout,
                   "namespaces %s to be gone" % list(namespaces))
    except AssertionError as e:
        errors.append(str(e))
    for api_version, kind, name in cluster_objects:
        delete_quietly(kube, api_version, kind, name)
    try:
        wait_until(lambda: all(get(kube, a, k, n) is None for a, k, n in cluster_objects), 60,
                   "%s to be gone" % list(cluster_objects))
    except AssertionError as e:
        errors.append(str(e))
    assert not errors, errors


def make_namespace(kube, name, tenant=True):
    # gpuaas.io/tenant: Kueue, as the collection configures it, manages jobs only in tenant namespaces, and the
    # tenants' admission policy lets GPU pods run only there, through Kueue (issue 11)
    labels = {"lab.gpuaas.io/test": "controllers"}
    if tenant:
        labels["gpuaas.io/tenant"] = name
    create_namespace(kube, name, labels)


def gpu_job(name, namespace, queue, gpus, run_seconds):
    """A Job whose single pod asks for `gpus` GPUs and (KWOK) completes `run_seconds` after it runs."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {KWOK_DELAY: "%ds" % run_seconds}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                    "name": "train", "image": "registry.invalid/lab/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            },
        },
    }


def create_job(kube, job):
    res(kube, "batch/v1", "Job").create(body=job, namespace=job["metadata"]["namespace"])


def job(kube, namespace, name):
    return get(kube, "batch/v1", "Job", name, namespace)


def pods_of(kube, namespace, job_name):
    return items(kube, "v1", "Pod", namespace, label_selector="job-name=%s" % job_name)


def workload_of(kube, namespace, job_name):
    for wl in items(kube, KUEUE, "Workload", namespace):
        if any(o["kind"] == "Job" and o["name"] == job_name for o in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def condition(obj, ctype):
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def with_condition(obj, ctype, status=None):
    """obj when it has condition `ctype` (with `status`, if given), else None: a wait_until predicate."""
    c = condition(obj, ctype)
    return obj if c and (status is None or c["status"] == status) else None


def job_succeeded(kube, namespace, name):
    return (((job(kube, namespace, name) or {}).get("status") or {}).get("succeeded") or 0) >= 1


def running_pods(kube, namespace, job_name):
    return [p for p in pods_of(kube, namespace, job_name) if (p.get("status") or {}).get("phase") == "Running"]


def free_h100_gpus(kube) -> dict[str, int]:
    """Unrequested nvidia.com/gpu per H100 node (pods of other tests may hold some)."""
    free = {}
    for node in H100_NODES:
        n = get(kube, "v1", "Node", node)
        free[node] = int(n["status"]["allocatable"].get("nvidia.com/gpu", "0"))
    for pod in items(kube, "v1", "Pod"):
        node = pod["spec"].get("nodeName")
        if node in free and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for c in pod["spec"]["containers"]:
                free[node] -= int((((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")) or 0)
    return free


def wait_for_free_h100(kube, per_node: int, nodes: int, timeout: float = 120):
    """The scenarios need whole H100 nodes; wait (bounded) for GPU pods of other tests to go away first."""
    try:
        wait_until(lambda: sum(1 for f in free_h100_gpus(kube).values() if f >= per_node) >= nodes, timeout,
                   "%d H100 node(s) with %d free GPUs" % (nodes, per_node))
    except AssertionError as e:
        raise AssertionError("%s; free GPUs per node now: %s" % (e, free_h100_gpus(kube))) from None


def cq_usage(kube, name, flavor):
    status = (get(kube, KUEUE, "ClusterQueue", name) or {}).get("status") or {}
    for f in status.get("flavorsUsage") or []:
        if f["name"] == flavor:
            for r in f["resources"]:
                if r["name"] == "nvidia.com/gpu":
                    return {"total": str(r.get("total", "0")), "borrowed": str(r.get("borrowed", "0"))}
    return {"total": "0", "borrowed": "0"}


# ---------------------------------------------------------------------------------------------- Kueue
@pytest.fixture(scope="module")
def kueue(lab, kube):
    """Kueue is running and its webhooks answer; a ResourceFlavor for the H100 nodes."""
    require_component(lab, "kueue")
    if lab.kueue_api == "v1beta1":
        pytest.skip("a LAB_KUEUE_API=v1beta1 lab loads v1beta1-only CRDs and runs no Kueue controller")
    hooks = get(kube, "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration")
    assert hooks, "Kueue's webhook configurations are missing: is lab/components/kueue.sh up?"
    flavor = PREFIX + "h100-" + uuid.uuid4().hex[:5]
    res(kube, KUEUE, "ResourceFlavor").create(body={
        "apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": flavor},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    })
    yield flavor
    cleanup(kube, cluster_objects=[(KUEUE, "ResourceFlavor", flavor)])


def cluster_queue(name, flavor, nominal, namespace_selector, cohort=None):
    spec = {
        "namespaceSelector": namespace_selector,
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                            "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}],
    }
    if cohort:
        spec["cohortName"] = cohort
        spec["preemption"] = {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name, namespace, cq):
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq}}


def ns_selector(*names):
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(names)}]}


def test_kueue_admits_one_8gpu_job_and_queues_the_next(lab, kube, kueue):
    """Nominal quota 8 GPUs: the first 8-GPU Job runs on an H100 node, the second waits (QuotaReserved
    false, no pods) until the first completes and then runs; a 16-GPU Job never gets a pod."""
    suffix = uuid.uuid4().hex[:5]
    ns, cq, lq = PREFIX + "queue-" + suffix, PREFIX + "cq-" + suffix, "itctl-lq"
    make_namespace(kube, ns)
    try:
        res(kube, KUEUE, "ClusterQueue").create(body=cluster_queue(cq, kueue, 8, ns_selector(ns)))
        res(kube, KUEUE, "LocalQueue").create(body=local_queue(lq, ns, cq), namespace=ns)
        wait_until(lambda: (condition(get(kube, KUEUE, "LocalQueue", lq, ns), "Active") or {}).get("status") == "True",
                   30, "the LocalQueue to be active")

        wait_for_free_h100(kube, per_node=8, nodes=1)
        create_job(kube, gpu_job("first", ns, lq, 8, run_seconds=12))
        first_pods = wait_until(lambda: running_pods(kube, ns, "first"), 60, "the first Job's pod to run")
        assert first_pods[0]["spec"]["nodeName"] in H100_NODES
        # Kueue injected the flavor's node labels and tolerations when it admitted the Job.
        assert first_pods[0]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == H100
        wl_first = workload_of(kube, ns, "first")
        assert condition(wl_first, "Admitted")["status"] == "True"
        assert wl_first["status"]["admission"]["clusterQueue"] == cq

        create_job(kube, gpu_job("second", ns, lq, 8, run_seconds=1))
        create_job(kube, gpu_job("too-big", ns, lq, 16, run_seconds=1))
        for name in ("second", "too-big"):
            wl = wait_until(lambda: with_condition(workload_of(kube, ns, name), "QuotaReserved"),
                            30, "Kueue to evaluate %s" % name)
            reserved = condition(wl, "QuotaReserved")
            assert reserved["status"] == "False", reserved
            assert "insufficient" in reserved["message"] or "exceeds" in reserved["message"], reserved
            assert job(kube, ns, name)["spec"]["suspend"] is True
            assert pods_of(kube, ns, name) == []
        # Still queued while the first runs.
        assert not job_succeeded(kube, ns, "first")
        assert pods_of(kube, ns, "second") == []

        wait_until(lambda: job_succeeded(kube, ns, "first"), 60, "the first Job to complete")
        wait_until(lambda: job_succeeded(kube, ns, "second"), 60, "the second Job to be admitted, run and complete")
        second_pod = pods_of(kube, ns, "second")[0]
        assert second_pod["spec"]["nodeName"] in H100_NODES
        # Kueue's job reconciler marks the Workload Finished after the Job controller reports success
        wl_second = wait_until(lambda: with_condition(workload_of(kube, ns, "second"), "Finished", "True"),
                               30, "Kueue to mark the second Job's Workload Finished")
        assert wl_second["status"]["admission"]["clusterQueue"] == cq

        # The Job that asks more than the whole quota never got a pod and is still not admitted.
        assert pods_of(kube, ns, "too-big") == []
        assert condition(workload_of(kube, ns, "too-big"), "QuotaReserved")["status"] == "False"
        assert job(kube, ns, "too-big")["spec"]["suspend"] is True

        # Prometheus scrapes Kueue's metrics, with the ClusterQueue resource metrics enabled.
        quota = wait_until(lambda: promql(lab, 'kueue_cluster_queue_nominal_quota{cluster_queue="%s",resource="nvidia.com/gpu"}' % cq),
                           30, "Kueue's nominal quota metric in Prometheus")
        assert float(quota[0]["value"][1]) == 8
    finally:
        cleanup(kube, [ns], [(KUEUE, "ClusterQueue", cq)])


def test_kueue_borrowing_and_reclaim_within_cohort(lab, kube, kueue):
    """Two ClusterQueues of 8 GPUs in one cohort: the busy tenant borrows the idle one's 8 and runs 16;
    when the idle tenant submits work, reclaim preemption gives its 8 back."""
    suffix = uuid.uuid4().hex[:5]
    cohort = PREFIX + "cohort-" + suffix
    ns_a, ns_b = PREFIX + "team-a-" + suffix, PREFIX + "team-b-" + suffix
    cq_a, cq_b = PREFIX + "cq-a-" + suffix, PREFIX + "cq-b-" + suffix
    lq = "itctl-lq"
    for ns in (ns_a, ns_b):
        make_namespace(kube, ns)
    try:
        res(kube, KUEUE, "ClusterQueue").create(body=cluster_queue(cq_a, kueue, 8, ns_selector(ns_a), cohort=cohort))
        res(kube, KUEUE, "ClusterQueue").create(body=cluster_queue(cq_b, kueue, 8, ns_selector(ns_b), cohort=cohort))
        res(kube, KUEUE, "LocalQueue").create(body=local_queue(lq, ns_a, cq_a), namespace=ns_a)
        res(kube, KUEUE, "LocalQueue").create(body=local_queue(lq, ns_b, cq_b), namespace=ns_b)
        for ns in (ns_a, ns_b):
            wait_until(lambda: (condition(get(kube, KUEUE, "LocalQueue", lq, ns), "Active") or {}).get("status") == "True",
                       30, "LocalQueue in %s to be active" % ns)

        # Tenant B: 16 GPUs of work while tenant A is idle.
        wait_for_free_h100(kube, per_node=8, nodes=2)
        for name in ("b-0", "b-1"):
            create_job(kube, gpu_job(name, ns_b, lq, 8, run_seconds=600))
        pods_b = {}
        for name in ("b-0", "b-1"):
            pods_b[name] = wait_until(lambda: running_pods(kube, ns_b, name), 60, "%s to run" % name)[0]
        assert {p["spec"]["nodeName"] for p in pods_b.values()} == H100_NODES
        assert wait_until(lambda: cq_usage(kube, cq_b, kueue) == {"total": "16", "borrowed": "8"} and cq_usage(kube, cq_b, kueue),
                          30, "tenant B's ClusterQueue to report 16 GPUs used, 8 borrowed")

        # Tenant A claims its nominal 8: Kueue preempts one of B's workloads.
        create_job(kube, gpu_job("a-0", ns_a, lq, 8, run_seconds=600))
        pod_a = wait_until(lambda: running_pods(kube, ns_a, "a-0"), 90, "tenant A's Job to run after reclaim")[0]
        assert pod_a["spec"]["nodeName"] in H100_NODES
        assert condition(workload_of(kube, ns_a, "a-0"), "Admitted")["status"] == "True"

        def preempted_b():
            out = []
            for name in ("b-0", "b-1"):
                wl = workload_of(kube, ns_b, name)
                pre = condition(wl, "Preempted")
                if pre and pre["status"] == "True":
                    out.append((name, pre))
            return out

        victims = wait_until(preempted_b, 30, "one of tenant B's workloads to be marked preempted")
        assert len(victims) == 1, victims
        victim, reason = victims[0]
        # Tenant B was borrowing and tenant A asks only for its nominal quota: a reclamation, not a fair-share trade.
        assert reason["reason"] == "InCohortReclamation", reason
        assert "preemptor path: /%s/%s" % (cohort, cq_a) in reason["message"], reason
        survivor = ({"b-0", "b-1"} - {victim}).pop()
        # The preempted Job is suspended again and lost its pod; the other keeps running.
        wait_until(lambda: job(kube, ns_b, victim)["spec"]["suspend"] is True and not running_pods(kube, ns_b, victim),
                   60, "the preempted Job to be suspended without pods")
        assert running_pods(kube, ns_b, survivor)
        assert condition(workload_of(kube, ns_b, victim), "QuotaReserved")["status"] == "False"
        wait_until(lambda: cq_usage(kube, cq_a, kueue) == {"total": "8", "borrowed": "0"}
                   and cq_usage(kube, cq_b, kueue) == {"total": "8", "borrowed": "0"},
                   30, "each ClusterQueue to use exactly its nominal 8 GPUs")
    finally:
        cleanup(kube, [ns_a, ns_b], [(KUEUE, "ClusterQueue", cq_a), (KUEUE, "ClusterQueue", cq_b)])


# ---------------------------------------------------------------------------------------------- KEDA
@pytest.fixture(scope="module")
def keda(lab, kube):
    """The KEDA operator runs and the metrics apiserver is registered and Available."""
    require_component(lab, "keda")
    svc = get(kube, "apiregistration.k8s.io/v1", "APIService", "v1beta1.external.metrics.k8s.io")
    assert svc, "APIService v1beta1.external.metrics.k8s.io is missing: is lab/components/keda.sh up?"
    assert condition(svc, "Available")["status"] == "True", condition(svc, "Available")
    return svc


def test_keda_scales_0_to_n_and_back_to_0_on_a_gpu_metric(lab, kube, keda, kueue):
    """A Deployment with a ScaledObject on a Prometheus query of the simulated DCGM exporter: 0 replicas
    while the GPUs are idle, N when a pod's GPU gets busy (the operator activates 0 → 1, the HPA reads the
    external metric through the KEDA metrics apiserver and scales 1 → N), back to 0 after the cooldown.
    The busy GPU pod runs through Kueue in a tenant namespace of its own (the tenants' admission policy refuses
    GPU pods outside Kueue); the scaled Deployment lives in a namespace Kueue does not manage."""
    suffix = uuid.uuid4().hex[:5]
    ns, gpu_ns, cq = PREFIX + "keda-" + suffix, PREFIX + "kgpu-" + suffix, PREFIX + "kcq-" + suffix
    make_namespace(kube, ns, tenant=False)
    make_namespace(kube, gpu_ns)
    try:
        res(kube, KUEUE, "ClusterQueue").create(body=cluster_queue(cq, kueue, 8, ns_selector(gpu_ns)))
        res(kube, KUEUE, "LocalQueue").create(body=local_queue("itctl-lq", gpu_ns, cq), namespace=gpu_ns)
        query = 'sum(DCGM_FI_DEV_GPU_UTIL{namespace="%s"})' % gpu_ns
        res(kube, "apps/v1", "Deployment").create(namespace=ns, body={
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "worker", "namespace": ns},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "worker"}},
                     "template": {"metadata": {"labels": {"app": "worker"}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "worker", "image": "registry.invalid/lab/worker:1"}]}}},
        })
        res(kube, KEDA, "ScaledObject").create(namespace=ns, body={
            "apiVersion": KEDA, "kind": "ScaledObject", "metadata": {"name": "worker", "namespace": ns},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
                "minReplicaCount": 0, "maxReplicaCount": 3, "pollingInterval": 2, "cooldownPeriod": 5,
                "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0},
                    "scaleDown": {"stabilizationWindowSeconds": 0}}}},
                "triggers": [{"type": "prometheus", "metadata": {
                    "serverAddress": lab.prometheus_url, "query": query,
                    "threshold": "30", "activationThreshold": "10"}}],
            },
        })
        so = wait_until(lambda: with_condition(get(kube, KEDA, "ScaledObject", "worker", ns), "Ready", "True"),
                        30, "the ScaledObject to be Ready")
        hpa_name = so["status"]["hpaName"]
        assert get(kube, "autoscaling/v2", "HorizontalPodAutoscaler", hpa_name, ns), "KEDA made no HPA"
        time.sleep(3)  # a few polling intervals with an idle metric: nothing scales up
        assert (condition(get(kube, KEDA, "ScaledObject", "worker", ns), "Active") or {}).get("status") != "True"
        assert (get(kube, "apps/v1", "Deployment", "worker", ns)["spec"].get("replicas") or 0) == 0

        # A pod gets a GPU and makes it busy: the simulated exporter reports 90 % for it.
        wait_for_free_h100(kube, per_node=1, nodes=1)
        res(kube, "v1", "Pod").create(namespace=gpu_ns, body={
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "busy", "namespace": gpu_ns, "annotations": {UTIL_ANNOTATION: "90"},
                         "labels": {QUEUE_LABEL: "itctl-lq"}},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "train", "image": "registry.invalid/lab/train:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        })
        series = wait_until(lambda: promql(lab, query), 60, "Prometheus to see the busy GPU")
        assert float(series[0]["value"][1]) == 90
        # 90 / threshold 30 → 3 replicas (= maxReplicaCount): only the HPA with the external metric gets past 1.
        wait_until(lambda: (get(kube, "apps/v1", "Deployment", "worker", ns).get("status") or {}).get("readyReplicas") == 3,
                   90, "the Deployment to scale 0 → 3")
        assert condition(get(kube, KEDA, "ScaledObject", "worker", ns), "Active")["status"] == "True"
        hpa = get(kube, "autoscaling/v2", "HorizontalPodAutoscaler", hpa_name, ns)
        assert hpa["status"]["desiredReplicas"] == 3, hpa["status"]
        external = [m for m in hpa["status"].get("currentMetrics") or [] if m["type"] == "External"]
        assert external and external[0]["external"]["metric"]["name"].startswith("s0-prometheus"), hpa["status"]

        # The GPU goes idle (its pod ends): back to 0 after the cooldown.
        res(kube, "v1", "Pod").delete(name="busy", namespace=gpu_ns, body={"gracePeriodSeconds": 0})
        wait_until(lambda: not promql(lab, query), 60, "the busy GPU's series to disappear from Prometheus")
        wait_until(lambda: get(kube, "apps/v1", "Deployment", "worker", ns)["spec"].get("replicas") == 0,
                   60, "the Deployment to scale back to 0")
        assert (condition(get(kube, KEDA, "ScaledObject", "worker", ns), "Active") or {}).get("status") == "False"
    finally:
        cleanup(kube, [ns, gpu_ns], [(KUEUE, "ClusterQueue", cq)])
