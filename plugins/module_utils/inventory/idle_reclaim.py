# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A check across sections (tenants, cohorts, priorities): can a tenant that scales to zero take its GPUs back?"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.priorities import tenant_priorities
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Cohort, Priority, Tenant
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator


def warn_unreclaimable_idle_quota(check: Validator, tenants: t.Sequence[Tenant], cohorts: t.Sequence[Cohort],
                                  priorities: t.Sequence[Priority]) -> None:
    """Warn when a tenant that scales to zero when idle could not take its GPUs back from borrowers.

    While it is at zero, other ClusterQueues of its cohort tree may borrow its unused nominal quota; on wake-up
    only its own ``reclaimWithinCohort`` lets Kueue preempt them (Kueue's default is Never; LowerPriority
    spares borrowers of equal or higher priority). ``lending_limit: 0`` on every accelerator keeps it unlent.
    """
    parents = {c.name: c.parent for c in cohorts}
    values = {p.name: p.value for p in priorities}

    def root(cohort: t.Optional[str]) -> t.Optional[str]:
        seen: t.Set[str] = set()
        while cohort and parents.get(cohort) and cohort not in seen:
            seen.add(cohort)
            cohort = parents[cohort]
        return cohort

    def best(tenant: Tenant) -> int:
        # a workload without a priority class has priority 0; compare the best each tenant may use
        return max([0] + [values[n] for n in tenant_priorities(tenant, priorities) if n in values])

    for i, tenant in enumerate(tenants):
        idle = [a.name for a in tenant.autoscaling + tenant.ray_reclaim if a.idle_window_seconds]
        if not tenant.present or not idle or not tenant.cohort:
            continue
        lent = [r for q in tenant.quotas for r, v in q.resources.items()
                if is_accelerator(r) and parse_quantity(v) > 0
                and parse_quantity(q.lending_limit.get(r, v)) > 0]
        if not lent:
            continue  # lending_limit 0 on every accelerator: nothing is ever lent
        tree = root(tenant.cohort)
        others = [o for o in tenants if o is not tenant and o.present and o.cohort and root(o.cohort) == tree]
        if not others:
            continue
        policy = tenant.preemption.reclaim_within_cohort or "Never"
        if policy == "Never":
            blocked = others
        elif policy == "LowerPriority":
            blocked = [o for o in others if best(o) >= best(tenant)]
        else:
            continue
        if not blocked:
            continue
        check.warn(
            "gpuaas_tenants[%d].preemption.reclaim_within_cohort: tenant %s scales %s to zero when idle, but with "
            "reclaim_within_cohort %s%s it cannot take its GPUs back from borrowers of equal or higher priority "
            "in cohort %s (%s): its nominal quota is not guaranteed after an idle period. Set "
            "preemption.reclaim_within_cohort: Any, or lending_limit: 0 on its GPU quotas to keep them unlent."
            % (i, tenant.name, ", ".join(idle), policy, " (Kueue's default)" if not tenant.preemption.reclaim_within_cohort else "",
               tree, ", ".join(sorted(o.name for o in blocked))))
