# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tenancy of a validated ``TenantModel`` as the quota plan replays it: a forest of cohorts and tenants per
accelerator flavor, the fair share (hierarchical weighted water-filling) Kueue's fair sharing aims at, and the quota
a tenant may still use (Kueue's hierarchical quota arithmetic). Pure.

This is the one implementation: the fair-sharing benchmark (``bench/fairness/model.py``, ``sim.py``) builds its
trees from raw inventories with ``link`` and replays with ``scheduler.simulate``.

A *pool* is a flavor that carries an accelerator quota (``kube.quantity.is_accelerator``); CPU and memory quotas
play no part. A node's ``nominal`` is its own quota: a tenant's (ClusterQueue), or a cohort's
(``gpuaas_cohorts[].quotas``, the Cohort's ``spec.resourceGroups``, e.g. a department budget).

Entitlement at a cohort: each child first gets ``min(demand, guaranteed)`` (guaranteed = the nominal quota of its
subtree, the cohort's own quota included); what is left — a cohort's own quota among it — is shared in proportion
to the children's fair-sharing weights (default 1), never above a child's demand; the result is handed down the
same way. A tenant without a cohort is its own root.

Available quota (``available``) follows Kueue's resource nodes (pkg/cache/resource_node.go): a node's subtree quota
is its own nominal quota plus what each child lends (the child's subtree quota less the part its lending limit keeps
back); the usage a child stores in its parent is what it uses beyond the part it keeps; a root may use its subtree
quota, a child what it keeps plus what its parent has left, bounded by its borrowing limit. Both limits apply at
tenants and at cohorts with a parent.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Quota
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.quantity import is_accelerator, parse_quantity

EPS = 1e-9
BISECTION_STEPS = 100   # enough for adjacent floats whatever the scale of the share


@dataclass
class Node:
    name: str
    weight: float = 1.0
    parent: t.Optional[str] = None
    tenant: bool = False
    nominal: t.Dict[str, float] = field(default_factory=dict)          # flavor -> own nominal quota
    borrowing_limit: t.Dict[str, float] = field(default_factory=dict)  # flavor -> limit (absent: unlimited)
    lending_limit: t.Dict[str, float] = field(default_factory=dict)    # flavor -> limit (absent: all of it)
    reclaim: bool = False   # may preempt other tenants of its cohort (reclaimWithinCohort other than Never)
    children: t.List["Node"] = field(default_factory=list)
    up: t.Optional["Node"] = field(default=None, repr=False, compare=False)   # the parent cohort's node

    def guaranteed(self, pool: str) -> float:
        """The nominal quota of the subtree: a cohort's own quota belongs to it and is shared by its children by
        weight, so it counts for the cohort but is no child's guarantee."""
        own = self.nominal.get(pool, 0.0)
        if self.tenant:
            return own
        return own + sum(c.guaranteed(pool) for c in self.children)

    def subtree_quota(self, pool: str) -> float:
        """Kueue's SubtreeQuota: own nominal quota plus what the children lend."""
        own = self.nominal.get(pool, 0.0)
        if self.tenant:
            return own
        return own + sum(c.subtree_quota(pool) - c.kept(pool) for c in self.children)

    def kept(self, pool: str) -> float:
        """Kueue's guaranteedQuota: the part of the subtree quota the lending limit keeps from the parent."""
        if pool in self.lending_limit:
            return max(0.0, self.subtree_quota(pool) - self.lending_limit[pool])
        return 0.0

    def lendable(self, pool: str) -> float:
        """What of its own nominal quota a tenant lends to its cohort (Kueue: lendingLimit, else all of it)."""
        nominal = self.nominal.get(pool, 0.0)
        return min(nominal, self.lending_limit.get(pool, nominal))

    def usage(self, pool: str, use: t.Mapping[str, float]) -> float:
        """Kueue's Usage: a tenant's usage; a cohort's, what its children use beyond the parts they keep."""
        if self.tenant:
            return float(use.get(self.name, 0.0))
        return sum(max(0.0, c.usage(pool, use) - c.kept(pool)) for c in self.children)

    def tenants(self) -> t.List["Node"]:
        if self.tenant:
            return [self]
        out: t.List[Node] = []
        for c in self.children:
            out.extend(c.tenants())
        return out


@dataclass
class Tree:
    roots: t.List[Node]
    pools: t.Dict[str, str]            # flavor -> accelerator resource name
    tenant_nodes: t.Dict[str, Node]

    def root_of(self, tenant: str) -> Node:
        for root in self.roots:
            if any(x.name == tenant for x in root.tenants()):
                return root
        raise KeyError(tenant)

    @property
    def tenant_names(self) -> t.List[str]:
        return list(self.tenant_nodes)


def available(node: Node, pool: str, use: t.Mapping[str, float]) -> float:
    """How much of ``pool`` ``node`` may still use with the tenants' usage ``use`` (Kueue's ``available``)."""
    if node.up is None:
        return node.subtree_quota(pool) - node.usage(pool, use)
    from_parent = available(node.up, pool, use)
    if pool in node.borrowing_limit:
        stored = node.subtree_quota(pool) - node.kept(pool)
        used = max(0.0, node.usage(pool, use) - node.kept(pool))
        from_parent = min(stored - used + node.borrowing_limit[pool], from_parent)
    return max(0.0, node.kept(pool) - node.usage(pool, use)) + from_parent


def link(cohorts: t.Sequence[Node], tenants: t.Sequence[Node], pools: t.Dict[str, str]) -> Tree:
    """The forest of ``cohorts`` and ``tenants`` by their ``parent`` names (an unknown parent: a root); cohorts
    without a tenant below them play no part."""
    by_name = {c.name: c for c in cohorts}
    roots: t.List[Node] = []
    for node in list(cohorts) + list(tenants):
        parent = by_name.get(node.parent) if node.parent else None
        node.up = parent
        if parent is not None:
            parent.children.append(node)
        else:
            roots.append(node)
    return Tree([r for r in roots if r.tenants()], pools, {x.name: x for x in tenants})


def _number(value: t.Any) -> float:
    return float(parse_quantity(value))


def _add_quotas(node: Node, quotas: t.Sequence[Quota], pools: t.Dict[str, str]) -> None:
    for quota in quotas:
        for res, amount in quota.resources.items():
            if not is_accelerator(res):
                continue
            pools.setdefault(quota.flavor, res)
            node.nominal[quota.flavor] = node.nominal.get(quota.flavor, 0.0) + _number(amount)
            if res in quota.borrowing_limit:
                node.borrowing_limit[quota.flavor] = _number(quota.borrowing_limit[res])
            if res in quota.lending_limit:
                node.lending_limit[quota.flavor] = _number(quota.lending_limit[res])


def tree_from_model(model: TenantModel) -> Tree:
    """Cohorts (with their own quotas) and present tenants as a forest; pools are the flavors that carry an
    accelerator quota."""
    pools: t.Dict[str, str] = {}
    cohorts: t.List[Node] = []
    for c in model.cohorts:
        w = c.fair_sharing_weight
        node = Node(c.name, 1.0 if w is None else _number(w), c.parent)
        _add_quotas(node, c.quotas, pools)
        cohorts.append(node)
    tenants: t.List[Node] = []
    for tenant in model.present_tenants:
        w = tenant.fair_sharing_weight
        node = Node(tenant.name, 1.0 if w is None else _number(w), tenant.cohort, tenant=True,
                    reclaim=tenant.preemption.reclaim_within_cohort not in (None, "Never"))
        _add_quotas(node, tenant.quotas, pools)
        tenants.append(node)
    return link(cohorts, tenants, pools)


def waterfill(cap: float, guaranteed: t.List[float], demand: t.List[float], weight: t.List[float]) -> t.List[float]:
    """Share ``cap``: child i gets min(d_i, g_i + w_i * lam), lam >= 0 chosen so the sum is min(cap, sum d).

    Children of weight 0 get their guarantee, and only what nobody of positive weight wants (equally)."""
    n = len(demand)
    total = min(cap, sum(demand))
    base = [min(d, g) for d, g in zip(demand, guaranteed)]
    if sum(base) >= total - 1e-12:
        s = sum(base)
        return [b * total / s if s > 0 else 0.0 for b in base]

    def alloc(lam: float) -> t.List[float]:
        return [min(d, g + wi * lam) if wi > 0 else min(d, g) for d, g, wi in zip(demand, guaranteed, weight)]

    out = alloc(float("inf"))
    if sum(out) <= total + 1e-12:
        rest = total - sum(out)
        zero = [i for i in range(n) if weight[i] <= 0]
        if rest > 1e-12 and zero:
            extra = waterfill(rest, [0.0] * len(zero), [demand[i] - out[i] for i in zero], [1.0] * len(zero))
            for i, e in zip(zero, extra):
                out[i] += e
        return out
    lo, hi = 0.0, 1.0
    while sum(alloc(hi)) < total:
        hi *= 2.0
    for _step in range(BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        if sum(alloc(mid)) < total:
            lo = mid
        else:
            hi = mid
    return alloc(hi)


def entitlements(tree: Tree, pool: str, demand: t.Mapping[str, float],
                 capacity: t.Optional[float] = None) -> t.Dict[str, float]:
    """The fair allocation of ``pool`` per tenant for the per-tenant ``demand`` (GPUs); ``capacity`` caps the sum."""
    out: t.Dict[str, float] = {x: 0.0 for x in tree.tenant_nodes}

    def subtree_demand(node: Node) -> float:
        if node.tenant:
            return float(demand.get(node.name, 0.0))
        return sum(subtree_demand(c) for c in node.children)

    def descend(node: Node, cap: float) -> None:
        if node.tenant:
            out[node.name] = cap
            return
        kids = node.children
        shares = waterfill(cap, [k.guaranteed(pool) for k in kids], [subtree_demand(k) for k in kids],
                           [k.weight for k in kids])
        for k, s in zip(kids, shares):
            descend(k, s)

    caps = [min(root.guaranteed(pool), subtree_demand(root)) for root in tree.roots]
    if capacity is not None and sum(caps) > capacity:
        caps = [c * capacity / sum(caps) for c in caps]
    for root, cap in zip(tree.roots, caps):
        descend(root, cap)
    return out
