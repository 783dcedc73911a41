# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every bench results file records beside its figures (issue 26): the machine, its load before and after,
the commit and date, the command, and for each figure every run's value with its mean and min-max spread.

    meta = results_meta.start(sys.argv)           # before the first timed run
    ...
    doc = results_meta.finish(meta, runs=3, figures={"wall_s": [1.2, 1.4, 1.3]}, extra={...})
    results_meta.write(Path("bench/results/x.json"), doc)

docs/benchmarks.md cites the file; bench/check_figures.py fails a figure that cites no existing results file.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False)
    if proc.returncode:
        return None
    return proc.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def start(argv: list[str]) -> dict:
    """Machine facts and load average, taken before the first timed run."""
    return {
        "command": "python " + " ".join([os.path.relpath(argv[0], REPO)] + list(argv[1:])),
        "git_commit": _git_commit(),
        "started": _now(),
        "machine": {"nproc": os.cpu_count(), "memory_gib": _memory_gib(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


def spread(values: list[float]) -> dict:
    """Every run's value with mean, median and min-max (None values, failed runs, are left out of the statistics)."""
    present = [v for v in values if v is not None]
    if not present:
        return {"values": values, "runs": 0}
    return {"values": values, "runs": len(present), "mean": round(statistics.mean(present), 3),
            "median": round(statistics.median(present), 3), "min": min(present), "max": max(present)}


def finish(meta: dict, runs: int, figures: dict[str, list[float]], extra: dict | None = None) -> dict:
    """The results document: meta + load after + run count + each figure's spread (+ the bench's own data)."""
    doc = dict(meta)
    doc["finished"] = _now()
    doc["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    doc["runs"] = runs
    doc["figures"] = {name: spread(values) for name, values in figures.items()}
    if extra:
        doc.update(extra)
    return doc


def write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print("[bench] results: %s" % os.path.relpath(path, REPO), flush=True)
    return path
