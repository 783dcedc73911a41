# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``kube/`` is generic: it imports nothing from the inventory, the manifests or the modules (issue 21)."""

from __future__ import annotations

import os
import re

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import quantity as inventory_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import quantity

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KUBE = os.path.join(ROOT, "plugins", "module_utils", "kube")
FOREIGN = re.compile(r"module_utils\.(inventory|manifests|observe)\b|plugins\.modules\b")


def test_kube_imports_nothing_domain_specific():
    offenders = []
    for name in sorted(os.listdir(KUBE)):
        if name.endswith(".py"):
            with open(os.path.join(KUBE, name)) as handle:
                offenders.extend("%s: %s" % (name, line.strip()) for line in handle
                                 if line.lstrip().startswith(("from ", "import ")) and FOREIGN.search(line))
    assert offenders == []


def test_inventory_quantity_is_the_kube_quantity():
    for name in ("parse_quantity", "quantity_value", "quantity_text", "normalize_quantity", "is_accelerator",
                 "ACCELERATOR_PREFIXES", "QUANTITY_EXAMPLES"):
        assert getattr(inventory_quantity, name) is getattr(quantity, name), name


def test_importing_kube_leaves_tls_warnings_on():
    """Issue 22 item 9: importing the collection's kube/ code must not silence urllib3's InsecureRequestWarning for
    the whole process; only a connection with validate_certs false silences it."""
    import subprocess
    import sys

    code = ("import warnings, urllib3\n"
            "from ansible_collections.gpuaas.platform.plugins.module_utils.kube import client  # noqa\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.warn('unverified', urllib3.exceptions.InsecureRequestWarning)\n"
            "print(len(seen))\n")
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, check=True,
                         env=dict(__import__("os").environ, PYTHONPATH=":".join(sys.path)))
    assert out.stdout.strip() == "1", (out.stdout, out.stderr)
