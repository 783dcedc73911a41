# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/check_figures.py (issue 26): docs/benchmarks.md has no figure without the results file that holds it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import check_figures  # noqa: E402


def test_docs_benchmarks_cites_a_committed_results_file_for_every_figure():
    problems = check_figures.check((REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8"), REPO)
    assert not problems, "\n".join(str(p) for p in problems)


def test_docs_benchmarks_states_the_rule_it_is_checked_by():
    head = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")[:3000]
    assert "bench/check_figures.py" in head


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "tenants-a.json").write_text(json.dumps({"runs": 3}))
    (tmp_path / "bench" / "results" / "onboard-before.json").write_text("{}")
    (tmp_path / "bench" / "results" / "onboard-after.json").write_text("{}")
    (tmp_path / "bench" / "fair" / "results" / "reduced").mkdir(parents=True)
    (tmp_path / "bench" / "fair" / "results" / "reduced" / "summary.md").write_text("x")
    return tmp_path


def lines_of(problems) -> list[int]:
    return [p.line for p in problems]


@pytest.mark.parametrize("text", [
    # a cited section: the citation on the heading, a line before, or the line itself
    "## Tenants (`bench/results/tenants-a.json`)\n\n| n | s |\n|---|---|\n| 10 | 3.67 |\n",
    "## Tenants\n\nFigures: `bench/results/tenants-a.json`.\n\n| n | s |\n|---|---|\n| 10 | 3.67 |\nIt took 12 %.\n",
    "## Tenants\n\nThe module took 3.67 s (`bench/results/tenants-a.json`).\n",
    # a relative path resolves to the one file under bench/ that ends with it
    "### Targets (`results/reduced/summary.md`)\n\n| target | 0.85 |\n",
    # {a,b} lists: every file must exist
    "## Onboarding\n\n`bench/results/onboard-{before,after}.json`: 17.17 s and 14.08 s.\n",
    # what is not a figure: versions, integers without % or ×, code, dates
    "## Set-up\n\nKueue v0.19.2 on kube-apiserver 1.35.4, 4 Jobs of 8 s, `--sync-period=0.5s`, 2026-12-02 01:25 UTC.\n",
    "## Commands\n\n```bash\npython bench/tenants_bench.py --scale 0.5\n```\n\n    make bench ARGS=0.25\n",
])
def test_good_samples_pass(repo: Path, text: str):
    assert check_figures.check(text, repo) == []


@pytest.mark.parametrize("text, bad_lines", [
    # a table row with no citation anywhere
    ("## Tenants\n\n| n | s |\n|---|---|\n| 10 | 3.67 |\n| 100 | 21 |\n", [5]),
    # a figure sentence without a citation, and a ratio
    ("## Tenants\n\nThe role took 21.73 s.\nIt is 0.33× kubectl.\n", [3, 4]),
    # a citation covers only the rest of its own section, not the next one (of any level)
    ("## A\n\n`bench/results/tenants-a.json`\n\n### B\n\n| 10 | 3.67 |\n", [7]),
    # a citation below the figure does not cover it
    ("## A\n\nIt took 3.67 s.\n\nSee `bench/results/tenants-a.json`.\n", [3]),
    # a cited file that is not in the repository fails, and covers nothing
    ("## A\n\nFrom `bench/results/tenants-gone.json`: 3.67 s.\n", [3, 3]),
    # every file of a {a,b} list must exist
    ("## A\n\n`bench/results/onboard-{before,pbonly}.json`\n", [3]),
    # a relative path that does not resolve to one file under bench/
    ("## A\n\n`results/nowhere/summary.md`: 0.9\n", [3, 3]),
    # a path outside the repository is no citation of a committed file
    ("## A\n\n`/tmp/results/prof.json` 3.5 s\n", [3, 3]),
])
def test_bad_samples_fail_on_the_uncited_lines(repo: Path, text: str, bad_lines: list[int]):
    assert lines_of(check_figures.check(text, repo)) == bad_lines


def test_figures_found_and_not_found():
    assert check_figures.figures("| 10 | 3.67 | 0.33× | 43 % |") == ["3.67", "0.33×", "43 %"]
    assert check_figures.figures("v0.19.2, 1.35.4, 4 nodes, `0.5`, 10 tenants") == []


def test_main_exits_nonzero_on_a_bad_doc(tmp_path: Path, capsys):
    doc = tmp_path / "b.md"
    doc.write_text("## A\n\nIt took 3.67 s.\n")
    sys_argv = sys.argv
    sys.argv = ["check_figures.py", str(doc)]
    try:
        assert check_figures.main() == 1
    finally:
        sys.argv = sys_argv
    assert "docs line 3" in capsys.readouterr().out
