#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every figure in docs/benchmarks.md names the committed results file that holds it (issue 26).

The rule (stated at the top of docs/benchmarks.md too):

* A *figure* is a decimal number (``0.903``, ``14.5``), or any number followed by ``%`` or ``×`` — outside
  fenced code blocks and inline code, and not part of a version (``v0.19.2``, ``1.35.4``).
* A *citation* is an inline-code path that contains ``results/`` and ends in a file name with an extension
  (``bench/results/tenants-2026-12-02.json``); ``{a,b}`` lists and ``<placeholder>`` parts are expanded. It is
  valid when every file it names is in the repository (tracked by git; outside a git work tree, on disk): the
  path from the repository root or, for a path that does not start with ``bench/``, the one file under ``bench/``
  whose path ends with it. A file as an earlier commit held it is cited as ``git show <commit>:<path>`` and is
  valid when git has it.
* A citation covers the rest of its section: from the line it is on (a heading counts) to the next heading of
  any level. Every line that holds a figure — a table row, a paragraph or list line — must be covered by a valid
  citation above it in its section (or on the line itself).

    python bench/check_figures.py [docs/benchmarks.md]     # exit 1 and one line per uncovered figure

A cited file that does not exist fails on its own line, figure or not.
"""
from __future__ import annotations

import argparse
import fnmatch
import itertools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"

_CODE_SPAN = re.compile(r"`([^`]*)`")
_CITATION = re.compile(r"^[\w./{},<>*+-]*results/[\w./{},<>*+-]*\.[A-Za-z]+$")
_GIT_SHOW = re.compile(r"^git show ([0-9a-f]{7,40}):(\S*results/\S+\.[A-Za-z]+)$")
# a version (v0.19.2, 1.35.4) is not a figure: no leading "v" or "digit.", no trailing ".digit"
_DECIMAL = re.compile(r"(?<![\w.])(?<!v)\d+\.\d+(?![\w.]*\d)(?!\.\d)")
_WITH_UNIT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|×)")
_FIGURE = re.compile("%s|%s" % (_WITH_UNIT.pattern, _DECIMAL.pattern))
_HEADING = re.compile(r"^#{1,6}\s")


@dataclass(frozen=True)
class Problem:
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return "docs line %d: %s: %s" % (self.line, self.reason, self.text.strip()[:160])


def _expand(path: str) -> list[str]:
    """``a-{x,y}.json`` -> ``a-x.json``, ``a-y.json``; ``<variant>`` -> ``*`` (a glob)."""
    path = re.sub(r"<[^>]*>", "*", path)
    parts = re.split(r"\{([^}]*)\}", path)
    fixed, choices = parts[0::2], [p.split(",") for p in parts[1::2]]
    out = []
    for combo in itertools.product(*choices):
        out.append("".join(f + c for f, c in itertools.zip_longest(fixed, combo, fillvalue="")))
    return out


def _repo_files(repo: Path) -> list[str]:
    """The files git tracks (committed or staged), or, outside a git work tree, every file on disk."""
    proc = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True, check=False)
    if proc.returncode == 0 and (repo / ".git").exists():
        return proc.stdout.splitlines()
    return [str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()]


def _exists(path: str, files: list[str]) -> bool:
    if path.startswith("/") or ".." in Path(path).parts:
        return False
    if any(fnmatch.fnmatchcase(f, path) for f in files):
        return True
    if path.startswith("bench/"):
        return False
    matches = [f for f in files if f.startswith("bench/") and fnmatch.fnmatchcase(f, "*/" + path)]
    return len(matches) == 1 or (len(matches) > 1 and "*" in path)


def _in_git(commit: str, path: str, repo: Path) -> bool:
    proc = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", "%s:%s" % (commit, path)],
                          capture_output=True, check=False)
    return proc.returncode == 0


def citations(line: str) -> list[str]:
    return [span for span in _CODE_SPAN.findall(line) if _CITATION.match(span) or _GIT_SHOW.match(span)]


def valid(citation: str, repo: Path, files: list[str]) -> bool:
    shown = _GIT_SHOW.match(citation)
    if shown:
        return _in_git(shown.group(1), shown.group(2), repo)
    return all(_exists(p, files) for p in _expand(citation))


def figures(line: str) -> list[str]:
    """The figures of one line of prose or table (inline code removed first)."""
    text = _CODE_SPAN.sub(" ", line)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    return [m.group(0) for m in _FIGURE.finditer(text)]


def check(markdown: str, repo: Path = REPO) -> list[Problem]:
    problems: list[Problem] = []
    files = _repo_files(repo)
    covered = False
    fenced = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    ") and not line.strip().startswith(("|", "*", "-")):
            continue  # code: commands, not figures
        if _HEADING.match(line):
            covered = False
        cited = citations(line)
        missing = [c for c in cited if not valid(c, repo, files)]
        for cite in missing:
            problems.append(Problem(number, line, "cites `%s`, which is not in the repository" % cite))
        if cited and not missing:
            covered = True
        found = figures(line)
        if found and not covered:
            problems.append(Problem(number, line, "figure %s without a results file cited above it in its section"
                                    % ", ".join(found[:3])))
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("doc", nargs="?", default=str(DOC))
    args = ap.parse_args()
    problems = check(Path(args.doc).read_text(encoding="utf-8"))
    for problem in problems:
        print(problem)
    print("%d figure line(s) without a results file" % len(problems) if problems else "every figure cites a results file")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
