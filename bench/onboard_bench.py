#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: onboard ONE tenant while the inventory's group_vars hold N tenants (issue 15, item 4).

An AWX job is waited on by a person, so onboarding one tenant should cost what one tenant costs, not what the
whole inventory costs. The bench

1. writes an inventory directory (the lab inventory, its ``gpuaas_tenants`` plus N bench tenants with two
   namespaces each, in ``group_vars`` as a real site has them — not as extra vars, which would change precedence);
2. converges it once with ``playbooks/tenants.yml`` (``--converge``; ~2 min at 500 on 2 shared cores; reuse it
   with later runs by leaving ``--converge`` out);
3. times ``ansible-playbook playbooks/onboard_tenant.yml`` for ``--reps`` new tenants (a new name each time, the
   survey answers as extra vars) and reports the median and the spread of the playbook wall, with the duration
   of every task from the ``ansible.posix.json`` callback (where the time goes);
4. offboards the tenants it onboarded (``offboard_tenant.yml`` with ``delete_namespaces``; not timed).

Usage (lab env sourced, ``make collection`` done; docs/benchmarks.md "Onboarding one tenant at 500 tenants"):
  python bench/onboard_bench.py --tenants 500 --converge --reps 5 --label after
  python bench/onboard_bench.py --tenants 500 --reps 5 --label before \
      --collections /tmp/old --onboard-playbook /tmp/old/ansible_collections/gpuaas/platform/playbooks/onboard_tenant.yml
  python bench/onboard_bench.py --tenants 0 --reps 5 --label small --inventory .lab/onboard-bench-inventory-0
Results: bench/results/onboard-<label>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_meta  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LAB_INVENTORY = REPO / "playbooks" / "inventory" / "lab"
VENV = REPO / ".venv" / "bin"
PREFIX = "bench-"


COLLECTIONS = [REPO / ".build"]


def collections_path() -> str:
    return "%s:%s" % (COLLECTIONS[0], ":".join(str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages")))


def bench_tenants(n: int) -> list[dict]:
    """The same bench tenants as bench/tenants_bench.py (two namespaces, one GPU, cohort org)."""
    out = []
    for i in range(n):
        name = "%s%04d" % (PREFIX, i)
        out.append({
            "name": name, "namespaces": [name + "-a", name + "-b"], "cohort": "org",
            "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1, "cpu": 8, "memory": "64Gi"}}],
            "access": {"users": [name + "-team"]},
        })
    return out


def write_inventory(path: Path, n: int) -> Path:
    """The lab inventory with N bench tenants added to group_vars/all/tenants.yml."""
    if path.exists():
        shutil.rmtree(path)
    shutil.copytree(LAB_INVENTORY, path)
    tenants_file = path / "group_vars" / "all" / "tenants.yml"
    inv = yaml.safe_load(tenants_file.read_text())
    inv["gpuaas_tenants"] = inv["gpuaas_tenants"] + bench_tenants(n)
    # N one-GPU tenants exceed the lab's GPUs: the capacity check still runs (and warns), as in tenants_bench.py
    inv["gpuaas_allow_overcommit"] = True
    tenants_file.write_text("---\n" + yaml.safe_dump(inv, sort_keys=False))
    return path


def env() -> dict:
    out = dict(os.environ)
    out.update({"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": collections_path(),
                "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
                "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"})
    return out


def _seconds(duration: dict) -> float | None:
    try:
        start = datetime.fromisoformat(duration["start"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(duration["end"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return round((end - start).total_seconds(), 3)


def playbook(path: Path, inventory: Path, extra: dict) -> dict:
    cmd = [str(VENV / "ansible-playbook"), str(path), "-i", str(inventory)]
    for key, value in extra.items():
        cmd += ["-e", "%s=%s" % (key, value)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(), cwd=str(REPO), check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of ansible-playbook, its workers and the module (waited-for children): less noisy than the wall
    # on a shared machine
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError("%s failed (rc=%s):\n%s\n%s" % (path.name, proc.returncode, proc.stdout[-4000:], proc.stderr[-2000:]))
    report = json.loads(proc.stdout[proc.stdout.find("{"):])
    tasks = []
    module = {}
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            tasks.append((task["task"]["name"], _seconds(task["task"].get("duration") or {})))
            host = task["hosts"].get("localhost") or {}
            if "requests" in host and "summary" in host:
                module = {"summary": host["summary"], "requests": host["requests"], "objects": host.get("objects")}
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "tasks": tasks, "module": module, "command": " ".join(cmd)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=500, help="bench tenants in group_vars")
    parser.add_argument("--reps", type=int, default=5, help="tenants onboarded (one timed run each)")
    parser.add_argument("--converge", action="store_true", help="converge the N-tenant inventory first (once)")
    parser.add_argument("--label", default="run", help="tag of this run (tenant names onb-<label>-<i>, result file)")
    parser.add_argument("--inventory", default=str(Path(os.environ.get("LAB_DIR", REPO / ".lab")) / "onboard-bench-inventory"))
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    parser.add_argument("--keep", action="store_true", help="do not offboard the onboarded tenants")
    parser.add_argument("--onboard-playbook", default=str(REPO / "playbooks" / "onboard_tenant.yml"),
                        help="the onboard playbook to time (e.g. an older revision: git show REV:playbooks/onboard_tenant.yml)")
    parser.add_argument("--collections", default=str(REPO / ".build"),
                        help="collections root holding ansible_collections/gpuaas/platform (default: make collection's)")
    args = parser.parse_args()
    COLLECTIONS[0] = Path(args.collections)
    if not (COLLECTIONS[0] / "ansible_collections" / "gpuaas" / "platform").exists():
        print("run `make collection` first", file=sys.stderr)
        return 2
    inventory = write_inventory(Path(args.inventory), args.tenants)
    meta = results_meta.start(sys.argv)
    result: dict = {"tenants": args.tenants, "label": args.label}
    if args.converge:
        res = playbook(REPO / "playbooks" / "tenants.yml", inventory, {})
        result["converge_s"] = res["wall_s"]
        print("[bench] converge %d tenants: %ss %s" % (args.tenants, res["wall_s"], res["module"].get("summary")), flush=True)
    names = ["onb-%s-%d" % (args.label, i) for i in range(args.reps)]
    runs = []
    try:
        for name in names:
            answers = {"tenant_name": name, "tenant_flavor": "h100", "tenant_gpus": 1, "tenant_cohort": "org",
                       "tenant_users_group": name + "-team"}
            res = playbook(Path(args.onboard_playbook), inventory, answers)
            runs.append(res)
            print("[bench] onboard %s: %ss (CPU %ss) %s requests %s" % (name, res["wall_s"], res["cpu_s"], res["module"].get("summary"),
                                                                        res["module"].get("requests")), flush=True)
    finally:
        if not args.keep:
            for name in names[:len(runs)]:
                playbook(REPO / "playbooks" / "offboard_tenant.yml", inventory, {"tenant_name": name, "delete_namespaces": "true", "drain_timeout": 60})
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    result.update({
        "walls_s": walls, "median_s": round(statistics.median(walls), 2), "min_s": min(walls), "max_s": max(walls),
        "cpu_s": cpus, "cpu_median_s": round(statistics.median(cpus), 2),
        "command": runs[0]["command"].replace(str(REPO) + "/", ""),
        # median duration of every task over the runs (task order of the first run)
        "tasks_median_s": [(task[0], round(statistics.median(r["tasks"][i][1] or 0 for r in runs), 3))
                           for i, task in enumerate(runs[0]["tasks"])],
        "module": runs[-1]["module"],
    })
    result = results_meta.finish(meta, runs=len(walls), figures={"wall_s": walls, "cpu_s": cpus}, extra=result)
    results_meta.write(Path(args.out) / ("onboard-%s.json" % args.label), result)
    print("[bench] %d tenants in group_vars, onboarding one: median %ss (min %s, max %s) over %d runs; CPU median %ss; load %s"
          % (args.tenants, result["median_s"], result["min_s"], result["max_s"], len(walls), result["cpu_median_s"],
             " ".join("%.1f" % x for x in result["load_average_after"])))
    for task, seconds in result["tasks_median_s"]:
        print("    %6.3f s  %s" % (seconds, task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
