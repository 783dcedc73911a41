# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idle GPUs go back to the pool and come back on demand (issue 12), with the lab's REAL KEDA, Kueue and
Prometheus. The ScaledObjects are built from a tenants inventory by the gpuaas.platform.tenants module (never
written here); the GPU utilization comes from the simulated DCGM exporter (pod annotation lab.gpuaas.io/gpu-util),
the wake/load signal from a small exporter this test registers with the lab's Prometheus (file_sd).

One scenario, in order (the test functions share it; each asserts one promise of docs/autoscaling.md):

  tenants (one cohort)   as-serve: 4 GPUs, reclaim Any      Deployment vllm (1 GPU/pod, max 3) + vllm-canary (busy)
                         as-nb:    1 GPU, lending_limit 0   StatefulSet nb (1 GPU, 0 <-> 1)
                         as-batch: 0 GPUs (borrows only)    long 1-GPU Jobs
  1. vllm's and nb's GPUs go idle -> both at 0 replicas within window + cooldown; vllm-canary (busy, same name
     prefix) stays; nb's Workload is kept (same UID, QuotaReserved=False reason OnHold)
  2. as-batch submits 4 Jobs: 3 run on vllm's freed GPUs (borrowed), the 4th waits (nb's GPU is not lendable)
  3. nb's wake signal rises -> nb re-admitted with the same Workload, no preemption
  4. vllm's request rate rises -> its first pod is admitted within 30 s by reclaim (exactly one borrower Workload
     preempted, reason InCohortReclamation); at 3x the per-replica target it reaches max_replicas (3)

Short windows: idle_scale_to_zero.after_seconds (the inventory's seconds form; real inventories use after_minutes),
cooldown_period 10 s, polling_interval 5 s. The repeated measurement (>= 5 cycles) is bench/autoscaling.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from conftest import kube_get as get, kube_items as items, kube_resource as res, local_play, promql, wait_until

KUEUE = "kueue.x-k8s.io/v1beta2"
KEDA = "keda.sh/v1alpha1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
UTIL = "lab.gpuaas.io/gpu-util"
KWOK_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
H100 = "NVIDIA-H100-80GB-HBM3"
WINDOW, COOLDOWN, POLLING = 20, 10, 5
# The lab's Prometheus scrapes every 5 s (lab/lab.sh): the last busy sample may be up to one scrape older than the
# moment the test sets the GPU idle, so the idle window can close that much before WINDOW has passed on our clock.
SCRAPE_INTERVAL = 5
TO_ZERO_BOUND = WINDOW + COOLDOWN + 2 * POLLING + 15  # + scrape interval, DCGM refresh, HPA/KEDA round trips
WAKE_BOUND = 30
MAX_REPLICAS = 3
PER_REPLICA = 10
SIGNAL = "gpuaas_autoscaling_test_requests_per_second"

S = uuid.uuid4().hex[:5]
NS_SERVE, NS_NB, NS_BATCH = "as-serve-" + S, "as-nb-" + S, "as-batch-" + S
T_SERVE, T_NB, T_BATCH = "as-serve-" + S, "as-nb-" + S, "as-batch-" + S
FLAVOR, COHORT = "as-h100-" + S, "as-co-" + S


# -- small helpers -----------------------------------------------------------------------------------


def condition(obj, ctype):
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


def is_true(obj, ctype):
    return (condition(obj, ctype) or {}).get("status") == "True"


def pods(kube, namespace, app):
    """The live pods of one workload, by its selector (app=<name>), not by name."""
    found = res(kube, "v1", "Pod").get(namespace=namespace, label_selector="app=%s" % app).items
    return [p.to_dict() for p in found if not p.metadata.deletionTimestamp]


def admitted(pod) -> bool:
    gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
    return ADMISSION_GATE not in gates and pod["status"].get("phase") == "Running"


def replicas(kube, kind, namespace, name) -> int:
    return (get(kube, "apps/v1", kind, name, namespace) or {}).get("spec", {}).get("replicas")


def reclaimed(kube) -> list[dict]:
    """Borrower Workloads Kueue preempted, with the reason it gave."""
    out = []
    for wl in items(kube, KUEUE, "Workload", NS_BATCH):
        cond = condition(wl, "Preempted")
        if cond and cond["status"] == "True":
            out.append({"workload": wl["metadata"]["name"], "reason": cond["reason"]})
    return out


class Signal:
    """A request-rate gauge per service, scraped by the lab's Prometheus (a file_sd target of the lab)."""

    def __init__(self, lab):
        self.registry = CollectorRegistry()
        self.gauge = Gauge(SIGNAL, "Requests per second (test signal)", ["service"], registry=self.registry)
        self.server, self.thread = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.port = self.server.server_port
        self.file = lab.dir / "prometheus" / "targets" / ("autoscaling-test-%s.json" % S)
        self.file.write_text(json.dumps([{"targets": ["127.0.0.1:%d" % self.port],
                                          "labels": {"job": "autoscaling-test-" + S}}]))

    def set(self, service: str, value: float) -> None:
        self.gauge.labels(service=service).set(value)

    def query(self, service: str) -> str:
        return 'sum(%s{job="autoscaling-test-%s",service="%s"})' % (SIGNAL, S, service)

    def close(self) -> None:
        self.file.unlink(missing_ok=True)
        self.server.shutdown()


def gpu_pod_template(app, util, grace=1):
    return {
        "metadata": {"labels": {"app": app}, "annotations": {UTIL: str(util)}},
        "spec": {"terminationGracePeriodSeconds": grace, "containers": [{
            "name": "server", "image": "registry.invalid/lab/vllm:1",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }


def deployment(name, namespace, util, replicas_=1):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"replicas": replicas_, "selector": {"matchLabels": {"app": name}},
                     "template": gpu_pod_template(name, util)}}


def statefulset(name, namespace, util):
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"replicas": 1, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": name}}, "template": gpu_pod_template(name, util)}}


def batch_job(name):
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS_BATCH, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {KWOK_DELAY: "3600s"}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                    "name": "train", "image": "registry.invalid/lab/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def set_util(kube, namespace, app, util):
    for pod in pods(kube, namespace, app):
        res(kube, "v1", "Pod").patch(name=pod["metadata"]["name"], namespace=namespace,
                                     body={"metadata": {"annotations": {UTIL: str(util)}}},
                                     content_type="application/merge-patch+json")


def inventory(signal: Signal) -> dict:
    flavor = {"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": H100},
              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    idle = {"after_seconds": WINDOW}
    tenants = [
        {"name": T_SERVE, "namespaces": [NS_SERVE], "cohort": COHORT,
         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 4}}],
         "preemption": {"reclaim_within_cohort": "Any"},
         "autoscaling": [{"name": "vllm", "target": {"kind": "Deployment", "name": "vllm"},
                          "max_replicas": MAX_REPLICAS, "polling_interval": POLLING, "cooldown_period": COOLDOWN,
                          "idle_scale_to_zero": dict(idle, wake_query=signal.query("vllm")),
                          "load": {"target_per_replica": PER_REPLICA}}]},
        {"name": T_NB, "namespaces": [NS_NB], "cohort": COHORT,
         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 1}, "lending_limit": {"nvidia.com/gpu": 0}}],
         "autoscaling": [{"name": "nb", "target": {"kind": "StatefulSet", "name": "nb"}, "max_replicas": 1,
                          "polling_interval": POLLING, "cooldown_period": COOLDOWN,
                          "idle_scale_to_zero": dict(idle, wake_query=signal.query("nb"))}]},
        {"name": T_BATCH, "namespaces": [NS_BATCH], "cohort": COHORT,
         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 0}}]},
    ]
    return {"flavor": flavor, "tenants": tenants}


PLAYBOOK = local_play("""
  tasks:
    - name: The test's ResourceFlavor (shared objects are not applied with limit_tenants)
      gpuaas.platform.resource_flavor:
        name: "{{ inv.flavor.name }}"
        node_labels: "{{ inv.flavor.node_labels }}"
        tolerations: "{{ inv.flavor.tolerations }}"
    - name: Reconcile the GPU tenancy
      gpuaas.platform.tenants:
        flavors: ["{{ inv.flavor }}"]
        cohorts: [{name: "%s"}]
        tenants: "{{ inv.tenants }}"
        prometheus: {url: "{{ prometheus_url }}"}
        limit_tenants: "{{ inv.tenants | map(attribute='name') | list }}"
""") % COHORT


@pytest.fixture(scope="module")
def scenario(lab, kube, run_playbook):
    for component in ("kueue", "keda"):
        if not list((lab.dir / "pids").glob("%s*.pid" % component)):
            pytest.fail("the lab runs without %s: bring it up with LAB_COMPONENTS including kueue and keda" % component)
    signal = Signal(lab)
    state: dict = {"signal": signal}
    try:
        signal.set("vllm", 0)
        signal.set("nb", 0)
        # Kueue manages namespaces labelled gpuaas.io/tenant (the tenants module sets the same label below).
        for ns, tenant_name in ((NS_SERVE, T_SERVE), (NS_NB, T_NB), (NS_BATCH, T_BATCH)):
            res(kube, "v1", "Namespace").create(body={"metadata": {"name": ns, "labels": {"gpuaas.io/tenant": tenant_name}}})
        # The workloads exist before their ScaledObjects (KEDA backs off on a missing target).
        res(kube, "apps/v1", "Deployment").create(body=deployment("vllm", NS_SERVE, 85), namespace=NS_SERVE)
        res(kube, "apps/v1", "Deployment").create(body=deployment("vllm-canary", NS_SERVE, 90), namespace=NS_SERVE)
        res(kube, "apps/v1", "StatefulSet").create(body=statefulset("nb", NS_NB, 70), namespace=NS_NB)
        run = run_playbook(PLAYBOOK, extra_vars={"inv": inventory(signal), "prometheus_url": lab.prometheus_url})
        assert run.rc == 0, run.explain()
        state["run"] = run
        yield state
    finally:
        signal.close()
        for ns in (NS_SERVE, NS_NB, NS_BATCH):
            try:
                res(kube, "v1", "Namespace").delete(name=ns)
            except NotFoundError:
                pass
        wait_until(lambda: all(get(kube, "v1", "Namespace", n) is None for n in (NS_SERVE, NS_NB, NS_BATCH)),
                   180, "the test namespaces to be gone")
        for name in (T_SERVE, T_NB, T_BATCH):
            try:
                res(kube, KUEUE, "ClusterQueue").delete(name=name)
            except NotFoundError:
                pass
        wait_until(lambda: all(get(kube, KUEUE, "ClusterQueue", n) is None for n in (T_SERVE, T_NB, T_BATCH)),
                   60, "the test ClusterQueues to be gone")
        try:
            res(kube, KUEUE, "ResourceFlavor").delete(name=FLAVOR)
        except NotFoundError:
            pass


VLLM, CANARY, NB = "vllm", "vllm-canary", "nb"


def test_scaled_objects_come_from_the_inventory_and_run(scenario, lab, kube):
    for ns, name in ((NS_SERVE, "vllm"), (NS_NB, "nb")):
        so = wait_until(lambda: is_true(get(kube, KEDA, "ScaledObject", name, ns), "Ready") and
                        get(kube, KEDA, "ScaledObject", name, ns), 60, "ScaledObject %s/%s Ready" % (ns, name))
        assert so["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
    so = get(kube, KEDA, "ScaledObject", "nb", NS_NB)
    assert (so["spec"]["idleReplicaCount"], so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (0, 1, 1)
    # every workload runs, admitted by Kueue on the tenants' quota
    wait_until(lambda: len([p for p in pods(kube, NS_SERVE, VLLM) if admitted(p)]) == 1, 60, "vllm's pod to run")
    wait_until(lambda: len([p for p in pods(kube, NS_SERVE, CANARY) if admitted(p)]) == 1, 60, "vllm-canary to run")
    wait_until(lambda: len([p for p in pods(kube, NS_NB, NB) if admitted(p)]) == 1, 60, "nb-0 to run")
    # the generated idle query finds vllm's own GPU (and not the canary's) in the lab's Prometheus
    query = next(t for t in so_triggers(kube, NS_SERVE, "vllm") if t["name"] == "gpu-busy")["metadata"]["query"]
    value = wait_until(lambda: promql(lab, query) and float(promql(lab, query)[0]["value"][1]) == 85 and 85, 30,
                       "the idle query to read vllm's 85 %")
    assert value == 85


def so_triggers(kube, ns, name):
    return get(kube, KEDA, "ScaledObject", name, ns)["spec"]["triggers"]


def test_idle_targets_go_to_zero_and_the_notebook_keeps_its_workload(scenario, kube):
    wl_nb = wait_until(lambda: next((w for w in items(kube, KUEUE, "Workload", NS_NB) if is_true(w, "Admitted")), None),
                       30, "nb's admitted Workload")
    scenario["nb_uid"] = wl_nb["metadata"]["uid"]
    t0 = time.monotonic()
    set_util(kube, NS_SERVE, VLLM, 0)
    set_util(kube, NS_NB, NB, 0)
    done = {}
    while len(done) < 2 and time.monotonic() - t0 < TO_ZERO_BOUND:
        for kind, ns, name in (("Deployment", NS_SERVE, "vllm"), ("StatefulSet", NS_NB, "nb")):
            if name not in done and replicas(kube, kind, ns, name) == 0:
                done[name] = time.monotonic() - t0
        time.sleep(0.5)
    assert set(done) == {"vllm", "nb"}, "not at 0 replicas within %ss of going idle: %s" % (TO_ZERO_BOUND, done)
    scenario["to_zero"] = done
    print("idle -> 0 replicas: vllm %.1fs, nb %.1fs (window %ss + cooldown %ss)" % (done["vllm"], done["nb"], WINDOW, COOLDOWN))
    # not before the idle window, measured as Prometheus measures it (one scrape of tolerance, see SCRAPE_INTERVAL)
    assert min(done.values()) >= WINDOW - SCRAPE_INTERVAL, "scaled in before the idle window passed: %s" % done
    # the busy canary (same name prefix as vllm) was neither scaled nor mistaken for vllm
    assert replicas(kube, "Deployment", NS_SERVE, "vllm-canary") == 1
    wait_until(lambda: not pods(kube, NS_SERVE, VLLM) and not pods(kube, NS_NB, NB), 30, "the idle pods to be gone")
    # Deployment: the per-pod Workloads are gone; StatefulSet: the same Workload, on hold, quota released
    wait_until(lambda: len(items(kube, KUEUE, "Workload", NS_SERVE)) == 1, 30,
               "vllm's Workloads to be deleted (only vllm-canary's left)")
    wl = wait_until(lambda: next((w for w in items(kube, KUEUE, "Workload", NS_NB)
                                  if (condition(w, "QuotaReserved") or {}).get("reason") == "OnHold"), None),
                    30, "nb's Workload to be on hold")
    assert wl["metadata"]["uid"] == scenario["nb_uid"]
    assert condition(wl, "QuotaReserved")["status"] == "False"
    assert not (wl.get("status") or {}).get("admission")


def test_freed_gpus_are_borrowed_except_the_unlendable_ones(scenario, kube):
    for i in range(4):
        res(kube, "batch/v1", "Job").create(body=batch_job("long-%d" % i), namespace=NS_BATCH)

    def running_jobs():
        return [p for p in items(kube, "v1", "Pod", NS_BATCH) if p["status"].get("phase") == "Running"]

    wait_until(lambda: len(running_jobs()) == 3, 60, "3 borrower Jobs to run on vllm's freed GPUs")
    usage = get(kube, KUEUE, "ClusterQueue", T_BATCH)["status"]["flavorsUsage"][0]["resources"]
    gpu = next(r for r in usage if r["name"] == "nvidia.com/gpu")
    assert (gpu["total"], gpu["borrowed"]) == ("3", "3"), usage
    # the 4th waits although nb's GPU is free: lending_limit 0 keeps it for nb
    wl4 = wait_until(lambda: next((w for w in items(kube, KUEUE, "Workload", NS_BATCH)
                                   if "long-3" in w["metadata"]["name"] and condition(w, "QuotaReserved")), None),
                     30, "Kueue to evaluate the 4th Job")
    assert condition(wl4, "QuotaReserved")["status"] == "False"
    time.sleep(POLLING)
    assert len(running_jobs()) == 3
    assert reclaimed(kube) == []


def test_notebook_wakes_with_the_same_workload_and_no_preemption(scenario, kube):
    signal = scenario["signal"]
    t0 = time.monotonic()
    signal.set("nb", 1)
    wait_until(lambda: [p for p in pods(kube, NS_NB, NB) if admitted(p)], WAKE_BOUND + 10, "nb-0 to run again")
    scenario["nb_wake"] = time.monotonic() - t0
    print("nb wake -> admitted: %.1fs" % scenario["nb_wake"])
    wls = items(kube, KUEUE, "Workload", NS_NB)
    assert [w["metadata"]["uid"] for w in wls] == [scenario["nb_uid"]]
    assert is_true(wls[0], "Admitted")
    assert reclaimed(kube) == [], "nb's own unlent GPU needed no preemption"
    assert replicas(kube, "StatefulSet", NS_NB, "nb") == 1


def test_serving_wakes_by_reclaim_within_30s_and_reaches_max(scenario, kube):
    signal = scenario["signal"]
    t0 = time.monotonic()
    signal.set("vllm", PER_REPLICA / 2)  # wakes, asks for one replica
    wait_until(lambda: [p for p in pods(kube, NS_SERVE, VLLM) if admitted(p)], WAKE_BOUND,
               "vllm's first pod to be admitted and run after the wake signal")
    wake = time.monotonic() - t0
    print("vllm wake -> first pod admitted: %.1fs" % wake)
    first = reclaimed(kube)
    assert len(first) == 1 and first[0]["reason"] == "InCohortReclamation", first

    signal.set("vllm", PER_REPLICA * MAX_REPLICAS)  # ceil(30 / 10) = 3 = max_replicas
    wait_until(lambda: len([p for p in pods(kube, NS_SERVE, VLLM) if admitted(p)]) == MAX_REPLICAS, 90,
               "vllm to reach %d running replicas under load" % MAX_REPLICAS)
    assert replicas(kube, "Deployment", NS_SERVE, "vllm") == MAX_REPLICAS
    preempted = reclaimed(kube)
    assert len(preempted) == MAX_REPLICAS and {p["reason"] for p in preempted} == {"InCohortReclamation"}, preempted
    usage = get(kube, KUEUE, "ClusterQueue", T_SERVE)["status"]["flavorsUsage"][0]["resources"]
    gpu = next(r for r in usage if r["name"] == "nvidia.com/gpu")
    assert (gpu["total"], gpu.get("borrowed", "0")) == ("4", "0"), usage  # vllm x3 + canary on its own quota
    hpa = get(kube, "autoscaling/v2", "HorizontalPodAutoscaler", "keda-hpa-vllm", NS_SERVE)
    assert hpa["spec"]["maxReplicas"] == MAX_REPLICAS


MODULE_PLAYBOOK = local_play("""
  tasks:
    - name: ScaledObject for the canary with the standalone module
      gpuaas.platform.scaled_object:
        name: canary
        namespace: "%s"
        target: {kind: Deployment, name: vllm-canary}
        max_replicas: 1
        idle_scale_to_zero:
          after_minutes: 5
          wake_query: "{{ wake_query }}"
        prometheus_url: "{{ prometheus_url }}"
""") % NS_SERVE


def test_scaled_object_module_check_mode_apply_and_idempotence(scenario, lab, kube, run_playbook):
    """The standalone module builds the same kind of ScaledObject: check mode writes nothing, the second run is a
    no-op, and the real KEDA accepts it (Ready)."""
    extra = {"prometheus_url": lab.prometheus_url, "wake_query": 'sum(%s{service="vllm-canary"})' % SIGNAL}
    check = run_playbook(MODULE_PLAYBOOK, extra_vars=extra, check=True)
    assert check.rc == 0 and check.changed == 1, check.explain()
    assert get(kube, KEDA, "ScaledObject", "canary", NS_SERVE) is None
    first = run_playbook(MODULE_PLAYBOOK, extra_vars=extra)
    assert first.rc == 0 and first.changed == 1, first.explain()
    second = run_playbook(MODULE_PLAYBOOK, extra_vars=extra)
    assert second.rc == 0 and second.changed == 0, second.explain()
    so = wait_until(lambda: is_true(get(kube, KEDA, "ScaledObject", "canary", NS_SERVE), "Ready") and
                    get(kube, KEDA, "ScaledObject", "canary", NS_SERVE), 60, "the module's ScaledObject to be Ready")
    assert "gpuaas.io/component" not in (so["metadata"].get("labels") or {})  # the tenants module never prunes it
    busy = next(t for t in so["spec"]["triggers"] if t["name"] == "gpu-busy")["metadata"]["query"]
    assert 'pod=~"vllm-canary-[' in busy
