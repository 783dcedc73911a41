# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How close the quota plan's prediction is to a real replay of the same demand through Kueue (issue 26).

The committed lab replay ``bench/fairness/results/reduced`` (``trace.json`` + ``lab/tenancy/events.jsonl`` and
``meta.json``, recorded by ``bench/fairness/replay.py`` on the lab: real kube-apiserver, real Kueue, KWOK nodes,
1 trace minute = 2 s) is read only. This script:

1. plans the trace with the collection's planner (``plugins/module_utils/quota_plan``) against the tenancy of
   ``bench/fairness/inventory.yml`` (the replay's ``tenancy`` variant), through the validated inventory model,
   with the lab's capacity (``run.json``: 16 H100 on two nodes, 7 MIG slices);
2. turns the recorded events into the same schedule (``bench.fairness.replay.to_results``: a run from
   QuotaReserved to Finished or to the quota release after an eviction; evictions = recorded Evicted=True);
3. computes the same per-tenant figures for both with the planner's own ``figures.schedule_figures`` (served
   GPU-hours inside the trace window, p50/p95 wait, preemptions, borrowed/lent GPU-hours, Jain while saturated)
   and writes them with the error (plan - lab, and relative) to ``bench/quota_plan/results/accuracy.json`` and
   ``accuracy.md``.

Run: ``make collection && PYTHONPATH=.build .venv/bin/python bench/quota_plan/accuracy.py`` (offline, ~2 s).
``--replay DIR --label NAME``: another replay directory of ``bench/fairness/run.py`` (its trace, ``run.json`` and
every lab run of variant ``tenancy``, ``lab/tenancy/`` or ``lab/tenancy/run-<k>/``), written to
``accuracy-NAME.json``/``.md`` with the error against each run and its spread over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / ".build"))

from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan import demand, figures, plan  # noqa: E402
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.scheduler import Job, Run, Schedule  # noqa: E402
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import tree_from_model  # noqa: E402
from bench.fairness import replay  # noqa: E402

REPLAY = REPO / "bench" / "fairness" / "results" / "reduced"
OUT = REPO / "bench" / "quota_plan" / "results"
COLUMNS = ("served_gpu_hours", "wait_p50_minutes", "wait_p95_minutes", "preemptions", "borrowed_gpu_hours",
           "lent_gpu_hours", "wasted_gpu_hours")


def tenancy_runs(replay_dir: Path) -> List[Path]:
    """The recorded lab runs of variant tenancy: ``lab/tenancy`` (one run) or ``lab/tenancy/run-<k>``."""
    base = replay_dir / "lab" / "tenancy"
    if (base / "meta.json").exists():
        return [base]
    return sorted((d for d in base.glob("run-*") if (d / "meta.json").exists()), key=lambda d: int(d.name[4:]))


def lab_schedule(trace: Dict[str, Any], run_dir: Path) -> List[Schedule]:
    meta = json.loads((run_dir / "meta.json").read_text())
    events = replay.load_events(run_dir / "events.jsonl")
    out = []
    for r in replay.to_results(trace, meta, events):
        s = Schedule(Job(r.id, r.tenant, r.pool, float(r.size), r.submit, r.duration),
                     [Run(x.start, x.end, x.evicted) for x in r.runs], r.evictions or 0)
        out.append(s)
    return out


def error(planned: Any, measured: Any) -> Dict[str, Any]:
    if planned is None or measured is None:
        return {"abs": None, "rel": None}
    diff = planned - measured
    return {"abs": round(diff, 3), "rel": round(diff / measured, 3) if measured else None}


def compare(predicted: Dict[str, Any], measured: Dict[str, Any], pools: Any) -> Dict[str, Any]:
    """Per tenant and figure: plan, lab and error; the served-share error; Jain and preemptions."""
    rows: Dict[str, Any] = {}
    for tenant, mine in predicted["variants"]["current"]["tenants"].items():
        lab = measured["tenants"][tenant]
        rows[tenant] = {c: {"plan": mine[c], "lab": lab[c], "error": error(mine[c], lab[c])} for c in COLUMNS}
    pool_rows = {p: {"plan": predicted["variants"]["current"]["pools"][p]["jain"], "lab": measured["pools"][p]["jain"]}
                 for p in pools}
    served_plan = sum(r["served_gpu_hours"]["plan"] for r in rows.values())
    served_lab = sum(r["served_gpu_hours"]["lab"] for r in rows.values())
    share_err = {t: round(r["served_gpu_hours"]["plan"] / served_plan - r["served_gpu_hours"]["lab"] / served_lab, 4)
                 for t, r in rows.items()}
    return {"tenants": rows, "jain": pool_rows,
            "served_share_error_points": {t: round(100 * v, 2) for t, v in share_err.items()},
            "max_served_share_error_points": round(100 * max(abs(v) for v in share_err.values()), 2),
            "preemptions": {"plan": predicted["variants"]["current"]["preemptions"], "lab": measured["preemptions"]}}


def table(title: str, one: Dict[str, Any]) -> List[str]:
    lines = [title, "", "| tenant | figure | plan | lab | plan - lab | relative |", "|---|---|---|---|---|---|"]
    for tenant, r in one["tenants"].items():
        for c in COLUMNS:
            e = r[c]["error"]
            lines.append("| %s | %s | %s | %s | %s | %s |" % (tenant, c, r[c]["plan"], r[c]["lab"], e["abs"],
                                                           "-" if e["rel"] is None else "%+.0f %%" % (100 * e["rel"])))
    lines += ["", "| pool | Jain plan | Jain lab |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % (p, v["plan"], v["lab"]) for p, v in one["jain"].items()]
    lines += ["", "Served-share error per tenant (points of the total): %s; preemptions plan %d, lab %d." % (
        ", ".join("%s %+.2f" % kv for kv in one["served_share_error_points"].items()),
        one["preemptions"]["plan"], one["preemptions"]["lab"])]
    return lines


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay", type=Path, default=REPLAY, help="a results directory of bench/fairness/run.py")
    ap.add_argument("--label", default="", help="written to accuracy-LABEL.json/.md (default accuracy.json/.md)")
    args = ap.parse_args(argv)
    replay_dir = args.replay.resolve()
    started = time.time()
    trace = json.loads((replay_dir / "trace.json").read_text())
    capacity = json.loads((replay_dir / "run.json").read_text())["nodes"]
    inventory = yaml.safe_load((REPO / "bench" / "fairness" / "inventory.yml").read_text())
    models = plan.validated({"current": inventory})
    jobs, horizon = demand.jobs_from_trace(trace)
    predicted = plan.plan(models, jobs, horizon, capacity)
    tree = tree_from_model(models["current"])
    pools = predicted["capacity"]
    runs = tenancy_runs(replay_dir)
    if not runs:
        raise SystemExit("no lab run of variant tenancy under %s/lab/tenancy" % replay_dir)
    per_run = [compare(predicted, figures.schedule_figures(lab_schedule(trace, d), tree, pools, horizon), pools)
               for d in runs]
    result = dict(per_run[0]) if len(runs) == 1 else {"runs": per_run}
    result.update({
        "replay": str(replay_dir.relative_to(REPO)), "trace_sha256": trace["sha256"], "jobs": len(jobs),
        "horizon_minutes": horizon, "capacity": pools,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": list(os.getloadavg()),
                    "python": platform.python_version(), "seconds": round(time.time() - started, 2), "runs": len(runs)},
        "note": "the planner is deterministic: one plan; compared with each recorded lab run of variant tenancy",
    })
    if len(runs) > 1:
        worst = [r["max_served_share_error_points"] for r in per_run]
        result["lab_runs"] = [str(d.relative_to(REPO)) for d in runs]
        result["max_served_share_error_points"] = {"mean": round(sum(worst) / len(worst), 2), "min": min(worst),
                                                   "max": max(worst)}
    suffix = "-%s" % args.label if args.label else ""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / ("accuracy%s.json" % suffix)).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    lines: List[str] = []
    for d, one in zip(runs, per_run):
        lines += table("# Quota plan vs the lab replay (%s, %d jobs, %s trace minutes)"
                       % (d.relative_to(REPO), len(jobs), horizon), one) + [""]
    if len(runs) > 1:
        lines.append("Largest served-share error over the %d runs: mean %.2f, min %.2f, max %.2f points." % (
            len(runs), result["max_served_share_error_points"]["mean"], result["max_served_share_error_points"]["min"],
            result["max_served_share_error_points"]["max"]))
    (OUT / ("accuracy%s.md" % suffix)).write_text("\n".join(lines).rstrip("\n") + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
