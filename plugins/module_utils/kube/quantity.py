# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes quantities (``8``, ``500m``, ``64Gi``, ``1e3``) and accelerator resource names, defined once.

A leaf (standard library only) so that ``kube/`` needs nothing from the inventory: used by the apply engine's
comparison (``"1Ti" == "1099511627776"`` when comparing live and desired), the inventory model (validation,
capacity), the Kueue builders (option checks), the admission policy and the utilization report.
"""

from __future__ import annotations

import re
import typing as t
from decimal import Decimal

QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
BINARY_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
DECIMAL_SUFFIX = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
                  "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
                  "P": Decimal("1e15"), "E": Decimal("1e18")}
QUANTITY_EXAMPLES = "examples: 8, 500m, 96, 1Ti, 512Gi"

# Resource-name prefixes of accelerators (GPU, MIG slices) whose quota is checked against node capacity
# and which the admission policy keeps inside Kueue.
ACCELERATOR_PREFIXES = ("nvidia.com/", "amd.com/", "gpu.intel.com/")


def parse_quantity(value: t.Any) -> Decimal:
    """Parse a Kubernetes quantity into a Decimal; surrounding white space is ignored.

    Raises ``ValueError`` with a readable reason when it is not a quantity.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("%r is not a quantity" % (value,))
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    match = QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError("%r is not a Kubernetes quantity (%s)" % (value, QUANTITY_EXAMPLES))
    base, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in BINARY_SUFFIX:
        return base * BINARY_SUFFIX[suffix]
    if suffix in DECIMAL_SUFFIX:
        return base * DECIMAL_SUFFIX[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


def quantity_value(value: t.Any) -> t.Optional[Decimal]:
    """Decimal value of a quantity as the API server writes it (a number, or a string without white
    space); None when ``value`` is not one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if isinstance(value, str) and value != value.strip():
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def quantity_text(value: t.Any) -> str:
    """The canonical text the inventory model keeps for a quantity: whole numbers as their decimal string."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def normalize_quantity(value: t.Any) -> t.Any:
    """Quantities are sent as strings (ints become '8'); other values are returned unchanged."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def is_accelerator(resource: str) -> bool:
    """GPU-like resources whose quota is checked against node capacity (``nvidia.com/gpu``, MIG, ...)."""
    return resource.startswith(ACCELERATOR_PREFIXES)
