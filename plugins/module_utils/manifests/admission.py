# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tenants admission policy ``gpuaas-require-kueue-queue``: no GPU outside Kueue (issues 11, 21).

Its own file so that its rules can be reviewed on their own. The policy is generated from data:

* the frameworks Kueue gates (``frameworks``, default every ``kueue_integrations.INTEGRATIONS`` entry): which
  kinds must carry a queue label, which pod templates are checked for GPUs, which resources the policy matches;
* the platform credentials (``platform_credentials``, the ClusterTriggerAuthentications the collection creates
  for KEDA): who may reference them and towards which Prometheus;
* the identities and namespaces it trusts (``AdmissionSettings``, the ``admission`` option of the tenants module).

It reads the tenant namespace contract written by ``tenancy.namespace``: the label ``gpuaas.io/tenant``, the
suggested queue label and the allowed-priorities annotation. ``workloads_refused_on_update`` predicts which
existing workloads of an adopted namespace the policy will refuse on their next update. No I/O.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue_integrations import (
    ADMISSION_GATE,
    ELASTIC_JOB_GATE,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    Integration,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import TENANT_LABEL, add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.tenants import DEFAULT_PLATFORM_NAMESPACES
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.quantity import ACCELERATOR_PREFIXES, is_accelerator

VAP_V = "admissionregistration.k8s.io/v1"
POLICY_NAME = "gpuaas-require-kueue-queue"

# The tenant namespace contract: written by tenancy.namespace, read by the policy. Tenants and project owners
# cannot write their Namespace objects, so they cannot change any of it.
SUGGESTED_QUEUE_LABEL = "gpuaas.io/suggested-queue"
DEFAULT_QUEUE = "default"
ALLOWED_PRIORITIES_ANNOTATION = "gpuaas.io/allowed-priorities"
# A namespace a cluster admin labels ``gpuaas.io/platform`` is on the platform allow-list too (tenants and project
# owners cannot label their Namespace objects, exactly as with ``gpuaas.io/tenant``).
PLATFORM_LABEL = "gpuaas.io/platform"

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
# The scheduling gates only Kueue lifts: its admission gate and an elastic job's gate (else a tenant could run the
# pods of an unadmitted scale-up slice).
KUEUE_GATES: t.Tuple[str, ...] = (ADMISSION_GATE, ELASTIC_JOB_GATE)
# Kueue's own identity: the only one that may remove Kueue's gates or a Pod's queue label.
DEFAULT_KUEUE_USERS: t.Tuple[str, ...] = (
    "system:serviceaccount:kueue-system:kueue-controller-manager",
    "system:serviceaccount:openshift-kueue-operator:kueue-controller-manager",
)
# The credentials the collection creates for KEDA, which only its own identity may reference.
# Every ClusterTriggerAuthentication the collection creates (the tenants' and the node pools', issue 22 item 2).
DEFAULT_PLATFORM_CREDENTIALS: t.Tuple[str, ...] = (keda.PROMETHEUS_AUTH_NAME, node_pools.PROMETHEUS_AUTH_NAME)


@dataclass
class AdmissionSettings:
    """What the admission policies trust (all configurable; defaults above)."""

    platform_namespaces: t.List[str] = field(default_factory=lambda: list(DEFAULT_PLATFORM_NAMESPACES))
    workload_controllers: t.List[str] = field(default_factory=lambda: list(DEFAULT_WORKLOAD_CONTROLLERS))
    kueue_users: t.List[str] = field(default_factory=lambda: list(DEFAULT_KUEUE_USERS))
    # who may use the platform's Prometheus credential in ScaledObjects (the collection's identity)
    automation_users: t.List[str] = field(default_factory=list)
    automation_groups: t.List[str] = field(default_factory=lambda: ["system:masters"])
    # the frameworks Kueue manages (upstream names); None: every known one (issue 22 item 3)
    kueue_frameworks: t.Optional[t.List[str]] = None

    def integrations(self) -> t.Tuple[Integration, ...]:
        """The ``Integration`` entries of ``kueue_frameworks`` (every known one when None)."""
        return kueue_integrations.integrations_of(self.kueue_frameworks)

    @classmethod
    def from_options(cls, options: t.Optional[t.Mapping[str, t.Any]]) -> "AdmissionSettings":
        out = cls()
        for key, value in (options or {}).items():
            if value is not None and hasattr(out, key):
                setattr(out, key, [str(v) for v in value])
        return out


# -- CEL building blocks ---------------------------------------------------------------------------------------

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


def _gk(kind: Integration) -> str:
    return "%s/%s" % (kind.group, kind.kind)


def _pod_specs_cel(frameworks: t.Sequence[Integration]) -> str:
    """CEL: the pod specs of ``object`` for a Pod or a builtin template kind; [] for every other kind.

    Pods are always checked, whether Kueue manages them or not (without the ``pod`` framework an ungated GPU Pod is
    refused by rule 4)."""
    pods = [i for i in kueue_integrations.INTEGRATIONS if i.kind == "Pod"]
    templates = [i for i in frameworks if i.builtin and i.kind != "Pod"] + list(kueue_integrations.EXTRA_TEMPLATE_KINDS)
    expr = "[]"
    for kind in reversed(pods + templates):
        expr = "variables.gk == '%s' ? %s : (%s)" % (_gk(kind), kind.pod_specs_cel, expr)
    return expr


def _resource_rules(frameworks: t.Sequence[Integration]) -> t.List[t.Dict[str, t.Any]]:
    by_group: t.Dict[str, t.List[str]] = {}
    for kind in list(frameworks) + list(kueue_integrations.EXTRA_TEMPLATE_KINDS):
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


def _platform_auth_cel(credentials: t.Sequence[str]) -> str:
    """CEL: trigger ``tr`` authenticates with one of the platform's ClusterTriggerAuthentications."""
    if len(credentials) == 1:
        name_test = "tr.authenticationRef.name == %s" % _cel_list(credentials)[1:-1]
    else:
        name_test = "tr.authenticationRef.name in %s" % _cel_list(credentials)
    return ("has(tr.authenticationRef) && %s && has(tr.authenticationRef.kind) "
            "&& tr.authenticationRef.kind == 'ClusterTriggerAuthentication'" % name_test)


# -- the policy: variables, then the rules that use them ----------------------------------------------------

def unmanaged_kinds(frameworks: t.Sequence[Integration]) -> t.List[Integration]:
    """The known kinds (Pod excepted: an ungated GPU Pod is refused anyway) that Kueue does not manage when it
    manages ``frameworks`` and whose pod templates the policy can read: refused with GPUs in tenant namespaces."""
    managed = {i.framework for i in frameworks}
    return [i for i in kueue_integrations.INTEGRATIONS
            if i.framework not in managed and i.kind != "Pod" and i.pod_specs_cel]


def _unmanaged_variables(unmanaged: t.Sequence[Integration]) -> t.List[t.Dict[str, str]]:
    """Variables for the kinds Kueue does not manage (none when it manages every known framework)."""
    if not unmanaged:
        return []
    expr = "[]"
    for kind in reversed(unmanaged):
        expr = "variables.gk == '%s' ? %s : (%s)" % (_gk(kind), kind.pod_specs_cel, expr)
    return [
        {"name": "isUnmanaged", "expression": "variables.gk in %s" % _cel_list(_gk(i) for i in unmanaged)},
        {"name": "unmanagedPodSpecs", "expression": "variables.isUnmanaged ? (%s) : []" % expr},
        {"name": "unmanagedWantsGpu", "expression": "variables.unmanagedPodSpecs.exists(s, %s)" % _SPEC_GPU_CEL},
    ]


def _variables(settings: AdmissionSettings, frameworks: t.Sequence[Integration],
               credentials: t.Sequence[str]) -> t.List[t.Dict[str, str]]:
    crd_gks = [_gk(i) for i in frameworks if not i.builtin]
    controllers = kueue_integrations.trusted_controllers(settings.workload_controllers,
                                                         [i.framework for i in frameworks])
    return [
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
        {"name": "podSpecs", "expression": _pod_specs_cel(frameworks)},
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
            "request.userInfo.username in %s" % _cel_list(controllers)},
        {"name": "byKueue", "expression": "request.userInfo.username in %s" % _cel_list(settings.kueue_users)},
        {"name": "gated", "expression":
            "variables.isPod && has(object.spec.schedulingGates) && "
            "object.spec.schedulingGates.exists(g, g.name == '%s')" % ADMISSION_GATE},
        # Kueue's gates on the Pod before the request (CREATE: none), for rule 6
        {"name": "oldKueueGates", "expression":
            "variables.isPod && oldObject != null && has(oldObject.spec.schedulingGates) ? "
            "oldObject.spec.schedulingGates.map(g, g.name).filter(n, n in %s) : []" % _cel_list(KUEUE_GATES)},
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
        # KEDA: the platform's Prometheus credentials
        {"name": "isScaler", "expression": "request.kind.group == 'keda.sh'"},
        {"name": "triggers", "expression":
            "variables.isScaler && has(object.spec.triggers) ? object.spec.triggers : []"},
        {"name": "usesPlatformAuth", "expression": "variables.triggers.exists(tr, %s)" % _platform_auth_cel(credentials)},
        # the platform credential this object names, for the messages
        {"name": "platformAuthName", "expression":
            "variables.usesPlatformAuth ? variables.triggers.filter(tr, %s)[0].authenticationRef.name : ''"
            % _platform_auth_cel(credentials)},
        {"name": "triggersUnchanged", "expression":
            "request.operation == 'UPDATE' && oldObject != null && has(oldObject.spec.triggers) && "
            "oldObject.spec.triggers == variables.triggers"},
        {"name": "byAutomation", "expression":
            "request.userInfo.username in %s || (has(request.userInfo.groups) && "
            "request.userInfo.groups.exists(g, g in %s))"
            % (_cel_list(settings.automation_users), _cel_list(settings.automation_groups))},
    ] + _unmanaged_variables(unmanaged_kinds(frameworks))


def _validations(credentials: t.Sequence[str], prometheus_server: t.Optional[str],
                 unmanaged: t.Sequence[Integration] = (),
                 managed: t.Sequence[Integration] = ()) -> t.List[t.Dict[str, str]]:
    """The rules, numbered as the policy's documentation and the isolation tests refer to them."""
    credential_names = ", ".join(credentials)
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
        {   # 6. only Kueue lifts its gates (the admission gate; an elastic job's gate until its new slice is admitted)
            "expression": "variables.byKueue || variables.oldKueueGates.all(n, has(object.spec.schedulingGates) && "
                          "object.spec.schedulingGates.exists(g, g.name == n))",
            "messageExpression":
                "'Only Kueue removes the scheduling gate ' + variables.oldKueueGates.join(', ') + ', when it admits "
                "the Workload of this Pod to its queue: wait for admission (kubectl get workloads -n ' + "
                "request.namespace + ') instead of removing the gate.'",
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
        {   # 10. the platform's Prometheus credentials: only the collection's identity writes triggers using them
            "expression": "!variables.usesPlatformAuth || variables.triggersUnchanged || variables.byAutomation",
            "messageExpression":
                "'The ClusterTriggerAuthentication ' + variables.platformAuthName + ' is the platform Prometheus "
                "credential: only the gpuaas.platform automation may reference it (and %s). Ask the platform team "
                "to declare this autoscaler in the inventory (gpuaas_tenants[].autoscaling), or use a "
                "TriggerAuthentication in namespace ' + request.namespace + ' with a credential of your own.'"
                % credential_names,
            "reason": "Forbidden",
        },
        {   # 11. ... and only towards the platform's Prometheus
            "expression": "!variables.usesPlatformAuth || variables.triggersUnchanged || variables.triggers.all(tr, "
                          "!(%s) || (has(tr.metadata) && 'serverAddress' in tr.metadata && "
                          "tr.metadata.serverAddress == %s))"
                          % (_platform_auth_cel(credentials), _cel_list([prometheus_server or ""])[1:-1]),
            "messageExpression":
                "'The credential ' + variables.platformAuthName + ' may only be sent to the platform Prometheus %s: "
                "set serverAddress to it, or use a TriggerAuthentication of your own for another server.'"
                % (prometheus_server or "(none configured)"),
            "reason": "Forbidden",
        },
    ]
    if unmanaged:
        validations.append({   # 12. a kind Kueue does not manage gets no GPUs in tenant namespaces (issue 22 item 3)
            "expression": "!variables.isTenant || !variables.isUnmanaged || !variables.unmanagedWantsGpu || "
                          "variables.byController",
            "messageExpression":
                "'Kueue does not manage ' + request.kind.kind + ' on this cluster, so a ' + request.kind.kind + "
                "' in tenant namespace ' + request.namespace + ' may not request GPUs (its pods would run outside "
                "every quota). Ask the platform team to enable its framework in gpuaas_kueue_integrations (Kueue "
                "manages: %s), or run the work as a kind Kueue manages with the label %s: ' + "
                "variables.suggestedQueue + '.'" % (", ".join(i.kind for i in managed) or "none", QUEUE_LABEL),
            "reason": "Forbidden",
        })
    for v in validations:
        v["message"] = "refused by the gpuaas.platform admission policy %s" % POLICY_NAME
    return validations


def admission_policy(settings: t.Optional[AdmissionSettings] = None,
                     prometheus_server: t.Optional[str] = None,
                     labels: t.Optional[t.Mapping[str, str]] = None,
                     frameworks: t.Sequence[Integration] = kueue_integrations.INTEGRATIONS,
                     platform_credentials: t.Sequence[str] = DEFAULT_PLATFORM_CREDENTIALS) -> t.List[t.Dict[str, t.Any]]:
    """ValidatingAdmissionPolicy + Binding ``gpuaas-require-kueue-queue``: no GPU outside Kueue (issue 11).

    In every namespace but the platform allow-list:

    * GPU requests (device resources nvidia.com/*, amd.com/*, gpu.intel.com/* incl. MIG, and DRA claims) are
      refused outside tenant namespaces (label ``gpuaas.io/tenant``);
    * in tenant namespaces a GPU Pod/Job/Deployment/StatefulSet/ReplicaSet/... needs a queue label, and every
      Kueue CRD framework kind of ``frameworks`` (RayJob, JobSet, TrainJob, ...) needs one whatever it requests;
    * a GPU Pod created by anyone but a workload controller (``request.userInfo``, never ownerReferences) must
      be held by Kueue's admission scheduling gate;
    * only the ``workload_controllers`` that run a framework of ``frameworks`` are trusted
      (``kueue_integrations.CONTROLLER_FRAMEWORKS``), and a known kind Kueue does not manage (not in
      ``frameworks``) is refused in tenant namespaces when its pod templates request GPUs (rule 12, issue 22 item 3);
    * on UPDATE a Pod's queue label and Kueue's gates (admission, elastic job) can only be removed by Kueue itself;
    * the Kueue priority label, pod ``priorityClassName`` and Kueue Workloads' priority must be in the tenant's
      allowed priorities (namespace annotation ``gpuaas.io/allowed-priorities``, written by the tenants role).

    * a KEDA ScaledObject/ScaledJob may name a platform credential (the ClusterTriggerAuthentications of
      ``platform_credentials``) only when the collection's identity (``automation_users``/``automation_groups``)
      writes its triggers, and only towards ``prometheus_server`` (``gpuaas_prometheus.url``); KEDA's own updates
      leave the triggers unchanged and pass.

    Every refusal says what to do instead. ``labels`` are the objects' ownership labels (the tenants component's).
    """
    settings = settings or AdmissionSettings()
    meta = {"name": POLICY_NAME, "labels": dict(labels) if labels is not None else add_ownership({})}
    policy = {
        "apiVersion": VAP_V, "kind": "ValidatingAdmissionPolicy", "metadata": meta,
        "spec": {
            "failurePolicy": "Fail",
            # every known kind: those Kueue does not manage are matched too, for rule 12
            "matchConstraints": {"resourceRules": _resource_rules(
                list(frameworks) + [i for i in kueue_integrations.INTEGRATIONS if i not in frameworks])},
            "variables": _variables(settings, frameworks, platform_credentials),
            "validations": _validations(platform_credentials, prometheus_server, unmanaged_kinds(frameworks),
                                        frameworks),
        },
    }
    binding = {
        "apiVersion": VAP_V, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": dict(meta["labels"])},
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


# -- the namespace labels: who may make a namespace a tenant's or the platform's (issue 22 item 1) ----------

NAMESPACE_POLICY_NAME = "gpuaas-namespace-labels"
# The labels that decide what the GPU rules do with a namespace: TENANT_LABEL selects it for a tenant's ClusterQueue
# (its LocalQueues spend that tenant's quota), PLATFORM_LABEL takes it off every rule of POLICY_NAME.
GOVERNING_NAMESPACE_LABELS: t.Tuple[str, ...] = (PLATFORM_LABEL, TENANT_LABEL)
# The RBAC grant (a virtual resource, nothing serves it) that makes an identity automation for this policy besides
# automation_users/automation_groups: the shipped gpuaas-automation-tenants ClusterRole holds it, so each
# least-privilege tenants account is trusted without being listed, in limited runs too; cluster-admin holds it
# through its wildcards. A namespace-as-a-service bot's `*` on namespaces does not reach it (another group).
NAMESPACE_LABELS_GRANT = ("gpuaas.io", "namespacelabels", "update")


def namespace_labels_policy(settings: t.Optional[AdmissionSettings] = None,
                            labels: t.Optional[t.Mapping[str, str]] = None) -> t.List[t.Dict[str, t.Any]]:
    """ValidatingAdmissionPolicy + Binding ``gpuaas-namespace-labels``: only the automation labels namespaces.

    Creating a Namespace with, adding, changing or removing ``gpuaas.io/platform`` or ``gpuaas.io/tenant`` is
    refused unless the request comes from ``automation_users``, a member of ``automation_groups`` (default
    ``system:masters``) or an identity RBAC grants ``update`` on ``namespacelabels.gpuaas.io``. Without it, anyone
    allowed to create namespaces (a namespace-as-a-service bot, OpenShift project self-provisioning) could make one
    a platform namespace (outside every GPU rule) or another tenant's (spending its quota). Updates that leave both
    labels as they are (other labels, annotations, finalizers, the namespace controller) pass. Bound to every
    namespace: a binding's namespaceSelector is matched against a Namespace's own labels, which the requester writes.
    """
    settings = settings or AdmissionSettings()
    group, resource, verb = NAMESPACE_LABELS_GRANT
    meta = {"name": NAMESPACE_POLICY_NAME, "labels": dict(labels) if labels is not None else add_ownership({})}
    who = "%s, members of %s, or an identity granted %s on %s.%s (the gpuaas-automation-tenants ClusterRole)" % (
        ", ".join(settings.automation_users) or "the accounts in gpuaas_admission.automation_users",
        ", ".join(settings.automation_groups) or "no group", verb, resource, group)
    policy = {
        "apiVersion": VAP_V, "kind": "ValidatingAdmissionPolicy", "metadata": meta,
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": ["namespaces", "namespaces/status", "namespaces/finalize"]}]},
            "variables": [
                {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
                {"name": "oldLabels", "expression":
                    "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
                {"name": "changed", "expression":
                    "%s.filter(k, (k in variables.labels) != (k in variables.oldLabels) || (k in variables.labels "
                    "&& variables.labels[k] != variables.oldLabels[k]))" % _cel_list(GOVERNING_NAMESPACE_LABELS)},
                {"name": "byAutomation", "expression":
                    "request.userInfo.username in %s || (has(request.userInfo.groups) && request.userInfo.groups."
                    "exists(g, g in %s)) || authorizer.group('%s').resource('%s').check('%s').allowed()"
                    % (_cel_list(settings.automation_users), _cel_list(settings.automation_groups), group, resource,
                       verb)},
            ],
            "validations": [{
                "expression": "size(variables.changed) == 0 || variables.byAutomation",
                "messageExpression":
                    "'Only the gpuaas.platform automation may set, change or remove the label' + "
                    "(size(variables.changed) == 1 ? ' ' : 's ') + variables.changed.join(', ') + ' of a Namespace "
                    "(' + request.userInfo.username + ' asked to on namespace ' + object.metadata.name + '): %s "
                    "makes a namespace spend that tenant\\'s GPU quota and %s exempts it from every GPU rule. The "
                    "automation is %s. To hand namespace ' + object.metadata.name + ' over to a tenant, ask the "
                    "platform team to add it to the tenant\\'s namespaces in the inventory (gpuaas_tenants[].namespaces; "
                    "an existing namespace also in gpuaas_tenants_adopt: Namespace/' + object.metadata.name + ', "
                    "docs/tenants.md, Brownfield adoption) and run the tenants playbook; platform namespaces go in "
                    "gpuaas_admission.platform_namespaces.'" % (TENANT_LABEL, PLATFORM_LABEL, who.replace("\\", "\\\\").replace("'", "\\'")),
                "message": "refused by the gpuaas.platform admission policy %s" % NAMESPACE_POLICY_NAME,
                "reason": "Forbidden",
            }],
        },
    }
    binding = {
        "apiVersion": VAP_V, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NAMESPACE_POLICY_NAME, "labels": dict(meta["labels"])},
        "spec": {"policyName": NAMESPACE_POLICY_NAME, "validationActions": ["Deny"]},
    }
    return [policy, binding]


# -- when a policy update is enforced (issue 22 item 8) ----------------------------------------------------

def _uses_platform_credential(obj: t.Mapping[str, t.Any], credentials: t.Sequence[str]) -> bool:
    return any((tr.get("authenticationRef") or {}).get("name") in credentials
               and (tr.get("authenticationRef") or {}).get("kind") == "ClusterTriggerAuthentication"
               for tr in ((obj.get("spec") or {}).get("triggers") or []))


def enforcement_probes(policy_name: str, pending: t.Iterable[t.Mapping[str, t.Any]],
                       credentials: t.Sequence[str] = DEFAULT_PLATFORM_CREDENTIALS) -> t.List[t.Mapping[str, t.Any]]:
    """The objects a run is about to write whose admission depends on the version of policy ``policy_name``.

    The API server reads policies through an informer: an update is enforced a moment after it is written. Until
    then the previous version decides, and it may refuse what the new one accepts (the credential pin of rule 11
    names the previous Prometheus URL, or none). A server-side dry run of one of these objects accepted by the
    policy shows the new version is in force; the engine's barrier retries it (reconcile/tenancy_runner.py)."""
    if policy_name == POLICY_NAME:
        return [o for o in pending if o.get("kind") in ("ScaledObject", "ScaledJob")
                and _uses_platform_credential(o, credentials)]
    if policy_name == NAMESPACE_POLICY_NAME:
        return [o for o in pending if o.get("kind") == "Namespace"]
    return []


def refused_by(message: str, policy_name: str) -> bool:
    """Whether an API error message is a refusal of the admission policy ``policy_name`` (the API server's words:
    "ValidatingAdmissionPolicy 'NAME' with binding 'NAME' denied request: ...")."""
    return "ValidatingAdmissionPolicy '%s'" % policy_name in message


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
