# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's tenancy as a tree, the three variants, and the static partitions.

The tree, the fair share and the quota arithmetic are the collection's quota planner
(``plugins/module_utils/quota_plan/tenancy.py``: ``Node``, ``Tree``, ``waterfill``, ``entitlements``), re-exported
here; what is bench-only is reading a raw inventory file (no validation: the benchmark's inventories carry
bench-only keys) into that tree, the variants and the demand-following static partition.

Entitlement (what "fair" means in this benchmark, the same notion as Kueue's fair sharing): at every cohort, each
child first gets ``min(demand, guaranteed)`` where guaranteed is the nominal quota of its subtree; what is left is
shared in proportion to the children's fair-sharing weights, never more than a child's demand (water-filling). The
result at a cohort is handed down to its children the same way. A tenant (ClusterQueue) without a cohort is its own
root: it can use its nominal quota and nothing more.

The benchmark's tree leaves out borrowing and lending limits (its ideal is the fair-share policy without them) and
lets every tenant of a cohort preempt (reclaim) whatever its ``preemption`` says; the quota planner's
``tree_from_model`` keeps both.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping

import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO / ".build") not in sys.path:
    sys.path.insert(0, str(REPO / ".build"))   # the collection as `make collection` builds it

from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import (  # noqa: E402
    Node, Tree, entitlements, link, waterfill)

__all__ = ["Node", "Tree", "entitlements", "waterfill", "load_inventory", "variant", "tree_from_inventory",
           "apportion", "demand_quotas", "with_quotas", "budget_shares", "static_budgets"]

INVENTORY = Path(__file__).with_name("inventory.yml")
VARIANTS = ("tenancy", "static", "weights1")


def load_inventory(path: Path = INVENTORY) -> Dict[str, Any]:
    return yaml.safe_load(Path(path).read_text())


def variant(inventory: Mapping[str, Any], name: str) -> Dict[str, Any]:
    """One of VARIANTS derived from the same inventory (a deep copy; the input is not changed)."""
    if name not in VARIANTS:
        raise ValueError("unknown variant %r (one of %s)" % (name, ", ".join(VARIANTS)))
    inv = copy.deepcopy(dict(inventory))
    if name == "static":
        # department budgets (cohort quotas) have no owner without cohorts: they go to the teams beneath them
        budgets = static_budgets(inventory)
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
        if budgets is not None:
            _replace_accelerator_quotas(inv, budgets, tree_from_inventory(inventory).pools)
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
    """Cohorts (with their own quotas) and present tenants as a forest; pools are the flavors that carry accelerator
    quota. Borrowing and lending limits are left out and every tenant may reclaim (see the module docstring)."""
    pools: Dict[str, str] = {}

    def add_quotas(node: Node, quotas: Any) -> None:
        for q in quotas or []:
            for res, amount in (q.get("resources") or {}).items():
                if res.startswith(("nvidia.com/", "amd.com/", "gpu.intel.com/")):
                    pools.setdefault(q["flavor"], res)
                    node.nominal[q["flavor"]] = node.nominal.get(q["flavor"], 0.0) + _number(amount)

    cohorts: List[Node] = []
    for c in inventory.get("gpuaas_cohorts") or []:
        w = c.get("fair_sharing_weight")
        cohorts.append(Node(c["name"], 1.0 if w is None else _number(w), c.get("parent")))
        add_quotas(cohorts[-1], c.get("quotas"))
    tenants: List[Node] = []
    for t in inventory.get("gpuaas_tenants") or []:
        if t.get("state", "present") != "present":
            continue
        w = t.get("fair_sharing_weight")
        tenants.append(Node(t["name"], 1.0 if w is None else _number(w), t.get("cohort"), tenant=True, reclaim=True))
        add_quotas(tenants[-1], t.get("quotas"))
    known = {c.name for c in cohorts}
    for node in cohorts + tenants:
        if node.parent and node.parent not in known:
            raise KeyError(node.parent)
    return link(cohorts, tenants, pools)


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
    _replace_accelerator_quotas(inv, quotas, tree.pools)
    return inv


def _replace_accelerator_quotas(inv: Dict[str, Any], quotas: Mapping[str, Mapping[str, int]],
                                pools: Mapping[str, str]) -> None:
    for tenant in inv["gpuaas_tenants"]:
        mine = quotas.get(tenant["name"], {})
        kept = [q for q in tenant.get("quotas") or [] if q["flavor"] not in pools]
        for pool, amount in mine.items():
            if amount > 0:
                kept.append({"flavor": pool, "resources": {pools[pool]: amount}})
        tenant["quotas"] = kept


def budget_shares(tree: Tree) -> Dict[str, Dict[str, float]]:
    """What each tenant can count on per pool when every tenant wants all it can get: its fair share
    (``entitlements`` under unbounded demand), i.e. its own nominal quota plus its weighted part of the quota its
    cohorts hold themselves (a department budget, ``gpuaas_cohorts[].quotas``). Where no cohort holds quota this is
    exactly the tenant's nominal quota. tenant -> pool -> GPUs."""
    unbounded = {t: 1e12 for t in tree.tenant_names}
    out: Dict[str, Dict[str, float]] = {t: {} for t in tree.tenant_names}
    for pool in tree.pools:
        for t, share in entitlements(tree, pool, unbounded).items():
            if share > 1e-9:
                out[t][pool] = round(share, 9)   # integer quotas stay integers (bisection noise dropped)
    return out


def static_budgets(inventory: Mapping[str, Any]) -> "Dict[str, Dict[str, int]] | None":
    """The static partition of an inventory whose cohorts hold quota (department budgets): each pool's whole quota
    apportioned to the tenants in proportion to ``budget_shares`` (whole GPUs, largest remainders). ``None`` when no
    cohort holds accelerator quota (the static variant keeps the tenants' own quotas then)."""
    tree = tree_from_inventory(inventory)
    cohorts = [c for root in tree.roots for c in _cohorts(root)]
    if not any(c.nominal.get(p, 0.0) > 0 for c in cohorts for p in tree.pools):
        return None
    shares = budget_shares(tree)
    out: Dict[str, Dict[str, int]] = {t: {} for t in tree.tenant_names}
    for pool in tree.pools:
        total = int(round(sum(root.guaranteed(pool) for root in tree.roots)))
        for t, q in apportion(total, {t: shares[t].get(pool, 0.0) for t in tree.tenant_names}, {}).items():
            out[t][pool] = q
    return out


def _cohorts(node: Node) -> List[Node]:
    if node.tenant:
        return []
    return [node] + [c for k in node.children for c in _cohorts(k)]
