# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sanity checks that depend on the ansible-core / Python version, for make test-matrix.

Run with the Python of a matrix venv, the collection directory as argument:
  compile    every .py file of the collection compiles with this Python
  import     every module and module_util imports with this ansible-core
  doc        ansible-doc renders every module and every role's argument spec
  syntax     every playbook passes ansible-playbook --syntax-check
The last line printed is a summary; the exit status is 1 when any check failed.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path


def main() -> int:
    coll = Path(sys.argv[1]).resolve()
    base = coll.parents[2]  # .../ansible_collections/gpuaas/platform -> parent of ansible_collections
    sys.path.insert(0, str(base))
    bindir = Path(sys.executable).parent
    problems: list[str] = []
    counts = {"compile": 0, "import": 0, "doc": 0, "syntax": 0}

    for path in sorted(coll.rglob("*.py")):
        if "tests/output" in str(path):
            continue
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            counts["compile"] += 1
        except SyntaxError as exc:
            problems.append("compile %s: %s" % (path.relative_to(coll), exc))

    for sub in ("plugins/module_utils", "plugins/modules"):
        for path in sorted((coll / sub).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            name = "ansible_collections.gpuaas.platform." + ".".join(path.relative_to(coll).with_suffix("").parts)
            try:
                importlib.import_module(name)
                counts["import"] += 1
            except Exception:  # pylint: disable=broad-except
                problems.append("import %s: %s" % (name, traceback.format_exc(limit=3)))

    env = dict(os.environ, ANSIBLE_DEPRECATION_WARNINGS="false")
    modules = sorted(p.stem for p in (coll / "plugins/modules").glob("*.py") if p.stem != "__init__")
    proc = subprocess.run([str(bindir / "ansible-doc"), "--json", "-t", "module"] + ["gpuaas.platform.%s" % m for m in modules],
                          capture_output=True, text=True, env=env, check=False)
    docs = {}
    if proc.returncode == 0:
        docs = json.loads(proc.stdout)
    for m in modules:
        fqcn = "gpuaas.platform.%s" % m
        if fqcn in docs and docs[fqcn].get("doc"):
            counts["doc"] += 1
            continue
        # one broken module fails the whole batch: ask for this one alone to say which
        one = subprocess.run([str(bindir / "ansible-doc"), "--json", "-t", "module", fqcn],
                             capture_output=True, text=True, env=env, check=False)
        if one.returncode == 0 and (json.loads(one.stdout).get(fqcn) or {}).get("doc"):
            counts["doc"] += 1
        else:
            problems.append("ansible-doc module %s: %s" % (m, one.stderr[-800:]))
    roles = sorted(p.name for p in (coll / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists())
    for role in roles:
        proc = subprocess.run([str(bindir / "ansible-doc"), "--json", "-t", "role", "gpuaas.platform.%s" % role],
                              capture_output=True, text=True, env=env, check=False)
        if proc.returncode == 0 and json.loads(proc.stdout).get("gpuaas.platform.%s" % role):
            counts["doc"] += 1
        else:
            problems.append("ansible-doc role %s: %s" % (role, proc.stderr[-800:]))

    for pb in sorted((coll / "playbooks").glob("*.yml")):
        proc = subprocess.run([str(bindir / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(pb)],
                              capture_output=True, text=True, env=env, cwd=str(coll), check=False)
        if proc.returncode == 0:
            counts["syntax"] += 1
        else:
            problems.append("syntax-check %s: %s" % (pb.name, (proc.stdout + proc.stderr)[-800:]))

    for p in problems:
        print("PROBLEM", p)
    print("%d problem(s); compiled %d, imported %d, documented %d, syntax-checked %d"
          % (len(problems), counts["compile"], counts["import"], counts["doc"], counts["syntax"]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
