# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_cohorts``: the Kueue Cohort tree tenants borrow and lend quota in.

A cohort may hold quota itself (``quotas``, the Cohort's ``spec.resourceGroups``): a shared pool on top of its
members' nominal quotas, e.g. a department budget that its teams (tenants with zero nominal quota) borrow
(Kueue KEP-1714's organisation -> departments -> teams). Its borrowing/lending limits bound what the cohort's
subtree borrows from and lends to its parent.
"""

from __future__ import annotations

import typing as t
from decimal import Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quotas import COHORT_LIMITS_NEED, parse_quotas
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Cohort, Tenant
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

COHORT_KEYS = ("name", "parent", "fair_sharing_weight", "quotas")


def parse_cohorts(check: Validator, value: t.Any, flavors: t.Set[str]) -> t.List[Cohort]:
    """The cohorts with their quotas (flavors of ``flavors``; limits only under a parent)."""
    out: t.List[Cohort] = []
    for _index, path, data, name in check.named_items("gpuaas_cohorts", value, COHORT_KEYS, "cohort"):
        parent = data.get("parent")
        if parent is not None:
            parent = check.name(path + ".parent", parent)
        weight = check.weight(path + ".fair_sharing_weight", data.get("fair_sharing_weight"))
        quotas = parse_quotas(check, path, data.get("quotas"), flavors, parent, COHORT_LIMITS_NEED, cap_lending=False)
        if name:
            out.append(Cohort(name, parent, weight, quotas))
    # a problem about a cohort points at its first entry (a duplicate is reported already)
    index = {c.name: i for i, c in reversed(list(enumerate(out)))}
    _unknown_parents(check, out, index)
    _cycles(check, out, index)
    return out


def _unknown_parents(check: Validator, cohorts: t.Sequence[Cohort], index: t.Mapping[str, int]) -> None:
    known = {c.name for c in cohorts}
    for i, cohort in enumerate(cohorts):
        if cohort.parent and cohort.parent not in known:
            check.unknown_ref("gpuaas_cohorts[%d].parent" % index.get(cohort.name, i), cohort.parent, known, "parent cohort")


def _cycles(check: Validator, cohorts: t.Sequence[Cohort], index: t.Mapping[str, int]) -> None:
    """Follow each cohort's parents; report each cycle once, at the cohort it was first found from."""
    parents = {c.name: c.parent for c in cohorts}
    reported: t.Set[str] = set()
    for cohort in cohorts:
        chain = [cohort.name]
        current = parents.get(cohort.name)
        while current and current in parents:
            if current in chain:
                cycle = chain[chain.index(current):] + [current]
                key = "->".join(sorted(set(cycle)))
                if key not in reported:
                    reported.add(key)
                    check.err("gpuaas_cohorts[%d].parent" % index[cohort.name],
                              "cohort cycle %s; a cohort tree must end at a root without parent" % " -> ".join(cycle))
                break
            chain.append(current)
            current = parents.get(current)


def check_cohort_lending(check: Validator, cohorts: t.Sequence[Cohort], tenants: t.Sequence[Tenant]) -> None:
    """A cohort's lending limit bounds what its whole subtree lends to its parent, so Kueue accepts one above the
    cohort's own nominal quota; above what the subtree holds (its own nominal plus that of every cohort and present
    tenant under it) it is a typo: nothing could ever be lent that far."""
    parents = {c.name: c.parent for c in cohorts}
    index = {c.name: i for i, c in reversed(list(enumerate(cohorts)))}

    def ancestry(name: t.Optional[str]) -> t.List[str]:
        chain: t.List[str] = []
        while name and name in parents and name not in chain:
            chain.append(name)
            name = parents[name]
        return chain

    held: t.Dict[t.Tuple[str, str, str], Decimal] = {}  # (cohort, flavor, resource) -> subtree nominal
    owners = [(ancestry(c.name), c.quotas) for c in cohorts]
    owners += [(ancestry(x.cohort), x.quotas) for x in tenants if x.present and x.cohort]
    for chain, quotas in owners:
        for quota in quotas:
            for res, amount in quota.resources.items():
                for name in chain:
                    key = (name, quota.flavor, res)
                    held[key] = held.get(key, Decimal(0)) + parse_quantity(amount)
    for cohort in cohorts:
        for k, quota in enumerate(cohort.quotas):
            for res, limit in quota.lending_limit.items():
                if res not in quota.resources:
                    continue  # reported by parse_quotas (a limit needs a nominal quota, 0 included)
                have = held.get((cohort.name, quota.flavor, res), Decimal(0))
                if parse_quantity(limit) > have:
                    check.err("gpuaas_cohorts[%d].quotas[%d].lending_limit.%s" % (index[cohort.name], k, res),
                              "lending limit %s is above what cohort %s's subtree holds of %s on flavor %s (%s: its own "
                              "nominal quota plus its members'); lower it, or raise the quotas it lends"
                              % (limit, cohort.name, res, quota.flavor, _amount(have)))


def _amount(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())
