# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replay a trace on the lab as Kueue Jobs and record what Kueue did, with a watch (millisecond timestamps).

For one variant:

1. converge the variant's inventory with the collection (``playbooks/tenants.yml``, a *full* reconcile: run it
   on a dedicated lab, e.g. ``LAB_DIR=.lab-fair LAB_PORT_OFFSET=500``; ``make bench-fairness`` does);
2. delete the bench Jobs left from an earlier variant and wait until their Workloads are gone;
3. watch Workloads and Pods of the tenant namespaces in two threads; every change of a Workload condition
   (QuotaReserved, Admitted, Evicted, Preempted, Finished) and every pod binding (``spec.nodeName`` set) is stored
   with the wall-clock time the watch event arrived (Kubernetes condition timestamps have 1 s resolution);
4. create one Job per trace job at ``t0 + submit x scale`` seconds: the GPU (or MIG slice) count as a limit, the
   tenant's ``default`` LocalQueue, KWOK stage annotations (pod-complete after ``duration x scale`` seconds,
   pod-create/ready/delete without delay), ``terminationGracePeriodSeconds: 1``, optionally the bin-packing
   scheduler profile (``--binpack``: a second kube-scheduler with NodeResourcesFit MostAllocated weighted on
   the GPU resources, started and stopped by this script);
5. wait until every Workload has finished (or the timeout), then write ``events.jsonl`` and ``meta.json`` (with
   Kueue's own counters from Prometheus before and after, as a cross-check).

``to_results`` turns the events into the same ``JobResult`` schedule the offline simulators produce.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import yaml

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.fairness import model  # noqa: E402
from bench.fairness.sim import JobResult, Run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Finished", "Requeued")
BINPACK = "gpuaas-binpack"
JOB_LABEL = "gpuaas.io/fairness-bench"


def log(msg: str) -> None:
    print("[fairness %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    site = ":".join(str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", "%s:%s" % (REPO / ".build", site))
    env.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
    env["K8S_AUTH_KUBECONFIG"] = env.get("KUBECONFIG", "")
    env["ANSIBLE_PYTHON_INTERPRETER"] = str(REPO / ".venv" / "bin" / "python")
    env["PATH"] = "%s:%s" % (REPO / ".venv" / "bin", env.get("PATH", ""))
    return env


def converge(inventory: Mapping[str, Any]) -> float:
    """Full reconcile of the tenancy with the collection's role; returns the seconds it took."""
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        # bench-only keys (fairness_bench_*: which tenants only lend) are not the collection's to see
        inv = {k: v for k, v in inventory.items() if not k.startswith("fairness_bench_")}
        yaml.safe_dump(dict(inv, gpuaas_delete_namespaces=False, gpuaas_tenants_check_capacity=True), f)
        path = f.name
    start = time.monotonic()
    try:
        proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,",
                               str(REPO / "playbooks" / "tenants.yml"), "-e", "@" + path],
                              capture_output=True, text=True, env=_env(), cwd=str(REPO), timeout=900, check=False)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise SystemExit("converging the tenancy failed:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-2000:]))
    return time.monotonic() - start


def client():
    from kubernetes import config, dynamic

    return dynamic.DynamicClient(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))


def namespaces_of(inventory: Mapping[str, Any]) -> Dict[str, str]:
    """tenant -> the namespace its jobs go to (its first)."""
    return {t["name"]: t["namespaces"][0] for t in inventory["gpuaas_tenants"]}


def clean(kube, namespaces: List[str], timeout: float = 300) -> None:
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    wls = kube.resources.get(api_version=KUEUE, kind="Workload")
    for ns in namespaces:
        jobs.delete(namespace=ns, label_selector=JOB_LABEL, body={"propagationPolicy": "Background"})
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = sum(len(wls.get(namespace=ns).items) + len(jobs.get(namespace=ns, label_selector=JOB_LABEL).items)
                   for ns in namespaces)
        if left == 0:
            return
        time.sleep(2)
    raise SystemExit("bench Jobs/Workloads still present after %ss" % timeout)


class Recorder:
    """Watches Workloads and Pods of the bench namespaces; ``events`` holds dicts with ``ms`` (wall clock)."""

    def __init__(self, kube, namespaces: List[str]):
        self.kube = kube
        self.namespaces = set(namespaces)
        self.events: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.state: Dict[str, Dict[str, str]] = {}
        self.bound: Dict[str, str] = {}
        self.phase: Dict[str, str] = {}
        self.threads = [threading.Thread(target=self._loop, args=(KUEUE, "Workload"), daemon=True),
                        threading.Thread(target=self._loop, args=("v1", "Pod"), daemon=True)]

    def start(self) -> "Recorder":
        for t in self.threads:
            t.start()
        return self

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)

    def _emit(self, **ev: Any) -> None:
        ev["ms"] = int(time.time() * 1000)
        with self.lock:
            self.events.append(ev)

    def _loop(self, api_version: str, kind: str) -> None:
        resource = self.kube.resources.get(api_version=api_version, kind=kind)
        rv = None
        while not self.stop.is_set():
            try:
                kwargs = {"timeout": 5, "watcher": None}
                if rv:
                    kwargs["resource_version"] = rv
                for event in resource.watch(**kwargs):
                    obj = event["raw_object"]
                    rv = obj["metadata"].get("resourceVersion") or rv
                    if obj["metadata"].get("namespace") in self.namespaces:
                        (self._workload if kind == "Workload" else self._pod)(event["type"], obj)
                    if self.stop.is_set():
                        break
            except Exception as exc:  # a watch that expires (410) or breaks is started again from now
                if "410" in str(exc) or "Expired" in str(exc):
                    rv = None   # transitions in between are lost: say so in the events
                    self._emit(kind="watch-gap", resource=kind, error=str(exc)[:200])
                time.sleep(0.2)

    def _workload(self, etype: str, obj: Dict[str, Any]) -> None:
        meta = obj["metadata"]
        owners = meta.get("ownerReferences") or []
        job = owners[0]["name"] if owners else meta["name"]
        key = "%s/%s" % (meta["namespace"], meta["name"])
        seen = self.state.setdefault(key, {})
        if etype == "DELETED":
            return
        for cond in (obj.get("status") or {}).get("conditions") or []:
            ctype = cond.get("type")
            if ctype not in CONDITIONS:
                continue
            # lastTransitionTime has 1 s resolution: a condition set again within the same second (a second
            # preemption, a re-admission) differs only in its message (Kueue names the preemptor there)
            value = "%s/%s/%s/%s" % (cond.get("status"), cond.get("reason"), cond.get("lastTransitionTime"),
                                     cond.get("message"))
            if seen.get(ctype) != value:
                seen[ctype] = value
                self._emit(kind="workload", job=job, namespace=meta["namespace"], type=ctype,
                           status=cond.get("status"), reason=cond.get("reason"),
                           message=(cond.get("message") or "")[:200], rv=meta.get("resourceVersion"),
                           cq=((obj.get("status") or {}).get("admission") or {}).get("clusterQueue"))

    def _pod(self, etype: str, obj: Dict[str, Any]) -> None:
        meta = obj["metadata"]
        node = (obj.get("spec") or {}).get("nodeName")
        job = (meta.get("labels") or {}).get("job-name")
        if etype != "DELETED" and node and self.bound.get(meta["name"]) != node:
            self.bound[meta["name"]] = node
            self._emit(kind="bound", job=job, namespace=meta["namespace"], pod=meta["name"], node=node)
        # when the pod's work really ended (issue 26: the work window is bind -> bind + duration only as a model)
        phase = (obj.get("status") or {}).get("phase")
        state = "deleted" if etype == "DELETED" else phase
        if state in ("Succeeded", "Failed", "deleted") and self.phase.get(meta["name"]) != state:
            self.phase[meta["name"]] = state
            self._emit(kind="pod-end", job=job, namespace=meta["namespace"], pod=meta["name"], state=state)


def job_body(job: Mapping[str, Any], namespace: str, resource: str, scale: float, binpack: bool) -> Dict[str, Any]:
    seconds = max(0.1, float(job["duration"]) * scale)
    spec: Dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "work", "image": "registry.invalid/gpu-work:1",
                        "resources": {"limits": {resource: str(job["size"])}}}],
    }
    if binpack:
        spec["schedulerName"] = BINPACK
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "fs-%s" % job["id"], "namespace": namespace,
                     "labels": {"kueue.x-k8s.io/queue-name": "default", JOB_LABEL: "true"},
                     "annotations": {"gpuaas.io/trace-submit": str(job["submit"])}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
            "metadata": {"labels": {JOB_LABEL: "true"}, "annotations": {
                "pod-complete.stage.kwok.x-k8s.io/delay": "%dms" % int(seconds * 1000),
                "pod-create.stage.kwok.x-k8s.io/delay": "0s",
                "pod-ready.stage.kwok.x-k8s.io/delay": "0s",
                "pod-delete.stage.kwok.x-k8s.io/delay": "0s"}},
            "spec": spec}},
    }


def start_binpack_scheduler(lab_dir: Path, port: int) -> subprocess.Popen:
    kubectl = Path(os.path.realpath(lab_dir / "bin" / "kubectl"))
    binary = kubectl.parent / "kube-scheduler"
    cfg = lab_dir / "fairness-scheduler.yaml"
    kc = lab_dir / "scheduler.kubeconfig"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False}, "clientConnection": {"kubeconfig": str(kc)},
        "profiles": [{"schedulerName": BINPACK, "pluginConfig": [{"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": "MostAllocated", "resources": [
                {"name": "nvidia.com/gpu", "weight": 10}, {"name": "nvidia.com/mig-1g.10gb", "weight": 10},
                {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}],
    }))
    logf = open(lab_dir / "logs" / "fairness-scheduler.log", "w")
    proc = subprocess.Popen([str(binary), "--config", str(cfg), "--bind-address=127.0.0.1",
                             "--secure-port=%d" % port, "--authentication-kubeconfig", str(kc),
                             "--authorization-kubeconfig", str(kc), "--v=1"],
                            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(3)
    if proc.poll() is not None:
        raise SystemExit("the bin-packing scheduler did not start: see %s" % (lab_dir / "logs" / "fairness-scheduler.log"))
    return proc


def prom_counters(url: Optional[str]) -> Dict[str, Any]:
    """Kueue's own counters per ClusterQueue (cumulative since Kueue started)."""
    if not url:
        return {}
    out: Dict[str, Any] = {}
    for name, query in (("admitted", "sum by (cluster_queue) (kueue_admitted_workloads_total)"),
                        ("preempted", "sum by (preempting_cluster_queue) (kueue_preempted_workloads_total)"),
                        ("evicted", "sum by (cluster_queue, reason) (kueue_evicted_workloads_total)")):
        try:
            with urllib.request.urlopen("%s/api/v1/query?%s" % (url, urllib.parse.urlencode({"query": query})),
                                        timeout=10) as r:
                out[name] = [(s["metric"], float(s["value"][1])) for s in json.load(r)["data"]["result"]]
        except Exception as exc:  # Prometheus is a cross-check only
            out[name] = "unavailable: %s" % exc
    return out


def kueue_settings(kube, namespaces: List[str]) -> Dict[str, Any]:
    """What decides Kueue's preemptions in this replay: the fair-sharing and waitForPodsReady blocks of the
    Configuration Kueue runs (the kueue role's ConfigMap, which the lab's Kueue runs) and each ClusterQueue's
    preemption and fair-sharing weight (issue 26: before/after of a configuration change must be traceable)."""
    out: Dict[str, Any] = {"configuration": None, "cluster_queues": {}}
    ns, name = os.environ.get("LAB_KUEUE_CONFIGMAP", "gpuaas-kueue/gpuaas-kueue-manager-config").split("/", 1)
    try:
        cm = kube.resources.get(api_version="v1", kind="ConfigMap").get(namespace=ns, name=name).to_dict()
        config = yaml.safe_load((cm.get("data") or {}).get("controller_manager_config.yaml") or "{}") or {}
        out["configuration"] = {k: config.get(k) for k in ("fairSharing", "waitForPodsReady", "admissionFairSharing")}
    except Exception as exc:   # a replay on a cluster without the role's ConfigMap still runs; say why it is missing
        out["configuration"] = "unavailable: %s" % str(exc)[:200]
    cqs = kube.resources.get(api_version=KUEUE, kind="ClusterQueue")
    for cq in cqs.get().to_dict().get("items", []):
        if cq["metadata"]["name"] in namespaces:
            spec = cq.get("spec") or {}
            out["cluster_queues"][cq["metadata"]["name"]] = {
                "cohort": spec.get("cohortName"), "preemption": spec.get("preemption"),
                "fairSharing": spec.get("fairSharing")}
    return out


class LoadSampler:
    """The machine's 1-minute load average every ``every`` seconds while the replay runs (min/mean/max in meta)."""

    def __init__(self, every: float = 10.0):
        self.samples: List[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(every,), daemon=True)

    def _loop(self, every: float) -> None:
        while not self.stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def start(self) -> "LoadSampler":
        self.thread.start()
        return self

    def close(self) -> Dict[str, Any]:
        self.stop.set()
        self.thread.join(5)
        s = self.samples
        return {"samples": len(s), "min": min(s) if s else None, "max": max(s) if s else None,
                "mean": sum(s) / len(s) if s else None}


def replay(trace: Mapping[str, Any], variant: str, out: Path, scale: float = 1.0, binpack: bool = True,
           inventory: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None,
           skip_converge: bool = False) -> Dict[str, Any]:
    inv = model.variant(inventory or model.load_inventory(), variant)
    tree = model.tree_from_inventory(inv)
    ns_of = namespaces_of(inv)
    namespaces = list(ns_of.values())
    out.mkdir(parents=True, exist_ok=True)
    converge_s = 0.0 if skip_converge else converge(inv)
    log("%s: tenancy converged in %.1fs" % (variant, converge_s))
    kube = client()
    clean(kube, namespaces)
    lab_dir = Path(os.environ.get("LAB_DIR", REPO / ".lab"))
    sched = None
    if binpack:
        sched = start_binpack_scheduler(lab_dir, 10309 + int(os.environ.get("LAB_PORT_OFFSET", "0")))
    prom = os.environ.get("GPUAAS_PROMETHEUS_URL")
    before = prom_counters(prom)
    load_before = os.getloadavg()
    settings = kueue_settings(kube, namespaces)
    sampler = LoadSampler().start()
    recorder = Recorder(kube, namespaces).start()
    time.sleep(2)   # let both watches start
    jobs_api = kube.resources.get(api_version="batch/v1", kind="Job")
    created: Dict[str, int] = {}
    errors: List[str] = []
    t0 = time.time() + 1.0
    horizon = max(float(j["submit"]) for j in trace["jobs"])
    log("%s: replaying %d jobs over %.0f trace minutes (%.0f s)" % (variant, len(trace["jobs"]), horizon, horizon * scale))
    try:
        for job in trace["jobs"]:
            due = t0 + float(job["submit"]) * scale
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            body = job_body(job, ns_of[job["tenant"]], tree.pools[job["pool"]], scale, binpack)
            try:
                jobs_api.create(body=body, namespace=body["metadata"]["namespace"])
                created[job["id"]] = int(time.time() * 1000)
            except Exception as exc:
                errors.append("%s: %s" % (job["id"], str(exc)[:300]))
        log("%s: all jobs submitted (%d errors); waiting for them to finish" % (variant, len(errors)))
        limit = time.time() + (timeout if timeout is not None else horizon * scale + 600)
        want = len(created)
        while time.time() < limit:
            with recorder.lock:
                finished = {e["job"] for e in recorder.events
                            if e["kind"] == "workload" and e["type"] == "Finished" and e["status"] == "True"}
            if len(finished) >= want:
                break
            time.sleep(2)
        time.sleep(1)
    finally:
        recorder.close()
        load_during = sampler.close()
        if sched is not None:
            sched.terminate()
            try:
                sched.wait(10)
            except subprocess.TimeoutExpired:
                sched.kill()
    time.sleep(6)   # one more Prometheus scrape (5 s) of Kueue's counters
    after = prom_counters(prom)
    meta = {"variant": variant, "t0_ms": int(t0 * 1000), "scale": scale, "binpack": binpack,
            "trace_sha256": trace["sha256"], "trace_seed": trace["params"].get("seed"), "jobs": len(trace["jobs"]),
            "created": created, "errors": errors, "converge_seconds": converge_s,
            "prometheus_before": before, "prometheus_after": after, "ended_ms": int(time.time() * 1000),
            # the machine and its load during the replay (issue 26: every figure says what it ran on)
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_before": list(load_before), "load_after": list(os.getloadavg()),
                        "load_1m_during": load_during},
            "kueue": settings}
    (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    with (out / "events.jsonl").open("w") as f:
        for ev in sorted(recorder.events, key=lambda e: e["ms"]):
            f.write(json.dumps(ev, sort_keys=True) + "\n")
    clean(kube, namespaces)
    return meta


def to_results(trace: Mapping[str, Any], meta: Mapping[str, Any], events: List[Mapping[str, Any]]) -> List[JobResult]:
    """The recorded schedule in trace minutes since t0 (submission = when the Job was created).

    A run lasts from QuotaReserved=True to Finished, or to QuotaReserved=False after an eviction (the quota is held
    until the Job has stopped). ``Run.bind`` is the first pod binding recorded inside the run (None: the pod was
    never bound before the run ended). ``JobResult.evictions`` counts every Evicted=True transition of the workload,
    including a second preemption of a workload whose pods are still stopping (one run, two evictions): the figure
    Kueue's ``kueue_preempted_workloads_total`` counts."""
    t0, scale = meta["t0_ms"], meta["scale"]
    end_ms = meta["ended_ms"]

    def minutes(ms: float) -> float:
        return (ms - t0) / 1000.0 / scale

    by_job: Dict[str, List[Mapping[str, Any]]] = {}
    binds: Dict[str, List[float]] = {}
    for ev in events:
        if ev["kind"] == "workload" and ev.get("job"):
            by_job.setdefault(ev["job"], []).append(ev)
        elif ev["kind"] == "bound" and ev.get("job"):
            binds.setdefault(ev["job"], []).append(minutes(ev["ms"]))
    out = []
    for job in trace["jobs"]:
        name = "fs-%s" % job["id"]
        created = meta["created"].get(job["id"])
        r = JobResult(job["id"], job["tenant"], job["pool"], int(job["size"]),
                      minutes(created) if created else float(job["submit"]), float(job["duration"]))
        r.evictions = 0
        running: Optional[Run] = None
        for ev in sorted(by_job.get(name, []), key=lambda e: e["ms"]):
            t = minutes(ev["ms"])
            if ev["type"] == "Evicted" and ev["status"] == "True":
                r.evictions += 1
            if ev["type"] == "QuotaReserved" and ev["status"] == "True" and (running is None or running.evicted):
                running = Run(t, t)
                r.runs.append(running)
            elif ev["type"] == "Evicted" and ev["status"] == "True" and running is not None:
                running.end, running.evicted = t, True
            elif ev["type"] == "QuotaReserved" and ev["status"] == "False" and running is not None:
                if not running.evicted:
                    running.evicted = True
                running.end = t      # quota is held until the Job has stopped
                running = None
            elif ev["type"] == "Finished" and ev["status"] == "True" and running is not None:
                running.end, running.evicted = t, False
                running = None
        if running is not None and not running.evicted:
            running.end = minutes(end_ms)   # still running when the replay ended
            running.evicted = True
        for run in r.runs:
            inside = [b for b in sorted(binds.get(name, [])) if run.start - 1e-9 <= b <= run.end + 1e-9]
            run.bind = inside[0] if inside else None
        out.append(r)
    return out


def load_events(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
