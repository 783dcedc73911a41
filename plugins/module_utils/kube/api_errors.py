# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Error translation: an API failure becomes a ``GpuaasError`` that says what is wrong and how to fix it.

The API server's Status body (message, reason, causes) is kept in ``problems``/``details``; the hint depends on
the status and on the words of the message (admission webhook, RBAC, immutable fields, missing APIs).
"""

from __future__ import annotations

import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

GROUP_HINTS: t.Dict[str, str] = {
    "kueue.x-k8s.io": "is Kueue installed? (install it with the gpuaas.platform.kueue role)",
    "keda.sh": "is KEDA installed? (install it with the gpuaas.platform.keda role)",
    "nvidia.com": "is the NVIDIA GPU Operator installed? (install it with the gpuaas.platform.gpu_operator role)",
    "nfd.k8s-sigs.io": "is Node Feature Discovery installed? (the gpuaas.platform.gpu_operator role installs it)",
    "nfd.openshift.io": "is the OpenShift NFD operator installed? (the gpuaas.platform.gpu_operator role installs it)",
    "operators.coreos.com": "is OLM installed? (OpenShift ships it; on Kubernetes use the Helm path of the install roles)",
    "monitoring.coreos.com": "is the Prometheus Operator installed? (ServiceMonitors need its CRDs)",
    "config.openshift.io": "this API only exists on OpenShift",
    "kueue.openshift.io": "is Red Hat's build of Kueue operator installed? (install it with the gpuaas.platform.kueue role)",
}


def missing_api_hint(group: str) -> str:
    return GROUP_HINTS.get(group, "is the operator that provides this API installed and its CRDs established?")


def _status_body(exc: t.Any) -> t.Dict[str, t.Any]:
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip().startswith("{"):
        try:
            return json.loads(body)
        except ValueError:
            return {}
    return {}


def connection_error(host: str, exc: Exception) -> GpuaasError:
    if isinstance(exc, GpuaasError):
        return exc
    return GpuaasError(
        "cannot reach the Kubernetes API server at %s: %s" % (host, exc),
        hint="check host/kubeconfig/context, the network path and proxy settings, and ca_cert/validate_certs",
    )


def translate_api_exception(exc: t.Any, action: str, ref: t.Optional[str] = None) -> GpuaasError:
    """Turn an ApiException into 'what is wrong / how to fix it' for the object ``ref``."""
    status = getattr(exc, "status", None) or 0
    body = _status_body(exc)
    message = body.get("message") or getattr(exc, "reason", "") or str(exc)
    reason = body.get("reason") or getattr(exc, "reason", "")
    details = body.get("details") or {}
    causes = details.get("causes") or []
    what = ref or "the request"
    problems = []
    for cause in causes:
        field = cause.get("field")
        text = cause.get("message") or cause.get("reason") or ""
        problems.append("%s: %s" % (field, text) if field else text)
    info = {"status": status, "reason": reason, "action": action}
    if ref:
        info["object"] = ref
    lower = message.lower()
    if "admission webhook" in lower and "denied" in lower:
        hint = ("an admission webhook rejected %s; the message above says which field to change" % what)
        if "failed calling webhook" in lower:
            hint = "the webhook is not reachable: is its controller (e.g. kueue-controller-manager) running?"
        return GpuaasError("%s %s was denied: %s" % (action, what, message), hint=hint, problems=problems, details=info)
    if "failed calling webhook" in lower:
        return GpuaasError(
            "%s %s failed: %s" % (action, what, message),
            hint="the admission webhook is not reachable: is its controller (e.g. kueue-controller-manager in "
                 "kueue-system) running and its Service ready?", problems=problems, details=info)
    if status == 422 or reason == "Invalid":
        return GpuaasError(
            "%s %s: the API server rejected the object as invalid: %s" % (action, what, message),
            hint="fix the fields listed (option names map to the API fields in snake_case); immutable fields "
                 "need the object to be deleted and recreated", problems=problems, details=info)
    if status == 403:
        if "being terminated" in lower:
            return GpuaasError("%s %s: %s" % (action, what, message),
                               hint="the namespace is being deleted: wait until it is gone (kubectl get ns), then "
                                    "re-run to create it again", problems=problems, details=info)
        if "validatingadmissionpolicy" in lower or "denied request" in lower:
            hint = "an admission policy denied it; the message above says why"
        elif "not currently held" in message:
            hint = ("RBAC lets an account grant only permissions it holds: it needs the bind verb on the referenced "
                    "role (the collection's gpuaas-automation-tenants ClusterRole binds admin and edit only) or every "
                    "rule of the role it creates; roles/automation_rbac/files lists what each playbook needs")
        else:
            import re  # only this message parses the API server's words

            denied = re.search(r'User "([^"]*)" cannot ([\w-]+) resource "([^"]+)" in API group "([^"]*)"'
                               r'(?: in the namespace "([^"]+)")?', message)
            if denied:
                user, verb, resource, group, namespace = denied.groups()
                info.update({"user": user, "verb": verb, "resource": resource, "api_group": group,
                             "namespace": namespace})
                hint = ("grant %s on %s%s %s to %s: bind the ClusterRole the collection ships for this playbook "
                        "(roles/automation_rbac, gpuaas-automation-<playbook>; docs/production.md) or add the verb to "
                        "its role; check with: kubectl auth can-i %s %s%s%s --as=%s"
                        % (verb, resource, " (API group %s)" % group if group else "",
                           "in namespace %s" % namespace if namespace else "cluster-wide", user,
                           verb, resource, ".%s" % group if group else "", " -n %s" % namespace if namespace else "",
                           user))
            else:
                hint = ("the credentials in use lack RBAC permission for this; grant the verb on this resource (the "
                        "ClusterRoles per playbook are in roles/automation_rbac; kubectl auth can-i ...)")
        return GpuaasError("%s %s is forbidden: %s" % (action, what, message), hint=hint, problems=problems,
                           details=info)
    if status == 401:
        return GpuaasError("%s %s: not authenticated: %s" % (action, what, message),
                           hint="the token/certificate was rejected or expired; refresh the kubeconfig or api_key",
                           details=info)
    if status == 409:
        if problems or "conflict" in lower:
            return GpuaasError(
                "%s %s: fields are managed by another field manager: %s" % (action, what, message),
                hint="someone else (e.g. kubectl) owns these fields; set force_conflicts: true to take them over, "
                     "or stop managing them elsewhere", problems=problems, details=info)
        return GpuaasError("%s %s: conflict: %s" % (action, what, message),
                           hint="the object changed or is being deleted; re-run", details=info)
    if status == 404:
        if "namespaces" in lower and "not found" in lower:
            hint = "the namespace does not exist; create it first (or let the tenants module create it)"
        elif "the server could not find the requested resource" in lower:
            hint = "the API is not served; is the operator/CRD installed?"
        else:
            hint = "the object or its API does not exist"
        return GpuaasError("%s %s: not found: %s" % (action, what, message), hint=hint, details=info)
    if status == 400 and "dry" in lower:
        return GpuaasError("%s %s: %s" % (action, what, message),
                           hint="a webhook on this resource does not support dry-run; check mode cannot simulate "
                                "it (sideEffects must be None/NoneOnDryRun)", details=info)
    if status in (500, 502, 503, 504) or status == 0:
        return GpuaasError("%s %s failed (HTTP %s): %s" % (action, what, status, message),
                           hint="the API server or an aggregated API/webhook is unhealthy; check "
                                "kubectl get apiservices and the operator pods, then re-run", details=info)
    return GpuaasError("%s %s failed (HTTP %s %s): %s" % (action, what, status, reason, message),
                       problems=problems, details=info)
