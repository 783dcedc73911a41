# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_priorities``: the Kueue WorkloadPriorityClasses tenants may label their workloads with.

Which classes a tenant may use is defined here once (issue 22 item 7): its ``allowed_priorities`` when the entry
names them, else the classes marked ``open_to_tenants``, else the lowest class(es) — never the top class by
default. The tenancy builders write the result on the tenant namespaces, where the admission policy reads it.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Priority, Tenant
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

PRIORITY_KEYS = ("name", "value", "description", "open_to_tenants")
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
        open_to_tenants = check.boolean(path + ".open_to_tenants", data.get("open_to_tenants", False), False)
        if name and prio is not None:
            out.append(Priority(name, prio, description, open_to_tenants))
    return out


def default_priorities(priorities: t.Sequence[Priority]) -> t.List[str]:
    """The classes a tenant without ``allowed_priorities`` may use, in inventory order: those marked
    ``open_to_tenants``; when none is marked, the lowest class (every class sharing the lowest value).

    The lowest class is the one that cannot take anything from anybody: within a ClusterQueue and across a cohort,
    Kueue preempts (``LowerPriority``) and borrows over (``borrow_within_cohort``) only workloads of a lower
    priority, so a default tenant can never push out another tenant's work with it.
    """
    marked = [p.name for p in priorities if p.open_to_tenants]
    if marked or not priorities:
        return marked
    lowest = min(p.value for p in priorities)
    return [p.name for p in priorities if p.value == lowest]


def tenant_priorities(tenant: Tenant, priorities: t.Sequence[Priority]) -> t.List[str]:
    """The classes ``tenant`` may use: the ones its entry names, else ``default_priorities``."""
    if tenant.allowed_priorities is not None:
        return list(tenant.allowed_priorities)
    return default_priorities(priorities)


def top_priorities(priorities: t.Sequence[Priority]) -> t.List[str]:
    """The class(es) of the highest value, when there is a lower one too (one value only: no class is above another)."""
    values = {p.value for p in priorities}
    if len(values) < 2:
        return []
    return [p.name for p in priorities if p.value == max(values)]


def warn_top_priority_allowed(check: Validator, tenants: t.Sequence[Tenant], priorities: t.Sequence[Priority]) -> None:
    """Warn about every present tenant that may use the top class: its workloads preempt everybody's.

    A top class marked ``open_to_tenants`` is one warning on the class (it reaches every tenant without a list);
    a tenant whose ``allowed_priorities`` names it is one warning on the tenant.
    """
    top = top_priorities(priorities)
    if not top:
        return
    defaulted = [x.name for x in tenants if x.present and x.allowed_priorities is None]
    for index, prio in enumerate(priorities):
        if prio.name in top and prio.open_to_tenants and defaulted:
            check.warn("gpuaas_priorities[%d].open_to_tenants: %s is the highest priority class and open to every "
                       "tenant without allowed_priorities (%s): their workloads outrank every other tenant's (Kueue "
                       "admits them first and preempts lower-priority work for them). Unmark it and name it in the "
                       "allowed_priorities of the tenants that need it."
                       % (index, prio.name, ", ".join(defaulted)))
    for index, tenant in enumerate(tenants):
        named = [p for p in tenant.allowed_priorities or [] if p in top]
        if tenant.present and named:
            check.warn("gpuaas_tenants[%d].allowed_priorities: tenant %s may use %s, the highest priority class: its "
                       "workloads outrank every other tenant's (Kueue admits them first and preempts lower-priority "
                       "work for them). Leave it out unless this tenant's work must win "
                       "(e.g. production serving)." % (index, tenant.name, ", ".join(named)))
