# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A tenant's ``quotas`` (nominal, borrowing and lending per flavor) and ``preemption`` (how it takes quota back)."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_rules import (
    MAX_FLAVORS_TOTAL,
    MAX_PER_GROUP,
    MAX_RESOURCE_GROUPS,
    lends_above_nominal,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import (
    BORROW_POLICIES,
    RECLAIM_POLICIES,
    WITHIN_CQ_POLICIES,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import QUALIFIED_NAME
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity, quantity_text
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Preemption, Quota
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

QUOTA_KEYS = ("flavor", "resources", "borrowing_limit", "lending_limit")
PREEMPTION_KEYS = ("reclaim_within_cohort", "within_cluster_queue", "borrow_within_cohort")
BORROW_KEYS = ("policy", "max_priority_threshold")


# Why a quota's borrowing/lending limits cannot be set, per owner: Kueue's webhook refuses them on a ClusterQueue
# without a cohort and on a Cohort without a parent (there is nothing to borrow from or lend to).
TENANT_LIMITS_NEED = "needs the tenant to be in a cohort (set gpuaas_tenants[].cohort)"
COHORT_LIMITS_NEED = ("needs the cohort to have a parent: a Cohort's limits bound what its subtree borrows from and lends "
                      "to its parent, and Kueue refuses them on a root Cohort (set gpuaas_cohorts[].parent)")


def parse_quotas(check: Validator, owner_path: str, value: t.Any, flavors: t.Set[str],
                 limits_allowed: t.Optional[str], limits_need: str = TENANT_LIMITS_NEED,
                 cap_lending: bool = True) -> t.List[Quota]:
    """One quota per flavor of a tenant (``gpuaas_tenants[i]``) or a cohort (``gpuaas_cohorts[i]``).

    Borrowing and lending limits need ``limits_allowed`` (the tenant's cohort, the cohort's parent; ``limits_need``
    says so otherwise) and a nominal quota of the resource. ``cap_lending``: a lending limit may not exceed the
    nominal quota (a ClusterQueue's rule; a Cohort's subtree may lend its members' quota too, checked across the
    tree by ``cohorts.check_cohort_lending``)."""
    out: t.List[Quota] = []
    seen: t.Dict[str, int] = {}
    for k, path, data in check.items(owner_path + ".quotas", value, QUOTA_KEYS):
        flavor = data.get("flavor")
        if not flavor:
            check.err(path + ".flavor", "is required")
            continue
        if flavor not in flavors:
            check.unknown_ref(path + ".flavor", str(flavor), flavors, "flavor")
        if flavor in seen:
            check.err(path + ".flavor", "flavor %r is listed twice (also quotas[%d]); merge the resources" % (flavor, seen[flavor]))
            continue
        seen[flavor] = k
        resources = resource_map(check, path + ".resources", data.get("resources"))
        if data.get("resources") is None:
            check.err(path + ".resources", "is required (e.g. {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti})")
        borrowing = resource_map(check, path + ".borrowing_limit", data.get("borrowing_limit"))
        lending = resource_map(check, path + ".lending_limit", data.get("lending_limit"))
        for label, limits in (("borrowing_limit", borrowing), ("lending_limit", lending)):
            if limits and not limits_allowed:
                check.err("%s.%s" % (path, label), "%s %s" % (label, limits_need))
            for res in limits:
                if res not in resources:
                    check.err("%s.%s.%s" % (path, label, res), "resource %r has no nominal quota in resources" % res)
        for res, limit in lending.items():
            if cap_lending and res in resources and lends_above_nominal(limit, resources[res]):
                check.err("%s.lending_limit.%s" % (path, res),
                          "lending limit %s is above the nominal quota %s" % (limit, resources[res]))
        out.append(Quota(str(flavor), resources, borrowing, lending))
    check_group_counts(check, owner_path + ".quotas", out)
    return out


def check_group_counts(check: Validator, path: str, quotas: t.Sequence[Quota]) -> None:
    """Kueue's CRD limits on the resourceGroups these quotas become (flavors sharing a resource form one group, as
    ``manifests.tenancy.quota_resource_groups`` builds them): checked here so that an inventory beyond them is refused
    before the first write, not by the API server in the middle of a run."""
    groups: t.List[t.Tuple[t.Set[str], t.List[str]]] = []  # (resources, flavors) per group
    for quota in quotas:
        touching = [g for g in groups if g[0] & set(quota.resources)]
        merged: t.Tuple[t.Set[str], t.List[str]] = (set(quota.resources), [quota.flavor])
        for group in touching:
            merged[0].update(group[0])
            merged[1].extend(group[1])
            groups.remove(group)
        groups.append(merged)
    if len(groups) > MAX_RESOURCE_GROUPS:
        check.err(path, "these quotas make %d resource groups (flavors sharing no resource are separate groups); Kueue "
                  "allows at most %d: give the flavors common resources or split the tenant" % (len(groups), MAX_RESOURCE_GROUPS))
    for resources, flavors in groups:
        if len(flavors) > MAX_PER_GROUP:
            check.err(path, "%d flavors share the resources %s; Kueue allows at most %d flavors per resource group"
                      % (len(flavors), ", ".join(sorted(resources)), MAX_PER_GROUP))
        if len(resources) > MAX_PER_GROUP:
            check.err(path, "a resource group of flavors %s covers %d resources; Kueue allows at most %d"
                      % (", ".join(flavors), len(resources), MAX_PER_GROUP))
    if len(quotas) > MAX_FLAVORS_TOTAL:
        check.err(path, "%d flavors; Kueue allows at most %d in one ClusterQueue or Cohort" % (len(quotas), MAX_FLAVORS_TOTAL))


def resource_map(check: Validator, path: str, value: t.Any) -> t.Dict[str, str]:
    """``{resource name: non-negative quantity}`` as canonical text; invalid entries are reported and left out."""
    data = check.mapping(path, value)
    out: t.Dict[str, str] = {}
    for res, amount in (data or {}).items():
        rpath = "%s.%s" % (path, res)
        if not isinstance(res, str) or not QUALIFIED_NAME.match(res):
            check.err(rpath, "%r is not a Kubernetes resource name (e.g. nvidia.com/gpu, cpu, memory)" % (res,))
            continue
        try:
            number = parse_quantity(amount)
        except ValueError as exc:
            check.err(rpath, str(exc))
            continue
        if number < 0:
            check.err(rpath, "must not be negative, got %s" % amount)
            continue
        out[res] = quantity_text(amount)
    return out


def parse_preemption(check: Validator, path: str, value: t.Any) -> Preemption:
    data = check.mapping(path, value, PREEMPTION_KEYS)
    if not data:
        return Preemption()
    out = Preemption(
        reclaim_within_cohort=check.enum(path + ".reclaim_within_cohort", data.get("reclaim_within_cohort"), RECLAIM_POLICIES),
        within_cluster_queue=check.enum(path + ".within_cluster_queue", data.get("within_cluster_queue"), WITHIN_CQ_POLICIES),
    )
    borrow = check.mapping(path + ".borrow_within_cohort", data.get("borrow_within_cohort"), BORROW_KEYS)
    if borrow:
        out.borrow_policy = check.enum(path + ".borrow_within_cohort.policy", borrow.get("policy"), BORROW_POLICIES)
        threshold = borrow.get("max_priority_threshold")
        if threshold is not None:  # Kueue's maxPriorityThreshold is an int32
            out.borrow_max_priority_threshold = check.integer(path + ".borrow_within_cohort.max_priority_threshold",
                                                              threshold, -2 ** 31, 2 ** 31 - 1)
        if out.reclaim_within_cohort in (None, "Never") and out.borrow_policy not in (None, "Never"):
            check.err(path + ".borrow_within_cohort.policy",
                      "needs reclaim_within_cohort LowerPriority or Any (Kueue refuses reclaimWithinCohort=Never with borrowWithinCohort)")
    return out
