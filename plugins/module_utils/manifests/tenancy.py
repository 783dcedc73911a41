# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pure functions: validated ``TenantModel`` -> desired Kubernetes objects (Kueue v1beta2 shape).

``desired_objects(model, platform)`` returns every object the tenants role manages:

* shared: ResourceFlavors, Cohorts, WorkloadPriorityClasses, the ClusterRole that lets tenants read
  Kueue queues (aggregated into ``admin``/``edit``/``view``), the ValidatingAdmissionPolicy (+ Binding)
  that refuses GPU work without a Kueue queue in tenant namespaces, and the Prometheus credentials for
  KEDA (Secret + ClusterTriggerAuthentication) when ``gpuaas_prometheus`` has a token or CA;
* per present tenant: Namespaces, one ClusterQueue, LocalQueues (``default`` + extra), RoleBindings
  (admins -> ``admin``, users -> ``edit``), a ClusterRole/Binding to read its own ClusterQueue, and the
  KEDA ScaledObjects of ``autoscaling``.

Every object carries ``app.kubernetes.io/managed-by: gpuaas.platform`` and ``gpuaas.io/component: tenants``;
tenant objects also ``gpuaas.io/tenant: <name>``. No I/O.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import TENANT_LABEL, add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import ACCELERATOR_PREFIXES, is_accelerator
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import (
    Tenant,
    TenantModel,
)

COMPONENT_VALUE = "tenants"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
OPENSHIFT_KUEUE_LABEL = "kueue.openshift.io/managed"
SUGGESTED_QUEUE_LABEL = "gpuaas.io/suggested-queue"
KUEUE_V = "kueue.x-k8s.io/v1beta2"
RBAC_V = "rbac.authorization.k8s.io/v1"
VAP_V = "admissionregistration.k8s.io/v1"

QUEUE_READER_ROLE = "gpuaas-tenant-queue-reader"
POLICY_NAME = "gpuaas-require-kueue-queue"
DEFAULT_QUEUE = "default"

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


# -- Kueue objects (v1beta2, built by the shared kueue_builders) -------------------------------------------

def resource_flavor(name: str, node_labels: t.Optional[t.Mapping[str, str]] = None,
                    node_taints: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                    tolerations: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                    topology_name: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    return kueue.resource_flavor(name, node_labels=node_labels or None, node_taints=node_taints or None,
                                 tolerations=tolerations or None, topology_name=topology_name, labels=labels_for())


def cohort(name: str, parent: t.Optional[str] = None, fair_sharing_weight: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    return kueue.cohort(name, parent=parent, fair_sharing_weight=fair_sharing_weight, labels=labels_for())


def workload_priority_class(name: str, value: int, description: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    return kueue.workload_priority_class(name, value, description=description, labels=labels_for())


def resource_groups(tenant: Tenant) -> t.List[t.Dict[str, t.Any]]:
    """Kueue resourceGroups for a tenant's quotas.

    Kueue wants every resource in exactly one group and every flavor of a group to list exactly the
    group's covered resources. Flavors sharing a resource are grouped together (connected components,
    inventory order kept); a flavor that lacks one of its group's resources gets a quota of 0 for it.
    """
    groups: t.List[t.Dict[str, t.Any]] = []  # each: {"resources": [..], "quotas": [Quota]}
    for quota in tenant.quotas:
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
    order = {q.flavor: i for i, q in enumerate(tenant.quotas)}
    out = []
    for group in groups:
        flavors = []
        for quota in sorted(group["quotas"], key=lambda q: order[q.flavor]):
            resources = []
            for res in group["resources"]:
                entry: t.Dict[str, t.Any] = {"name": res, "nominal_quota": quota.resources.get(res, "0")}
                if res in quota.borrowing_limit:
                    entry["borrowing_limit"] = quota.borrowing_limit[res]
                if res in quota.lending_limit:
                    entry["lending_limit"] = quota.lending_limit[res]
                resources.append(entry)
            flavors.append({"name": quota.flavor, "resources": resources})
        out.append({"covered_resources": list(group["resources"]), "flavors": flavors})
    return out


def cluster_queue(tenant: Tenant, draining: bool = False) -> t.Dict[str, t.Any]:
    """The tenant's ClusterQueue (named like the tenant); ``draining`` sets stopPolicy HoldAndDrain."""
    pre = tenant.preemption
    preemption: t.Dict[str, t.Any] = {}
    if pre.reclaim_within_cohort:
        preemption["reclaim_within_cohort"] = pre.reclaim_within_cohort
    if pre.within_cluster_queue:
        preemption["within_cluster_queue"] = pre.within_cluster_queue
    if pre.borrow_policy:
        borrow: t.Dict[str, t.Any] = {"policy": pre.borrow_policy}
        if pre.borrow_max_priority_threshold is not None:
            borrow["max_priority_threshold"] = pre.borrow_max_priority_threshold
        preemption["borrow_within_cohort"] = borrow
    obj = kueue.cluster_queue(
        tenant.name, resource_groups=resource_groups(tenant), cohort=tenant.cohort,
        namespace_selector={"matchLabels": {TENANT_LABEL: tenant.name}},
        queueing_strategy=tenant.queueing_strategy, preemption=preemption or None,
        fair_sharing_weight=tenant.fair_sharing_weight, stop_policy="HoldAndDrain" if draining else None,
        labels=labels_for(tenant.name))
    if not obj["spec"].get("resourceGroups"):
        obj["spec"].pop("resourceGroups", None)
    return obj


def local_queue(name: str, namespace: str, cluster_queue_name: str, tenant: str) -> t.Dict[str, t.Any]:
    return kueue.local_queue(name, namespace, cluster_queue=cluster_queue_name, labels=labels_for(tenant))


# -- namespaces and RBAC -----------------------------------------------------------------------------------

def allowed_priorities(tenant: Tenant, model: t.Optional[TenantModel] = None) -> t.List[str]:
    """The priority classes the tenant may use: its ``allowed_priorities``, else every class of the inventory."""
    if tenant.allowed_priorities is not None:
        return list(tenant.allowed_priorities)
    return [p.name for p in model.priorities] if model is not None else []


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


# -- admission policy ----------------------------------------------------------------------------------------

ALLOWED_PRIORITIES_ANNOTATION = "gpuaas.io/allowed-priorities"
# A namespace a cluster admin labels ``gpuaas.io/platform`` is on the platform allow-list too (tenants and project
# owners cannot label their Namespace objects, exactly as with ``gpuaas.io/tenant``).
PLATFORM_LABEL = "gpuaas.io/platform"
PRIORITY_LABEL = kueue_integrations.PRIORITY_LABEL
ADMISSION_GATE = kueue_integrations.ADMISSION_GATE

DEFAULT_PLATFORM_NAMESPACES: t.Tuple[str, ...] = (
    "kube-system", "kueue-system", "openshift-kueue-operator", "gpu-operator", "nvidia-gpu-operator",
    "node-feature-discovery", "openshift-nfd", "keda", "openshift-keda", "monitoring", "openshift-monitoring",
    "openshift-user-workload-monitoring")
# Identities whose Pods (and child Jobs/StatefulSets) are admitted on the strength of their parent object,
# which went through this policy and through Kueue: Kubernetes' Job controller (Job -> Pods) and the operators
# of Kueue's CRD frameworks that create pods or child workloads themselves. Never decided by ownerReferences,
# which the Pod's author writes.
DEFAULT_WORKLOAD_CONTROLLERS: t.Tuple[str, ...] = (
    "system:serviceaccount:kube-system:job-controller",
    "system:serviceaccount:jobset-system:jobset-controller-manager",
    "system:serviceaccount:lws-system:lws-controller-manager",
    "system:serviceaccount:ray-system:kuberay-operator",
    "system:serviceaccount:kubeflow:training-operator",
    "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager",
    "system:serviceaccount:appwrapper-system:appwrapper-controller-manager",
)
# Kueue's own identity: the only one that may remove the admission gate or a Pod's queue label.
DEFAULT_KUEUE_USERS: t.Tuple[str, ...] = (
    "system:serviceaccount:kueue-system:kueue-controller-manager",
    "system:serviceaccount:openshift-kueue-operator:kueue-controller-manager",
)


@dataclass
class AdmissionSettings:
    """What the admission policies trust (all configurable; defaults above)."""

    platform_namespaces: t.List[str] = field(default_factory=lambda: list(DEFAULT_PLATFORM_NAMESPACES))
    workload_controllers: t.List[str] = field(default_factory=lambda: list(DEFAULT_WORKLOAD_CONTROLLERS))
    kueue_users: t.List[str] = field(default_factory=lambda: list(DEFAULT_KUEUE_USERS))
    # who may use the platform's Prometheus credential in ScaledObjects (the collection's identity)
    automation_users: t.List[str] = field(default_factory=list)
    automation_groups: t.List[str] = field(default_factory=lambda: ["system:masters"])

    @classmethod
    def from_options(cls, options: t.Optional[t.Mapping[str, t.Any]]) -> "AdmissionSettings":
        out = cls()
        for key, value in (options or {}).items():
            if value is not None and hasattr(out, key):
                setattr(out, key, [str(v) for v in value])
        return out


def _cel_list(values: t.Iterable[str]) -> str:
    return "[%s]" % ", ".join("'%s'" % v.replace("\\", "\\\\").replace("'", "\\'") for v in values)


_GPU_PREFIX_CEL = " || ".join("k.startsWith('%s')" % p for p in ACCELERATOR_PREFIXES)
_CONTAINER_GPU_CEL = (
    "(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, %s)) || "
    "(has(c.resources.requests) && c.resources.requests.exists(k, %s)) || "
    "(has(c.resources.claims) && size(c.resources.claims) > 0)))" % (_GPU_PREFIX_CEL, _GPU_PREFIX_CEL))
_SPEC_GPU_CEL = (
    "s.containers.exists(c, %s) || (has(s.initContainers) && s.initContainers.exists(c, %s)) || "
    "(has(s.resourceClaims) && size(s.resourceClaims) > 0)" % (_CONTAINER_GPU_CEL, _CONTAINER_GPU_CEL))


def _gk(kind: kueue_integrations.Integration) -> str:
    return "%s/%s" % (kind.group, kind.kind)


def _pod_specs_cel() -> str:
    """CEL: the pod specs of ``object`` for a Pod or a builtin template kind; [] for every other kind."""
    expr = "[]"
    for kind in reversed([i for i in kueue_integrations.INTEGRATIONS if i.kind == "Pod"]
                         + kueue_integrations.template_kinds()):
        expr = "variables.gk == '%s' ? %s : (%s)" % (_gk(kind), kind.pod_specs_cel, expr)
    return expr


def _resource_rules() -> t.List[t.Dict[str, t.Any]]:
    by_group: t.Dict[str, t.List[str]] = {}
    for kind in list(kueue_integrations.INTEGRATIONS) + list(kueue_integrations.EXTRA_TEMPLATE_KINDS):
        by_group.setdefault(kind.group, [])
        if kind.resource not in by_group[kind.group]:
            by_group[kind.group].append(kind.resource)
    rules = [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": res}
             for group, res in by_group.items()]
    rules.append({"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                  "resources": ["workloads"]})
    rules.append({"apiGroups": ["keda.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                  "resources": ["scaledobjects", "scaledjobs"]})
    return rules


_PLATFORM_AUTH_CEL = ("has(tr.authenticationRef) && tr.authenticationRef.name == '%s' && has(tr.authenticationRef.kind) "
                      "&& tr.authenticationRef.kind == 'ClusterTriggerAuthentication'" % keda.PROMETHEUS_AUTH_NAME)


def admission_policy(settings: t.Optional[AdmissionSettings] = None,
                     prometheus_server: t.Optional[str] = None) -> t.List[t.Dict[str, t.Any]]:
    """ValidatingAdmissionPolicy + Binding ``gpuaas-require-kueue-queue``: no GPU outside Kueue (issue 11).

    Generated from ``kueue_integrations`` (the same list the kueue role enables). In every namespace but the
    platform allow-list:

    * GPU requests (device resources nvidia.com/*, amd.com/*, gpu.intel.com/* incl. MIG, and DRA claims) are
      refused outside tenant namespaces (label ``gpuaas.io/tenant``);
    * in tenant namespaces a GPU Pod/Job/Deployment/StatefulSet/ReplicaSet/... needs a queue label, and every
      Kueue CRD framework kind (RayJob, JobSet, TrainJob, ...) needs one whatever it requests;
    * a GPU Pod created by anyone but a workload controller (``request.userInfo``, never ownerReferences) must
      be held by Kueue's admission scheduling gate;
    * on UPDATE a Pod's queue label and Kueue's admission gate can only be removed by Kueue itself;
    * the Kueue priority label, pod ``priorityClassName`` and Kueue Workloads' priority must be in the tenant's
      allowed priorities (namespace annotation ``gpuaas.io/allowed-priorities``, written by the tenants role).

    * a KEDA ScaledObject/ScaledJob may name the platform's Prometheus credential (ClusterTriggerAuthentication
      ``gpuaas-prometheus``) only when the collection's identity (``automation_users``/``automation_groups``)
      writes its triggers, and only towards ``prometheus_server`` (``gpuaas_prometheus.url``); KEDA's own updates
      leave the triggers unchanged and pass.

    Every refusal says what to do instead.
    """
    settings = settings or AdmissionSettings()
    crd_gks = [_gk(i) for i in kueue_integrations.crd_kinds()]
    variables = [
        {"name": "gk", "expression": "request.kind.group + '/' + request.kind.kind"},
        {"name": "isPod", "expression": "variables.gk == '/Pod'"},
        {"name": "isWorkload", "expression": "variables.gk == 'kueue.x-k8s.io/Workload'"},
        {"name": "isFramework", "expression": "variables.gk in %s" % _cel_list(crd_gks)},
        {"name": "nsLabels", "expression":
            "namespaceObject != null && has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}"},
        {"name": "nsAnnotations", "expression":
            "namespaceObject != null && has(namespaceObject.metadata.annotations) ? "
            "namespaceObject.metadata.annotations : {}"},
        {"name": "isTenant", "expression": "'%s' in variables.nsLabels" % TENANT_LABEL},
        {"name": "podSpecs", "expression": _pod_specs_cel()},
        {"name": "wantsGpu", "expression": "variables.podSpecs.exists(s, %s)" % _SPEC_GPU_CEL},
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
        {"name": "oldLabels", "expression":
            "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
        {"name": "hasQueue", "expression":
            "'%s' in variables.labels && variables.labels['%s'] != ''" % (QUEUE_LABEL, QUEUE_LABEL)},
        {"name": "suggestedQueue", "expression":
            "'%s' in variables.nsLabels ? variables.nsLabels['%s'] : '%s'"
            % (SUGGESTED_QUEUE_LABEL, SUGGESTED_QUEUE_LABEL, DEFAULT_QUEUE)},
        {"name": "byController", "expression":
            "request.userInfo.username in %s" % _cel_list(settings.workload_controllers)},
        {"name": "byKueue", "expression": "request.userInfo.username in %s" % _cel_list(settings.kueue_users)},
        {"name": "gated", "expression":
            "variables.isPod && has(object.spec.schedulingGates) && "
            "object.spec.schedulingGates.exists(g, g.name == '%s')" % ADMISSION_GATE},
        {"name": "wasGated", "expression":
            "variables.isPod && oldObject != null && has(oldObject.spec.schedulingGates) && "
            "oldObject.spec.schedulingGates.exists(g, g.name == '%s')" % ADMISSION_GATE},
        {"name": "restricted", "expression":
            "variables.isTenant && '%s' in variables.nsAnnotations" % ALLOWED_PRIORITIES_ANNOTATION},
        {"name": "allowed", "expression":
            "variables.restricted ? variables.nsAnnotations['%s'].split(',').filter(p, p != '') : []"
            % ALLOWED_PRIORITIES_ANNOTATION},
        {"name": "allowedText", "expression":
            "size(variables.allowed) == 0 ? 'none' : variables.allowed.join(', ')"},
        # v1beta2 Workloads name it in spec.priorityClassRef, v1beta1 in spec.priorityClassName
        {"name": "workloadPriorityClass", "expression":
            "!variables.isWorkload ? '' : (has(object.spec.priorityClassRef) && has(object.spec.priorityClassRef.name) "
            "? object.spec.priorityClassRef.name : (has(object.spec.priorityClassName) ? "
            "object.spec.priorityClassName : ''))"},
        {"name": "priorityLabel", "expression":
            "'%s' in variables.labels ? variables.labels['%s'] : ''" % (PRIORITY_LABEL, PRIORITY_LABEL)},
        # KEDA: the platform's Prometheus credential
        {"name": "isScaler", "expression": "request.kind.group == 'keda.sh'"},
        {"name": "triggers", "expression":
            "variables.isScaler && has(object.spec.triggers) ? object.spec.triggers : []"},
        {"name": "usesPlatformAuth", "expression": "variables.triggers.exists(tr, %s)" % _PLATFORM_AUTH_CEL},
        {"name": "triggersUnchanged", "expression":
            "request.operation == 'UPDATE' && oldObject != null && has(oldObject.spec.triggers) && "
            "oldObject.spec.triggers == variables.triggers"},
        {"name": "byAutomation", "expression":
            "request.userInfo.username in %s || (has(request.userInfo.groups) && "
            "request.userInfo.groups.exists(g, g in %s))"
            % (_cel_list(settings.automation_users), _cel_list(settings.automation_groups))},
    ]
    queue_hint = ("'add the label %s: ' + variables.suggestedQueue + ' (or another LocalQueue of this namespace: "
                  "kubectl get localqueues -n ' + request.namespace + ') to the ' + request.kind.kind + "
                  "' metadata.labels.'" % QUEUE_LABEL)
    validations = [
        {   # 1. GPUs only in tenant namespaces (pods are immutable in their requests: checked on CREATE)
            "expression": "variables.isTenant || !variables.wantsGpu || (variables.isPod && request.operation == 'UPDATE')",
            "messageExpression":
                "'GPUs are handed out only through Kueue in tenant namespaces, and namespace ' + request.namespace + "
                "' is not one (no label %s). Run this ' + request.kind.kind + ' in one of your tenant namespaces "
                "(kubectl get namespaces -l %s), or ask the platform team to add this namespace to a tenant in "
                "the inventory (gpuaas_tenants[].namespaces).'" % (TENANT_LABEL, TENANT_LABEL),
            "reason": "Forbidden",
        },
        {   # 2. GPU Pods/templates in tenant namespaces carry a queue
            "expression": "!variables.isTenant || !variables.wantsGpu || variables.hasQueue || variables.byController "
                          "|| (variables.isPod && request.operation == 'UPDATE')",
            "messageExpression": "'GPU workloads in tenant namespace ' + request.namespace + ' must go through Kueue: ' + "
                                 + queue_hint,
            "reason": "Forbidden",
        },
        {   # 3. Kueue framework kinds always carry a queue in tenant namespaces
            "expression": "!variables.isTenant || !variables.isFramework || variables.hasQueue || variables.byController",
            "messageExpression": "'A ' + request.kind.kind + ' in tenant namespace ' + request.namespace + ' is run by "
                                 "Kueue and must go through Kueue: ' + " + queue_hint,
            "reason": "Forbidden",
        },
        {   # 4. a GPU Pod nobody trusted created must be held by Kueue
            "expression": "!variables.isTenant || !variables.isPod || request.operation != 'CREATE' || "
                          "!variables.wantsGpu || variables.byController || variables.gated",
            "messageExpression":
                "'This GPU Pod is not held by Kueue (no scheduling gate %s): only Pods that Kueue queues, or that "
                "a workload controller creates, may request GPUs; ownerReferences written in the Pod do not count. "
                "Create a Job (or Deployment, StatefulSet, JobSet, RayJob, ...) with the label %s: ' + "
                "variables.suggestedQueue + ' instead.'" % (ADMISSION_GATE, QUEUE_LABEL),
            "reason": "Forbidden",
        },
        {   # 5. the queue label of a Pod stays
            "expression": "!variables.isPod || request.operation != 'UPDATE' || variables.byKueue || "
                          "!('%s' in variables.oldLabels) || ('%s' in variables.labels && variables.labels['%s'] == "
                          "variables.oldLabels['%s'])" % (QUEUE_LABEL, QUEUE_LABEL, QUEUE_LABEL, QUEUE_LABEL),
            "messageExpression":
                "'The label %s of Pod ' + object.metadata.name + ' cannot be removed or changed: Kueue queued it "
                "under ' + variables.oldLabels['%s'] + '. Delete the Pod and create it again with the queue you "
                "want.'" % (QUEUE_LABEL, QUEUE_LABEL),
            "reason": "Forbidden",
        },
        {   # 6. only Kueue lifts its admission gate
            "expression": "!variables.wasGated || variables.gated || variables.byKueue",
            "messageExpression":
                "'Only Kueue removes the scheduling gate %s, when it admits the Workload of this Pod to its queue: wait "
                "for admission (kubectl get workloads -n ' + request.namespace + ') instead of removing the gate.'"
                % ADMISSION_GATE,
            "reason": "Forbidden",
        },
        {   # 7. the Kueue priority label is one the tenant may use
            "expression": "!variables.restricted || variables.priorityLabel == '' || variables.byController || "
                          "variables.byKueue || variables.priorityLabel in variables.allowed",
            "messageExpression":
                "'Priority class ' + variables.priorityLabel + ' is not allowed in tenant namespace ' + "
                "request.namespace + ' (allowed: ' + variables.allowedText + '). Set the label %s to one of "
                "those, or leave it out; the platform team can change the list in the inventory "
                "(gpuaas_tenants[].allowed_priorities).'" % PRIORITY_LABEL,
            "reason": "Forbidden",
        },
        {   # 8. pod priorityClassName too (Kueue takes a workload's priority from it when the label is absent)
            "expression": "!variables.restricted || variables.byController || variables.podSpecs.all(s, "
                          "!has(s.priorityClassName) || s.priorityClassName == '' || "
                          "s.priorityClassName in variables.allowed)",
            "messageExpression":
                "'priorityClassName ' + variables.podSpecs.filter(s, has(s.priorityClassName))[0].priorityClassName"
                " + ' is not allowed in tenant namespace ' + request.namespace + ' (allowed: ' + "
                "variables.allowedText + '). Remove spec.priorityClassName and use the label %s with an allowed "
                "class; the platform team can change the list in the inventory "
                "(gpuaas_tenants[].allowed_priorities).'" % PRIORITY_LABEL,
            "reason": "Forbidden",
        },
        {   # 9. the choke point for every framework: the priority class Kueue resolved for the Workload
            "expression": "!variables.isWorkload || !variables.restricted || variables.workloadPriorityClass == '' || "
                          "variables.workloadPriorityClass in variables.allowed",
            "messageExpression":
                "'Workload ' + object.metadata.name + ' has priority class ' + variables.workloadPriorityClass + "
                "', which tenant namespace ' + request.namespace + ' may not use (allowed: ' + "
                "variables.allowedText + '). Set the label %s of the job to an allowed class, and no "
                "priorityClassName in its pod templates.'" % PRIORITY_LABEL,
            "reason": "Forbidden",
        },
        {   # 10. the platform's Prometheus credential: only the collection's identity writes triggers using it
            "expression": "!variables.usesPlatformAuth || variables.triggersUnchanged || variables.byAutomation",
            "messageExpression":
                "'The ClusterTriggerAuthentication %s is the platform Prometheus credential: only the "
                "gpuaas.platform automation may reference it. Ask the platform team to declare this autoscaler in "
                "the inventory (gpuaas_tenants[].autoscaling), or use a TriggerAuthentication in namespace ' + "
                "request.namespace + ' with a credential of your own.'" % keda.PROMETHEUS_AUTH_NAME,
            "reason": "Forbidden",
        },
        {   # 11. ... and only towards the platform's Prometheus
            "expression": "!variables.usesPlatformAuth || variables.triggersUnchanged || variables.triggers.all(tr, "
                          "!(%s) || (has(tr.metadata) && 'serverAddress' in tr.metadata && "
                          "tr.metadata.serverAddress == %s))" % (_PLATFORM_AUTH_CEL, _cel_list([prometheus_server or ""])[1:-1]),
            "messageExpression":
                "'The credential %s may only be sent to the platform Prometheus %s: set serverAddress to it, or use "
                "a TriggerAuthentication of your own for another server.'"
                % (keda.PROMETHEUS_AUTH_NAME, prometheus_server or "(none configured)"),
            "reason": "Forbidden",
        },
    ]
    for v in validations:
        v["message"] = "refused by the gpuaas.platform admission policy %s" % POLICY_NAME
    policy = {
        "apiVersion": VAP_V, "kind": "ValidatingAdmissionPolicy", "metadata": _meta(POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _resource_rules()},
            "variables": variables,
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": VAP_V, "kind": "ValidatingAdmissionPolicyBinding", "metadata": _meta(POLICY_NAME),
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                 "values": sorted(set(settings.platform_namespaces))},
                {"key": PLATFORM_LABEL, "operator": "DoesNotExist"}]}},
        },
    }
    return [policy, binding]


# -- existing workloads of an adopted namespace -------------------------------------------------------------

# The builtin kinds Kueue gates whose existing objects the policy checks on their next update (Job, Pod,
# Deployment, StatefulSet), as (apiVersion, kind).
ADOPTION_WORKLOAD_KINDS: t.Tuple[t.Tuple[str, str], ...] = tuple(
    (i.api_version, i.kind) for i in kueue_integrations.INTEGRATIONS if i.builtin)


def _pod_specs(obj: t.Mapping[str, t.Any]) -> t.List[t.Mapping[str, t.Any]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return [spec]
    return [((spec.get("template") or {}).get("spec")) or {}]


def gpu_requests(obj: t.Mapping[str, t.Any]) -> t.List[str]:
    """The accelerator resources (and DRA claims) the pod specs of a Pod or workload ask for, as the policy sees them."""
    found: t.Set[str] = set()
    for spec in _pod_specs(obj):
        if spec.get("resourceClaims"):
            found.add("resourceClaims")
        for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
            resources = container.get("resources") or {}
            for section in ("limits", "requests"):
                found.update(k for k in (resources.get(section) or {}) if is_accelerator(k))
            if resources.get("claims"):
                found.add("resources.claims")
    return sorted(found)


def workloads_refused_on_update(objects: t.Iterable[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
    """Existing GPU workloads without the Kueue queue label: the admission policy refuses their next update.

    Objects controlled by another object (the Pods of a Deployment's ReplicaSet, the Pods of a Job) are left out:
    their owner is reported, and it is the owner users update.
    """
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if any(ref.get("controller") for ref in meta.get("ownerReferences") or []):
            continue
        if (meta.get("labels") or {}).get(QUEUE_LABEL):
            continue
        resources = gpu_requests(obj)
        if resources:
            out.append({"kind": obj.get("kind"), "namespace": meta.get("namespace"), "name": meta.get("name"),
                        "resources": resources})
    return sorted(out, key=lambda w: (w["namespace"] or "", w["kind"] or "", w["name"] or ""))


# -- everything ----------------------------------------------------------------------------------------------

def tenant_objects(tenant: Tenant, model: TenantModel, platform: str = "kubernetes",
                   authenticated_prometheus: bool = False) -> t.List[t.Dict[str, t.Any]]:
    """Desired objects of one present tenant."""
    allowed = allowed_priorities(tenant, model)
    objs: t.List[t.Dict[str, t.Any]] = [namespace(ns, tenant, platform, allowed) for ns in tenant.namespaces]
    objs.append(cluster_queue(tenant))
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
    return objs


def shared_objects(model: TenantModel, prometheus_token: t.Optional[str] = None,
                   prometheus_ca: t.Optional[str] = None, keda_namespace: str = "keda",
                   admission: t.Optional[AdmissionSettings] = None) -> t.List[t.Dict[str, t.Any]]:
    admission = admission or AdmissionSettings()
    objs: t.List[t.Dict[str, t.Any]] = []
    objs.extend(resource_flavor(f.name, f.node_labels, f.node_taints, f.tolerations, f.topology_name)
                for f in model.flavors)
    objs.extend(cohort(c.name, c.parent, c.fair_sharing_weight) for c in model.cohorts)
    objs.extend(workload_priority_class(p.name, p.value, p.description) for p in model.priorities)
    if model.present_tenants:
        objs.append(queue_reader_cluster_role())
        objs.extend(admission_policy(admission, model.prometheus.url))
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
