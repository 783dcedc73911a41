# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tenancy inventory as a validated model.

``TenantModel.from_inventory(vars, nodes=None)`` parses the whole inventory (``gpuaas_flavors``,
``gpuaas_cohorts``, ``gpuaas_priorities``, ``gpuaas_tenants``, ``gpuaas_prometheus`` and the
``gpuaas_*`` switches), collects *every* problem with a path such as
``gpuaas_tenants[3].quotas[0].flavor`` and raises one ``InventoryError`` listing them all.

No I/O: the node capacity used for the over-commit check is passed in (``nodes``), as a list of
``{"name", "labels", "allocatable"}`` dicts read by the caller.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from decimal import Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import (  # noqa: F401 - re-exported
    AUTOSCALING_KEYS,
    IDLE_KEYS,
    INFERENCE_SERVICE_SUFFIX,
    LOAD_KEYS,
    NOT_SCALABLE_KINDS,
    SCALE_TARGET_KINDS,
    TARGET_KEYS,
    parse_autoscaling,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.cohorts import COHORT_KEYS, parse_cohorts  # noqa: F401
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.flavors import FLAVOR_KEYS, parse_flavors  # noqa: F401
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.priorities import PRIORITY_KEYS, parse_priorities  # noqa: F401
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.prometheus import (  # noqa: F401 - re-exported
    PROMETHEUS_KEYS,
    TOKEN_SECRET_KEYS,
    parse_prometheus,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import (
    is_accelerator,
    parse_quantity,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quotas import (  # noqa: F401 - re-exported
    BORROW_KEYS,
    PREEMPTION_KEYS,
    QUOTA_KEYS,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import (  # noqa: F401 - re-exported
    Access,
    Autoscaling,
    Cohort,
    ExtraQueue,
    Flavor,
    NodePool,
    Preemption,
    Priority,
    PrometheusSettings,
    Quota,
    Tenant,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.tenants import (  # noqa: F401 - re-exported
    ACCESS_KEYS,
    QUEUE_KEYS,
    SYSTEM_NAMESPACE_PREFIXES,
    SYSTEM_NAMESPACES,
    TENANT_KEYS,
    parse_tenants,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import (  # noqa: F401 - re-exported
    InventoryError,
    Validator,
)

# -- gpuaas_node_pools (issue 13): GPU node pools grown and shrunk from Kueue's reserved quota ----------
NODE_POOL_KEYS = ("name", "flavor", "target", "min_nodes", "max_nodes", "gpus_per_node", "gpu_resource",
                  "node_labels", "provisioning_seconds", "idle_seconds", "polling_interval", "include_pending")
NODE_POOL_TARGET_KEYS = ("kind", "name", "namespace", "api_version")
# The scalable kinds a pool can target and their API versions (both have a /scale subresource with a selector).
NODE_POOL_TARGET_KINDS = {
    "MachineSet": "machine.openshift.io/v1beta1",
    "MachineDeployment": "cluster.x-k8s.io/v1beta2",
}


@dataclass
class TenantModel:
    flavors: t.List[Flavor] = field(default_factory=list)
    cohorts: t.List[Cohort] = field(default_factory=list)
    priorities: t.List[Priority] = field(default_factory=list)
    tenants: t.List[Tenant] = field(default_factory=list)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    allow_overcommit: bool = False
    warnings: t.List[str] = field(default_factory=list)
    capacity: t.Dict[str, t.Dict[str, str]] = field(default_factory=dict)
    node_pools: t.List[NodePool] = field(default_factory=list)

    @property
    def present_tenants(self) -> t.List[Tenant]:
        return [x for x in self.tenants if x.present]

    @property
    def absent_tenants(self) -> t.List[Tenant]:
        return [x for x in self.tenants if not x.present]

    def tenant(self, name: str) -> t.Optional[Tenant]:
        for tenant in self.tenants:
            if tenant.name == name:
                return tenant
        return None

    @classmethod
    def from_inventory(cls, inventory: t.Mapping[str, t.Any],
                       nodes: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None) -> "TenantModel":
        """Parse and validate the whole inventory; raise ``InventoryError`` listing every problem."""
        parser = _Parser()
        model = parser.parse(inventory, nodes)
        if parser.errors:
            count = len(parser.errors)
            raise InventoryError(
                "The GPU tenancy inventory has %d problem%s; nothing was changed." % (count, "" if count == 1 else "s"),
                hint="Fix every listed item in group_vars (gpuaas_flavors, gpuaas_cohorts, gpuaas_priorities, "
                     "gpuaas_tenants) and run again. Paths point at the offending entry, e.g. gpuaas_tenants[3].quotas[0].flavor.",
                problems=parser.errors,
            )
        return model


def flavor_capacity(flavor: Flavor, nodes: t.Sequence[t.Mapping[str, t.Any]]) -> t.Dict[str, Decimal]:
    """Sum the allocatable accelerator resources of the nodes whose labels match the flavor's node_labels."""
    totals: t.Dict[str, Decimal] = {}
    for node in nodes:
        labels = node.get("labels") or {}
        if any(labels.get(k) != v for k, v in flavor.node_labels.items()):
            continue
        for resource, amount in (node.get("allocatable") or {}).items():
            if not is_accelerator(resource):
                continue
            try:
                totals[resource] = totals.get(resource, Decimal(0)) + parse_quantity(amount)
            except ValueError:
                continue
    return totals


class _Parser(Validator):
    # -- sections ------------------------------------------------------------------------------
    def parse(self, inv: t.Mapping[str, t.Any], nodes: t.Optional[t.Sequence[t.Mapping[str, t.Any]]]) -> TenantModel:
        model = TenantModel()
        model.allow_overcommit = bool(inv.get("gpuaas_allow_overcommit", False))
        model.flavors = parse_flavors(self, inv.get("gpuaas_flavors"))
        model.cohorts = parse_cohorts(self, inv.get("gpuaas_cohorts"))
        model.priorities = parse_priorities(self, inv.get("gpuaas_priorities"))
        model.prometheus = parse_prometheus(self, inv.get("gpuaas_prometheus"))
        model.tenants = parse_tenants(self, inv.get("gpuaas_tenants"), {f.name for f in model.flavors},
                                      {c.name for c in model.cohorts}, {p.name for p in model.priorities},
                                      model.prometheus.url)
        self.idle_reclaim(model)
        model.node_pools = self.node_pools(inv.get("gpuaas_node_pools"), model)
        if nodes is not None:
            self.capacity(model, nodes)
        model.warnings = self.warnings
        return model

    def idle_reclaim(self, model: TenantModel) -> None:
        """Warn when a tenant that scales to zero when idle could not take its GPUs back from borrowers.

        While it is at zero, other ClusterQueues of its cohort tree may borrow its unused nominal quota; on wake-up
        only its own ``reclaimWithinCohort`` lets Kueue preempt them (Kueue's default is Never; LowerPriority
        spares borrowers of equal or higher priority). ``lending_limit: 0`` on every accelerator keeps it unlent.
        """
        parents = {c.name: c.parent for c in model.cohorts}
        values = {p.name: p.value for p in model.priorities}

        def root(cohort: t.Optional[str]) -> t.Optional[str]:
            seen: t.Set[str] = set()
            while cohort and parents.get(cohort) and cohort not in seen:
                seen.add(cohort)
                cohort = parents[cohort]
            return cohort

        for i, tenant in enumerate(model.tenants):
            idle = [a.name for a in tenant.autoscaling if a.idle_window_seconds]
            if not tenant.present or not idle or not tenant.cohort:
                continue
            lent = [r for q in tenant.quotas for r, v in q.resources.items()
                    if is_accelerator(r) and parse_quantity(v) > 0
                    and parse_quantity(q.lending_limit.get(r, v)) > 0]
            if not lent:
                continue  # lending_limit 0 on every accelerator: nothing is ever lent
            tree = root(tenant.cohort)
            others = [o for o in model.tenants if o is not tenant and o.present and o.cohort and root(o.cohort) == tree]
            if not others:
                continue
            policy = tenant.preemption.reclaim_within_cohort or "Never"
            if policy == "Never":
                blocked = others
            elif policy == "LowerPriority":
                # a workload without a priority class has priority 0; compare the best each tenant may use
                def best(other: Tenant) -> int:
                    names = other.allowed_priorities if other.allowed_priorities is not None else list(values)
                    return max([0] + [values[n] for n in names if n in values])
                blocked = [o for o in others if best(o) >= best(tenant)]
            else:
                continue
            if not blocked:
                continue
            self.warnings.append(
                "gpuaas_tenants[%d].preemption.reclaim_within_cohort: tenant %s scales %s to zero when idle, but with "
                "reclaim_within_cohort %s%s it cannot take its GPUs back from borrowers of equal or higher priority "
                "in cohort %s (%s): its nominal quota is not guaranteed after an idle period. Set "
                "preemption.reclaim_within_cohort: Any, or lending_limit: 0 on its GPU quotas to keep them unlent."
                % (i, tenant.name, ", ".join(idle), policy, " (Kueue's default)" if not tenant.preemption.reclaim_within_cohort else "",
                   tree, ", ".join(sorted(o.name for o in blocked))))

    def node_pools(self, value: t.Any, model: TenantModel) -> t.List[NodePool]:
        """``gpuaas_node_pools``: each pool feeds one flavor; its nodes must carry the flavor's node labels."""
        out: t.List[NodePool] = []
        names = []
        targets: t.Dict[t.Tuple[str, str, str], int] = {}
        flavors = {f.name: f for f in model.flavors}
        for i, item in enumerate(self.sequence("gpuaas_node_pools", value)):
            path = "gpuaas_node_pools[%d]" % i
            data = self.mapping(path, item, NODE_POOL_KEYS)
            if data is None:
                continue
            name = self.label_name(path + ".name", data.get("name"))
            names.append((i, name))
            flavor = data.get("flavor")
            if not flavor:
                self.err(path + ".flavor", "is required (the Kueue ResourceFlavor this pool's nodes belong to)")
            elif flavor not in flavors:
                self.unknown_ref(path + ".flavor", str(flavor), flavors, "flavor")
            target = self.mapping(path + ".target", data.get("target"), NODE_POOL_TARGET_KEYS) or {}
            kind = target.get("kind", "MachineSet")
            api_version = target.get("api_version") or NODE_POOL_TARGET_KINDS.get(kind)
            if kind not in NODE_POOL_TARGET_KINDS and not target.get("api_version"):
                self.err(path + ".target.kind", "%r is not one of %s (or set target.api_version)"
                         % (kind, ", ".join(NODE_POOL_TARGET_KINDS)))
            target_name = self.name(path + ".target.name", target.get("name"))
            default_ns = "openshift-machine-api" if kind == "MachineSet" else None
            namespace = self.label_name(path + ".target.namespace", target.get("namespace") or default_ns)
            min_n = self.integer(path + ".min_nodes", data.get("min_nodes", 0), 0)
            max_n = self.integer(path + ".max_nodes", data.get("max_nodes"), 1) if data.get("max_nodes") is not None else None
            if data.get("max_nodes") is None:
                self.err(path + ".max_nodes", "is required (the most nodes this pool may grow to)")
            if min_n is not None and max_n is not None and min_n > max_n:
                self.err(path + ".max_nodes", "must be at least min_nodes (%d)" % min_n)
            gpus = self.integer(path + ".gpus_per_node", data.get("gpus_per_node"), 1) if data.get("gpus_per_node") is not None else None
            if data.get("gpus_per_node") is None:
                self.err(path + ".gpus_per_node", "is required (the GPUs one node of the pool offers, e.g. 8)")
            resource = data.get("gpu_resource", "nvidia.com/gpu")
            if not isinstance(resource, str) or not is_accelerator(resource):
                self.err(path + ".gpu_resource", "%r is not an accelerator resource (e.g. nvidia.com/gpu)" % (resource,))
                resource = "nvidia.com/gpu"
            labels = self.string_map(path + ".node_labels", data.get("node_labels"), "node label")
            provisioning = self.integer(path + ".provisioning_seconds", data.get("provisioning_seconds", 600), 0)
            idle = self.integer(path + ".idle_seconds", data.get("idle_seconds", 600), 0)
            polling = self.integer(path + ".polling_interval", data.get("polling_interval", 15), 1)
            pending = data.get("include_pending", False)
            if not isinstance(pending, bool):
                self.err(path + ".include_pending", "must be true or false, got %r" % (pending,))
                pending = False
            if flavor in flavors:
                wanted = flavors[flavor].node_labels
                missing = {k: v for k, v in wanted.items() if labels.get(k) != v}
                if missing:
                    self.err(path + ".node_labels",
                             "the pool's node template does not give its nodes the node labels of flavor %r (%s): "
                             "Kueue would place the pool's workloads on nodes the pool never creates; set them in "
                             "the MachineSet/MachineDeployment template and in node_labels"
                             % (flavor, ", ".join("%s=%s (has %s)" % (k, v, labels.get(k, "nothing"))
                                                  for k, v in sorted(missing.items()))))
            if target_name and namespace:
                key = (kind, namespace, target_name)
                if key in targets:
                    self.err(path + ".target", "%s %s/%s is already the target of gpuaas_node_pools[%d]"
                             % (kind, namespace, target_name, targets[key]))
                targets[key] = i
            if name and flavor and target_name and namespace and max_n is not None and gpus is not None:
                out.append(NodePool(name=name, flavor=str(flavor), target_kind=kind, target_name=target_name,
                                    target_namespace=namespace, target_api_version=api_version or "",
                                    min_nodes=min_n or 0, max_nodes=max_n, gpus_per_node=gpus, gpu_resource=resource,
                                    node_labels=labels, provisioning_seconds=provisioning if provisioning is not None else 600,
                                    idle_seconds=idle if idle is not None else 600, polling_interval=polling or 15,
                                    include_pending=pending))
        self.duplicates("gpuaas_node_pools", names, "node pool")
        return out

    def capacity(self, model: TenantModel, nodes: t.Sequence[t.Mapping[str, t.Any]]) -> None:
        """Sum of nominal accelerator quotas per flavor must fit the matching nodes' allocatable."""
        by_flavor = {f.name: f for f in model.flavors}
        wanted: t.Dict[t.Tuple[str, str], Decimal] = {}
        where: t.Dict[t.Tuple[str, str], t.List[str]] = {}
        for i, tenant in enumerate(model.tenants):
            if not tenant.present:
                continue
            for quota in tenant.quotas:
                for res, amount in quota.resources.items():
                    if not is_accelerator(res) or quota.flavor not in by_flavor:
                        continue
                    key = (quota.flavor, res)
                    wanted[key] = wanted.get(key, Decimal(0)) + parse_quantity(amount)
                    where.setdefault(key, []).append("%s=%s" % (tenant.name, amount))
        caps: t.Dict[str, t.Dict[str, Decimal]] = {}
        for (flavor, res), amount in sorted(wanted.items()):
            if flavor not in caps:
                caps[flavor] = flavor_capacity(by_flavor[flavor], nodes)
                _add_pool_capacity(caps[flavor], flavor, model.node_pools)
            have = caps[flavor].get(res, Decimal(0))
            if amount > have:
                index = [f.name for f in model.flavors].index(flavor)
                message = ("quotas ask for %s %s on flavor %r (%s) but the matching nodes offer %s" %
                           (_fmt(amount), res, flavor, ", ".join(where[(flavor, res)]), _fmt(have)))
                if model.allow_overcommit:
                    self.warnings.append("gpuaas_flavors[%d]: %s (allowed by gpuaas_allow_overcommit)" % (index, message))
                else:
                    self.err("gpuaas_flavors[%d]" % index,
                             message + "; lower the quotas, add nodes, check the flavor's node_labels, or set gpuaas_allow_overcommit: true")
        model.capacity = {f: {r: _fmt(v) for r, v in res.items()} for f, res in caps.items()}


def _add_pool_capacity(caps: t.Dict[str, Decimal], flavor: str, pools: t.Sequence[NodePool]) -> None:
    """A flavor fed by node pools offers (at least) each pool's max_nodes x gpus_per_node.

    The pools' live nodes also match the flavor, so they are not added on top: the capacity is the larger of
    the live nodes and the pools' maximum (nodes outside any pool that match the flavor count only when
    they exceed the pools' maximum)."""
    for res in {p.gpu_resource for p in pools if p.flavor == flavor}:
        most = sum(Decimal(p.max_nodes * p.gpus_per_node) for p in pools if p.flavor == flavor and p.gpu_resource == res)
        caps[res] = max(caps.get(res, Decimal(0)), most)


def _fmt(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    return str(value.normalize())


# -- the part of the contract observers read (validate, monitoring rules) ---------------------------------

def tenant_index(tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]]) -> t.Tuple[t.Dict[str, str], t.List[t.Dict[str, t.Any]]]:
    """``(namespace -> tenant, [tenant summaries])`` from the raw ``gpuaas_tenants`` inventory list.

    Only ``name``, ``namespaces`` and ``state`` are read (the whole entry is validated by the tenants role);
    the ClusterQueue of a tenant is named after it, as the tenants role builds it. Tenants with
    ``state: absent`` are left out.
    """
    ns_map: t.Dict[str, str] = {}
    out: t.List[t.Dict[str, t.Any]] = []
    for entry in tenants or []:
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        if entry.get("state", "present") == "absent":
            continue
        namespaces = [str(n) for n in entry.get("namespaces") or []]
        out.append({"name": str(entry["name"]), "namespaces": namespaces,
                    "cluster_queue": str(entry["name"])})
        for ns in namespaces:
            ns_map.setdefault(ns, str(entry["name"]))
    return ns_map, out
