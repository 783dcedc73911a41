# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tenancy inventory as a validated model.

``TenantModel.from_inventory(vars, nodes=None)`` parses the whole inventory (``gpuaas_flavors``,
``gpuaas_cohorts``, ``gpuaas_priorities``, ``gpuaas_tenants``, ``gpuaas_prometheus``, ``gpuaas_node_pools``,
``gpuaas_openshift_ai``, ``gpuaas_clusters`` and
the ``gpuaas_*`` switches), collects *every* problem with a path such as
``gpuaas_tenants[3].quotas[0].flavor`` and raises one ``InventoryError`` listing them all.

Each section has its own parser (``flavors.py``, ``cohorts.py``, ``priorities.py``, ``prometheus.py``,
``tenants.py`` with ``quotas.py`` and ``autoscaling.py``, ``node_pools.py``, ``openshift_ai.py``, ``clusters.py``) written on the shared
``validator.Validator``; the checks across sections are ``idle_reclaim.py`` and ``capacity.py``; the typed
records are in ``records.py``. This module joins them and is the import point for the rest of the collection:
the names below are re-exported so that callers depend on ``inventory.model`` only.

No I/O: the node capacity used for the over-commit check is passed in (``nodes``), as a list of
``{"name", "labels", "allocatable"}`` dicts read by the caller.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import (
    AUTOSCALING_KEYS,
    IDLE_KEYS,
    INFERENCE_SERVICE_SUFFIX,
    LOAD_KEYS,
    NOT_SCALABLE_KINDS,
    SCALE_TARGET_KINDS,
    TARGET_KEYS,
    parse_autoscaling,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.capacity import check_capacity, flavor_capacity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.clusters import (
    CLUSTERS_KEYS,
    MANAGER_KEYS,
    WORKER_FLAVOR_KEYS,
    WORKER_KEYS,
    Cluster,
    Fleet,
    Worker,
    parse_clusters,
    worker_quotas,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.cohorts import COHORT_KEYS, check_cohort_lending, parse_cohorts
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.flavors import FLAVOR_KEYS, parse_flavors
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.idle_reclaim import warn_unreclaimable_idle_quota
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.node_pools import (
    NODE_POOL_KEYS,
    NODE_POOL_TARGET_KEYS,
    NODE_POOL_TARGET_KINDS,
    parse_node_pools,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.openshift_ai import (
    COUNT_KEYS,
    OPENSHIFT_AI_KEYS,
    parse_openshift_ai,
    plan_hardware_profiles,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.priorities import (
    PRIORITY_KEYS,
    default_priorities,
    parse_priorities,
    tenant_priorities,
    warn_top_priority_allowed,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.prometheus import (
    PROMETHEUS_KEYS,
    TOKEN_SECRET_KEYS,
    parse_prometheus,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quotas import BORROW_KEYS, PREEMPTION_KEYS, QUOTA_KEYS
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import (
    Access,
    Autoscaling,
    Cohort,
    ExtraQueue,
    Flavor,
    HardwareProfilePlan,
    NodePool,
    OpenShiftAI,
    Preemption,
    Priority,
    PrometheusSettings,
    Quota,
    Tenant,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.tenants import (
    ACCESS_KEYS,
    QUEUE_KEYS,
    SYSTEM_NAMESPACE_PREFIXES,
    SYSTEM_NAMESPACES,
    TENANT_KEYS,
    parse_tenants,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import (
    InventoryError,
    Validator,
    problem_count,
)

__all__ = [
    # the model and its records
    "TenantModel", "Flavor", "Cohort", "Priority", "Quota", "Preemption", "Access", "ExtraQueue", "Autoscaling",
    "Tenant", "NodePool", "PrometheusSettings", "InventoryError", "OpenShiftAI", "HardwareProfilePlan", "Fleet", "Cluster", "Worker",
    # entry points besides TenantModel.from_inventory
    "parse_autoscaling", "flavor_capacity", "tenant_index", "parse_quantity", "default_priorities", "tenant_priorities",
    "worker_quotas",
    # the keys each inventory mapping accepts (role argument specs are tested equal to them)
    "FLAVOR_KEYS", "COHORT_KEYS", "PRIORITY_KEYS", "TENANT_KEYS", "QUOTA_KEYS", "PREEMPTION_KEYS", "BORROW_KEYS",
    "ACCESS_KEYS", "QUEUE_KEYS", "AUTOSCALING_KEYS", "TARGET_KEYS", "IDLE_KEYS", "LOAD_KEYS", "PROMETHEUS_KEYS",
    "TOKEN_SECRET_KEYS", "NODE_POOL_KEYS", "NODE_POOL_TARGET_KEYS", "OPENSHIFT_AI_KEYS", "COUNT_KEYS",
    "CLUSTERS_KEYS", "MANAGER_KEYS", "WORKER_KEYS", "WORKER_FLAVOR_KEYS",
    # values the contract is written in
    "SYSTEM_NAMESPACES", "SYSTEM_NAMESPACE_PREFIXES", "SCALE_TARGET_KINDS", "INFERENCE_SERVICE_SUFFIX",
    "NOT_SCALABLE_KINDS", "NODE_POOL_TARGET_KINDS",
]


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
    openshift_ai: OpenShiftAI = field(default_factory=OpenShiftAI)
    hardware_profiles: t.List[HardwareProfilePlan] = field(default_factory=list)
    # the MultiKueue fleet of gpuaas_clusters; None: a single-cluster inventory (docs/multicluster.md)
    fleet: t.Optional[Fleet] = None

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
        check = Validator()
        model = cls._parse(check, inventory, nodes)
        if check.errors:
            raise InventoryError(
                "The GPU tenancy inventory has %s; nothing was changed." % problem_count(len(check.errors)),
                hint="Fix every listed item in group_vars (gpuaas_flavors, gpuaas_cohorts, gpuaas_priorities, "
                     "gpuaas_tenants, gpuaas_clusters) and run again. Paths point at the offending entry, e.g. gpuaas_tenants[3].quotas[0].flavor.",
                problems=check.errors,
            )
        return model

    @classmethod
    def _parse(cls, check: Validator, inventory: t.Mapping[str, t.Any],
               nodes: t.Optional[t.Sequence[t.Mapping[str, t.Any]]]) -> "TenantModel":
        """Each section in the order its references need: a section reads only the names of those before it."""
        model = cls(allow_overcommit=bool(inventory.get("gpuaas_allow_overcommit", False)))
        model.flavors = parse_flavors(check, inventory.get("gpuaas_flavors"))
        model.cohorts = parse_cohorts(check, inventory.get("gpuaas_cohorts"), {f.name for f in model.flavors})
        model.priorities = parse_priorities(check, inventory.get("gpuaas_priorities"))
        model.prometheus = parse_prometheus(check, inventory.get("gpuaas_prometheus"))
        model.tenants = parse_tenants(check, inventory.get("gpuaas_tenants"), {f.name for f in model.flavors},
                                      {c.name for c in model.cohorts}, {p.name for p in model.priorities},
                                      model.prometheus.url)
        check_cohort_lending(check, model.cohorts, model.tenants)
        warn_top_priority_allowed(check, model.tenants, model.priorities)
        warn_unreclaimable_idle_quota(check, model.tenants, model.cohorts, model.priorities)
        model.openshift_ai = parse_openshift_ai(check, inventory.get("gpuaas_openshift_ai"))
        model.hardware_profiles = plan_hardware_profiles(check, model.openshift_ai, model.tenants, model.cohorts)
        model.node_pools = parse_node_pools(check, inventory.get("gpuaas_node_pools"), model.flavors)
        if nodes is not None:
            model.capacity = check_capacity(check, model.flavors, model.tenants, model.node_pools, nodes,
                                            model.allow_overcommit, model.cohorts)
        model.fleet = parse_clusters(check, inventory.get("gpuaas_clusters"), model.flavors, model.tenants,
                                     model.allow_overcommit)
        if model.fleet is not None:
            for i, cohort in enumerate(model.cohorts):
                if cohort.quotas:
                    check.err("gpuaas_cohorts[%d].quotas" % i,
                              "cohort quotas are not supported with gpuaas_clusters (MultiKueue): the fleet splits each "
                              "tenant's quota across the workers, not a cohort's; give the quota to the tenants of "
                              "cohort %s instead (docs/multicluster.md)" % cohort.name)
        model.warnings = check.warnings
        return model


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
