# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A check across sections (flavors, cohorts, tenants, node pools) and the nodes: do the nominal GPU quotas fit the
cluster? A cohort's quota is capacity handed out like a tenant's (its members may use it all at once), so it counts
the same way.

No I/O: the nodes are passed in, as ``{"name", "labels", "allocatable"}`` dicts read by the caller.
"""

from __future__ import annotations

import typing as t
from decimal import Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Cohort, Flavor, NodePool, Quota, Tenant
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator


# GPU feature discovery labels each GPU node with its product; under GPU time-slicing (device plugin sharing with
# renameByDefault false, the GPU Operator's default) it appends "-SHARED" to that value, e.g.
# NVIDIA-A100-SXM4-80GB-SHARED. A ResourceFlavor's nodeLabels are matched exactly (Kueue copies them into the
# admitted pods' nodeSelector), so a flavor naming the plain product stops matching once its nodes are time-sliced.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GFD_SHARED_SUFFIX = "-SHARED"


def _matches(labels: t.Mapping[str, str], wanted: t.Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def shared_product_counterpart(product: str) -> str:
    """The other spelling of a GPU product label value: with the time-slicing suffix added, or removed."""
    if product.endswith(GFD_SHARED_SUFFIX):
        return product[:-len(GFD_SHARED_SUFFIX)]
    return product + GFD_SHARED_SUFFIX


def shared_product_hint(flavor: Flavor, nodes: t.Sequence[t.Mapping[str, t.Any]]) -> t.Optional[str]:
    """When no node matches the flavor but some would with the product label's other spelling (``-SHARED`` added
    or removed), what to write in node_labels instead; else None."""
    product = flavor.node_labels.get(GPU_PRODUCT_LABEL)
    if not product or any(_matches(node.get("labels") or {}, flavor.node_labels) for node in nodes):
        return None
    other = dict(flavor.node_labels, **{GPU_PRODUCT_LABEL: shared_product_counterpart(product)})
    names = sorted(str(node.get("name")) for node in nodes if _matches(node.get("labels") or {}, other))
    if not names:
        return None
    why = ("GPU time-slicing is on there: GPU feature discovery appends %s" % GFD_SHARED_SUFFIX
           if other[GPU_PRODUCT_LABEL].endswith(GFD_SHARED_SUFFIX) else
           "time-slicing is off there, so GPU feature discovery does not append %s" % GFD_SHARED_SUFFIX)
    return ("nodes %s carry %s=%s (%s); set the flavor's node_labels to that value"
            % (", ".join(names[:5]) + (" …" if len(names) > 5 else ""), GPU_PRODUCT_LABEL, other[GPU_PRODUCT_LABEL], why))


def flavor_capacity(flavor: Flavor, nodes: t.Sequence[t.Mapping[str, t.Any]]) -> t.Dict[str, Decimal]:
    """Sum the allocatable accelerator resources of the nodes whose labels match the flavor's node_labels exactly
    (as Kueue does)."""
    totals: t.Dict[str, Decimal] = {}
    for node in nodes:
        if not _matches(node.get("labels") or {}, flavor.node_labels):
            continue
        for resource, amount in (node.get("allocatable") or {}).items():
            if not is_accelerator(resource):
                continue
            try:
                totals[resource] = totals.get(resource, Decimal(0)) + parse_quantity(amount)
            except ValueError:
                continue
    return totals


def check_capacity(check: Validator, flavors: t.Sequence[Flavor], tenants: t.Sequence[Tenant],
                   node_pools: t.Sequence[NodePool], nodes: t.Sequence[t.Mapping[str, t.Any]],
                   allow_overcommit: bool, cohorts: t.Sequence[Cohort] = ()) -> t.Dict[str, t.Dict[str, str]]:
    """The sum of nominal accelerator quotas per flavor (present tenants' and cohorts') must fit the matching nodes'
    allocatable (a warning with ``allow_overcommit``). Returns the capacity found, ``{flavor: {resource: amount}}``,
    for every flavor asked for."""
    by_flavor = {f.name: f for f in flavors}
    wanted: t.Dict[t.Tuple[str, str], Decimal] = {}
    where: t.Dict[t.Tuple[str, str], t.List[str]] = {}
    holders: t.List[t.Tuple[str, t.Sequence[Quota]]] = [(x.name, x.quotas) for x in tenants if x.present]
    holders += [("cohort %s" % c.name, c.quotas) for c in cohorts]
    for holder, quotas in holders:
        for quota in quotas:
            for res, amount in quota.resources.items():
                if not is_accelerator(res) or quota.flavor not in by_flavor:
                    continue
                key = (quota.flavor, res)
                wanted[key] = wanted.get(key, Decimal(0)) + parse_quantity(amount)
                where.setdefault(key, []).append("%s=%s" % (holder, amount))
    caps: t.Dict[str, t.Dict[str, Decimal]] = {}
    for (flavor, res), amount in sorted(wanted.items()):
        if flavor not in caps:
            caps[flavor] = flavor_capacity(by_flavor[flavor], nodes)
            _add_pool_capacity(caps[flavor], flavor, node_pools)
        have = caps[flavor].get(res, Decimal(0))
        if amount > have:
            index = [f.name for f in flavors].index(flavor)
            message = ("quotas ask for %s %s on flavor %r (%s) but the matching nodes offer %s" %
                       (_amount_text(amount), res, flavor, ", ".join(where[(flavor, res)]), _amount_text(have)))
            shared = shared_product_hint(by_flavor[flavor], nodes)
            if shared:
                message += " - " + shared
            if allow_overcommit:
                check.warn("gpuaas_flavors[%d]: %s (allowed by gpuaas_allow_overcommit)" % (index, message))
            else:
                check.err("gpuaas_flavors[%d]" % index,
                          message + "; lower the quotas, add nodes, check the flavor's node_labels, or set gpuaas_allow_overcommit: true")
    return {f: {r: _amount_text(v) for r, v in res.items()} for f, res in caps.items()}


def _add_pool_capacity(caps: t.Dict[str, Decimal], flavor: str, pools: t.Sequence[NodePool]) -> None:
    """A flavor fed by node pools offers (at least) each pool's max_nodes x gpus_per_node.

    The pools' live nodes also match the flavor, so they are not added on top: the capacity is the larger of
    the live nodes and the pools' maximum (nodes outside any pool that match the flavor count only when
    they exceed the pools' maximum)."""
    for res in {p.gpu_resource for p in pools if p.flavor == flavor}:
        most = sum(Decimal(p.max_nodes * p.gpus_per_node) for p in pools if p.flavor == flavor and p.gpu_resource == res)
        caps[res] = max(caps.get(res, Decimal(0)), most)


def _amount_text(value: Decimal) -> str:
    """A summed amount as the report shows it: whole numbers without a fraction."""
    if value == value.to_integral_value():
        return str(int(value))
    return str(value.normalize())
