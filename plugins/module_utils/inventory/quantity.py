# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes quantities, re-exported from their one definition in ``kube/quantity.py``.

Kept so that existing imports of ``inventory.quantity`` keep working; new code imports ``kube.quantity``.
"""

from __future__ import annotations

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.quantity import (  # pylint: disable=unused-import
    ACCELERATOR_PREFIXES,
    BINARY_SUFFIX,
    DECIMAL_SUFFIX,
    QUANTITY,
    QUANTITY_EXAMPLES,
    is_accelerator,
    normalize_quantity,
    parse_quantity,
    quantity_text,
    quantity_value,
)
