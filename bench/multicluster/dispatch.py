#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MultiKueue dispatch latency (issue 27): a manager lab and one or more worker labs (``--worker`` per worker), the
fleet converged through the collection's entry point (playbooks/multicluster.yml, as an admin runs it), then N
tenant Jobs submitted on the manager one after the other. Per Job:

  dispatch  = the Job created on the manager -> its copy exists on a worker (MultiKueue created it; which worker is
              recorded: with two workers MultiKueue copies the Workload to both, the first to admit keeps it)
  admitted  = the Job created on the manager -> the manager's Workload Admitted (the worker's Kueue admitted the
              copy and MultiKueue reported it back)
  completed = the Job created on the manager -> the manager's Job has succeeded=1 (status flowed back)

polled every 50 ms (the figures carry ±50 ms). Results: JSON with every sample, p50/p95/max, the machine (CPUs,
load before/after) and the Kueue version; docs/benchmarks.md ("MultiKueue dispatch latency").

  make lab-up LAB_DIR=$PWD/.lab-mgr LAB_PORT_OFFSET=2800 LAB_COMPONENTS=kueue
  make lab-worker-up LAB_WORKER_DIR=$PWD/.lab-mgr-worker LAB_PORT_OFFSET=2800
  make collection
  .venv/bin/python bench/multicluster/dispatch.py --manager .lab-mgr --worker .lab-mgr-worker --jobs 20 \\
      --out bench/multicluster/results/dispatch.json
  # two workers: also `make lab-worker2-up LAB_WORKER2_DIR=$PWD/.lab-mgr-worker2 LAB_PORT_OFFSET=2800`, then
  .venv/bin/python bench/multicluster/dispatch.py --manager .lab-mgr --worker .lab-mgr-worker \\
      --worker .lab-mgr-worker2 --jobs 20 --out bench/multicluster/results/dispatch-two-workers.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from kubernetes import config, dynamic
from kubernetes.dynamic.exceptions import NotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import poll  # noqa: E402  (bench/poll.py)

REPO = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
TENANT = "mkbench"
FLAVOR = "mkbench-h100"
POLL = 0.05


def lab_env(lab_dir: Path) -> dict:
    values = {}
    for line in (lab_dir / "env").read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export "):].split("=", 1)
            values[key] = value
    return values


def client(env: dict):
    return dynamic.DynamicClient(config.new_client_from_config(config_file=env["KUBECONFIG"], context="lab-admin"))


def worker_name(index: int) -> str:
    """bench-worker for the first worker (the name of the one-worker results), bench-worker-2 and on after it."""
    return "bench-worker" if index == 0 else "bench-worker-%d" % (index + 1)


def fleet_vars(manager: dict, workers: list, state: str = "present") -> dict:
    return {
        "gpuaas_platform": "kubernetes",
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_tenants": [{"name": TENANT, "namespaces": [TENANT], "state": state,
                            "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 4, "cpu": 16,
                                                                        "memory": "64Gi"}}]}],
        "gpuaas_clusters": {
            "manager": {"name": "bench-manager", "auth": {"kubeconfig": manager["KUBECONFIG"], "context": "lab-admin"}},
            "workers": [{"name": worker_name(i), "api_server": worker["LAB_APISERVER"],
                         "auth": {"kubeconfig": worker["KUBECONFIG"], "context": "lab-admin"},
                         "flavors": [{"name": FLAVOR, "capacity": {"nvidia.com/gpu": 16, "cpu": 448,
                                                                    "memory": "4Ti"}}]}
                        for i, worker in enumerate(workers)]},
    }


def playbook(manager: dict, extra: dict) -> float:
    """Run playbooks/multicluster.yml (the collection built into .build by `make collection`); its wall seconds."""
    venv = REPO / ".venv" / "bin"
    site = ":".join(str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages"))
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        json.dump(extra, handle)
        handle.flush()
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                   ANSIBLE_COLLECTIONS_PATH="%s:%s" % (REPO / ".build", site), KUBECONFIG=manager["KUBECONFIG"],
                   ANSIBLE_PYTHON_INTERPRETER=str(venv / "python"), ANSIBLE_LOCALHOST_WARNING="false")
        start = time.monotonic()
        proc = subprocess.run([str(venv / "ansible-playbook"), "-i", "localhost,", str(REPO / "playbooks" /
                                                                                       "multicluster.yml"),
                               "-e", "@" + handle.name], capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            sys.exit("playbooks/multicluster.yml failed:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-2000:]))
        return time.monotonic() - start


def wait_until(predicate, timeout: float, what: str):
    return poll.wait_until(predicate, timeout, what, POLL)


def job(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": TENANT, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"},
                                              "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def admitted(kube, name: str) -> bool:
    for wl in kube.resources.get(api_version=KUEUE, kind="Workload").get(namespace=TENANT).items:
        owners = [o.name for o in (wl.metadata.ownerReferences or [])]
        if name in owners:
            return any(c.type == "Admitted" and c.status == "True" for c in (wl.status.conditions or []))
    return False


def assigned_cluster(kube, name: str) -> str | None:
    """The worker the manager's Workload of Job ``name`` is assigned to (Workload status.clusterName, Kueue v1beta2)."""
    for wl in kube.resources.get(api_version=KUEUE, kind="Workload").get(namespace=TENANT).items:
        if name in [o.name for o in (wl.metadata.ownerReferences or [])]:
            return (wl.to_dict().get("status") or {}).get("clusterName")
    return None


def percentile(values: list, q: float) -> float:
    """Nearest-rank percentile (q in 0..100), as bench/fairness/metrics.py."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100.0 * len(ordered)) - 1)]


def stats(values: list) -> dict:
    return {"n": len(values), "p50": round(percentile(values, 50), 3), "p95": round(percentile(values, 95), 3),
            "max": round(max(values), 3), "min": round(min(values), 3),
            "mean": round(sum(values) / len(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manager", required=True, type=Path, help="the manager lab's LAB_DIR")
    parser.add_argument("--worker", required=True, type=Path, action="append",
                        help="a worker lab's LAB_DIR (repeat for each worker)")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    manager_env, worker_envs = lab_env(args.manager), [lab_env(w) for w in args.worker]
    manager = client(manager_env)
    names = [worker_name(i) for i in range(len(worker_envs))]
    load_before = os.getloadavg()
    converge = playbook(manager_env, fleet_vars(manager_env, worker_envs))
    for cluster in names:
        wait_until(lambda cluster=cluster: any(c.type == "Active" and c.status == "True" for c in (
            manager.resources.get(api_version=KUEUE, kind="MultiKueueCluster").get(name=cluster).status.conditions
            or [])), 120, "MultiKueueCluster %s Active" % cluster)
    jobs = manager.resources.get(api_version="batch/v1", kind="Job")
    worker_jobs = {cluster: client(env).resources.get(api_version="batch/v1", kind="Job")
                   for cluster, env in zip(names, worker_envs)}
    samples = []
    try:
        for _ in range(args.jobs):
            name = "mkb-%s" % uuid.uuid4().hex[:8]
            start = time.monotonic()
            jobs.create(body=job(name), namespace=TENANT)

            def copied(job_name=name):
                for cluster, worker_api in worker_jobs.items():
                    try:
                        worker_api.get(name=job_name, namespace=TENANT)
                        return cluster
                    except NotFoundError:
                        continue
                return None
            copied_to = wait_until(copied, 120, "the copy of %s on a worker" % name)
            dispatch = time.monotonic() - start
            wait_until(lambda job_name=name: admitted(manager, job_name), 120, "%s admitted" % name)
            admit = time.monotonic() - start
            wait_until(lambda job_name=name: (jobs.get(name=job_name, namespace=TENANT).status.succeeded or 0) >= 1,
                       180, "%s succeeded on the manager" % name)
            assigned = assigned_cluster(manager, name)
            if assigned != copied_to:  # the copy found first must be the one Kueue assigned the Workload to
                sys.exit("%s: copied to %s but the manager's Workload is assigned to %s" % (name, copied_to, assigned))
            ran_on = copied_to
            samples.append({"job": name, "dispatch": round(dispatch, 3), "admitted": round(admit, 3),
                            "completed": round(time.monotonic() - start, 3), "worker": ran_on})
            print("%-14s dispatch %.2fs admitted %.2fs completed %.2fs on %s" % (
                name, dispatch, admit, samples[-1]["completed"], ran_on), flush=True)
    finally:
        load_after = os.getloadavg()
        # the tenant offboarded on both clusters through the same entry point (drains: its Jobs are done)
        offboard = playbook(manager_env, fleet_vars(manager_env, worker_envs, state="absent"))
    # the lab runs the real Kueue controller out of cluster (docs/lab.md): the version lab/versions.env pins
    versions = dict(line.split("=", 1) for line in (REPO / "lab" / "versions.env").read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    kueue = versions.get("KUEUE_VERSION", "unknown")
    out = {
        "what": "MultiKueue dispatch latency, manager lab -> worker lab (bench/multicluster/dispatch.py)",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in load_after],
                    "note": "machine shared with other sessions' labs and test runs"},
        "kueue": kueue, "poll_seconds": POLL, "jobs": len(samples), "workers": names,
        "jobs_per_worker": {cluster: sum(1 for x in samples if x["worker"] == cluster) for cluster in names},
        "playbook_seconds": {"converge": round(converge, 1), "offboard": round(offboard, 1)},
        "dispatch": stats([s["dispatch"] for s in samples]),
        "admitted": stats([s["admitted"] for s in samples]),
        "completed": stats([s["completed"] for s in samples]),
        "samples": samples,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("dispatch", "admitted", "completed", "machine")}, indent=2))


if __name__ == "__main__":
    main()
