#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idle RayCluster reclaimed -> GPUs borrowed -> wake -> workers re-admitted, over N cycles on the lab's REAL KubeRay
v1.6.2, Kueue v0.19.2 and Prometheus (GPU utilization from the lab's SIMULATED DCGM exporter) (issue 25). Results:
docs/benchmarks.md ("Ray idle reclaim: wake latency").

Set-up (the gpuaas.platform.tenants module, like a site's inventory):
  ray:   2 GPUs, reclaim_within_cohort Any; RayCluster `tune` (elastic, head 1 CPU, worker group `gpu` of 2 x 1 GPU at
         0 % GPU), opted in to idle reclaim (window W, cooldown C)
  batch: 0 GPUs in the same cohort (borrows only)
Each cycle, the committed playbook playbooks/ray_idle_reclaim.yml run the way AWX runs it (one ansible-playbook):
  1. runs until the module reclaims `tune` (its workers idle for the window, out of the cooldown); wait until the
     workers are gone and the ray tenant's GPU usage is 0
  2. batch submits 2 long 1-GPU Jobs; wait until both run on the borrowed GPUs
  3. t0: the wake annotation gpuaas.io/wake is set; ONE playbook run (the wake) starts at once. Measured from t0:
     the module's write (RayCluster workers' replicas back to 2, seen by polling while the run goes on), the end of
     the run, the new Workload slice (2 GPU workers) Admitted, both workers Running and Ready; and the batch
     Workloads Kueue preempted for it (reason)
  4. the batch Jobs are deleted; the next cycle waits out the window and the cooldown

  source .lab-me/env && make collection && .venv/bin/python bench/ray_wake/run.py --cycles 10
(KubeRay is started on the lab for the run when the lab does not run it, `lab.sh component kuberay up`, and stopped.
`make bench-ray-wake RAY_WAKE_ARGS="--cycles 10"` starts its own lab .lab-ray-wake, ports +1050, Kueue, and stops it.)
Without --watch not included: the wait for the scheduled run itself (an AWX schedule every minute adds up to 60 s
before step 3's run starts). With --watch S (the module's watch_seconds, what a one-minute schedule runs with
gpuaas_ray_reclaim_watch_seconds): step 3's run starts first and the wake arrives --wake-after seconds into it, as a
tenant's wake meets a run already watching; t0 is the annotation, so that wait is included.

  .venv/bin/python bench/ray_wake/run.py --cycles 6 --watch 45 --out bench/results/ray-wake-watch.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kubernetes import config, dynamic
from kubernetes.dynamic.exceptions import NotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import results_meta  # noqa: E402  (bench/results_meta.py)
from poll import wait_until  # noqa: E402  (bench/poll.py)

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
WAKE = "gpuaas.io/wake"
UTIL = "lab.gpuaas.io/gpu-util"
KWOK_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
H100 = "NVIDIA-H100-80GB-HBM3"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RECLAIM_PLAYBOOK = REPO / "playbooks" / "ray_idle_reclaim.yml"
CLUSTER, WORKERS = "tune", 2
TARGET_S = 30  # issue 25: demand returns -> workers re-admitted within 30 s (p95)

TENANTS_PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - gpuaas.platform.resource_flavor:
        name: "{{ gpuaas_flavors[0].name }}"
        node_labels: "{{ gpuaas_flavors[0].node_labels }}"
        tolerations: "{{ gpuaas_flavors[0].tolerations }}"
    - gpuaas.platform.tenants:
        flavors: "{{ gpuaas_flavors }}"
        cohorts: "{{ gpuaas_cohorts }}"
        tenants: "{{ gpuaas_tenants }}"
        prometheus: "{{ gpuaas_prometheus }}"
        limit_tenants: "{{ gpuaas_tenants | map(attribute='name') | list }}"
"""


def cond(obj: dict | None, ctype: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with fewer than 20 values, p95 is the largest)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100)
    return ordered[int(rank) - 1]


class Lab:
    def __init__(self) -> None:
        self.dir = Path(os.environ["LAB_DIR"])
        self.kubeconfig = os.environ["KUBECONFIG"]
        self.prometheus = os.environ["GPUAAS_PROMETHEUS_URL"]
        self.kube = dynamic.DynamicClient(config.new_client_from_config(config_file=self.kubeconfig))

    def res(self, api_version: str, kind: str):
        return self.kube.resources.get(api_version=api_version, kind=kind)

    def items(self, api_version: str, kind: str, namespace: str, selector: str | None = None) -> list[dict]:
        return [x.to_dict() for x in self.res(api_version, kind).get(namespace=namespace, label_selector=selector).items]

    def cluster(self, ns: str) -> dict:
        return self.res("ray.io/v1", "RayCluster").get(name=CLUSTER, namespace=ns).to_dict()

    def workers(self, ns: str) -> list[dict]:
        return [p for p in self.items("v1", "Pod", ns, "ray.io/cluster=%s,ray.io/node-type=worker" % CLUSTER)
                if not p["metadata"].get("deletionTimestamp")]

    def gpu_usage(self, cq: str) -> int:
        status = self.res(KUEUE, "ClusterQueue").get(name=cq).to_dict().get("status") or {}
        return sum(int(r["total"]) for fu in status.get("flavorsUsage") or [] for r in fu["resources"]
                   if r["name"] == "nvidia.com/gpu")

    def preempted(self, ns: str) -> dict[str, str]:
        return {w["metadata"]["uid"]: cond(w, "Preempted")["reason"] for w in self.items(KUEUE, "Workload", ns)
                if cond(w, "Preempted").get("status") == "True"}

    def component(self, name: str, action: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(REPO / "lab" / "lab.sh"), "component", name, action],
                              capture_output=True, text=True, timeout=300, check=False,
                              env=dict(os.environ, LAB_DIR=str(self.dir)))

    def runs(self, name: str) -> bool:
        return any(os.path.exists("/proc/%s" % p.read_text().strip()) for p in (self.dir / "pids").glob("%s*.pid" % name))

    def env(self) -> dict[str, str]:
        collections = "%s:%s" % (REPO / ".build", ":".join(str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages")))
        return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections,
                    ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOCALHOST_WARNING="false",
                    ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
                    K8S_AUTH_KUBECONFIG=self.kubeconfig, PATH="%s:%s:%s" % (self.dir / "bin", VENV_BIN, os.environ["PATH"]))


def playbook(lab: Lab, path: Path, extra_vars: dict, watch=None, during=None, poll=None) -> tuple[dict, float | None]:
    """Run ``path`` with ``extra_vars``; return the JSON callback's report and, with ``watch`` (a predicate), the
    monotonic time it first held while the run went on (polled every 0.1 s). ``during`` = (seconds, action): call
    ``action`` that many seconds after the run started (the wake arriving while a watching run goes on); ``watch``
    is polled only after it, and so is ``poll`` (a callable recording its own marks while the run goes on)."""
    with tempfile.TemporaryDirectory() as tmp:
        vars_file = Path(tmp) / "vars.json"
        vars_file.write_text(json.dumps(extra_vars))
        out = Path(tmp) / "out.json"
        with open(out, "w", encoding="utf-8") as stdout:
            proc = subprocess.Popen([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(path), "-e",
                                     "@%s" % vars_file], stdout=stdout, stderr=subprocess.PIPE, text=True,
                                    env=lab.env(), cwd=str(REPO))
            seen, started, acted = None, time.monotonic(), during is None
            while proc.poll() is None:
                if not acted and time.monotonic() - started >= during[0]:
                    during[1]()
                    acted = True
                if acted and watch is not None and seen is None and watch():
                    seen = time.monotonic()
                if acted and poll is not None:
                    poll()
                time.sleep(0.1)
            stderr = proc.stderr.read() if proc.stderr else ""
        text = out.read_text()
        if proc.returncode:
            raise RuntimeError("%s failed (rc %d): %s %s" % (path.name, proc.returncode, text[-3000:], stderr[-2000:]))
        return json.loads(text[text.find("{"):]), seen


def module_result(report: dict) -> dict:
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            if "Reclaim or wake" in task.get("task", {}).get("name", ""):
                [host] = task["hosts"].values()
                return host
    raise RuntimeError("no 'Reclaim or wake' task in the playbook's report")


def clusters_result(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in module_result(report)["clusters"]}


def container(name: str, gpus: int = 0) -> dict:
    limits = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": "registry.invalid/lab/ray:2.52.0",
            "resources": {"requests": dict(limits), "limits": limits}}


def raycluster(ns: str) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": CLUSTER, "namespace": ns, "labels": {QUEUE_LABEL: "default"},
                         "annotations": {ELASTIC: "true"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": WORKERS, "minReplicas": 0, "maxReplicas": 4,
                                           "rayStartParams": {},
                                           "template": {"metadata": {"annotations": {UTIL: "0"}},
                                                        "spec": {"tolerations": [TOLERATION],
                                                                 "containers": [container("ray-worker", 1)]}}}]}}


def batch_job(name: str, ns: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "default", "app": "borrow"}},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": {"app": "borrow"}, "annotations": {KWOK_DELAY: "3600s"}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "tolerations": [TOLERATION],
                         "containers": [{"name": "train", "image": "registry.invalid/lab/train:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def ready(pod: dict) -> bool:
    return pod["status"].get("phase") == "Running" and cond(pod, "Ready").get("status") == "True"


def main() -> int:  # pylint: disable=too-many-locals,too-many-statements
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--window", type=int, default=10, help="idle_scale_to_zero.after_seconds")
    ap.add_argument("--cooldown", type=int, default=10, help="cooldown_period after a wake")
    ap.add_argument("--scrape", type=int, default=5, help="the lab Prometheus' scrape interval (lab/lab.sh)")
    ap.add_argument("--watch", type=int, default=0,
                    help="the wake run's watch_seconds: the wake arrives --wake-after s into a run already watching "
                         "(the AWX schedule with gpuaas_ray_reclaim_watch_seconds); 0: one run started at the wake")
    ap.add_argument("--wake-after", type=float, default=15.0, help="with --watch: when the wake arrives in the run")
    ap.add_argument("--watch-interval", type=int, default=2, help="with --watch: seconds between two passes")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "ray-wake.json"))
    args = ap.parse_args()
    meta = results_meta.start(sys.argv)
    lab = Lab()
    s = uuid.uuid4().hex[:5]
    ray_t, batch_t, flavor, cohort = "rw-ray-" + s, "rw-batch-" + s, "rw-h100-" + s, "rw-co-" + s
    inventory = {
        "gpuaas_flavors": [{"name": flavor, "node_labels": {"nvidia.com/gpu.product": H100}, "tolerations": [TOLERATION]}],
        "gpuaas_cohorts": [{"name": cohort}],
        "gpuaas_tenants": [
            {"name": ray_t, "namespaces": [ray_t], "cohort": cohort,
             "quotas": [{"flavor": flavor, "resources": {"nvidia.com/gpu": WORKERS, "cpu": 8, "memory": "16Gi"}}],
             "preemption": {"reclaim_within_cohort": "Any"},
             "autoscaling": [{"name": CLUSTER, "target": {"kind": "RayCluster", "name": CLUSTER}, "worker_groups": ["gpu"],
                              "idle_scale_to_zero": {"after_seconds": args.window, "utilization_threshold": 1},
                              "cooldown_period": args.cooldown}]},
            {"name": batch_t, "namespaces": [batch_t], "cohort": cohort,
             "quotas": [{"flavor": flavor, "resources": {"nvidia.com/gpu": 0, "cpu": 4, "memory": "8Gi"}}]},
        ],
        "gpuaas_prometheus": {"url": lab.prometheus},
    }
    reclaim_vars = dict(inventory, gpuaas_ray_reclaim_scrape_interval=args.scrape, gpuaas_ray_reclaim_tenants=[ray_t])
    started_kuberay = False
    cycles: list[dict] = []
    failure = None
    with tempfile.TemporaryDirectory() as tmp:
        tenants_play = Path(tmp) / "tenants.yml"
        tenants_play.write_text(TENANTS_PLAY)
        try:
            if not lab.runs("kuberay"):
                out = lab.component("kuberay", "up")
                if out.returncode:
                    print(out.stdout, out.stderr, file=sys.stderr)
                    return 1
                started_kuberay = True
            playbook(lab, tenants_play, inventory)
            lab.res("ray.io/v1", "RayCluster").create(body=raycluster(ray_t), namespace=ray_t)
            wait_until(lambda: len([p for p in lab.workers(ray_t) if ready(p)]) == WORKERS, 180, "tune's workers to run")
            head_uid = lab.items("v1", "Pod", ray_t, "ray.io/cluster=%s,ray.io/node-type=head" % CLUSTER)[0]["metadata"]["uid"]
            uid = lab.cluster(ray_t)["metadata"]["uid"]
            for cycle in range(1, args.cycles + 1):
                # 1. reclaim: the workers have been idle (and scraped) for the window and the cooldown is over
                time.sleep(max(args.window, args.cooldown) + args.scrape)
                t_idle = time.monotonic()
                reclaim_runs = 0
                while True:
                    reclaim_runs += 1
                    action = clusters_result(playbook(lab, RECLAIM_PLAYBOOK, reclaim_vars)[0])[CLUSTER]
                    if action["action"] == "reclaim":
                        break
                    if time.monotonic() - t_idle > 180:
                        raise RuntimeError("no reclaim within 180 s: %s" % action)
                    time.sleep(args.scrape)
                wait_until(lambda: not lab.workers(ray_t) and lab.gpu_usage(ray_t) == 0, 90,
                           "the workers gone and the ray tenant's GPU usage 0")
                # 2. another tenant borrows the freed GPUs
                for i in range(WORKERS):
                    lab.res("batch/v1", "Job").create(body=batch_job("borrow-%d-%d" % (cycle, i), batch_t), namespace=batch_t)
                wait_until(lambda: len([p for p in lab.items("v1", "Pod", batch_t, "app=borrow") if ready(p)]) == WORKERS,
                           120, "the borrowed Jobs to run")
                before = lab.preempted(batch_t)
                # 3. the wake: the annotation, then one run of the playbook at once - or, with --watch, the
                #    annotation while a watching run goes on
                marks0: dict[str, float] = {}

                def wake() -> None:
                    marks0["t0"] = time.monotonic()
                    lab.res("ray.io/v1", "RayCluster").patch(
                        name=CLUSTER, namespace=ray_t, content_type="application/merge-patch+json",
                        body={"metadata": {"annotations": {WAKE: "%d-%d" % (time.time(), cycle)}}})

                def restored() -> bool:
                    return next((g["replicas"] for g in lab.cluster(ray_t)["spec"]["workerGroupSpecs"]
                                 if g["groupName"] == "gpu"), 0) > 0

                def slice_admitted():
                    return next((w for w in lab.items(KUEUE, "Workload", ray_t)
                                 if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])
                                 and {p["name"]: p["count"] for p in w["spec"]["podSets"]}.get("gpu") == WORKERS
                                 and (w["metadata"].get("annotations") or {}).get(REPLACEMENT_FOR)
                                 and cond(w, "Admitted").get("status") == "True"), None)

                # after admission, where the time goes: Kueue lifting the workers' elastic-job gate, the scheduler
                # binding them, KWOK (the SIMULATED kubelet) reporting them Running and Ready
                marks: dict[str, float] = {}
                tests = {"ungated": lambda p: not p["spec"].get("schedulingGates"),
                         "bound": lambda p: p["spec"].get("nodeName"), "ready": ready}

                def workers_ready() -> bool:
                    pods, now = lab.workers(ray_t), time.monotonic()
                    for mark, test in tests.items():
                        if mark not in marks and len([p for p in pods if test(p)]) == WORKERS:
                            marks[mark] = now
                    return "ready" in marks

                if args.watch:
                    # the run goes on after the wake (it watches): write, admission and workers are marked meanwhile
                    def poll() -> None:
                        now = time.monotonic()
                        if "write" not in marks and restored():
                            marks["write"] = now
                        if "write" in marks and "admitted" not in marks and slice_admitted():
                            marks["admitted"] = now
                        if "admitted" in marks and "ready" not in marks:
                            workers_ready()

                    report, _ = playbook(lab, RECLAIM_PLAYBOOK, dict(
                        reclaim_vars, gpuaas_ray_reclaim_watch_seconds=args.watch,
                        gpuaas_ray_reclaim_watch_interval=args.watch_interval),
                        during=(args.wake_after, wake), poll=poll)
                    t_write = marks.get("write")
                else:
                    wake()
                    report, t_write = playbook(lab, RECLAIM_PLAYBOOK, reclaim_vars, watch=restored)
                t0 = marks0["t0"]
                t_run = time.monotonic()
                # a watching run may reclaim the cluster again once the cooldown is over: its wake is in `changes`
                woke = next((c for c in module_result(report)["changes"] if c["name"] == CLUSTER
                             and c["action"] == "wake"), clusters_result(report)[CLUSTER])
                if woke["action"] != "wake" or t_write is None:
                    raise RuntimeError("the wake run did not wake the cluster: %s" % woke)

                if "admitted" not in marks:
                    wait_until(slice_admitted, 180, "the new slice to be admitted", interval=0.1)
                    marks["admitted"] = time.monotonic()
                t_adm = marks["admitted"]

                wait_until(workers_ready, 180, "the workers Running", interval=0.1)
                t_ready = marks["ready"]
                time.sleep(2)
                new = {u: r for u, r in lab.preempted(batch_t).items() if u not in before}
                head = lab.items("v1", "Pod", ray_t, "ray.io/cluster=%s,ray.io/node-type=head" % CLUSTER)[0]
                cycles.append({
                    "cycle": cycle, "reclaim_runs": reclaim_runs,
                    "wake_to_module_write_s": round(t_write - t0, 2), "module_run_s": round(t_run - t0, 2),
                    "write_to_admitted_s": round(t_adm - t_write, 2), "write_to_running_s": round(t_ready - t_write, 2),
                    "admitted_to_ungated_s": round(marks.get("ungated", t_ready) - t_adm, 2),
                    "admitted_to_bound_s": round(marks.get("bound", t_ready) - t_adm, 2),
                    "admitted_to_running_s": round(t_ready - t_adm, 2),
                    "wake_to_admitted_s": round(t_adm - t0, 2), "wake_to_running_s": round(t_ready - t0, 2),
                    "preemptions": len(new), "reasons": sorted(set(new.values())),
                    "head_same_pod": head["metadata"]["uid"] == head_uid,
                    "head_restarts": sum(c.get("restartCount", 0) for c in head["status"].get("containerStatuses") or []),
                    "load_average_1m": round(os.getloadavg()[0], 2)})
                print(json.dumps(cycles[-1]), flush=True)
                # 4. the borrowers go
                for job in lab.items("batch/v1", "Job", batch_t):
                    lab.res("batch/v1", "Job").delete(name=job["metadata"]["name"], namespace=batch_t,
                                                      body={"propagationPolicy": "Background"})
                wait_until(lambda: not lab.items("v1", "Pod", batch_t, "app=borrow"), 90, "the borrowers' pods gone")
        except (RuntimeError, TimeoutError) as exc:  # the cycles done are still valid; the failure is recorded
            failure = str(exc)
            print("cycle failed: %s" % exc, file=sys.stderr)
        finally:
            for ns in (ray_t, batch_t):
                try:
                    lab.res("v1", "Namespace").delete(name=ns)
                except NotFoundError:
                    pass
            try:
                wait_until(lambda: all(not lab.res("v1", "Namespace").get(
                    label_selector="kubernetes.io/metadata.name=%s" % n).items for n in (ray_t, batch_t)), 180,
                    "namespaces gone", interval=1)
                for kind, name in (("ClusterQueue", ray_t), ("ClusterQueue", batch_t), ("Cohort", cohort),
                                   ("ResourceFlavor", flavor)):
                    try:
                        lab.res(KUEUE, kind).delete(name=name)
                    except NotFoundError:
                        pass
            except TimeoutError as exc:
                print("cleanup: %s" % exc, file=sys.stderr)
            if started_kuberay:
                lab.component("kuberay", "down")
    if not cycles:
        return 1
    keys = ("wake_to_module_write_s", "module_run_s", "write_to_admitted_s", "write_to_running_s",
            "admitted_to_ungated_s", "admitted_to_bound_s", "admitted_to_running_s", "wake_to_admitted_s",
            "wake_to_running_s")
    figures = {k: [c[k] for c in cycles] for k in keys}
    figures["preemptions_per_wake"] = [c["preemptions"] for c in cycles]
    admitted = figures["wake_to_admitted_s"]
    doc = results_meta.finish(meta, runs=len(cycles), figures=figures, extra={
        "cycles": len(cycles), "failure": failure, "window_s": args.window, "cooldown_s": args.cooldown,
        "scrape_s": args.scrape, "target_p95_s": TARGET_S, "watch_s": args.watch,
        "wake_after_s": args.wake_after if args.watch else None, "watch_interval_s": args.watch_interval if args.watch else None,
        "percentiles_s": {k: {"p50": round(statistics.median(figures[k]), 2), "p95": percentile(figures[k], 95),
                              "max": max(figures[k])} for k in keys},
        "target_met": percentile(admitted, 95) <= TARGET_S,
        "reasons": sorted({r for c in cycles for r in c["reasons"]}),
        "head_never_replaced": all(c["head_same_pod"] and not c["head_restarts"] for c in cycles),
        "per_cycle": cycles,
    })
    results_meta.write(Path(args.out), doc)
    print(json.dumps(doc["percentiles_s"], indent=1))
    return 0 if failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
