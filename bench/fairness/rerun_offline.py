# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Re-run the offline simulators for every committed results directory into another directory.

    make collection && python bench/fairness/rerun_offline.py /tmp/offline-before   # on the old commit
    make collection && python bench/fairness/rerun_offline.py /tmp/offline-after    # on the new one
    diff -r /tmp/offline-before /tmp/offline-after                                 # byte-for-byte

For each ``bench/fairness/results/**/run.json`` it replays that directory's ``trace.json`` against the inventory
and nodes ``run.json`` names (``run.offline``), writing ``OUT/<results dir>/offline/*.json``. A change to the model
or the scheduler that must not change results is proved this way; the committed files are not touched.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))
from bench.fairness import model, run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write into (one subdirectory per results directory)")
    args = parser.parse_args()
    results = REPO / "bench" / "fairness" / "results"
    for settings_file in sorted(results.glob("**/run.json")):
        folder = settings_file.parent
        settings = json.loads(settings_file.read_text())
        trace = json.loads((folder / "trace.json").read_text())
        inv = model.load_inventory(REPO / settings["inventory"]) if settings.get("inventory") else model.load_inventory()
        run.offline(trace, args.out / folder.relative_to(results), inv, settings["nodes"])
        print(folder.relative_to(results), flush=True)


if __name__ == "__main__":
    main()
