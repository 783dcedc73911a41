# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_tenants``: each tenant's namespaces, queues, access and priorities; its quotas, preemption and
autoscaling are read by their own parsers (``quotas.py``, ``autoscaling.py``)."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import (
    IDLE_RECLAIM_KINDS,
    parse_autoscaling_list,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import QUEUEING_STRATEGIES
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quotas import parse_preemption, parse_quotas
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Access, ExtraQueue, Tenant
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

# The platform's own namespaces: the admission policy exempts them (gpuaas_admission.platform_namespaces overrides
# this default), so a tenant may never claim one — its GPU pods would be outside every rule. Defined once here; the
# policy (manifests/admission.py) and the tenants run's cross-check (reconcile/tenancy_runner.py) read it.
DEFAULT_PLATFORM_NAMESPACES: t.Tuple[str, ...] = (
    "kube-system", "kueue-system", "openshift-kueue-operator", "gpu-operator", "nvidia-gpu-operator",
    "node-feature-discovery", "openshift-nfd", "keda", "openshift-keda", "monitoring", "openshift-monitoring",
    "openshift-user-workload-monitoring")

# Namespaces a tenant can never claim.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "kueue-system", "keda",
                     "gpu-operator", "nvidia-gpu-operator", "openshift", "monitoring")
SYSTEM_NAMESPACE_PREFIXES = ("kube-", "openshift-")

TENANT_KEYS = ("name", "namespaces", "cohort", "fair_sharing_weight", "quotas", "preemption", "access",
               "autoscaling", "queues", "state", "queueing_strategy", "labels", "default_priority", "default_queue",
               "allowed_priorities", "hardware_profiles")
ACCESS_KEYS = ("admins", "users")
QUEUE_KEYS = ("name", "namespaces")
TENANT_STATES = ("present", "absent")
# The LocalQueue created in every tenant namespace unless default_queue is false.
DEFAULT_QUEUE = "default"


def parse_tenants(check: Validator, value: t.Any, flavors: t.Set[str], cohorts: t.Set[str], priorities: t.Set[str],
                  prometheus_url: t.Optional[str]) -> t.List[Tenant]:
    """Every tenant; a namespace belongs to one tenant only. ``flavors``, ``cohorts`` and ``priorities`` are the
    names the tenants may refer to; ``prometheus_url`` is where their autoscalers read metrics."""
    out: t.List[Tenant] = []
    claimed: t.Dict[str, str] = {}
    for _index, path, data, name in check.named_items("gpuaas_tenants", value, TENANT_KEYS, "tenant", label=True):
        state = data.get("state", "present") or "present"
        if state not in TENANT_STATES:
            check.err(path + ".state", "%r is not one of present, absent" % (state,))
            state = "present"
        namespaces = _namespaces(check, path, data.get("namespaces"), state == "present", claimed, name)
        tenant = Tenant(name=name or "", namespaces=namespaces, state=state)
        cohort = data.get("cohort")
        if cohort is not None:
            cohort = check.name(path + ".cohort", cohort)
            if cohort and cohort not in cohorts:
                check.unknown_ref(path + ".cohort", cohort, cohorts, "cohort")
        tenant.cohort = cohort
        tenant.fair_sharing_weight = check.weight(path + ".fair_sharing_weight", data.get("fair_sharing_weight"))
        tenant.queueing_strategy = check.enum(path + ".queueing_strategy", data.get("queueing_strategy"), QUEUEING_STRATEGIES)
        tenant.labels = check.string_map(path + ".labels", data.get("labels"), "label")
        if data.get("default_priority") is not None:
            check.err(path + ".default_priority",
                      "was removed: Kueue has no per-tenant default priority (only the cluster-wide "
                      "WorkloadPriorityClass named 'default' behind its alpha gate WorkloadPriorityClassDefaulting), "
                      "so this key never took effect; delete it and set the label kueue.x-k8s.io/priority-class "
                      "on the workload (allowed_priorities limits which classes a tenant may use)")
        if data.get("allowed_priorities") is not None:
            tenant.allowed_priorities = _allowed_priorities(check, path, data.get("allowed_priorities"), priorities)
        if data.get("hardware_profiles") is not None:  # OpenShift AI (inventory/openshift_ai.py)
            tenant.hardware_profiles = check.boolean(path + ".hardware_profiles", data.get("hardware_profiles"), False)
        tenant.quotas = parse_quotas(check, path, data.get("quotas"), flavors, cohort)
        tenant.preemption = parse_preemption(check, path + ".preemption", data.get("preemption"))
        tenant.access = _access(check, path + ".access", data.get("access"))
        tenant.queues = _queues(check, path + ".queues", data.get("queues"), namespaces)
        tenant.default_queue = check.boolean(path + ".default_queue", data.get("default_queue", True), True)
        if not tenant.default_queue and state == "present":
            for ns in namespaces:
                if tenant.suggested_queue(ns) is None:
                    check.err(path + ".queues", "namespace %r has no LocalQueue: with default_queue: false, list it in "
                                                "a queue's namespaces" % ns)
        autoscaling = parse_autoscaling_list(check, path + ".autoscaling", data.get("autoscaling"), namespaces,
                                             prometheus_url)
        tenant.autoscaling = [a for a in autoscaling if a.target_kind not in IDLE_RECLAIM_KINDS]
        tenant.ray_reclaim = [a for a in autoscaling if a.target_kind in IDLE_RECLAIM_KINDS]
        if name:
            out.append(tenant)
    return out


def _namespaces(check: Validator, tenant_path: str, value: t.Any, present: bool, claimed: t.Dict[str, str],
                tenant: t.Optional[str]) -> t.List[str]:
    """The tenant's namespaces; ``claimed`` (namespace -> owner, shared by every tenant) gets them added."""
    namespaces: t.List[str] = []
    raw = check.sequence(tenant_path + ".namespaces", value)
    if not raw and present:
        check.err(tenant_path + ".namespaces", "a tenant needs at least one namespace")
    for j, ns in enumerate(raw):
        path = "%s.namespaces[%d]" % (tenant_path, j)
        ns = check.label_name(path, ns)
        if ns is None:
            continue
        if ns in SYSTEM_NAMESPACES or ns.startswith(SYSTEM_NAMESPACE_PREFIXES):
            check.err(path, "%r is a system namespace; tenants need their own namespaces" % ns)
            continue
        if ns in DEFAULT_PLATFORM_NAMESPACES:
            check.err(path, "%r is a platform namespace (the admission policy exempts it: "
                            "gpuaas_admission.platform_namespaces); tenants need their own namespaces" % ns)
            continue
        if ns in namespaces:
            check.err(path, "namespace %r is listed twice" % ns)
            continue
        if ns in claimed:
            check.err(path, "namespace %r is already claimed by %s" % (ns, claimed[ns]))
            continue
        claimed[ns] = "%s (%s)" % (tenant_path, tenant)
        namespaces.append(ns)
    return namespaces


def _allowed_priorities(check: Validator, tenant_path: str, value: t.Any, priorities: t.Set[str]) -> t.List[str]:
    allowed: t.List[str] = []
    for k, prio in enumerate(check.sequence(tenant_path + ".allowed_priorities", value)):
        if prio not in priorities:
            check.unknown_ref("%s.allowed_priorities[%d]" % (tenant_path, k), str(prio), priorities, "priority")
        elif prio not in allowed:
            allowed.append(prio)
    return allowed


def _access(check: Validator, path: str, value: t.Any) -> Access:
    """``admins`` and ``users``: group names, ``group:<name>`` or ``user:<name>``."""
    data = check.mapping(path, value, ACCESS_KEYS)
    out = Access()
    if not data:
        return out
    for role in ACCESS_KEYS:
        for j, subject in enumerate(check.sequence("%s.%s" % (path, role), data.get(role))):
            if not isinstance(subject, str) or not subject.strip():
                check.err("%s.%s[%d]" % (path, role, j), "must be a group name (or 'user:<name>' for a single user)")
                continue
            if subject.startswith("user:"):
                target = out.admin_users if role == "admins" else out.user_users
                target.append(subject[5:])
            else:
                target = out.admin_groups if role == "admins" else out.user_groups
                target.append(subject[6:] if subject.startswith("group:") else subject)
    return out


def _queues(check: Validator, path: str, value: t.Any, namespaces: t.List[str]) -> t.List[ExtraQueue]:
    """Extra LocalQueues (a bare string is a queue in every tenant namespace)."""
    entries = [{"name": x} if isinstance(x, str) else x for x in check.sequence(path, value)]
    out: t.List[ExtraQueue] = []
    for _index, qpath, data, name in check.named_items(path, entries, QUEUE_KEYS, "queue"):
        if name == DEFAULT_QUEUE:
            check.err(qpath + ".name", "'default' is created in every namespace already; pick another name")
            continue
        qns = []
        for k, ns in enumerate(check.sequence(qpath + ".namespaces", data.get("namespaces"))):
            if ns not in namespaces:
                check.unknown_ref("%s.namespaces[%d]" % (qpath, k), str(ns), namespaces, "tenant namespace")
            else:
                qns.append(ns)
        if name:
            out.append(ExtraQueue(name, qns if data.get("namespaces") else list(namespaces)))
    return out
