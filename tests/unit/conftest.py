# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make ``ansible_collections.gpuaas.platform`` importable from a plain checkout."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _ensure_collection_path() -> None:
    parts = ROOT.split(os.sep)
    if parts[-3:] == ["ansible_collections", "gpuaas", "platform"]:
        base = os.sep.join(parts[:-3])
    else:
        # one link per checkout: two checkouts (worktrees, a CI clone beside a dev tree) testing at once must
        # never import each other's code through a shared link
        checkout = hashlib.sha256(ROOT.encode("utf-8")).hexdigest()[:10]
        base = os.path.join(tempfile.gettempdir(), "gpuaas-unit-%d-%s" % (os.getuid(), checkout))
        link = os.path.join(base, "ansible_collections", "gpuaas", "platform")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.realpath(link) != ROOT:
            tmp = link + ".%d" % os.getpid()
            os.symlink(ROOT, tmp)
            os.replace(tmp, link)
    if base not in sys.path:
        sys.path.insert(0, base)
    # ansible_collections must resolve to the namespace package containing gpuaas, not only the one in site-packages
    mod = sys.modules.get("ansible_collections")
    if mod is not None and hasattr(mod, "__path__"):
        path = os.path.join(base, "ansible_collections")
        if path not in list(mod.__path__):
            mod.__path__.append(path)


_ensure_collection_path()
