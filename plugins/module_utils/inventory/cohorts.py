# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_cohorts``: the Kueue Cohort tree tenants borrow and lend quota in."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Cohort
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

COHORT_KEYS = ("name", "parent", "fair_sharing_weight")


def parse_cohorts(check: Validator, value: t.Any) -> t.List[Cohort]:
    out: t.List[Cohort] = []
    for _index, path, data, name in check.named_items("gpuaas_cohorts", value, COHORT_KEYS, "cohort"):
        parent = data.get("parent")
        if parent is not None:
            parent = check.name(path + ".parent", parent)
        weight = check.weight(path + ".fair_sharing_weight", data.get("fair_sharing_weight"))
        if name:
            out.append(Cohort(name, parent, weight))
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
