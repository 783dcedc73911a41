#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idle -> zero -> borrowed -> wake -> reclaimed, measured over N cycles on the lab's real KEDA, Kueue and
Prometheus (issue 12). Results: docs/benchmarks.md ("Autoscaling: idle GPUs back to the pool").

Set-up (through the gpuaas.platform.tenants module, like a user's inventory):
  serve: 4 GPUs, reclaim_within_cohort Any, Deployment vllm (1 GPU, max 1), idle_scale_to_zero after_seconds W,
         cooldown C, polling P, wake_query on a request-rate gauge this script serves to Prometheus (file_sd)
  batch: 0 GPUs in the same cohort (borrows only)
Each cycle:
  1. vllm's pod reports 0 % GPU (lab annotation) -> time until the Deployment is at 0 replicas   (idle -> zero)
  2. batch submits 4 long 1-GPU Jobs; wait until all 4 run on the borrowed GPUs
  3. the request rate rises -> time until vllm's pod is admitted and Running                     (wake -> admitted)
     and how many batch Workloads Kueue preempted for it (reason)                               (preemptions per wake)
  4. the rate drops, the batch Jobs are deleted

  source .lab-bench/env && python bench/autoscaling/run.py --cycles 5 --out bench/autoscaling/results
(`make bench-autoscaling` starts its own lab .lab-autoscaling, ports +900, Kueue and KEDA, and stops it.)
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
from prometheus_client import CollectorRegistry, Gauge, start_http_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import poll  # noqa: E402  (bench/poll.py)
import results_meta  # noqa: E402  (bench/results_meta.py)

REPO = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
UTIL = "lab.gpuaas.io/gpu-util"
GATE = "kueue.x-k8s.io/admission"


def wait_until(predicate, timeout, what, interval=0.25):
    return poll.wait_until(predicate, timeout, what, interval)


class Lab:
    def __init__(self):
        self.dir = Path(os.environ["LAB_DIR"])
        self.prometheus = os.environ["GPUAAS_PROMETHEUS_URL"]
        self.kube = dynamic.DynamicClient(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))

    def res(self, api_version, kind):
        return self.kube.resources.get(api_version=api_version, kind=kind)

    def pods(self, ns, selector):
        return [p.to_dict() for p in self.res("v1", "Pod").get(namespace=ns, label_selector=selector).items
                if not p.metadata.deletionTimestamp]

    def replicas(self, ns, name):
        return self.res("apps/v1", "Deployment").get(name=name, namespace=ns).spec.replicas

    def preempted(self, ns):
        out = {}
        for wl in self.res(KUEUE, "Workload").get(namespace=ns).items:
            wl = wl.to_dict()
            for cond in (wl.get("status") or {}).get("conditions") or []:
                if cond["type"] == "Preempted" and cond["status"] == "True":
                    out[wl["metadata"]["uid"]] = cond["reason"]
        return out


def admitted(pod):
    return GATE not in [g["name"] for g in pod["spec"].get("schedulingGates") or []] and pod["status"].get("phase") == "Running"


def percentile(values, q):
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(q / 100.0 * (len(ordered) - 1)))))
    return ordered[rank]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--window", type=int, default=20, help="idle_scale_to_zero.after_seconds")
    ap.add_argument("--cooldown", type=int, default=10)
    ap.add_argument("--polling", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench" / "autoscaling" / "results"))
    args = ap.parse_args()
    meta = results_meta.start(sys.argv)
    lab = Lab()
    s = uuid.uuid4().hex[:5]
    ns_serve, ns_batch, flavor, cohort = "bas-serve-" + s, "bas-batch-" + s, "bas-h100-" + s, "bas-co-" + s

    registry = CollectorRegistry()
    gauge = Gauge("gpuaas_bench_requests_per_second", "bench signal", ["service"], registry=registry)
    gauge.labels(service="vllm").set(0)
    server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
    target_file = lab.dir / "prometheus" / "targets" / ("bench-autoscaling-%s.json" % s)
    target_file.write_text(json.dumps([{"targets": ["127.0.0.1:%d" % server.server_port], "labels": {"job": "bench-as-" + s}}]))
    wake_query = 'sum(gpuaas_bench_requests_per_second{job="bench-as-%s",service="vllm"})' % s

    inv = {
        "flavor": {"name": flavor, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "tenants": [
            {"name": ns_serve, "namespaces": [ns_serve], "cohort": cohort,
             "quotas": [{"flavor": flavor, "resources": {"nvidia.com/gpu": 4}}],
             "preemption": {"reclaim_within_cohort": "Any"},
             "autoscaling": [{"name": "vllm", "target": {"kind": "Deployment", "name": "vllm"}, "max_replicas": 1,
                              "polling_interval": args.polling, "cooldown_period": args.cooldown,
                              "idle_scale_to_zero": {"after_seconds": args.window, "wake_query": wake_query}}]},
            {"name": ns_batch, "namespaces": [ns_batch], "cohort": cohort,
             "quotas": [{"flavor": flavor, "resources": {"nvidia.com/gpu": 0}}]},
        ]}
    playbook = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - gpuaas.platform.resource_flavor:
        name: "{{ inv.flavor.name }}"
        node_labels: "{{ inv.flavor.node_labels }}"
        tolerations: "{{ inv.flavor.tolerations }}"
    - gpuaas.platform.tenants:
        flavors: ["{{ inv.flavor }}"]
        cohorts: [{name: "%s"}]
        tenants: "{{ inv.tenants }}"
        prometheus: {url: "%s"}
        limit_tenants: "{{ inv.tenants | map(attribute='name') | list }}"
""" % (cohort, lab.prometheus)
    cycles = []
    try:
        for ns in (ns_serve, ns_batch):
            lab.res("v1", "Namespace").create(body={"metadata": {"name": ns, "labels": {"gpuaas.io/tenant": ns}}})
        template = {"metadata": {"labels": {"app": "vllm"}, "annotations": {UTIL: "85"}},
                    "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                        "name": "server", "image": "registry.invalid/lab/vllm:1",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        lab.res("apps/v1", "Deployment").create(namespace=ns_serve, body={
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "vllm", "namespace": ns_serve, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "vllm"}}, "template": template}})
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "p.yml").write_text(playbook)
            (Path(tmp) / "vars.json").write_text(json.dumps({"inv": inv}))
            env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                       ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build"), K8S_AUTH_KUBECONFIG=os.environ["KUBECONFIG"],
                       ANSIBLE_PYTHON_INTERPRETER=str(REPO / ".venv" / "bin" / "python"))
            proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,",
                                   str(Path(tmp) / "p.yml"), "-e", "@%s" % (Path(tmp) / "vars.json")],
                                  env=env, capture_output=True, text=True, check=False)
            if proc.returncode:
                print(proc.stdout[-3000:], proc.stderr[-2000:], file=sys.stderr)
                return 1
        wait_until(lambda: [p for p in lab.pods(ns_serve, "app=vllm") if admitted(p)], 90, "vllm to run")
        time.sleep(args.window)  # let Prometheus see a busy window first
        for cycle in range(args.cycles):
            for pod in lab.pods(ns_serve, "app=vllm"):
                lab.res("v1", "Pod").patch(name=pod["metadata"]["name"], namespace=ns_serve,
                                           body={"metadata": {"annotations": {UTIL: "0"}}},
                                           content_type="application/merge-patch+json")
            t0 = time.monotonic()
            wait_until(lambda: lab.replicas(ns_serve, "vllm") == 0, 300, "vllm at 0 replicas")
            to_zero = time.monotonic() - t0
            wait_until(lambda: not lab.pods(ns_serve, "app=vllm"), 60, "vllm's pod to be gone")
            for i in range(4):
                lab.res("batch/v1", "Job").create(namespace=ns_batch, body={
                    "apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": "long-%d-%d" % (cycle, i), "namespace": ns_batch, "labels": {QUEUE_LABEL: "default"}},
                    "spec": {"backoffLimit": 0, "template": {
                        "metadata": {"labels": {"app": "batch"}, "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "3600s"}},
                        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                            "name": "train", "image": "registry.invalid/lab/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
            wait_until(lambda: len([p for p in lab.pods(ns_batch, "app=batch") if p["status"].get("phase") == "Running"]) == 4,
                       90, "4 borrower Jobs running")
            before = lab.preempted(ns_batch)
            gauge.labels(service="vllm").set(5)
            t1 = time.monotonic()
            wait_until(lambda: [p for p in lab.pods(ns_serve, "app=vllm") if admitted(p)], 120, "vllm admitted after wake")
            wake = time.monotonic() - t1
            time.sleep(2)
            new = {uid: reason for uid, reason in lab.preempted(ns_batch).items() if uid not in before}
            cycles.append({"cycle": cycle + 1, "idle_to_zero_s": round(to_zero, 1), "wake_to_admitted_s": round(wake, 1),
                           "preemptions": len(new), "reasons": sorted(set(new.values()))})
            print(json.dumps(cycles[-1]), flush=True)
            gauge.labels(service="vllm").set(0)
            for job in lab.res("batch/v1", "Job").get(namespace=ns_batch).items:
                lab.res("batch/v1", "Job").delete(name=job.metadata.name, namespace=ns_batch,
                                                  body={"propagationPolicy": "Background"})
            wait_until(lambda: not lab.pods(ns_batch, "app=batch"), 60, "batch pods gone")
            time.sleep(args.window)  # the woken pod is busy (85 %) for a full window before the next idle phase
    finally:
        target_file.unlink(missing_ok=True)
        server.shutdown()
        for ns in (ns_serve, ns_batch):
            try:
                lab.res("v1", "Namespace").delete(name=ns)
            except NotFoundError:
                pass
        try:
            wait_until(lambda: all(not lab.res("v1", "Namespace").get(label_selector="kubernetes.io/metadata.name=%s" % n).items
                                   for n in (ns_serve, ns_batch)), 180, "namespaces gone", interval=1)
            for kind, name in ((("ClusterQueue", ns_serve), ("ClusterQueue", ns_batch), ("ResourceFlavor", flavor))):
                try:
                    lab.res(KUEUE, kind).delete(name=name)
                except NotFoundError:
                    pass
        except Exception as exc:  # report, do not hide: the figures above are still valid
            print("cleanup: %s" % exc, file=sys.stderr)
    if not cycles:
        return 1
    zero = [c["idle_to_zero_s"] for c in cycles]
    wake = [c["wake_to_admitted_s"] for c in cycles]
    summary = results_meta.finish(meta, runs=len(cycles), figures={
        "idle_to_zero_s": zero, "wake_to_admitted_s": wake,
        "preemptions_per_wake": [c["preemptions"] for c in cycles]}, extra={
        "cycles": len(cycles), "window_s": args.window, "cooldown_s": args.cooldown, "polling_s": args.polling,
        "idle_to_zero_percentiles_s": {"p50": statistics.median(zero), "p95": percentile(zero, 95), "max": max(zero)},
        "wake_to_admitted_percentiles_s": {"p50": statistics.median(wake), "p95": percentile(wake, 95),
                                           "max": max(wake)},
        "reasons": sorted({r for c in cycles for r in c["reasons"]}),
        "per_cycle": cycles,
    })
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "per_cycle"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
