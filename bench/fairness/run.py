# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fair-sharing benchmark (issue 14): one trace, offline ideal and static, lab replays per variant, summary.

    python bench/fairness/run.py --out bench/fairness/results/full                      # 450 jobs, all variants
    python bench/fairness/run.py --jobs 120 --horizon 160 --out bench/fairness/results/reduced
    python bench/fairness/run.py --offline-only --out /tmp/fs                           # no lab needed
    python bench/fairness/run.py --summarise-only bench/fairness/results/reduced        # redo the figures

The lab replay needs a dedicated lab with Kueue (the variants are full reconciles of the tenancy), e.g.
``LAB_DIR=.lab-fair LAB_PORT_OFFSET=500 LAB_COMPONENTS=kueue bash lab/lab.sh up`` then ``source .lab-fair/env``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.fairness import metrics, model, sim, summarise, trace as tracegen  # noqa: E402
from bench.fairness.sim import JobResult, Run  # noqa: E402

CAPACITY = {"fs-h100": 16.0, "fs-mig-1g": 7.0}   # lab/topology.yaml


def dump_results(results: List[JobResult], path: Path) -> None:
    path.write_text(json.dumps([dataclasses.asdict(r) for r in results]))


def load_results(path: Path) -> List[JobResult]:
    out = []
    for d in json.loads(path.read_text()):
        runs = [Run(**r) for r in d.pop("runs")]
        out.append(JobResult(runs=runs, **d))
    return out


def offline(trace: Dict[str, Any], out: Path) -> None:
    inv = model.load_inventory()
    (out / "offline").mkdir(parents=True, exist_ok=True)
    for name, variant in (("ideal", "tenancy"), ("static", "static"), ("ideal-weights1", "weights1")):
        res = sim.simulate(trace["jobs"], model.tree_from_inventory(model.variant(inv, variant)), CAPACITY)
        dump_results(res, out / "offline" / ("%s.json" % name))


def machine() -> str:
    load = os.getloadavg()
    return "%s, %d CPUs, load average %.1f/%.1f/%.1f at summary time, Python %s" % (
        platform.platform(), os.cpu_count() or 0, load[0], load[1], load[2], platform.python_version())


def counter_delta(meta: Dict[str, Any], name: str) -> Optional[float]:
    before, after = meta["prometheus_before"].get(name), meta["prometheus_after"].get(name)
    if not isinstance(after, list):
        return None
    total = sum(v for _, v in after)
    if isinstance(before, list):
        total -= sum(v for _, v in before)
    return total


def summarise_dir(out: Path) -> str:
    from bench.fairness import replay

    trace = json.loads((out / "trace.json").read_text())
    inv = model.load_inventory()
    fair = model.tree_from_inventory(inv)
    named: Dict[str, Any] = {}
    schedules: Dict[str, List[JobResult]] = {}
    for name in ("ideal", "static", "ideal-weights1"):
        p = out / "offline" / ("%s.json" % name)
        if p.exists():
            schedules["%s (offline)" % name] = load_results(p)
    metas = {}
    for variant in model.VARIANTS:
        d = out / "lab" / variant
        if (d / "meta.json").exists():
            meta = json.loads((d / "meta.json").read_text())
            metas[variant] = meta
            schedules["%s (lab)" % variant] = replay.to_results(trace, meta, replay.load_events(d / "events.jsonl"))
            dump_results(schedules["%s (lab)" % variant], d / "schedule.json")
    for name, res in schedules.items():
        named[name] = metrics.summarise(res, fair, fair, CAPACITY)
    statics = {}
    for name in named:
        lab_static = named.get("static (lab)")
        statics[name] = lab_static if name.endswith("(lab)") and lab_static else named["static (offline)"]
    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    for name, res in schedules.items():
        slug = name.replace(" (", "-").replace(")", "").replace(" ", "-")
        for pool, cap in CAPACITY.items():
            (plots / ("%s-%s.svg" % (slug, pool))).write_text(
                summarise.stacked_svg(res, pool, fair.tenant_names, cap, "%s — %s allocation by tenant" % (name, pool)))
    lines = ["# Fair-sharing benchmark: %s" % out.name, "",
             "Trace: %d jobs, seed %s, sha256 `%s`, horizon %s trace minutes." % (
                 len(trace["jobs"]), trace["params"]["seed"], trace["sha256"], trace["params"]["horizon"]),
             "Machine: %s." % machine(), ""]
    for variant, meta in metas.items():
        lines.append("- lab `%s`: 1 trace minute = %s s, bin-packing scheduler %s, converge %.1f s, %d submit errors, "
                     "wall %.0f s" % (variant, meta["scale"], "on" if meta["binpack"] else "off", meta["converge_seconds"],
                                      len(meta["errors"]), (meta["ended_ms"] - meta["t0_ms"]) / 1000.0))
        res = schedules["%s (lab)" % variant]
        lines.append("  cross-check with Kueue's counters in Prometheus: admitted +%s (recorded %d admissions), "
                     "preempted +%s (recorded %d evictions)" % (
                         counter_delta(meta, "admitted"), sum(len(r.runs) for r in res),
                         counter_delta(meta, "preempted"), sum(1 for r in res for x in r.runs if x.evicted)))
    lines += ["", summarise.figures_table(named, statics, fair), ""]
    ideal = named.get("ideal (offline)")
    for name in ("tenancy (lab)", "weights1 (lab)", "ideal (offline)"):
        if name in named:
            c = summarise.compare(named[name], statics[name], ideal)
            lines += ["Targets for **%s** (static reference: %s):" % (
                name, "static (lab)" if statics[name] is named.get("static (lab)") else "static (offline)"), "",
                summarise.table(["target", "measured", ""], summarise.target_rows(c)), ""]
    text = "\n".join(lines)
    (out / "summary.md").write_text(text)
    (out / "summary.json").write_text(json.dumps(named, indent=1, sort_keys=True, default=str))
    return text


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--jobs", type=int, default=450)
    ap.add_argument("--horizon", type=float, default=600.0, help="trace minutes")
    ap.add_argument("--scale", type=float, default=1.0, help="seconds of lab time per trace minute")
    ap.add_argument("--variants", default=",".join(model.VARIANTS))
    ap.add_argument("--no-binpack", action="store_true", help="use the lab's default (spreading) scheduler")
    ap.add_argument("--offline-only", action="store_true")
    ap.add_argument("--summarise-only", type=Path)
    ap.add_argument("--out", type=Path, default=Path("bench/fairness/results/latest"))
    args = ap.parse_args(argv)
    if args.summarise_only:
        print(summarise_dir(args.summarise_only))
        return 0
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    trace = tracegen.generate(args.seed, args.jobs, args.horizon)
    (out / "trace.json").write_text(json.dumps(trace, indent=1, sort_keys=True))
    print("trace: %d jobs, seed %d, sha256 %s" % (len(trace["jobs"]), args.seed, trace["sha256"]), flush=True)
    offline(trace, out)
    if not args.offline_only:
        from bench.fairness import replay

        for variant in [v for v in args.variants.split(",") if v]:
            start = time.monotonic()
            replay.replay(trace, variant, out / "lab" / variant, scale=args.scale, binpack=not args.no_binpack)
            print("variant %s replayed in %.0f s" % (variant, time.monotonic() - start), flush=True)
            summarise_dir(out)   # figures so far, in case a later variant is interrupted
    print(summarise_dir(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
