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
"""

from __future__ import annotations

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


def lab_schedule(trace: Dict[str, Any]) -> List[Schedule]:
    meta = json.loads((REPLAY / "lab" / "tenancy" / "meta.json").read_text())
    events = replay.load_events(REPLAY / "lab" / "tenancy" / "events.jsonl")
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


def main() -> int:
    started = time.time()
    trace = json.loads((REPLAY / "trace.json").read_text())
    capacity = json.loads((REPLAY / "run.json").read_text())["nodes"]
    inventory = yaml.safe_load((REPO / "bench" / "fairness" / "inventory.yml").read_text())
    models = plan.validated({"current": inventory})
    jobs, horizon = demand.jobs_from_trace(trace)
    predicted = plan.plan(models, jobs, horizon, capacity)
    tree = tree_from_model(models["current"])
    pools = predicted["capacity"]
    measured = figures.schedule_figures(lab_schedule(trace), tree, pools, horizon)
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
    result = {
        "replay": str(REPLAY.relative_to(REPO)), "trace_sha256": trace["sha256"], "jobs": len(jobs),
        "horizon_minutes": horizon, "capacity": pools,
        "tenants": rows, "jain": pool_rows,
        "served_share_error_points": {t: round(100 * v, 2) for t, v in share_err.items()},
        "max_served_share_error_points": round(100 * max(abs(v) for v in share_err.values()), 2),
        "preemptions": {"plan": predicted["variants"]["current"]["preemptions"], "lab": measured["preemptions"]},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": list(os.getloadavg()),
                    "python": platform.python_version(), "seconds": round(time.time() - started, 2), "runs": 1},
        "note": "the planner is deterministic: one run; the lab replay is one recorded run (its spread is not known)",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "accuracy.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    lines = ["# Quota plan vs the lab replay (%s, %d jobs, %s trace minutes)" % (result["replay"], len(jobs), horizon), "",
             "| tenant | figure | plan | lab | plan - lab | relative |", "|---|---|---|---|---|---|"]
    for tenant, r in rows.items():
        for c in COLUMNS:
            e = r[c]["error"]
            lines.append("| %s | %s | %s | %s | %s | %s |" % (tenant, c, r[c]["plan"], r[c]["lab"], e["abs"],
                                                           "-" if e["rel"] is None else "%+.0f %%" % (100 * e["rel"])))
    lines += ["", "| pool | Jain plan | Jain lab |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % (p, v["plan"], v["lab"]) for p, v in pool_rows.items()]
    lines += ["", "Served-share error per tenant (points of the total): %s; preemptions plan %d, lab %d." % (
        ", ".join("%s %+.2f" % kv for kv in result["served_share_error_points"].items()),
        result["preemptions"]["plan"], result["preemptions"]["lab"])]
    (OUT / "accuracy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
