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
