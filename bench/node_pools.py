#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-pool scaling times (issue 13), repeated: admission -> node Ready, last completion -> node gone.

Against a running lab with Kueue and KEDA (source its env first; LAB_DIR names it), with the machine-controller
SIMULATOR started here. Per cycle, at a pool of 0 nodes: four 8-GPU Jobs (quota 32 = 4 nodes x 8) are submitted;
the script polls every 0.25 s and records when each Workload is first seen admitted, when each pool node is first
seen Ready, when the last Job is first seen complete and when the last pool node is gone. The pool is the same as
tests/integration/test_node_pools.py (whose helpers this reuses): idle_seconds 15, KEDA polling 5 s, simulator
provisioning 2 s, Jobs of --job-seconds.

    source .lab-pools/env && make collection && .venv/bin/python bench/node_pools.py --cycles 5

Prints one line per cycle and a summary (min / median / max) as a Markdown table, and writes every cycle's figures
with the machine, load and commit to bench/results/node-pools-<kind>.json (--out).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import test_node_pools as T  # noqa: E402  (the test's pool, inventory and helpers)
sys.path.insert(0, str(REPO / "bench"))
import results_meta  # noqa: E402
from conftest import _lab_from_env  # noqa: E402


def playbook(lab, text: str, extra: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pb.yml"
        path.write_text(text)
        vars_file = Path(tmp) / "vars.json"
        vars_file.write_text(json.dumps(extra))
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), K8S_AUTH_KUBECONFIG=lab.kubeconfig,
                   ANSIBLE_COLLECTIONS_PATH="%s:%s" % (REPO / ".build", ":".join(
                       str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages"))),
                   ANSIBLE_PYTHON_INTERPRETER=str(REPO / ".venv" / "bin" / "python"))
        proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), str(path), "-i", "localhost,",
                               "-e", "@%s" % vars_file], env=env, capture_output=True, text=True, check=False)
        if proc.returncode:
            sys.exit("playbook failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-2000:]))


def cycle(env: T.Lab, index: int, job_seconds: int) -> dict:
    names = ["bench%d-%d" % (index, i) for i in range(4)]
    for name in names:
        env.job(name, T.GPUS, seconds=job_seconds)
    admitted: dict = {}
    ready: dict = {}
    done = gone = None
    while True:
        now = time.time()
        for w in env.workloads():
            if w["metadata"]["name"] not in admitted and T.true_since(w, "Admitted"):
                admitted[w["metadata"]["name"]] = now
        for node in env.ready_pool_nodes():
            ready.setdefault(node, now)
        if done is None and env.jobs_done(names):
            done = now
        if done is not None and not env.pool_nodes() and env.replicas() == 0:
            gone = now
            break
        if now - min(admitted.values() or [now]) > 300:
            raise SystemExit("cycle %d did not finish within 300 s" % index)
        time.sleep(0.25)
    last_admission = max(admitted.values())
    out = {"cycle": index, "admission_to_first_ready": min(ready.values()) - last_admission,
           "admission_to_all_ready": max(ready.values()) - last_admission, "completion_to_gone": gone - done,
           "nodes": len(ready)}
    for name in names:
        env.batch.delete_namespaced_job(name, T.NS, propagation_policy="Background")
    while env.workloads():
        time.sleep(0.5)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--job-seconds", type=int, default=8)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory of node-pools-<kind>.json")
    args = ap.parse_args()
    meta = results_meta.start(sys.argv)
    lab = _lab_from_env()
    env = T.Lab(lab)
    f = env.target
    env.create_target(T.target_body(f))
    sim = T.MachineSimulator(lab, f, lab.dir / "logs" / ("machine-simulator-bench-%s.log" % T.S), provision_seconds=2)
    rows = []
    try:
        playbook(lab, T.PLAYBOOK, {"inv": T.inventory(f), "prometheus_url": lab.prometheus_url})
        for i in range(args.cycles):
            row = cycle(env, i, args.job_seconds)
            rows.append(row)
            print("cycle %(cycle)d: admission -> first node Ready %(admission_to_first_ready).1f s, -> all 4 Ready "
                  "%(admission_to_all_ready).1f s; last completion -> 0 nodes %(completion_to_gone).1f s" % row, flush=True)
    finally:
        sim.stop()
        T.cleanup(env, f)
    keys = ("admission_to_first_ready", "admission_to_all_ready", "completion_to_gone")
    doc = results_meta.finish(meta, runs=len(rows), figures={k: [round(r[k], 2) for r in rows] for k in keys},
                              extra={"kind": f.kind, "flavour": os.environ.get("LAB_FLAVOR", "kubernetes"),
                                     "job_seconds": args.job_seconds, "per_cycle": rows})
    results_meta.write(Path(args.out) / ("node-pools-%s.json" % f.kind.lower()), doc)
    print("\n| figure (%d cycles, %s) | min s | median s | max s |\n|---|---:|---:|---:|" % (len(rows), f.kind))
    for key, label in (("admission_to_first_ready", "last admission -> first pool node Ready"),
                       ("admission_to_all_ready", "last admission -> all 4 pool nodes Ready"),
                       ("completion_to_gone", "last Job completion -> pool at 0 nodes")):
        values = [r[key] for r in rows]
        print("| %s | %.1f | %.1f | %.1f |" % (label, min(values), statistics.median(values), max(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
