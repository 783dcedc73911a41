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

import re
import typing as t
from dataclasses import dataclass, field
from decimal import Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.cohorts import COHORT_KEYS, parse_cohorts  # noqa: F401
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.flavors import FLAVOR_KEYS, parse_flavors  # noqa: F401
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import (
    BORROW_POLICIES,
    QUEUEING_STRATEGIES,
    RECLAIM_POLICIES,
    WITHIN_CQ_POLICIES,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_rules import lends_above_nominal
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import QUALIFIED_NAME
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.priorities import PRIORITY_KEYS, parse_priorities  # noqa: F401
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.prometheus import (  # noqa: F401 - re-exported
    PROMETHEUS_KEYS,
    TOKEN_SECRET_KEYS,
    parse_prometheus,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import (
    is_accelerator,
    parse_quantity,
    quantity_text,
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
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import (  # noqa: F401 - re-exported
    InventoryError,
    Validator,
)

# Namespaces a tenant can never claim.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "kueue-system", "keda",
                     "gpu-operator", "nvidia-gpu-operator", "openshift", "monitoring")
SYSTEM_NAMESPACE_PREFIXES = ("kube-", "openshift-")

# Kinds KEDA can scale (they have /scale) whose pod names the idle trigger knows how to match.
SCALE_TARGET_KINDS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
}
# InferenceService has no /scale: its predictor Deployment (KServe raw deployment mode) is scaled instead.
INFERENCE_SERVICE_SUFFIX = "-predictor"
# Kinds without /scale that users try to autoscale, and what to do instead (docs/autoscaling.md).
NOT_SCALABLE_KINDS = {
    "RayCluster": "has no /scale subresource; use Ray's in-tree autoscaler (enableInTreeAutoscaling) with Kueue's "
                  "elastic jobs (annotation kueue.x-k8s.io/elastic-job: \"true\"), see docs/autoscaling.md",
    "RayJob": "has no /scale subresource; its RayCluster scales with Ray's in-tree autoscaler, see docs/autoscaling.md",
    "RayService": "has no /scale subresource; use Ray Serve autoscaling, see docs/autoscaling.md",
    "Workload": "is Kueue's bookkeeping object, not a workload; scale the Deployment or StatefulSet that owns it",
    "Job": "runs to completion; Kueue queues Jobs, KEDA ScaledJobs (not ScaledObjects) create them",
}

TENANT_KEYS = ("name", "namespaces", "cohort", "fair_sharing_weight", "quotas", "preemption", "access",
               "autoscaling", "queues", "state", "queueing_strategy", "labels", "default_priority", "default_queue",
               "allowed_priorities")
QUOTA_KEYS = ("flavor", "resources", "borrowing_limit", "lending_limit")
PREEMPTION_KEYS = ("reclaim_within_cohort", "within_cluster_queue", "borrow_within_cohort")
BORROW_KEYS = ("policy", "max_priority_threshold")
ACCESS_KEYS = ("admins", "users")
QUEUE_KEYS = ("name", "namespaces")
AUTOSCALING_KEYS = ("name", "namespace", "target", "min_replicas", "max_replicas", "idle_scale_to_zero",
                    "load", "polling_interval", "cooldown_period", "triggers")
TARGET_KEYS = ("kind", "name", "api_version")
IDLE_KEYS = ("after_minutes", "after_seconds", "utilization_threshold", "wake_query", "wake_threshold", "pod_regex")
LOAD_KEYS = ("query", "target_per_replica", "activation_threshold")
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
        model.tenants = self.tenants(inv.get("gpuaas_tenants"), model)
        self.idle_reclaim(model)
        model.node_pools = self.node_pools(inv.get("gpuaas_node_pools"), model)
        if nodes is not None:
            self.capacity(model, nodes)
        model.warnings = self.warnings
        return model

    def tenants(self, value: t.Any, model: TenantModel) -> t.List[Tenant]:
        out: t.List[Tenant] = []
        names = []
        flavors = {f.name for f in model.flavors}
        cohorts = {c.name for c in model.cohorts}
        priorities = {p.name for p in model.priorities}
        claimed: t.Dict[str, str] = {}
        for i, item in enumerate(self.sequence("gpuaas_tenants", value)):
            path = "gpuaas_tenants[%d]" % i
            data = self.mapping(path, item, TENANT_KEYS)
            if data is None:
                continue
            name = self.label_name(path + ".name", data.get("name"))
            names.append((i, name))
            state = data.get("state", "present") or "present"
            if state not in ("present", "absent"):
                self.err(path + ".state", "%r is not one of present, absent" % (state,))
                state = "present"
            namespaces: t.List[str] = []
            raw_ns = self.sequence(path + ".namespaces", data.get("namespaces"))
            if not raw_ns and state == "present":
                self.err(path + ".namespaces", "a tenant needs at least one namespace")
            for j, ns in enumerate(raw_ns):
                npath = "%s.namespaces[%d]" % (path, j)
                ns = self.label_name(npath, ns)
                if ns is None:
                    continue
                if ns in SYSTEM_NAMESPACES or ns.startswith(SYSTEM_NAMESPACE_PREFIXES):
                    self.err(npath, "%r is a system namespace; tenants need their own namespaces" % ns)
                    continue
                if ns in namespaces:
                    self.err(npath, "namespace %r is listed twice" % ns)
                    continue
                if ns in claimed:
                    self.err(npath, "namespace %r is already claimed by %s" % (ns, claimed[ns]))
                    continue
                claimed[ns] = "%s (%s)" % (path, name)
                namespaces.append(ns)
            tenant = Tenant(name=name or "", namespaces=namespaces, state=state)
            cohort = data.get("cohort")
            if cohort is not None:
                cohort = self.name(path + ".cohort", cohort)
                if cohort and cohort not in cohorts:
                    self.unknown_ref(path + ".cohort", cohort, cohorts, "cohort")
            tenant.cohort = cohort
            tenant.fair_sharing_weight = self.weight(path + ".fair_sharing_weight", data.get("fair_sharing_weight"))
            tenant.queueing_strategy = self.enum(path + ".queueing_strategy", data.get("queueing_strategy"), QUEUEING_STRATEGIES)
            tenant.labels = self.string_map(path + ".labels", data.get("labels"), "label")
            if data.get("default_priority") is not None:
                self.err(path + ".default_priority",
                         "was removed: Kueue has no per-tenant default priority (only the cluster-wide "
                         "WorkloadPriorityClass named 'default' behind its alpha gate WorkloadPriorityClassDefaulting), "
                         "so this key never took effect; delete it and set the label kueue.x-k8s.io/priority-class "
                         "on the workload (allowed_priorities limits which classes a tenant may use)")
            allowed = data.get("allowed_priorities")
            if allowed is not None:
                tenant.allowed_priorities = []
                for k, prio in enumerate(self.sequence(path + ".allowed_priorities", allowed)):
                    if prio not in priorities:
                        self.unknown_ref("%s.allowed_priorities[%d]" % (path, k), str(prio), priorities, "priority")
                    elif prio not in tenant.allowed_priorities:
                        tenant.allowed_priorities.append(prio)
            tenant.quotas = self.quotas(path, data.get("quotas"), flavors, cohort, state)
            tenant.preemption = self.preemption(path + ".preemption", data.get("preemption"))
            tenant.access = self.access(path + ".access", data.get("access"))
            tenant.queues = self.queues(path + ".queues", data.get("queues"), namespaces)
            default_queue = data.get("default_queue", True)
            if not isinstance(default_queue, bool):
                self.err(path + ".default_queue", "must be true or false, got %r" % (default_queue,))
                default_queue = True
            tenant.default_queue = default_queue
            if not default_queue and state == "present":
                for ns in namespaces:
                    if tenant.suggested_queue(ns) is None:
                        self.err(path + ".queues", "namespace %r has no LocalQueue: with default_queue: false, list it in "
                                                   "a queue's namespaces" % ns)
            tenant.autoscaling = self.autoscaling(path + ".autoscaling", data.get("autoscaling"), namespaces, model)
            if name:
                out.append(tenant)
        self.duplicates("gpuaas_tenants", names, "tenant")
        return out

    def quotas(self, tpath: str, value: t.Any, flavors: t.Set[str], cohort: t.Optional[str], state: str) -> t.List[Quota]:
        out: t.List[Quota] = []
        seen: t.Dict[str, int] = {}
        for k, item in enumerate(self.sequence(tpath + ".quotas", value)):
            path = "%s.quotas[%d]" % (tpath, k)
            data = self.mapping(path, item, QUOTA_KEYS)
            if data is None:
                continue
            flavor = data.get("flavor")
            if not flavor:
                self.err(path + ".flavor", "is required")
                continue
            if flavor not in flavors:
                self.unknown_ref(path + ".flavor", str(flavor), flavors, "flavor")
            if flavor in seen:
                self.err(path + ".flavor", "flavor %r is listed twice (also quotas[%d]); merge the resources" % (flavor, seen[flavor]))
                continue
            seen[flavor] = k
            resources = self.resource_map(path + ".resources", data.get("resources"))
            if data.get("resources") is None:
                self.err(path + ".resources", "is required (e.g. {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti})")
            borrowing = self.resource_map(path + ".borrowing_limit", data.get("borrowing_limit"))
            lending = self.resource_map(path + ".lending_limit", data.get("lending_limit"))
            for label, limits in (("borrowing_limit", borrowing), ("lending_limit", lending)):
                if limits and not cohort:
                    self.err("%s.%s" % (path, label), "%s needs the tenant to be in a cohort (set gpuaas_tenants[].cohort)" % label)
                for res in limits:
                    if res not in resources:
                        self.err("%s.%s.%s" % (path, label, res), "resource %r has no nominal quota in resources" % res)
            for res, limit in lending.items():
                if res in resources and lends_above_nominal(limit, resources[res]):
                    self.err("%s.lending_limit.%s" % (path, res),
                             "lending limit %s is above the nominal quota %s" % (limit, resources[res]))
            out.append(Quota(str(flavor), resources, borrowing, lending))
        return out

    def resource_map(self, path: str, value: t.Any) -> t.Dict[str, str]:
        data = self.mapping(path, value)
        out: t.Dict[str, str] = {}
        for res, amount in (data or {}).items():
            rpath = "%s.%s" % (path, res)
            if not isinstance(res, str) or not QUALIFIED_NAME.match(res):
                self.err(rpath, "%r is not a Kubernetes resource name (e.g. nvidia.com/gpu, cpu, memory)" % (res,))
                continue
            try:
                number = parse_quantity(amount)
            except ValueError as exc:
                self.err(rpath, str(exc))
                continue
            if number < 0:
                self.err(rpath, "must not be negative, got %s" % amount)
                continue
            out[res] = quantity_text(amount)
        return out

    def preemption(self, path: str, value: t.Any) -> Preemption:
        data = self.mapping(path, value, PREEMPTION_KEYS)
        if not data:
            return Preemption()
        out = Preemption(
            reclaim_within_cohort=self.enum(path + ".reclaim_within_cohort", data.get("reclaim_within_cohort"), RECLAIM_POLICIES),
            within_cluster_queue=self.enum(path + ".within_cluster_queue", data.get("within_cluster_queue"), WITHIN_CQ_POLICIES),
        )
        borrow = self.mapping(path + ".borrow_within_cohort", data.get("borrow_within_cohort"), BORROW_KEYS)
        if borrow:
            out.borrow_policy = self.enum(path + ".borrow_within_cohort.policy", borrow.get("policy"), BORROW_POLICIES)
            if borrow.get("max_priority_threshold") is not None:
                out.borrow_max_priority_threshold = self.integer(path + ".borrow_within_cohort.max_priority_threshold",
                                                                 borrow.get("max_priority_threshold"))
            if out.reclaim_within_cohort in (None, "Never") and out.borrow_policy not in (None, "Never"):
                self.err(path + ".borrow_within_cohort.policy",
                         "needs reclaim_within_cohort LowerPriority or Any (Kueue refuses reclaimWithinCohort=Never with borrowWithinCohort)")
        return out

    def access(self, path: str, value: t.Any) -> Access:
        data = self.mapping(path, value, ACCESS_KEYS)
        out = Access()
        if not data:
            return out
        for role in ACCESS_KEYS:
            for j, subject in enumerate(self.sequence("%s.%s" % (path, role), data.get(role))):
                spath = "%s.%s[%d]" % (path, role, j)
                if not isinstance(subject, str) or not subject.strip():
                    self.err(spath, "must be a group name (or 'user:<name>' for a single user)")
                    continue
                if subject.startswith("user:"):
                    target = out.admin_users if role == "admins" else out.user_users
                    target.append(subject[5:])
                else:
                    target = out.admin_groups if role == "admins" else out.user_groups
                    target.append(subject[6:] if subject.startswith("group:") else subject)
        return out

    def queues(self, path: str, value: t.Any, namespaces: t.List[str]) -> t.List[ExtraQueue]:
        out: t.List[ExtraQueue] = []
        names = []
        for j, item in enumerate(self.sequence(path, value)):
            qpath = "%s[%d]" % (path, j)
            if isinstance(item, str):
                item = {"name": item}
            data = self.mapping(qpath, item, QUEUE_KEYS)
            if data is None:
                continue
            name = self.name(qpath + ".name", data.get("name"))
            names.append((j, name))
            if name == "default":
                self.err(qpath + ".name", "'default' is created in every namespace already; pick another name")
                continue
            qns = []
            for k, ns in enumerate(self.sequence(qpath + ".namespaces", data.get("namespaces"))):
                if ns not in namespaces:
                    self.unknown_ref("%s.namespaces[%d]" % (qpath, k), str(ns), namespaces, "tenant namespace")
                else:
                    qns.append(ns)
            if name:
                out.append(ExtraQueue(name, qns if data.get("namespaces") else list(namespaces)))
        self.duplicates(path, names, "queue")
        return out

    def autoscaling(self, path: str, value: t.Any, namespaces: t.List[str], model: TenantModel) -> t.List[Autoscaling]:
        out: t.List[Autoscaling] = []
        seen: t.Dict[t.Tuple[str, str], int] = {}
        for j, item in enumerate(self.sequence(path, value)):
            apath = "%s[%d]" % (path, j)
            data = self.mapping(apath, item, AUTOSCALING_KEYS)
            if data is None:
                continue
            name = self.name(apath + ".name", data.get("name"))
            namespace = data.get("namespace")
            if namespace is None and len(namespaces) == 1:
                namespace = namespaces[0]
            if namespace not in namespaces:
                self.unknown_ref(apath + ".namespace", str(namespace), namespaces, "tenant namespace")
                namespace = None
            target = self.mapping(apath + ".target", data.get("target"), TARGET_KEYS) or {}
            kind = target.get("kind", "Deployment")
            target_name = self.name(apath + ".target.name", target.get("name"))
            source_kind = None
            api_version = target.get("api_version")
            if kind in NOT_SCALABLE_KINDS:
                self.err(apath + ".target.kind", "KEDA cannot scale a %s: it %s" % (kind, NOT_SCALABLE_KINDS[kind]))
            elif kind == "InferenceService":
                # KServe InferenceService has no /scale: scale its predictor Deployment (raw deployment mode).
                source_kind, kind, api_version = "InferenceService", "Deployment", "apps/v1"
                target_name = (target_name + INFERENCE_SERVICE_SUFFIX) if target_name else target_name
            api_version = api_version or SCALE_TARGET_KINDS.get(kind)
            if not api_version and kind not in NOT_SCALABLE_KINDS:
                self.err(apath + ".target.kind", "%r needs target.api_version (known kinds: %s, InferenceService)"
                         % (kind, ", ".join(SCALE_TARGET_KINDS)))
            min_r = self.integer(apath + ".min_replicas", data.get("min_replicas", 0), 0)
            max_r = self.integer(apath + ".max_replicas", data.get("max_replicas", max(min_r or 0, 1)), 1)
            if min_r is not None and max_r is not None and min_r > max_r:
                self.err(apath + ".max_replicas", "must be at least min_replicas (%d)" % min_r)
            polling = data.get("polling_interval")
            if polling is not None:
                polling = self.integer(apath + ".polling_interval", polling, 1)
            cooldown = data.get("cooldown_period")
            if cooldown is not None:
                cooldown = self.integer(apath + ".cooldown_period", cooldown, 0)
            idle = self.mapping(apath + ".idle_scale_to_zero", data.get("idle_scale_to_zero"), IDLE_KEYS)
            load = self.mapping(apath + ".load", data.get("load"), LOAD_KEYS)
            triggers = self.sequence(apath + ".triggers", data.get("triggers"))
            for k, trig in enumerate(triggers):
                tdata = self.mapping("%s.triggers[%d]" % (apath, k), trig)
                if tdata is not None and not tdata.get("type"):
                    self.err("%s.triggers[%d].type" % (apath, k), "is required (a KEDA scaler type, e.g. prometheus)")
            auto = Autoscaling(name=name or "", namespace=namespace or "", target_kind=kind,
                               target_name=target_name or "", target_api_version=api_version or "",
                               min_replicas=min_r or 0, max_replicas=max_r or 1, polling_interval=polling,
                               cooldown_period=cooldown, source_kind=source_kind,
                               triggers=[dict(x) for x in triggers if isinstance(x, t.Mapping)])
            idle_set = idle is not None and data.get("idle_scale_to_zero") is not None
            load_set = load is not None and data.get("load") is not None
            if idle_set:
                self.idle_settings(apath, idle or {}, auto)
            if load_set:
                self.load_settings(apath, load or {}, auto)
            if (idle_set or load_set) and not model.prometheus.url:
                self.err(apath + (".idle_scale_to_zero" if idle_set else ".load"),
                         "reads %s from Prometheus: set gpuaas_prometheus.url in the inventory"
                         % ("GPU utilization" if idle_set else "its metric"))
            if not idle_set and not load_set and not auto.triggers:
                self.err(apath, "needs idle_scale_to_zero, load or triggers")
            if name and namespace:
                if (namespace, name) in seen:
                    self.err(apath + ".name", "duplicate ScaledObject %s/%s" % (namespace, name))
                seen[(namespace, name)] = j
                out.append(auto)
        return out

    def idle_settings(self, apath: str, idle: t.Mapping[str, t.Any], auto: Autoscaling) -> None:
        """idle_scale_to_zero: window, threshold, pod match and wake signal; checks the target kind allows 0."""
        ipath = apath + ".idle_scale_to_zero"
        if idle.get("after_minutes") is not None and idle.get("after_seconds") is not None:
            self.err(ipath, "set after_minutes or after_seconds, not both")
        if idle.get("after_seconds") is not None:
            seconds = self.integer(ipath + ".after_seconds", idle.get("after_seconds"), 10)
        else:
            minutes = self.integer(ipath + ".after_minutes", idle.get("after_minutes", 15), 1)
            seconds = minutes * 60 if minutes is not None else None
        auto.idle_window_seconds = seconds or 900
        thr = idle.get("utilization_threshold", 1)
        try:
            parse_quantity(thr)
            auto.idle_utilization_threshold = quantity_text(thr)
        except ValueError as exc:
            self.err(ipath + ".utilization_threshold", str(exc))
        wake = idle.get("wake_query")
        if wake is not None and (not isinstance(wake, str) or not wake.strip()):
            self.err(ipath + ".wake_query", "must be a PromQL expression returning one value")
            wake = None
        auto.wake_query = wake
        try:
            parse_quantity(idle.get("wake_threshold", 0))
            auto.wake_threshold = quantity_text(idle.get("wake_threshold", 0))
        except ValueError as exc:
            self.err(ipath + ".wake_threshold", str(exc))
        regex = idle.get("pod_regex")
        if regex is not None:
            try:
                if not isinstance(regex, str) or not regex:
                    raise re.error("empty")
                re.compile(regex)
                auto.pod_regex = regex
            except re.error as exc:
                self.err(ipath + ".pod_regex", "must be a regular expression matched against whole pod names (%s)" % exc)
        elif auto.target_kind not in SCALE_TARGET_KINDS:
            self.err(ipath + ".pod_regex", "is required for a %s target: the idle trigger must know the names of the "
                                           "target's own pods (e.g. '%s-[0-9]+')" % (auto.target_kind, auto.target_name or "name"))
        elif auto.target_kind == "Deployment" and len(auto.target_name) > 46:
            self.warnings.append("%s.target.name: pod names of a Deployment named longer than 46 characters are "
                                 "truncated, so the idle trigger may miss its pods; set idle_scale_to_zero.pod_regex"
                                 % apath)
        if auto.min_replicas != 0:
            self.err(apath + ".min_replicas", "must be 0 with idle_scale_to_zero")
        if not wake and not auto.triggers:
            self.warnings.append(
                "%s.idle_scale_to_zero: without wake_query (or load.query) nothing brings %s %s back from zero; set "
                "wake_query to a request-rate or queue-depth PromQL, or scale it up by hand"
                % (apath, auto.target_kind, auto.target_name))

    def load_settings(self, apath: str, load: t.Mapping[str, t.Any], auto: Autoscaling) -> None:
        """load: scale between 1 and max_replicas on a metric (AverageValue: one replica per target_per_replica)."""
        lpath = apath + ".load"
        query = load.get("query") or auto.wake_query
        if not query or not isinstance(query, str):
            self.err(lpath + ".query", "is required (or set idle_scale_to_zero.wake_query, which load then uses)")
        auto.load_query = query if isinstance(query, str) else None
        if load.get("target_per_replica") is None:
            self.err(lpath + ".target_per_replica", "is required: the value of the query one replica handles")
        for key in ("target_per_replica", "activation_threshold"):
            if load.get(key) is None:
                continue
            try:
                number = parse_quantity(load[key])
            except ValueError as exc:
                self.err("%s.%s" % (lpath, key), str(exc))
                continue
            if key == "target_per_replica" and number <= 0:
                self.err(lpath + ".target_per_replica", "must be above 0, got %s" % load[key])
                continue
            setattr(auto, "load_target" if key == "target_per_replica" else "load_activation", quantity_text(load[key]))
        if auto.target_kind == "StatefulSet":
            self.err(lpath, "a StatefulSet under Kueue scales only between 0 and N (Kueue refuses other replica changes); "
                            "use idle_scale_to_zero with max_replicas: N and no load")

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


def parse_autoscaling(entry: t.Mapping[str, t.Any], namespace: str,
                      prometheus_url: t.Optional[str]) -> t.Tuple[Autoscaling, t.List[str]]:
    """One ``autoscaling`` entry outside a tenant (the ``scaled_object`` module): ``(Autoscaling, warnings)``;
    raises ``InventoryError`` listing every problem, with paths under ``options``."""
    parser = _Parser()
    model = TenantModel(prometheus=PrometheusSettings(url=prometheus_url))
    autos = parser.autoscaling("options", [dict(entry, namespace=namespace)], [namespace], model)
    if parser.errors or not autos:
        raise InventoryError("The autoscaling options have %d problem%s; nothing was changed."
                             % (len(parser.errors), "" if len(parser.errors) == 1 else "s"),
                             hint="Fix every listed option (see ansible-doc gpuaas.platform.scaled_object and docs/autoscaling.md).",
                             problems=[e.replace("options[0].", "").replace("gpuaas_prometheus.url in the inventory", "prometheus_url")
                                       for e in parser.errors])
    return autos[0], [w.replace("options[0].", "") for w in parser.warnings]


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
