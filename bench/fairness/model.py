# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's tenancy as a tree, the three variants, and hierarchical weighted water-filling.

Everything here is pure (no I/O except reading the inventory file) so the unit tests can check it by hand.

Entitlement (what "fair" means in this benchmark, the same notion as Kueue's fair sharing): at every cohort, each
child first gets ``min(demand, guaranteed)`` where guaranteed is the nominal quota of its subtree; what is left is
shared in proportion to the children's fair-sharing weights, never more than a child's demand (water-filling). The
result at a cohort is handed down to its children the same way. A tenant (ClusterQueue) without a cohort is its own
root: it can use its nominal quota and nothing more.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import yaml

INVENTORY = Path(__file__).with_name("inventory.yml")
VARIANTS = ("tenancy", "static", "weights1")


@dataclass
class Node:
    name: str
    weight: float = 1.0
    parent: Optional[str] = None
    tenant: bool = False
    # pool (flavor) -> nominal quota: a tenant's, or a cohort's own (gpuaas_cohorts[].quotas, Cohort resourceGroups)
    nominal: Dict[str, float] = field(default_factory=dict)
    children: List["Node"] = field(default_factory=list)

    def guaranteed(self, pool: str) -> float:
        """The nominal quota of the subtree: a cohort's own quota belongs to it and is shared by its children by
        weight, so it counts for the cohort but is no child's guarantee."""
        own = self.nominal.get(pool, 0.0)
        if self.tenant:
            return own
        return own + sum(c.guaranteed(pool) for c in self.children)

    def tenants(self) -> List["Node"]:
        if self.tenant:
            return [self]
        out: List[Node] = []
        for c in self.children:
            out.extend(c.tenants())
        return out


@dataclass
class Tree:
    roots: List[Node]
    pools: Dict[str, str]            # pool (flavor name) -> Kubernetes resource name
    tenant_nodes: Dict[str, Node]

    def root_of(self, tenant: str) -> Node:
        for root in self.roots:
            if any(t.name == tenant for t in root.tenants()):
                return root
        raise KeyError(tenant)

    @property
    def tenant_names(self) -> List[str]:
        return list(self.tenant_nodes)


def load_inventory(path: Path = INVENTORY) -> Dict[str, Any]:
    return yaml.safe_load(Path(path).read_text())


def variant(inventory: Mapping[str, Any], name: str) -> Dict[str, Any]:
    """One of VARIANTS derived from the same inventory (a deep copy; the input is not changed)."""
    if name not in VARIANTS:
        raise ValueError("unknown variant %r (one of %s)" % (name, ", ".join(VARIANTS)))
    inv = copy.deepcopy(dict(inventory))
    if name == "static":
        inv["gpuaas_cohorts"] = []
        for tenant in inv["gpuaas_tenants"]:
            tenant.pop("cohort", None)
            tenant.pop("fair_sharing_weight", None)
            for quota in tenant.get("quotas", []):
                quota.pop("borrowing_limit", None)
                quota.pop("lending_limit", None)
            # reclaim needs a cohort; keep only the within-queue policy
            pre = tenant.get("preemption") or {}
            pre.pop("reclaim_within_cohort", None)
            pre.pop("borrow_within_cohort", None)
    elif name == "weights1":
        for cohort in inv.get("gpuaas_cohorts", []):
            if "fair_sharing_weight" in cohort:
                cohort["fair_sharing_weight"] = 1
        for tenant in inv["gpuaas_tenants"]:
            tenant["fair_sharing_weight"] = 1
    return inv


def _number(value: Any) -> float:
    text = str(value).strip()
    if text.endswith("m"):
        return float(text[:-1]) / 1000.0
    return float(text)


def tree_from_inventory(inventory: Mapping[str, Any]) -> Tree:
    """Cohorts and tenants as a forest; pools are the flavors that carry accelerator quota."""
    cohorts: Dict[str, Node] = {}
    for c in inventory.get("gpuaas_cohorts") or []:
        w = c.get("fair_sharing_weight")
        cohorts[c["name"]] = Node(c["name"], 1.0 if w is None else _number(w), c.get("parent"))
    pools: Dict[str, str] = {}

    def add_quotas(node: Node, quotas: Any) -> None:
        for q in quotas or []:
            for res, amount in (q.get("resources") or {}).items():
                if res.startswith(("nvidia.com/", "amd.com/", "gpu.intel.com/")):
                    pools.setdefault(q["flavor"], res)
                    node.nominal[q["flavor"]] = node.nominal.get(q["flavor"], 0.0) + _number(amount)

    for c in inventory.get("gpuaas_cohorts") or []:
        add_quotas(cohorts[c["name"]], c.get("quotas"))
    tenants: Dict[str, Node] = {}
    for t in inventory.get("gpuaas_tenants") or []:
        if t.get("state", "present") != "present":
            continue
        w = t.get("fair_sharing_weight")
        node = Node(t["name"], 1.0 if w is None else _number(w), t.get("cohort"), tenant=True)
        add_quotas(node, t.get("quotas"))
        tenants[node.name] = node
    roots: List[Node] = []
    for node in list(cohorts.values()) + list(tenants.values()):
        if node.parent:
            cohorts[node.parent].children.append(node)
        else:
            roots.append(node)
    # cohorts without any tenant below them play no part
    roots = [r for r in roots if r.tenants()]
    return Tree(roots, pools, tenants)


def waterfill(cap: float, guaranteed: List[float], demand: List[float], weight: List[float]) -> List[float]:
    """Share ``cap`` among children: each gets min(d, g + w * lam); lam >= 0 chosen so the sum is min(cap, sum d).

    Children of weight 0 get their guarantee, and only what nobody of positive weight wants beyond it (shared
    equally among them)."""
    n = len(demand)
    total = min(cap, sum(demand))
    base = [min(d, g) for d, g in zip(demand, guaranteed)]
    if sum(base) >= total - 1e-12:
        # cap below the guarantees (cannot happen at a root); scale down proportionally
        s = sum(base)
        return [b * total / s if s > 0 else 0.0 for b in base]

    def alloc(lam: float, w: List[float]) -> List[float]:
        return [min(d, g + wi * lam) if wi > 0 else min(d, g) for d, g, wi in zip(demand, guaranteed, w)]

    out = alloc(float("inf"), weight)
    if sum(out) <= total + 1e-12:
        # everyone of positive weight is satisfied: the rest goes to weight-0 children, equally
        rest = total - sum(out)
        zero = [i for i in range(n) if weight[i] <= 0]
        if rest > 1e-12 and zero:
            extra = waterfill(rest, [0.0] * len(zero), [demand[i] - out[i] for i in zero], [1.0] * len(zero))
            for i, e in zip(zero, extra):
                out[i] += e
        return out
    lo, hi = 0.0, 1.0
    while sum(alloc(hi, weight)) < total:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if sum(alloc(mid, weight)) < total:
            lo = mid
        else:
            hi = mid
    return alloc(hi, weight)


def entitlements(tree: Tree, pool: str, demand: Mapping[str, float], capacity: Optional[float] = None) -> Dict[str, float]:
    """Fair allocation of ``pool`` per tenant for the given per-tenant demand (hierarchical weighted water-filling).

    Each root may use its subtree's nominal quota (Kueue: a cohort owns what its members own); ``capacity``
    (the physical pool) caps the sum when given."""
    out: Dict[str, float] = {t: 0.0 for t in tree.tenant_nodes}

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

    root_caps = []
    for root in tree.roots:
        root_caps.append(min(root.guaranteed(pool), subtree_demand(root)))
    if capacity is not None and sum(root_caps) > capacity:
        scale = capacity / sum(root_caps)
        root_caps = [c * scale for c in root_caps]
    for root, cap in zip(tree.roots, root_caps):
        descend(root, cap)
    return out


def apportion(total: int, demand: Mapping[str, float], minimum: Mapping[str, int]) -> Dict[str, int]:
    """Integer shares of ``total`` proportional to ``demand`` (Hamilton: floors, then the largest remainders, ties
    in the given order), each at least ``minimum``: a name whose share falls below its minimum gets the minimum and
    the rest is apportioned again among the others. Names of zero demand get their minimum (usually 0)."""
    names = list(demand)
    fixed: Dict[str, int] = {}
    while True:
        free = [n for n in names if n not in fixed]
        left = total - sum(fixed.values())
        weight = sum(max(0.0, float(demand[n])) for n in free)
        if left < sum(minimum.get(n, 0) for n in free):
            raise ValueError("%d cannot hold the minimum shares %s" % (total, dict(minimum)))
        if weight <= 0:
            out = dict(fixed, **{n: minimum.get(n, 0) for n in free})
            return out
        ideal = {n: left * max(0.0, float(demand[n])) / weight for n in free}
        share = {n: int(ideal[n]) for n in free}
        rest = left - sum(share.values())
        for n in sorted(free, key=lambda n: (-(ideal[n] - share[n]), names.index(n)))[:rest]:
            share[n] += 1
        low = [n for n in free if share[n] < minimum.get(n, 0)]
        if not low:
            return dict(fixed, **share)
        for n in low:
            fixed[n] = minimum.get(n, 0)


def demand_quotas(tree: Tree, jobs: List[Mapping[str, Any]], capacity: Mapping[str, float]) -> Dict[str, Dict[str, int]]:
    """A static partition of each pool that follows the demand: nominal quota proportional to each tenant's
    GPU-minutes (size x duration) in ``jobs`` (hindsight of the whole trace), at least the tenant's largest job
    so that every job can run. tenant -> pool -> quota."""
    out: Dict[str, Dict[str, int]] = {t: {} for t in tree.tenant_names}
    for pool, cap in capacity.items():
        work = {t: 0.0 for t in tree.tenant_names}
        biggest = {t: 0 for t in tree.tenant_names}
        for j in jobs:
            if j["pool"] == pool and j["tenant"] in work:
                work[j["tenant"]] += float(j["size"]) * float(j["duration"])
                biggest[j["tenant"]] = max(biggest[j["tenant"]], int(j["size"]))
        for t, q in apportion(int(cap), work, biggest).items():
            out[t][pool] = q
    return out


def with_quotas(inventory: Mapping[str, Any], quotas: Mapping[str, Mapping[str, int]], tree: Tree) -> Dict[str, Any]:
    """The static variant of ``inventory`` with each tenant's accelerator nominal quota replaced by ``quotas``."""
    inv = variant(inventory, "static")
    for tenant in inv["gpuaas_tenants"]:
        mine = quotas.get(tenant["name"], {})
        kept = []
        for q in tenant.get("quotas") or []:
            if q["flavor"] in tree.pools:
                continue
            kept.append(q)
        for pool, amount in mine.items():
            if amount > 0:
                kept.append({"flavor": pool, "resources": {tree.pools[pool]: amount}})
        tenant["quotas"] = kept
    return inv
