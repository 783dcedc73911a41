# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pure functions: validated ``TenantModel`` -> desired Kubernetes objects (Kueue v1beta2 shape).

``desired_objects(model, platform)`` returns every object the tenants role manages:

* shared: ResourceFlavors, Cohorts, WorkloadPriorityClasses, the ClusterRole that lets tenants read
  Kueue queues (aggregated into ``admin``/``edit``/``view``), the ValidatingAdmissionPolicies (+ Bindings,
  built by ``admission``) that refuse GPU work without a Kueue queue in tenant namespaces and namespace labels
  ``gpuaas.io/tenant``/``gpuaas.io/platform`` written by anyone but the automation, and the Prometheus
  credentials for KEDA (Secret + ClusterTriggerAuthentication) when ``gpuaas_prometheus`` has a token or CA;
* per present tenant: Namespaces, one ClusterQueue, LocalQueues (``default`` + extra), RoleBindings
  (admins -> ``admin``, users -> ``edit``), a ClusterRole/Binding to read its own ClusterQueue, and the
  KEDA ScaledObjects of ``autoscaling``, and (opt-in, ``gpuaas_openshift_ai``) its OpenShift AI HardwareProfiles
  (built by ``openshift_ai``; the shared ClusterRole that lets tenants read them).

Every object carries ``app.kubernetes.io/managed-by: gpuaas.platform`` and ``gpuaas.io/component: tenants``;
tenant objects also ``gpuaas.io/tenant: <name>``. No I/O.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import openshift_ai
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import provisioning
# The admission policy lives in its own module; its public names stay importable from here.
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.admission import (  # pylint: disable=unused-import
    ADOPTION_WORKLOAD_KINDS,
    ALLOWED_PRIORITIES_ANNOTATION,
    DEFAULT_PLATFORM_NAMESPACES,
    DEFAULT_QUEUE,
    DEFAULT_WORKLOAD_CONTROLLERS,
    NAMESPACE_POLICY_NAME,
    POLICY_NAME,
    QUEUE_LABEL,
    SUGGESTED_QUEUE_LABEL,
    VAP_V,
    AdmissionSettings,
    admission_policy,
    namespace_labels_policy,
    workloads_refused_on_update,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import TENANT_LABEL, add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import (
    Quota,
    Tenant,
    TenantModel,
    tenant_priorities,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import records

COMPONENT_VALUE = "tenants"
OPENSHIFT_KUEUE_LABEL = "kueue.openshift.io/managed"
KUEUE_V = "kueue.x-k8s.io/v1beta2"
RBAC_V = "rbac.authorization.k8s.io/v1"

QUEUE_READER_ROLE = "gpuaas-tenant-queue-reader"

# Kinds this module manages, in (apiVersion, kind) form: the prune scope of the tenants module.
MANAGED_KINDS: t.Tuple[t.Tuple[str, str], ...] = (
    ("v1", "Namespace"),
    (KUEUE_V, "ResourceFlavor"),
    (KUEUE_V, "Cohort"),
    (KUEUE_V, "WorkloadPriorityClass"),
    (KUEUE_V, "ClusterQueue"),
    (KUEUE_V, "LocalQueue"),
    (RBAC_V, "ClusterRole"),
    (RBAC_V, "ClusterRoleBinding"),
    (RBAC_V, "RoleBinding"),
    (VAP_V, "ValidatingAdmissionPolicy"),
    (VAP_V, "ValidatingAdmissionPolicyBinding"),
    ("v1", "Secret"),
    (keda.KEDA_V, "ClusterTriggerAuthentication"),
    (keda.KEDA_V, "ScaledObject"),
    (openshift_ai.HWP_V, openshift_ai.HWP_KIND),
)


def labels_for(tenant: t.Optional[str] = None, extra: t.Optional[t.Mapping[str, str]] = None) -> t.Dict[str, str]:
    """Ownership labels (plus ``extra``) of an object built here."""
    labels = dict(extra or {})
    if tenant:
        labels[TENANT_LABEL] = tenant
    return add_ownership(labels, component=COMPONENT_VALUE)


def _meta(name: str, tenant: t.Optional[str] = None, namespace: t.Optional[str] = None,
          extra_labels: t.Optional[t.Mapping[str, str]] = None) -> t.Dict[str, t.Any]:
    meta: t.Dict[str, t.Any] = {"name": name, "labels": labels_for(tenant, extra_labels)}
    if namespace:
        meta["namespace"] = namespace
    return meta


# -- Kueue objects (v1beta2, built by manifests/kueue.py from records made of the validated model) ----------

def resource_flavor(name: str, node_labels: t.Optional[t.Mapping[str, str]] = None,
                    node_taints: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                    tolerations: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                    topology_name: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    flavor = records.Flavor(name, dict(node_labels or {}), list(node_taints or []), list(tolerations or []),
                            topology_name)
    return kueue.resource_flavor(records.ResourceFlavorSpec(records.ObjectMeta(name, labels=labels_for()), flavor))


def cohort(name: str, parent: t.Optional[str] = None, fair_sharing_weight: t.Optional[str] = None,
           quotas: t.Sequence[Quota] = ()) -> t.Dict[str, t.Any]:
    """A Cohort; ``quotas`` (the cohort's shared pool) become its resourceGroups, grouped as a tenant's are."""
    return kueue.cohort(records.CohortSpec(records.ObjectMeta(name, labels=labels_for()), parent,
                                           quota_resource_groups(quotas), fair_sharing_weight))


def workload_priority_class(name: str, value: int, description: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    return kueue.workload_priority_class(records.PriorityClassSpec(records.ObjectMeta(name, labels=labels_for()),
                                                                   records.Priority(name, value, description)))


def resource_groups(tenant: Tenant) -> t.List[records.ResourceGroup]:
    """Kueue resourceGroups for a tenant's quotas (``quota_resource_groups``)."""
    return quota_resource_groups(tenant.quotas)


def quota_resource_groups(quotas: t.Sequence[Quota]) -> t.List[records.ResourceGroup]:
    """Kueue resourceGroups for the quotas of a tenant's ClusterQueue or of a Cohort.

    Kueue wants every resource in exactly one group and every flavor of a group to list exactly the
    group's covered resources. Flavors sharing a resource are grouped together (connected components,
    inventory order kept); a flavor that lacks one of its group's resources gets a quota of 0 for it.
    """
    groups: t.List[t.Dict[str, t.Any]] = []  # each: {"resources": [..], "quotas": [Quota]}
    for quota in quotas:
        names = list(quota.resources)
        touching = [g for g in groups if set(g["resources"]) & set(names)]
        if touching:
            merged = touching[0]
            for other in touching[1:]:
                for res in other["resources"]:
                    if res not in merged["resources"]:
                        merged["resources"].append(res)
                merged["quotas"].extend(other["quotas"])
                groups.remove(other)
        else:
            merged = {"resources": [], "quotas": []}
            groups.append(merged)
        for res in names:
            if res not in merged["resources"]:
                merged["resources"].append(res)
        merged["quotas"].append(quota)
    order = {q.flavor: i for i, q in enumerate(quotas)}
    out = []
    for group in groups:
        flavors = []
        for quota in sorted(group["quotas"], key=lambda q: order[q.flavor]):
            resources = [records.ResourceQuota(res, quota.resources.get(res, "0"), quota.borrowing_limit.get(res),
                                               quota.lending_limit.get(res)) for res in group["resources"]]
            flavors.append(records.FlavorQuotas(quota.flavor, resources))
        out.append(records.ResourceGroup(list(group["resources"]), flavors))
    return out


def _preemption(tenant: Tenant) -> t.Optional[records.Preemption]:
    """The tenant's preemption as the ClusterQueue carries it; None when it sets nothing (Kueue's defaults)."""
    pre = tenant.preemption
    if not (pre.reclaim_within_cohort or pre.within_cluster_queue or pre.borrow_policy):
        return None
    return records.Preemption(pre.reclaim_within_cohort or None, pre.within_cluster_queue or None,
                              pre.borrow_policy or None, pre.borrow_max_priority_threshold if pre.borrow_policy else None)


def cluster_queue(tenant: Tenant, draining: bool = False,
                  admission_checks: t.Sequence[records.AdmissionCheck] = ()) -> t.Dict[str, t.Any]:
    """The tenant's ClusterQueue (named like the tenant); ``draining`` sets stopPolicy HoldAndDrain;
    ``admission_checks`` (``provisioning.cluster_queue_checks``) go to ``admissionChecksStrategy``."""
    obj = kueue.cluster_queue(records.ClusterQueueSpec(
        records.ObjectMeta(tenant.name, labels=labels_for(tenant.name)), resource_groups=resource_groups(tenant),
        cohort=tenant.cohort or None, namespace_selector={"matchLabels": {TENANT_LABEL: tenant.name}},
        queueing_strategy=tenant.queueing_strategy or None, preemption=_preemption(tenant),
        fair_sharing_weight=tenant.fair_sharing_weight, stop_policy="HoldAndDrain" if draining else None,
        admission_checks=list(admission_checks)))
    if not obj["spec"].get("resourceGroups"):
        obj["spec"].pop("resourceGroups", None)
    return obj


def local_queue(name: str, namespace: str, cluster_queue_name: str, tenant: str) -> t.Dict[str, t.Any]:
    return kueue.local_queue(records.LocalQueueSpec(records.ObjectMeta(name, namespace, labels_for(tenant)),
                                                    cluster_queue_name))


# -- namespaces and RBAC -----------------------------------------------------------------------------------

def allowed_priorities(tenant: Tenant, model: t.Optional[TenantModel] = None) -> t.List[str]:
    """The priority classes the tenant may use (``priorities.tenant_priorities``: its ``allowed_priorities``, else
    the classes open to tenants, else the lowest)."""
    return tenant_priorities(tenant, model.priorities if model is not None else [])


def namespace(name: str, tenant: Tenant, platform: str = "kubernetes",
              priorities: t.Optional[t.Sequence[str]] = None) -> t.Dict[str, t.Any]:
    """A tenant namespace. ``priorities`` (the allowed classes) lands in the annotation the admission policy
    reads; tenants cannot change it (namespace objects are not theirs to write)."""
    extra = dict(tenant.labels)
    suggested = tenant.suggested_queue(name)
    if suggested:
        extra[SUGGESTED_QUEUE_LABEL] = suggested
    if platform == "openshift":
        extra[OPENSHIFT_KUEUE_LABEL] = "true"
    meta = _meta(name, tenant.name, extra_labels=extra)
    if priorities is not None:
        meta["annotations"] = {ALLOWED_PRIORITIES_ANNOTATION: ",".join(priorities)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _subjects(groups: t.Sequence[str], users: t.Sequence[str]) -> t.List[t.Dict[str, str]]:
    out = [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g} for g in groups]
    out.extend({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u} for u in users)
    return out


def role_binding(name: str, namespace: str, cluster_role: str, subjects: t.List[t.Dict[str, str]],
                 tenant: str) -> t.Dict[str, t.Any]:
    return {"apiVersion": RBAC_V, "kind": "RoleBinding", "metadata": _meta(name, tenant, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": subjects}


def queue_reader_cluster_role() -> t.Dict[str, t.Any]:
    """Read LocalQueues and Workloads; aggregated into admin/edit/view so tenant bindings include it.

    It grants no verb on ClusterQueues: tenants can never change them.
    """
    extra = {"rbac.authorization.k8s.io/aggregate-to-admin": "true",
             "rbac.authorization.k8s.io/aggregate-to-edit": "true",
             "rbac.authorization.k8s.io/aggregate-to-view": "true"}
    return {"apiVersion": RBAC_V, "kind": "ClusterRole", "metadata": _meta(QUEUE_READER_ROLE, extra_labels=extra),
            "rules": [{"apiGroups": ["kueue.x-k8s.io"],
                       "resources": ["localqueues", "localqueues/status", "workloads", "workloads/status"],
                       "verbs": ["get", "list", "watch"]}]}


def tenant_cluster_role(tenant: Tenant) -> t.Dict[str, t.Any]:
    """Read-only access to the tenant's own ClusterQueue and the shared flavors/priorities/cohorts."""
    name = "gpuaas-tenant-%s" % tenant.name
    return {"apiVersion": RBAC_V, "kind": "ClusterRole", "metadata": _meta(name, tenant.name),
            "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "clusterqueues/status"],
                       "resourceNames": [tenant.name], "verbs": ["get", "watch"]},
                      {"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors", "workloadpriorityclasses", "cohorts"],
                       "verbs": ["get", "list", "watch"]}]}


def tenant_cluster_role_binding(tenant: Tenant, subjects: t.List[t.Dict[str, str]]) -> t.Dict[str, t.Any]:
    name = "gpuaas-tenant-%s" % tenant.name
    return {"apiVersion": RBAC_V, "kind": "ClusterRoleBinding", "metadata": _meta(name, tenant.name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects}


# -- everything ----------------------------------------------------------------------------------------------

def tenant_objects(tenant: Tenant, model: TenantModel, platform: str = "kubernetes",
                   authenticated_prometheus: bool = False) -> t.List[t.Dict[str, t.Any]]:
    """Desired objects of one present tenant."""
    allowed = allowed_priorities(tenant, model)
    objs: t.List[t.Dict[str, t.Any]] = [namespace(ns, tenant, platform, allowed) for ns in tenant.namespaces]
    objs.append(cluster_queue(tenant, admission_checks=provisioning.cluster_queue_checks(tenant, model)))
    admins = _subjects(tenant.access.admin_groups, tenant.access.admin_users)
    users = _subjects(tenant.access.user_groups, tenant.access.user_users)
    for ns in tenant.namespaces:
        if tenant.default_queue:
            objs.append(local_queue(DEFAULT_QUEUE, ns, tenant.name, tenant.name))
        if admins:
            objs.append(role_binding("gpuaas-admins", ns, "admin", admins, tenant.name))
        if users:
            objs.append(role_binding("gpuaas-users", ns, "edit", users, tenant.name))
    for queue in tenant.queues:
        for ns in queue.namespaces:
            objs.append(local_queue(queue.name, ns, tenant.name, tenant.name))
    if admins or users:
        objs.append(tenant_cluster_role(tenant))
        objs.append(tenant_cluster_role_binding(tenant, admins + users))
    for auto in tenant.autoscaling:
        objs.append(keda.autoscaling_object(auto, model.prometheus, authenticated_prometheus, labels_for(tenant.name)))
    objs.extend(openshift_ai.hardware_profile(plan, labels_for(tenant.name))
                for plan in model.hardware_profiles if plan.tenant == tenant.name)
    return objs


def shared_objects(model: TenantModel, prometheus_token: t.Optional[str] = None,
                   prometheus_ca: t.Optional[str] = None, keda_namespace: str = "keda",
                   admission: t.Optional[AdmissionSettings] = None) -> t.List[t.Dict[str, t.Any]]:
    admission = admission or AdmissionSettings()
    objs: t.List[t.Dict[str, t.Any]] = []
    objs.extend(resource_flavor(f.name, f.node_labels, f.node_taints, f.tolerations, f.topology_name)
                for f in model.flavors)
    objs.extend(cohort(c.name, c.parent, c.fair_sharing_weight, c.quotas) for c in model.cohorts)
    objs.extend(workload_priority_class(p.name, p.value, p.description) for p in model.priorities)
    if model.present_tenants:
        objs.append(queue_reader_cluster_role())
        objs.extend(admission_policy(admission, model.prometheus.url, labels_for(), admission.integrations()))
        objs.extend(namespace_labels_policy(admission, labels_for()))
    if model.hardware_profiles:
        objs.append(openshift_ai.profile_reader_cluster_role(labels_for()))
    if any(t_.autoscaling for t_ in model.present_tenants):
        objs.extend(keda.prometheus_auth(model.prometheus, prometheus_token, prometheus_ca, keda_namespace, labels_for()))
    return objs


def desired_objects(model: TenantModel, platform: str = "kubernetes", prometheus_token: t.Optional[str] = None,
                    prometheus_ca: t.Optional[str] = None, keda_namespace: str = "keda",
                    admission: t.Optional[AdmissionSettings] = None) -> t.List[t.Dict[str, t.Any]]:
    """Every object the inventory asks for (present tenants only; absent tenants are offboarded by the module)."""
    objs = shared_objects(model, prometheus_token, prometheus_ca, keda_namespace, admission)
    authenticated = bool(prometheus_token or prometheus_ca)
    for tenant in model.present_tenants:
        objs.extend(tenant_objects(tenant, model, platform, authenticated))
    return objs
