# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fair-sharing benchmark (issue 14): one trace, offline ideal and static, lab replays per variant, summary.

    python bench/fairness/run.py --out bench/fairness/results/full                      # 450 jobs, all variants
    python bench/fairness/run.py --jobs 120 --horizon 160 --out bench/fairness/results/reduced
    python bench/fairness/run.py --offline-only --out /tmp/fs                           # no lab needed
    python bench/fairness/run.py --summarise-only bench/fairness/results/reduced        # redo the figures
    python bench/fairness/run.py --inventory my-tenants.yml --capacity fs-h100=8+8,fs-mig-1g=7 \
        --trace my-trace.json --offline-only --out /tmp/mine                              # your tenancy, your trace

``--inventory``: a tenant inventory in the collection's format (default ``bench/fairness/inventory.yml``; the
variants are derived from it). ``--capacity``: GPUs per node of each pool (flavor), ``pool=8+8`` = two nodes of 8
(default: the lab, ``lab/topology.yaml``). ``--trace``: replay this trace file (format: ``bench/fairness/trace.py``)
instead of generating one. The choices are stored in ``run.json`` beside the results, and ``--summarise-only``
reads them from there.

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
from typing import Any, Dict, List, Mapping, Optional

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.fairness import metrics, model, sim, summarise, trace as tracegen  # noqa: E402
from bench.fairness.sim import JobResult, Run  # noqa: E402

NODES = {"fs-h100": [8.0, 8.0], "fs-mig-1g": [7.0]}   # lab/topology.yaml: two 8-GPU H100 nodes, one A100 as 7 slices
CAPACITY = {pool: sum(n) for pool, n in NODES.items()}


def parse_capacity(text: str) -> Dict[str, List[float]]:
    """``fs-h100=8+8,fs-mig-1g=7`` -> {"fs-h100": [8.0, 8.0], "fs-mig-1g": [7.0]} (GPUs per node of each pool)."""
    out: Dict[str, List[float]] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        pool, sep, nodes = part.partition("=")
        if not sep or not pool.strip():
            raise ValueError("capacity %r: expected pool=GPUs[+GPUs...]" % part)
        sizes = [float(x) for x in nodes.split("+") if x.strip()]
        if not sizes or any(x <= 0 for x in sizes):
            raise ValueError("capacity %r: every node needs a positive GPU count" % part)
        out[pool.strip()] = sizes
    return out


def dump_results(results: List[JobResult], path: Path) -> None:
    path.write_text(json.dumps([dataclasses.asdict(r) for r in results]))


def load_results(path: Path) -> List[JobResult]:
    out = []
    for d in json.loads(path.read_text()):
        runs = [Run(**dict({"bind": r["start"]}, **r)) for r in d.pop("runs")]   # files before issue 26: bind = start
        out.append(JobResult(runs=runs, **d))
    return out


def offline(trace: Dict[str, Any], out: Path, inv: Optional[Dict[str, Any]] = None,
            nodes: Optional[Dict[str, List[float]]] = None) -> None:
    inv = inv or model.load_inventory()
    nodes = nodes or NODES
    capacity = {p: sum(n) for p, n in nodes.items()}
    (out / "offline").mkdir(parents=True, exist_ok=True)
    for name, variant in (("ideal", "tenancy"), ("static", "static"), ("ideal-weights1", "weights1")):
        res = sim.simulate(trace["jobs"], model.tree_from_inventory(model.variant(inv, variant)), capacity)
        dump_results(res, out / "offline" / ("%s.json" % name))
    # a static partition that follows the trace's demand instead of the inventory's quotas (issue 26)
    tree = model.tree_from_inventory(inv)
    quotas = model.demand_quotas(tree, trace["jobs"], capacity)
    res = sim.simulate(trace["jobs"], model.tree_from_inventory(model.with_quotas(inv, quotas, tree)), capacity)
    dump_results(res, out / "offline" / "static-demand.json")
    (out / "offline" / "static-demand-quotas.json").write_text(json.dumps(quotas, indent=1, sort_keys=True))
    # work-conserving, node-aware FIFO without tenants: what GPU work needs no fairness policy, and whose fairness
    # is not chosen by the ratio Jain's index scores
    dump_results(sim.fifo(trace["jobs"], nodes), out / "offline" / "fifo.json")


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


def _settings(out: Path) -> Dict[str, Any]:
    p = out / "run.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _inventory(settings: Mapping[str, Any]) -> Dict[str, Any]:
    return model.load_inventory(Path(settings["inventory"])) if settings.get("inventory") else model.load_inventory()


def cross_check(meta: Mapping[str, Any], res: List[JobResult]) -> List[str]:
    """Recorded admissions and evictions per ClusterQueue against Kueue's counters (deltas over the replay)."""
    lines = []
    for name, label, recorded in (
            ("admitted", "admissions", {}), ("evicted", "evictions (victim queue)", {})):
        for j in res:
            recorded[j.tenant] = recorded.get(j.tenant, 0) + (len(j.runs) if name == "admitted" else
                                                              metrics.evictions_of(j))
        after, before = meta["prometheus_after"].get(name), meta["prometheus_before"].get(name)
        if not isinstance(after, list):
            lines.append("  %s per ClusterQueue: Prometheus unavailable" % label)
            continue
        kueue: Dict[str, float] = {}
        for m, v in after:
            kueue[m.get("cluster_queue")] = kueue.get(m.get("cluster_queue"), 0.0) + v
        for m, v in before if isinstance(before, list) else []:
            kueue[m.get("cluster_queue")] = kueue.get(m.get("cluster_queue"), 0.0) - v
        cells = ["%s %d/%d" % (t, recorded.get(t, 0), kueue.get(t, 0)) for t in sorted(set(recorded) | set(kueue))
                 if t and (recorded.get(t, 0) or kueue.get(t, 0))]
        same = all(recorded.get(t, 0) == kueue.get(t, 0) for t in set(recorded) | set(kueue) if t)
        lines.append("  %s per ClusterQueue, recorded/Kueue: %s (%s)" % (label, ", ".join(cells),
                                                                          "equal" if same else "**differ**"))
    return lines


def run_dirs(variant_dir: Path) -> List[Path]:
    """The recorded lab runs of one variant: ``<variant>/run-<k>/`` (several runs, issue 26) in run order, or the
    variant directory itself when it holds one run (results written before issue 26)."""
    if (variant_dir / "meta.json").exists():
        return [variant_dir]
    runs = [d for d in variant_dir.glob("run-*") if (d / "meta.json").exists() and d.name[4:].isdigit()]
    return sorted(runs, key=lambda d: int(d.name[4:]))


def next_run_dir(variant_dir: Path) -> Path:
    """Where the next lab run of a variant goes: ``run-<k+1>`` after the runs already there (never overwrites)."""
    done = [int(d.name[4:]) for d in variant_dir.glob("run-*") if d.name[4:].isdigit()]
    if (variant_dir / "meta.json").exists():
        raise SystemExit("%s holds a single run written before issue 26; write new runs to another --out" % variant_dir)
    return variant_dir / ("run-%d" % (max(done, default=0) + 1))


def preemption_causes(events: List[Mapping[str, Any]], scale: float, soon: float = 2.0) -> Dict[str, Any]:
    """What preempted, from the recorded ``Preempted=True`` transitions: Kueue's reason (InCohortFairSharing: a
    fair-sharing strategy; InCohortReclamation: a queue within its nominal quota taking it back; InClusterQueue),
    the preemptor's cohort path and the number of preemption decisions (Kueue's message names them; replays
    before issue 26 did not record messages), and how many victims had been admitted less than ``soon`` trace
    minutes earlier (admitted into quota another queue was about to take: the re-admit/re-preempt churn)."""
    admitted: Dict[str, float] = {}
    reasons: Dict[str, int] = {}
    paths: Dict[str, int] = {}
    decisions = set()
    quick = 0
    for e in events:
        if e.get("kind") != "workload":
            continue
        if (e["type"] == "QuotaReserved" and e["status"] == "True") or \
                (e["type"] == "Evicted" and e["status"] == "False" and e.get("reason") == "QuotaReserved"):
            admitted[e["job"]] = e["ms"]
        if e["type"] == "Preempted" and e["status"] == "True":
            reasons[e.get("reason") or "?"] = reasons.get(e.get("reason") or "?", 0) + 1
            msg = e.get("message") or ""
            if "preemptor path:" in msg:
                path = msg.split("preemptor path:", 1)[1].split(";")[0].strip().rstrip("/")
                paths[path] = paths.get(path, 0) + 1
            if "(UID: " in msg:
                decisions.add(msg.split("(UID: ", 1)[1].split(",")[0])
            if e["job"] in admitted and (e["ms"] - admitted[e["job"]]) / 1000.0 / scale < soon:
                quick += 1
    return {"reasons": reasons, "preemptor_paths": paths, "decisions": len(decisions) if decisions else None,
            "victim_admitted_within_2_min": quick, "preemptions": sum(reasons.values())}


def summarise_dir(out: Path, inv: Optional[Dict[str, Any]] = None,
                  nodes: Optional[Dict[str, List[float]]] = None) -> str:
    from bench.fairness import replay

    settings = _settings(out)
    inv = inv or _inventory(settings)
    nodes = nodes or {p: [float(x) for x in n] for p, n in (settings.get("nodes") or NODES).items()}
    capacity = {p: sum(n) for p, n in nodes.items()}
    trace = json.loads((out / "trace.json").read_text())
    fair = model.tree_from_inventory(inv)
    named: Dict[str, Any] = {}
    schedules: Dict[str, List[JobResult]] = {}
    for name in ("ideal", "static", "ideal-weights1", "static-demand", "fifo"):
        p = out / "offline" / ("%s.json" % name)
        if p.exists():
            schedules["%s (offline)" % name] = load_results(p)
    metas: Dict[str, Any] = {}          # schedule name -> its meta.json
    lab_names: Dict[str, List[str]] = {}  # variant -> its lab schedules in run order
    causes: Dict[str, Any] = {}
    for variant in model.VARIANTS:
        dirs = run_dirs(out / "lab" / variant)
        for d in dirs:
            # one run in the variant directory (before issue 26): "tenancy (lab)"; several: "tenancy (lab run 2)"
            name = "%s (lab)" % variant if d.name == variant else "%s (lab run %s)" % (variant, d.name[4:])
            meta = json.loads((d / "meta.json").read_text())
            metas[name] = meta
            events = replay.load_events(d / "events.jsonl")
            schedules[name] = replay.to_results(trace, meta, events)
            causes[name] = preemption_causes(events, meta["scale"])
            dump_results(schedules[name], d / "schedule.json")
            lab_names.setdefault(variant, []).append(name)
    for name, res in schedules.items():
        named[name] = metrics.summarise(res, fair, fair, capacity, nodes=nodes)
    statics = {}
    lab_statics = lab_names.get("static", [])
    for name in named:
        statics[name] = named["static (offline)"]
        if "(lab" in name and lab_statics:
            # the static run of the same round (same hour and load), else the last static run there is
            same_round = name.replace(name.split(" (")[0], "static", 1)
            statics[name] = named[same_round if same_round in named else lab_statics[-1]]
    runs = {v: len(n) for v, n in lab_names.items()}
    lines = ["# Fair-sharing benchmark: %s" % out.name, "",
             "Written by `python bench/fairness/run.py --summarise-only %s` (bench/fairness/run.py, metrics.py, "
             "summarise.py)." % out,
             "Trace: %d jobs, seed %s, sha256 `%s`, horizon %s trace minutes." % (
                 len(trace["jobs"]), trace["params"].get("seed"), trace["sha256"], trace["params"].get("horizon")),
             "Inventory: %s. Nodes (GPUs per node): %s." % (
                 settings.get("inventory") or "bench/fairness/inventory.yml",
                 ", ".join("%s %s" % (p, "+".join("%g" % x for x in n)) for p, n in nodes.items())),
             ("Lab runs per variant: %s%s." % (", ".join("%s %d" % kv for kv in runs.items()),
                                               " (one run each: no spread)" if max(runs.values()) == 1 else
                                               "; each run is scored against the static run of the same round, the "
                                               "targets are judged on the mean over the runs, min–max beside it")
              if runs else "Lab runs: none (offline simulators only: deterministic, one run each)."),
             "Summarised on: %s (the lab runs' own machine and load are in docs/benchmarks.md and meta.json)." % machine(),
             ""]
    for variant, meta in metas.items():   # variant: the schedule's name
        lines.append("- `%s`: 1 trace minute = %s s, bin-packing scheduler %s, converge %.1f s, %d submit errors, "
                     "wall %.0f s" % (variant, meta["scale"], "on" if meta["binpack"] else "off", meta["converge_seconds"],
                                      len(meta["errors"]), (meta["ended_ms"] - meta["t0_ms"]) / 1000.0))
        m = meta.get("machine")
        during = (m or {}).get("load_1m_during") or {}
        lines.append("  machine: %s%s" % ("%s, %s CPUs, load average %s before and %s after the replay" % (
            m["platform"], m["cpus"], "/".join("%.1f" % x for x in m["load_before"]),
            "/".join("%.1f" % x for x in m["load_after"])) if m else "not recorded in meta.json (replays before issue 26)",
            "; 1-min load during it %.1f–%.1f (mean %.1f, %d samples)" % (
                during["min"], during["max"], during["mean"], during["samples"]) if during.get("samples") else ""))
        kueue = meta.get("kueue")
        if kueue:
            config = kueue.get("configuration")
            strategies = ((config or {}).get("fairSharing") or {}).get("preemptionStrategies") \
                if isinstance(config, dict) else config
            lines.append("  Kueue: fairSharing.preemptionStrategies %s, waitForPodsReady %s; ClusterQueue preemption: %s" % (
                strategies, (config or {}).get("waitForPodsReady") if isinstance(config, dict) else "?",
                "; ".join("%s %s" % (cq, json.dumps(v.get("preemption"), sort_keys=True))
                          for cq, v in sorted(kueue.get("cluster_queues", {}).items()))))
        else:
            lines.append("  Kueue's configuration: not recorded in meta.json (replays before issue 26)")
        res = schedules[variant]
        unbound = sum(1 for r in res for x in r.runs if x.bind is None)
        lines.append("  Kueue's counters in Prometheus: admitted +%s (recorded %d admissions), preempted +%s "
                     "(recorded %d evictions in %d evicted runs); %d runs never had a pod bound" % (
                         counter_delta(meta, "admitted"), sum(len(r.runs) for r in res),
                         counter_delta(meta, "preempted"), sum(metrics.evictions_of(r) for r in res),
                         sum(1 for r in res for x in r.runs if x.evicted), unbound))
        lines += cross_check(meta, res)
        c = causes[variant]
        if c["preemptions"]:
            lines.append("  preemptions by Kueue's reason: %s; preemptor cohort path: %s; %s decisions; %d of %d victims "
                         "had been admitted < 2 trace minutes before" % (
                             ", ".join("%s %d" % kv for kv in sorted(c["reasons"].items())),
                             ", ".join("%s %d" % kv for kv in sorted(c["preemptor_paths"].items())) or "not recorded",
                             c["decisions"] if c["decisions"] is not None else "? (not recorded)",
                             c["victim_admitted_within_2_min"], c["preemptions"]))
    demand_q = out / "offline" / "static-demand-quotas.json"
    if demand_q.exists():
        q = json.loads(demand_q.read_text())
        same = all(q[t].get(p, 0) == int(fair.tenant_nodes[t].nominal.get(p, 0)) for t in q for p in q[t])
        lines += ["", "Static partition following the trace's demand (`model.demand_quotas`: quotas ∝ each tenant's "
                  "GPU-minutes, at least its largest job): %s — %s." % (
                      "; ".join("%s %s" % (t, ", ".join("%s %d" % kv for kv in sorted(v.items()))) for t, v in q.items()),
                      "**the same as the inventory's nominal quotas**, so `static-demand (offline)` equals "
                      "`static (offline)`" if same else "differs from the inventory's nominal quotas")]
    lines += ["", "Headline: GPU work (pod bound → bound + duration) while saturated; quota held "
              "(QuotaReserved → Finished) in brackets; the gap is quota held while no pod works. The bound is the "
              "most GPUs the jobs present at each saturated instant could occupy on the nodes (packing, no fairness).",
              "", summarise.figures_table(named, statics, fair), ""]
    ideal = named.get("ideal (offline)")
    pools = list(capacity)
    spreads: Dict[str, Any] = {}
    for variant, names in lab_names.items():
        comparisons = [summarise.compare(named[n], statics[n], ideal) for n in names]
        spreads[variant] = summarise.spread_figures(comparisons, [named[n] for n in names])
    if spreads and max(len(n) for n in lab_names.values()) > 1:
        lines += ["Spread over the lab runs: mean (min–max); gains against the static run of the same round.", "",
                  summarise.spread_table(spreads, pools), ""]
        for variant in ("tenancy", "weights1"):
            if variant in spreads:
                lines += ["Targets for **%s (lab)**, judged on the mean over its %d runs:" % (
                    variant, len(lab_names[variant])), "",
                    summarise.table(["target", "mean (min–max)", "runs meeting it", ""],
                                    summarise.spread_target_rows(spreads[variant], pools)), ""]
    for name in ("tenancy (lab)", "weights1 (lab)", "ideal (offline)"):
        if name in named:
            c = summarise.compare(named[name], statics[name], ideal)
            lines += ["Targets for **%s** (static reference: %s; every pool with a figure is judged):" % (
                name, "static (lab)" if statics[name] is named.get("static (lab)") else "static (offline)"), "",
                summarise.table(["target", "measured", ""], summarise.target_rows(c)), ""]
    text = "\n".join(lines)
    (out / "summary.md").write_text(text)
    # one entry per schedule as before; "lab spread" holds mean/min/max/runs per variant and figure
    for name, c in causes.items():
        named[name]["preemption_causes"] = c
    (out / "summary.json").write_text(json.dumps(dict(named, **({"lab spread": spreads} if spreads else {})),
                                                 indent=1, sort_keys=True, default=str))
    return text


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--jobs", type=int, default=450)
    ap.add_argument("--horizon", type=float, default=600.0, help="trace minutes")
    ap.add_argument("--rates", choices=("quota", "equal"), default="quota",
                    help="arrival rate per tenant of a generated trace (see bench/fairness/trace.py)")
    ap.add_argument("--scale", type=float, default=1.0, help="seconds of lab time per trace minute")
    ap.add_argument("--variants", default=",".join(model.VARIANTS))
    ap.add_argument("--no-binpack", action="store_true", help="use the lab's default (spreading) scheduler")
    ap.add_argument("--inventory", type=Path, help="tenant inventory (default: bench/fairness/inventory.yml)")
    ap.add_argument("--capacity", help="GPUs per node of each pool, e.g. fs-h100=8+8,fs-mig-1g=7 (default: the lab)")
    ap.add_argument("--trace", type=Path, help="replay this trace file instead of generating one")
    ap.add_argument("--runs", type=int, default=1,
                    help="lab runs per variant, added after the runs already in --out (lab/<variant>/run-<k>)")
    ap.add_argument("--offline-only", action="store_true")
    ap.add_argument("--summarise-only", type=Path)
    ap.add_argument("--out", type=Path, default=Path("bench/fairness/results/latest"))
    args = ap.parse_args(argv)
    if args.summarise_only:
        print(summarise_dir(args.summarise_only))
        return 0
    inv = model.load_inventory(args.inventory) if args.inventory else model.load_inventory()
    nodes = parse_capacity(args.capacity) if args.capacity else NODES
    tree = model.tree_from_inventory(inv)
    missing = sorted(set(tree.pools) - set(nodes))
    if missing:
        ap.error("--capacity has no nodes for the pool(s) %s of the inventory" % ", ".join(missing))
    nodes = {p: nodes[p] for p in tree.pools}
    capacity = {p: sum(n) for p, n in nodes.items()}
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.trace:
        trace = json.loads(args.trace.read_text())
        if not tracegen.verify(trace):
            ap.error("%s: sha256 does not match its jobs and params" % args.trace)
        unknown = sorted({j["tenant"] for j in trace["jobs"]} - set(tree.tenant_names))
        if unknown:
            ap.error("%s: tenants not in the inventory: %s" % (args.trace, ", ".join(unknown)))
    else:
        trace = tracegen.generate(args.seed, args.jobs, args.horizon, tree=tree, rates=args.rates,
                                  lenders=tracegen.lenders_of(inv))
    (out / "trace.json").write_text(json.dumps(trace, indent=1, sort_keys=True))
    (out / "run.json").write_text(json.dumps({
        "inventory": str(args.inventory) if args.inventory else None, "nodes": nodes,
        "trace": str(args.trace) if args.trace else None}, indent=1, sort_keys=True))
    print("trace: %d jobs, seed %s, sha256 %s" % (len(trace["jobs"]), trace["params"].get("seed"), trace["sha256"]),
          flush=True)
    offline(trace, out, inv, nodes)
    if not args.offline_only:
        from bench.fairness import replay

        # round-robin (every variant once, then again), so that a slow or loaded hour hits all variants alike
        for _round in range(args.runs):
            for variant in [v for v in args.variants.split(",") if v]:
                start = time.monotonic()
                where = next_run_dir(out / "lab" / variant)
                replay.replay(trace, variant, where, scale=args.scale, binpack=not args.no_binpack, inventory=inv)
                print("variant %s replayed in %.0f s (%s)" % (variant, time.monotonic() - start, where), flush=True)
                summarise_dir(out, inv, nodes)   # figures so far, in case a later run is interrupted
    print(summarise_dir(out, inv, nodes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
