# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fairness/run.py (issue 26): others can run it with their inventory, capacity and trace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.fairness import run, trace  # noqa: E402


def test_parse_capacity():
    assert run.parse_capacity("fs-h100=8+8,fs-mig-1g=7") == {"fs-h100": [8.0, 8.0], "fs-mig-1g": [7.0]}
    assert run.CAPACITY == {"fs-h100": 16.0, "fs-mig-1g": 7.0}   # the lab: 2 x 8 H100, 7 slices
    for bad in ("fs-h100", "=8", "gpu=0", "gpu=8+-1"):
        with pytest.raises(ValueError):
            run.parse_capacity(bad)


def test_offline_run_with_own_inventory_capacity_and_trace(tmp_path, capsys):
    inv = {"gpuaas_cohorts": [{"name": "org"}], "gpuaas_tenants": [
        {"name": name, "namespaces": [name], "cohort": "org",
         "quotas": [{"flavor": "pool", "resources": {"nvidia.com/gpu": 2}}]} for name in ("a", "b")]}
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(inv))
    # a alone: two 2-GPU jobs of 10 min at 0; b submits nothing. Static: a runs them one after the other
    # (nominal 2) -> finishes at 20; ideal: a borrows b's 2 GPUs -> both run at once, finish at 10
    jobs = [{"id": "j0", "tenant": "a", "pool": "pool", "size": 2, "submit": 0.0, "duration": 10.0, "phase": "all"},
            {"id": "j1", "tenant": "a", "pool": "pool", "size": 2, "submit": 0.0, "duration": 10.0, "phase": "all"}]
    params = {"note": "hand-made"}   # params are free-form
    tr = {"params": params, "jobs": jobs, "sha256": trace.canonical_sha256(jobs, params)}
    (tmp_path / "trace.json").write_text(json.dumps(tr))
    out = tmp_path / "out"
    assert run.main(["--offline-only", "--inventory", str(tmp_path / "inv.yml"), "--capacity", "pool=2+2",
                     "--trace", str(tmp_path / "trace.json"), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ideal (offline)"]["makespan"] == pytest.approx(10.0)
    assert summary["static (offline)"]["makespan"] == pytest.approx(20.0)
    # recorded so that --summarise-only uses the same inventory and nodes
    settings = json.loads((out / "run.json").read_text())
    assert settings["nodes"] == {"pool": [2.0, 2.0]} and settings["inventory"].endswith("inv.yml")
    capsys.readouterr()
    assert run.main(["--summarise-only", str(out)]) == 0
    assert "pool 2+2" in (out / "summary.md").read_text()
    # a trace whose hash does not match, or a pool the capacity does not name, is refused
    tr["jobs"][0]["size"] = 1
    (tmp_path / "bad.json").write_text(json.dumps(tr))
    with pytest.raises(SystemExit):
        run.main(["--offline-only", "--inventory", str(tmp_path / "inv.yml"), "--trace", str(tmp_path / "bad.json"),
                  "--capacity", "pool=4", "--out", str(out)])
    with pytest.raises(SystemExit):
        run.main(["--offline-only", "--inventory", str(tmp_path / "inv.yml"), "--capacity", "other=4",
                  "--out", str(out)])


REDUCED = Path(__file__).resolve().parents[2] / "bench" / "fairness" / "results" / "reduced"


def _copy_run(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True)
    for name in ("events.jsonl", "meta.json"):
        (dst / name).write_text((src / name).read_text())


def test_next_run_dir_appends_and_never_overwrites(tmp_path):
    variant = tmp_path / "tenancy"
    assert run.next_run_dir(variant) == variant / "run-1"
    _copy_run(REDUCED / "lab" / "tenancy", variant / "run-1")
    (variant / "run-3").mkdir()            # a run that was interrupted still takes its number
    assert run.next_run_dir(variant) == variant / "run-4"
    assert run.run_dirs(variant) == [variant / "run-1"]   # only runs with a meta.json are scored
    with pytest.raises(SystemExit):        # a single run written before issue 26: new runs go elsewhere
        run.next_run_dir(REDUCED / "lab" / "tenancy")


def test_several_runs_report_mean_and_min_max_of_the_single_runs(tmp_path):
    # two "tenancy" runs made of the committed tenancy and weights1 replays (same trace, same tenants), and the
    # committed static replay twice: each run's figures must be what the single-run summary of that replay says,
    # and the spread their mean, min and max
    single = json.loads((REDUCED / "summary.json").read_text())
    out = tmp_path / "multi"
    out.mkdir()
    for name in ("trace.json", "run.json", "offline/static.json", "offline/ideal.json"):
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text((REDUCED / name).read_text())
    _copy_run(REDUCED / "lab" / "tenancy", out / "lab" / "tenancy" / "run-1")
    _copy_run(REDUCED / "lab" / "weights1", out / "lab" / "tenancy" / "run-2")
    for k in (1, 2):
        _copy_run(REDUCED / "lab" / "static", out / "lab" / "static" / ("run-%d" % k))
    run.summarise_dir(out)
    summary = json.loads((out / "summary.json").read_text())
    a, b = single["tenancy (lab)"], single["weights1 (lab)"]
    assert summary["tenancy (lab run 1)"]["preemptions"] == a["preemptions"] == 37
    assert summary["tenancy (lab run 2)"]["preemptions"] == b["preemptions"] == 28
    spread = summary["lab spread"]["tenancy"]
    per100 = spread["preemptions_per_100"]
    assert per100["runs"] == [pytest.approx(100 * 37 / 118), pytest.approx(100 * 28 / 118)]
    assert per100["mean"] == pytest.approx(100 * 32.5 / 118)
    assert (per100["min"], per100["max"]) == (pytest.approx(100 * 28 / 118), pytest.approx(100 * 37 / 118))
    work = spread["fs-h100 work_saturated"]
    assert work["mean"] == pytest.approx((a["pools"]["fs-h100"]["work_saturated"] +
                                          b["pools"]["fs-h100"]["work_saturated"]) / 2)
    gain = spread["fs-h100 gain_work_points"]["runs"][0]   # against the static run of the same round
    assert gain == pytest.approx(100 * (a["pools"]["fs-h100"]["work_saturated"] -
                                        single["static (lab)"]["pools"]["fs-h100"]["work_saturated"]))
    assert spread["max_preemptions"]["runs"] == [9.0, 5.0]
    text = (out / "summary.md").read_text()
    assert "Lab runs per variant: tenancy 2, static 2" in text
    assert "Targets for **tenancy (lab)**, judged on the mean over its 2 runs" in text
    # 32.5 / 118 = 27.5 per 100 jobs: missed in both runs
    assert "| ≤ 10 preemptions (evictions) per 100 jobs | 27.5 (23.7–31.4) | 0 of 2 | **missed** |" in text


def test_preemption_causes_counts_reasons_decisions_and_quick_repreemption():
    def wl(ms, job, ctype, status, reason, message=""):
        return {"kind": "workload", "ms": ms, "job": job, "type": ctype, "status": status, "reason": reason,
                "message": message}

    msg = "Preempted to accommodate a workload (UID: %s, JobUID: x) due to Fair Sharing within the cohort; " \
          "preemptor path: /org/research/"
    events = [
        wl(0, "a", "QuotaReserved", "True", "QuotaReserved"),
        wl(1000, "b", "QuotaReserved", "True", "QuotaReserved"),
        # one decision (UID u1) preempts a and b; b was admitted 9 s = 4.5 trace minutes before (scale 2): not quick
        wl(10000, "a", "Preempted", "True", "InCohortFairSharing", msg % "u1"),
        wl(10000, "b", "Preempted", "True", "InCohortFairSharing", msg % "u1"),
        # a comes back (a new reservation shows as Evicted=False, reason QuotaReserved) and is preempted 3 s later
        wl(20000, "a", "Evicted", "False", "QuotaReserved"),
        wl(23000, "a", "Preempted", "True", "InCohortReclamation", msg.replace("Fair Sharing", "reclamation") % "u2"),
        {"kind": "bound", "ms": 23001, "job": "a"},
    ]
    c = run.preemption_causes(events, scale=2.0)
    assert c["reasons"] == {"InCohortFairSharing": 2, "InCohortReclamation": 1}
    assert c["preemptor_paths"] == {"/org/research": 3}
    assert c["decisions"] == 2
    assert c["victim_admitted_within_2_min"] == 1     # only a's second run: 1.5 trace minutes
    assert run.preemption_causes([wl(0, "a", "Preempted", "True", "InCohortFairSharing")], 2.0)["decisions"] is None
