# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_priorities``: the Kueue WorkloadPriorityClasses tenants may label their workloads with."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Priority
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

PRIORITY_KEYS = ("name", "value", "description")
# WorkloadPriorityClass.value: an int32, capped like PriorityClass (higher values are reserved for the system).
PRIORITY_MIN, PRIORITY_MAX = -2147483648, 1000000000
MAX_DESCRIPTION = 2048


def parse_priorities(check: Validator, value: t.Any) -> t.List[Priority]:
    out: t.List[Priority] = []
    for _index, path, data, name in check.named_items("gpuaas_priorities", value, PRIORITY_KEYS, "priority"):
        prio = check.integer(path + ".value", data.get("value"), PRIORITY_MIN, PRIORITY_MAX)
        description = data.get("description")
        if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION):
            check.err(path + ".description", "must be a string of at most %d characters" % MAX_DESCRIPTION)
            description = None
        if name and prio is not None:
            out.append(Priority(name, prio, description))
    return out
