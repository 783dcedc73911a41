# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Attributes of the read-only modules (the C(*_info) modules and C(prometheus_query))."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Read-only; runs the same in check mode.
    support: full
  diff_mode:
    description: Nothing changes, so there is nothing to diff.
    support: none
"""
