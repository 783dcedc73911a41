#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the tenants role against the lab (issue 5).

For each tenant count N (2 namespaces per tenant, added to the lab's example tenancy) and in the same run:

  role     ansible-playbook playbooks/tenants.yml (one gpuaas.platform.tenants module call)
  kubectl  kubectl apply --server-side of the very same rendered objects (one object at a time, as kubectl does)
  naive    a playbook with one kubernetes.core.k8s (server-side apply) task execution per object

each (a) from empty, (b) re-run with nothing to change, (c) check mode with diff (one quota changed;
kubectl: ``kubectl diff --server-side``). Peak RSS of the module process is measured by running the module
through a tiny interpreter wrapper (getrusage of the child). Between variants the bench tenants are removed
with the role itself (``gpuaas_delete_namespaces``) and the bench waits until their namespaces are gone.

Usage (lab env sourced; `make bench BENCH_ARGS="--tenants 10,100,500"`):
  python bench/tenants_bench.py --tenants 10,100,500 --naive-max 10 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
INVENTORY = REPO / "playbooks" / "inventory" / "lab"
EXAMPLE = INVENTORY / "group_vars" / "all" / "tenants.yml"
PLAYBOOK = REPO / "playbooks" / "tenants.yml"
VENV = REPO / ".venv" / "bin"
PREFIX = "bench-"


def lab_dir() -> Path:
    return Path(os.environ.get("LAB_DIR", REPO / ".lab"))


def kubectl_bin() -> str:
    candidate = lab_dir() / "bin" / "kubectl"
    return str(candidate) if candidate.exists() else "kubectl"


def collections_path() -> str:
    return "%s:%s" % (REPO / ".build", ":".join(str(p) for p in (REPO / ".venv" / "lib").glob("python3*/site-packages")))


def import_collection():
    sys.path.insert(0, str(REPO / ".build"))
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders  # noqa: E402
    from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel  # noqa: E402
    return builders, TenantModel


def bench_tenants(n: int, gpus: int = 1) -> list[dict]:
    out = []
    for i in range(n):
        name = "%s%04d" % (PREFIX, i)
        out.append({
            "name": name, "namespaces": [name + "-a", name + "-b"], "cohort": "org",
            "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": gpus, "cpu": 8, "memory": "64Gi"}}],
            "access": {"users": [name + "-team"]},
        })
    return out


def inventory_vars(n: int, changed: bool = False) -> dict:
    inv = yaml.safe_load(EXAMPLE.read_text())
    tenants = inv["gpuaas_tenants"] + bench_tenants(n)
    if changed and n:
        tenants[len(inv["gpuaas_tenants"])]["quotas"][0]["resources"]["cpu"] = 9
    return {"gpuaas_tenants": tenants, "gpuaas_allow_overcommit": True}


class Runner:
    def __init__(self, workdir: Path, verbose: bool = False) -> None:
        self.workdir = workdir
        self.verbose = verbose
        self.rss_file = workdir / "rss.txt"
        self.wrapper = workdir / "python-rss"
        self.wrapper.write_text(
            "#!%s\nimport os, resource, subprocess, sys\n"
            "rc = subprocess.call([%r] + sys.argv[1:])\n"
            "with open(%r, 'a') as f:\n"
            "    f.write('%%d\\n' %% resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(rc)\n" % (VENV / "python", str(VENV / "python"), str(self.rss_file)))
        self.wrapper.chmod(0o755)

    def env(self) -> dict:
        env = dict(os.environ)
        env.update({"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": collections_path(),
                    "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
                    "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"})
        return env

    def playbook(self, playbook: Path, extra: dict, check: bool = False, diff: bool = False,
                 interpreter: str | None = None) -> dict:
        vars_file = self.workdir / "vars.json"
        extra = dict(extra)
        extra["ansible_python_interpreter"] = interpreter or str(self.wrapper)
        vars_file.write_text(json.dumps(extra))
        cmd = [str(VENV / "ansible-playbook"), str(playbook), "-i", str(INVENTORY), "-e", "@%s" % vars_file]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if self.rss_file.exists():
            self.rss_file.unlink()
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env(), cwd=str(REPO), check=False)
        wall = time.monotonic() - start
        report = {}
        brace = proc.stdout.find("{")
        if brace >= 0:
            try:
                report = json.loads(proc.stdout[brace:])
            except ValueError:
                report = {}
        if proc.returncode != 0:
            raise RuntimeError("%s failed (rc=%s):\n%s\n%s" % (playbook.name, proc.returncode, proc.stdout[-4000:],
                                                               proc.stderr[-2000:]))
        rss = [int(x) for x in self.rss_file.read_text().split()] if self.rss_file.exists() else []
        module = None
        dur: dict = {}
        for play in report.get("plays", []):
            for task in play.get("tasks", []):
                if "Reconcile the GPU tenancy" in task["task"]["name"]:
                    module = task["hosts"]["localhost"]
                    dur = task["task"].get("duration") or {}
        stats = report.get("stats", {}).get("localhost", {})
        out = {"wall_s": round(wall, 2), "changed_tasks": stats.get("changed"), "peak_rss_mb": round(max(rss) / 1024, 1) if rss else None}
        if module is not None:
            out["module_s"] = _duration(dur)
            out["summary"] = module.get("summary")
            out["requests"] = module.get("requests")
            out["objects"] = module.get("objects")
        return out

    def kubectl(self, *args: str, stdin_file: Path | None = None, ok_codes=(0,)) -> float:
        cmd = [kubectl_bin(), "--context", "lab-admin"] + list(args)
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        if proc.returncode not in ok_codes:
            raise RuntimeError("kubectl %s failed (rc=%s): %s" % (" ".join(args), proc.returncode, proc.stderr[-3000:]))
        return round(wall, 2)


def _duration(dur: dict) -> float | None:
    from datetime import datetime
    try:
        start = datetime.fromisoformat(dur["start"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(dur["end"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return round((end - start).total_seconds(), 2)


def render(builders, TenantModel, n: int, changed: bool = False) -> list[dict]:
    inv = yaml.safe_load(EXAMPLE.read_text())
    inv.update(inventory_vars(n, changed))
    return builders.desired_objects(TenantModel.from_inventory(inv))


def write_yaml(objs: list[dict], path: Path) -> Path:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


def wait_bench_gone(runner: Runner, timeout: float = 900) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        proc = subprocess.run([kubectl_bin(), "--context", "lab-admin", "get", "ns", "-o", "name"],
                              capture_output=True, text=True, check=False)
        if not [x for x in proc.stdout.split() if x.startswith("namespace/" + PREFIX)]:
            return round(time.monotonic() - start, 1)
        time.sleep(2)
    raise RuntimeError("bench namespaces still there after %ss" % timeout)


def cleanup(runner: Runner) -> dict:
    res = runner.playbook(PLAYBOOK, {"gpuaas_delete_namespaces": True, "gpuaas_drain_timeout": 120})
    res["ns_gone_s"] = wait_bench_gone(runner)
    return res


NAIVE_PLAYBOOK = """---
- name: Naive tenancy - one kubernetes.core.k8s task execution per object
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Apply one object
      kubernetes.core.k8s:
        context: lab-admin
        definition: "{{ item }}"
        apply: true
        server_side_apply:
          field_manager: naive-bench
          force_conflicts: true
      loop: "{{ lookup('ansible.builtin.file', objects_file) | from_yaml }}"
      loop_control:
        label: "{{ item.kind }} {{ item.metadata.namespace | default('') }}/{{ item.metadata.name }}"
"""


def naive(runner: Runner, objs_file: Path, check: bool = False, diff: bool = False) -> dict:
    pb = runner.workdir / "naive.yml"
    pb.write_text(NAIVE_PLAYBOOK)
    # kubernetes.core.k8s wants a list: store the objects as one YAML list
    list_file = runner.workdir / ("naive-objects%s.yml" % ("-changed" if check else ""))
    list_file.write_text(yaml.safe_dump(list(yaml.safe_load_all(objs_file.read_text())), sort_keys=False))
    res = runner.playbook(pb, {"objects_file": str(list_file)}, check=check, diff=diff,
                          interpreter=str(VENV / "python"))
    return {"wall_s": res["wall_s"], "changed_tasks": res["changed_tasks"]}


def bench_one(n: int, runner: Runner, builders, TenantModel, do_naive: bool, do_kubectl: bool,
              do_role: bool = True) -> dict:
    row: dict = {"tenants": n, "namespaces": 2 * n}
    objs = render(builders, TenantModel, n)
    changed = render(builders, TenantModel, n, changed=True)
    row["objects"] = len(objs)
    f_objs = write_yaml(objs, runner.workdir / ("objects-%d.yml" % n))
    f_changed = write_yaml(changed, runner.workdir / ("objects-%d-changed.yml" % n))
    print("[bench] N=%d: %d objects" % (n, len(objs)), flush=True)

    row["cleanup_before"] = cleanup(runner)
    if do_role:
        row["role_a"] = runner.playbook(PLAYBOOK, inventory_vars(n))
        print("[bench]   role (a) %s" % row["role_a"], flush=True)
        row["role_b"] = runner.playbook(PLAYBOOK, inventory_vars(n))
        print("[bench]   role (b) %s" % row["role_b"], flush=True)
        row["role_c"] = runner.playbook(PLAYBOOK, inventory_vars(n, changed=True), check=True, diff=True)
        print("[bench]   role (c) %s" % row["role_c"], flush=True)
        row["role_offboard"] = cleanup(runner)
        print("[bench]   role offboard %s" % row["role_offboard"], flush=True)

    if do_kubectl:
        row["kubectl_a"] = {"wall_s": runner.kubectl("apply", "--server-side", "--field-manager=kubectl-bench", "--force-conflicts",
                                                     "-f", str(f_objs))}
        row["kubectl_b"] = {"wall_s": runner.kubectl("apply", "--server-side", "--field-manager=kubectl-bench", "--force-conflicts",
                                                     "-f", str(f_objs))}
        row["kubectl_c"] = {"wall_s": runner.kubectl("diff", "--server-side", "--field-manager=kubectl-bench", "--force-conflicts",
                                                     "-f", str(f_changed), ok_codes=(0, 1))}
        print("[bench]   kubectl a/b/c %s %s %s" % (row["kubectl_a"], row["kubectl_b"], row["kubectl_c"]), flush=True)
        row["cleanup_kubectl"] = cleanup(runner)

    if do_naive:
        row["naive_a"] = naive(runner, f_objs)
        row["naive_b"] = naive(runner, f_objs)
        row["naive_c"] = naive(runner, f_changed, check=True, diff=True)
        print("[bench]   naive a/b/c %s %s %s" % (row["naive_a"], row["naive_b"], row["naive_c"]), flush=True)
        row["cleanup_naive"] = cleanup(runner)
    return row


def ratio(a, b) -> str:
    if not a or not b:
        return "-"
    return "%.2f×" % (a / b)


def markdown(rows: list[dict], command: str) -> str:
    lines = ["| tenants | objects | phase | role wall s (module s) | kubectl s | naive s | role/kubectl | naive/role | "
             "module peak RSS MB | API requests (list/get/apply/delete) |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        for phase, label in (("a", "(a) from empty"), ("b", "(b) no-op re-run"), ("c", "(c) check + diff")):
            role = row.get("role_%s" % phase) or {}
            kub = (row.get("kubectl_%s" % phase) or {}).get("wall_s")
            nai = (row.get("naive_%s" % phase) or {}).get("wall_s")
            req = role.get("requests") or {}
            lines.append("| %d | %d | %s | %s (%s) | %s | %s | %s | %s | %s | %s |" % (
                row["tenants"], row["objects"], label, role.get("wall_s"), role.get("module_s"),
                kub if kub is not None else "-", nai if nai is not None else "-",
                ratio(role.get("wall_s"), kub), ratio(nai, role.get("wall_s")), role.get("peak_rss_mb"),
                "/".join(str(req.get(k, "-")) for k in ("list", "get", "apply", "delete"))))
        off = row.get("role_offboard") or {}
        if not off:
            continue
        lines.append("| %d | %d | offboard all bench tenants (drain + delete + namespaces) | %s (%s) | - | - | - | - | %s | %s |" % (
            row["tenants"], row["objects"], off.get("wall_s"), off.get("module_s"), off.get("peak_rss_mb"),
            "/".join(str((off.get("requests") or {}).get(k, "-")) for k in ("list", "get", "apply", "delete"))))
    return "\n".join(lines) + "\n\nCommand: `%s`\n" % command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", default="10,100,500", help="comma-separated tenant counts")
    parser.add_argument("--naive-max", type=int, default=10, help="measure the naive role only up to this count")
    parser.add_argument("--no-kubectl", action="store_true")
    parser.add_argument("--no-role", action="store_true", help="skip the role (e.g. to add naive numbers later)")
    parser.add_argument("--json", default=str(REPO / "bench" / "results" / "tenants.json"))
    parser.add_argument("--markdown", default=str(REPO / "bench" / "results" / "tenants.md"))
    args = parser.parse_args()
    if not (REPO / ".build" / "ansible_collections" / "gpuaas" / "platform").exists():
        print("run `make collection` first (make bench does)", file=sys.stderr)
        return 2
    builders, TenantModel = import_collection()
    counts = [int(x) for x in args.tenants.split(",") if x]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tenants-bench-") as tmp:
        runner = Runner(Path(tmp))
        try:
            for n in counts:
                rows.append(bench_one(n, runner, builders, TenantModel, do_naive=n <= args.naive_max,
                                      do_kubectl=not args.no_kubectl, do_role=not args.no_role))
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(rows, indent=1))
        finally:
            cleanup(runner)
    command = "python bench/tenants_bench.py " + " ".join(sys.argv[1:])
    md = markdown(rows, command)
    Path(args.markdown).write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
