#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the tenants role against the lab (issue 5).

For each tenant count N (2 namespaces per tenant, added to the lab's example tenancy) and in the same run:

  role     ansible-playbook playbooks/tenants.yml (one gpuaas.platform.tenants module call, 8 apply workers)
  kubectl  kubectl apply --server-side of the very same rendered objects, parallelised the way a user would:
           the objects split into --kubectl-parallel files per tier (cluster-scoped first, then namespaced) and
           ``ls tier/*.yaml | xargs -P <parallel> -n 1 kubectl apply --server-side -f`` (parallel = the module's
           8 workers by default)
  naive    a playbook with one kubernetes.core.k8s (server-side apply) task execution per object

each (a) from empty, (b) re-run with nothing to change, (c) check mode with diff (one quota changed;
kubectl: ``kubectl diff --server-side`` the same way). Peak RSS of the module process is measured by running the
module through a tiny interpreter wrapper (getrusage of the child). Between variants the bench tenants are removed
with the role itself (``gpuaas_delete_namespaces``) and the bench waits until their namespaces are gone.
--runs repeats the whole sequence; the results file (bench/results/tenants-<label>.json) holds every run's value,
mean and min-max per figure, the machine, the load average before and after, the commit and the date
(bench/results_meta.py).

Usage (lab env sourced; `make bench BENCH_ARGS="--tenants 10,100 --runs 3"`):
  python bench/tenants_bench.py --tenants 10,100 --runs 3 --label 2026-12-02
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_meta  # noqa: E402

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

    def kubectl_parallel(self, verb: str, tiers: list[Path], parallel: int) -> float:
        """Wall of ``ls tier/*.yaml | xargs -P parallel -n 1 kubectl <verb> --server-side -f`` for each tier in turn
        (namespaces and other cluster-scoped objects before the namespaced ones, as a user must order them)."""
        kubectl = [kubectl_bin(), "--context", "lab-admin", verb, "--server-side", "--field-manager=kubectl-bench",
                   "--force-conflicts", "-f"]
        # kubectl diff exits 1 when it found a difference: that is the expected answer, not a failure
        inner = "%s \"$1\"; rc=$?; [ $rc -le %d ] || exit $rc" % (" ".join(shlex.quote(x) for x in kubectl),
                                                                 1 if verb == "diff" else 0)
        start = time.monotonic()
        for tier in tiers:
            cmd = "ls %s/*.yaml | xargs -P %d -n 1 sh -c %s _" % (shlex.quote(str(tier)), parallel, shlex.quote(inner))
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, check=False)
            if proc.returncode:
                raise RuntimeError("%s failed (rc=%s): %s" % (cmd, proc.returncode, proc.stderr[-3000:]))
        return round(time.monotonic() - start, 2)


def split_tiers(objs: list[dict], directory: Path, parallel: int) -> list[Path]:
    """The objects as ``parallel`` files per tier: cluster-scoped (namespaces first), then namespaced."""
    tiers = []
    for index, members in enumerate(([o for o in objs if not o["metadata"].get("namespace")],
                                     [o for o in objs if o["metadata"].get("namespace")])):
        tier = directory / ("tier%d" % index)
        tier.mkdir(parents=True, exist_ok=True)
        for old in tier.glob("*.yaml"):
            old.unlink()
        size = max(1, math.ceil(len(members) / parallel))
        for chunk in range(0, len(members), size):
            (tier / ("%04d.yaml" % chunk)).write_text(yaml.safe_dump_all(members[chunk:chunk + size], sort_keys=False))
        tiers.append(tier)
    return tiers


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
    # prune is opt-in (gpuaas_tenants_prune): the bench tenants are missing from the inventory and must go
    res = runner.playbook(PLAYBOOK, {"gpuaas_delete_namespaces": True, "gpuaas_tenants_prune": True,
                                     "gpuaas_drain_timeout": 120})
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
              do_role: bool = True, parallel: int = 8) -> dict:
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
        tiers = split_tiers(objs, runner.workdir / ("kubectl-%d" % n), parallel)
        tiers_changed = split_tiers(changed, runner.workdir / ("kubectl-%d-changed" % n), parallel)
        row["kubectl_parallel"] = parallel
        row["kubectl_a"] = {"wall_s": runner.kubectl_parallel("apply", tiers, parallel)}
        row["kubectl_b"] = {"wall_s": runner.kubectl_parallel("apply", tiers, parallel)}
        row["kubectl_c"] = {"wall_s": runner.kubectl_parallel("diff", tiers_changed, parallel)}
        print("[bench]   kubectl (xargs -P %d) a/b/c %s %s %s" % (parallel, row["kubectl_a"], row["kubectl_b"],
                                                               row["kubectl_c"]), flush=True)
        row["cleanup_kubectl"] = cleanup(runner)

    if do_naive:
        row["naive_a"] = naive(runner, f_objs)
        row["naive_b"] = naive(runner, f_objs)
        row["naive_c"] = naive(runner, f_changed, check=True, diff=True)
        print("[bench]   naive a/b/c %s %s %s" % (row["naive_a"], row["naive_b"], row["naive_c"]), flush=True)
        row["cleanup_naive"] = cleanup(runner)
    return row


PHASES = (("a", "(a) from empty"), ("b", "(b) no-op re-run"), ("c", "(c) check + diff"))


def figures(rows: list[dict]) -> dict[str, list]:
    """Per tenant count and phase, every run's role wall, module, kubectl and naive seconds and peak RSS."""
    out: dict[str, list] = {}
    for row in rows:
        for phase, _label in PHASES:
            role = row.get("role_%s" % phase) or {}
            for name, value in (("role_wall_s", role.get("wall_s")), ("module_s", role.get("module_s")),
                                ("module_peak_rss_mb", role.get("peak_rss_mb")),
                                ("kubectl_s", (row.get("kubectl_%s" % phase) or {}).get("wall_s")),
                                ("naive_s", (row.get("naive_%s" % phase) or {}).get("wall_s"))):
                if value is not None:
                    out.setdefault("%d/%s/%s" % (row["tenants"], phase, name), []).append(value)
        off = row.get("role_offboard") or {}
        if off:
            out.setdefault("%d/offboard/role_wall_s" % row["tenants"], []).append(off.get("wall_s"))
            out.setdefault("%d/offboard/namespaces_gone_s" % row["tenants"], []).append(off.get("ns_gone_s"))
    return out


def ratio(a, b) -> str:
    if not a or not b:
        return "-"
    return "%.2f×" % (a / b)


def markdown(doc: dict) -> str:
    """Mean (min-max) per figure, one line per tenant count and phase."""
    fig = doc["figures"]

    def cell(key: str) -> str:
        f = fig.get(key)
        if not f or not f.get("runs"):
            return "-"
        return "%.2f (%.2f–%.2f)" % (f["mean"], f["min"], f["max"])

    lines = ["| tenants | objects | phase | role wall s | module s | kubectl -P %s s | naive s | role / kubectl | "
             "module / kubectl | module peak RSS MB | requests list/get/apply/delete |" % doc.get("kubectl_parallel"),
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    seen = set()
    for row in doc["per_run"]:
        n = row["tenants"]
        if n in seen:  # one line per tenant count: the figures already hold every run
            continue
        seen.add(n)
        for phase, label in PHASES:
            key = "%d/%s/" % (n, phase)
            role = (fig.get(key + "role_wall_s") or {}).get("mean")
            module = (fig.get(key + "module_s") or {}).get("mean")
            kub = (fig.get(key + "kubectl_s") or {}).get("mean")
            req = (row.get("role_%s" % phase) or {}).get("requests") or {}
            lines.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n, row["objects"], label, cell(key + "role_wall_s"), cell(key + "module_s"), cell(key + "kubectl_s"),
                cell(key + "naive_s"), ratio(role, kub), ratio(module, kub), cell(key + "module_peak_rss_mb"),
                "/".join(str(req.get(k, "-")) for k in ("list", "get", "apply", "delete"))))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", default="10,100", help="comma-separated tenant counts")
    parser.add_argument("--runs", type=int, default=3, help="repeat the whole sequence per tenant count")
    parser.add_argument("--naive-max", type=int, default=0, help="measure the naive role only up to this count")
    parser.add_argument("--no-kubectl", action="store_true")
    parser.add_argument("--no-role", action="store_true", help="skip the role (e.g. to add naive numbers later)")
    parser.add_argument("--kubectl-parallel", type=int, default=8,
                        help="xargs -P for the kubectl baseline (default: the module's 8 apply workers)")
    parser.add_argument("--label", default="run", help="results file bench/results/tenants-<label>.json")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = parser.parse_args()
    if not (REPO / ".build" / "ansible_collections" / "gpuaas" / "platform").exists():
        print("run `make collection` first (make bench does)", file=sys.stderr)
        return 2
    builders, TenantModel = import_collection()
    counts = [int(x) for x in args.tenants.split(",") if x]
    meta = results_meta.start(sys.argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tenants-bench-") as tmp:
        runner = Runner(Path(tmp))
        try:
            for n in counts:
                for run in range(args.runs):
                    row = bench_one(n, runner, builders, TenantModel, do_naive=n <= args.naive_max,
                                    do_kubectl=not args.no_kubectl, do_role=not args.no_role,
                                    parallel=args.kubectl_parallel)
                    row["run"] = run + 1
                    rows.append(row)
        finally:
            cleanup(runner)
    doc = results_meta.finish(meta, runs=args.runs, figures=figures(rows), extra={
        "kubectl_parallel": args.kubectl_parallel, "module_apply_workers": 8, "tenant_counts": counts,
        "per_run": rows})
    md = markdown(doc)
    doc["markdown"] = md
    results_meta.write(Path(args.out) / ("tenants-%s.json" % args.label), doc)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
