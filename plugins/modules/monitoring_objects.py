#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: monitoring_objects
short_description: Scrape configs, alert rules and Grafana dashboards for GPUs and Kueue
version_added: "0.1.0"
description:
  - Builds and applies, through the collection's server-side apply engine, the monitoring objects of the GPU platform
  - a C(ServiceMonitor) for the Kueue controller's metrics service and a C(ServiceMonitor) or C(PodMonitor) for the
    NVIDIA DCGM exporter (with C(honorLabels) so the C(namespace)/C(pod) of the workload holding a GPU is kept),
    when the Prometheus Operator's C(monitoring.coreos.com/v1) API is served;
  - a C(PrometheusRule) with the given rule groups (alerts and recording rules) plus a generated group that maps
    every tenant namespace to its tenant (C(gpuaas:namespace_tenant:info)) so dashboards can aggregate per tenant;
  - Grafana dashboards as a C(ConfigMap) for the Grafana dashboard sidecar (label C(grafana_dashboard=1) by default)
    and/or as C(GrafanaDashboard) objects of the Grafana Operator (C(grafana.integreatly.org/v1beta1)).
  - Objects carry C(app.kubernetes.io/managed-by=gpuaas.platform), C(app.kubernetes.io/part-of=gpuaas-observability)
    and C(app.kubernetes.io/instance=<namespace>); objects with these labels (same O(namespace)) that are no longer
    desired are deleted, so installations with different O(namespace) do not touch each other.
  - Check mode is a server-side dry run; C(--diff) shows per-object changes.
  - Kinds whose API the cluster does not serve (no Prometheus Operator, no Grafana Operator), and monitors whose
    namespace does not exist (Kueue or the GPU Operator not installed there), are skipped and listed in RV(not_applied)
    with a warning.
author:
  - gpuaas.platform contributors (@gpuaas)
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
options:
  state:
    description: C(present) applies the objects, C(absent) deletes every object this module created.
    type: str
    choices: [present, absent]
    default: present
  namespace:
    description: Namespace of the PrometheusRule and the dashboards (created when missing and O(create_namespace=true)).
    type: str
    default: gpuaas-monitoring
  create_namespace:
    description: Create O(namespace) when it does not exist.
    type: bool
    default: true
  labels:
    description: Extra labels for every object, for example the label your Prometheus selects rules and monitors by.
    type: dict
    default: {}
  kueue_monitor:
    description: The ServiceMonitor for Kueue's metrics Service (HTTPS, authenticated with Prometheus' ServiceAccount token).
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Create it.
        type: bool
        default: true
      namespace:
        description: Namespace of Kueue (and of the ServiceMonitor).
        type: str
        default: kueue-system
      selector:
        description: Labels of Kueue's metrics Service.
        type: dict
        default: {app.kubernetes.io/name: kueue, app.kubernetes.io/component: metrics-service}
      port:
        description: Name of the Service port.
        type: str
        default: https
      scheme:
        description: C(https) or C(http).
        type: str
        default: https
      insecure_skip_verify:
        description: Skip verifying Kueue's self-signed metrics certificate (as Kueue's own ServiceMonitor does).
        type: bool
        default: true
      interval:
        description: Scrape interval.
        type: str
        default: 30s
  dcgm_monitor:
    description: The ServiceMonitor or PodMonitor for the NVIDIA DCGM exporter.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Create it.
        type: bool
        default: true
      kind:
        description: C(ServiceMonitor) (selects the exporter's Service) or C(PodMonitor) (selects its pods).
        type: str
        choices: [ServiceMonitor, PodMonitor]
        default: ServiceMonitor
      namespace:
        description: Namespace of the DCGM exporter (GPU Operator namespace).
        type: str
        default: gpu-operator
      selector:
        description: Labels of the exporter's Service (or pods).
        type: dict
        default: {app: nvidia-dcgm-exporter}
      port:
        description: Name of the metrics port.
        type: str
        default: gpu-metrics
      interval:
        description: Scrape interval.
        type: str
        default: 15s
      honor_labels:
        description: Keep the exporter's C(namespace)/C(pod)/C(container) labels (else they become C(exported_*)).
        type: bool
        default: true
  rules:
    description: The PrometheusRule.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Create it.
        type: bool
        default: true
      name:
        description: Name of the PrometheusRule.
        type: str
        default: gpuaas-gpu-alerts
      groups:
        description: Rule groups in Prometheus rule-file format (the role passes C(files/gpuaas-alerts.rules.yml)).
        type: list
        elements: dict
        default: []
      tenants:
        description: The C(gpuaas_tenants) list; adds the C(gpuaas-tenants) group mapping namespaces to tenants.
        type: list
        elements: dict
        default: []
      alert_overrides:
        description:
          - Per alert name, C(for) and extra C(labels) to use instead of the shipped ones (see EXAMPLES).
        type: dict
        default: {}
  dashboards:
    description: Grafana dashboards.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Install them.
        type: bool
        default: true
      mode:
        description:
          - C(configmap) for the Grafana sidecar, C(grafana_operator) for C(GrafanaDashboard) objects, C(both), or
            C(auto) (a ConfigMap, plus GrafanaDashboard objects when the Grafana Operator API is served).
        type: str
        choices: [auto, configmap, grafana_operator, both]
        default: auto
      files:
        description: Dashboard JSON per file name (a string or a parsed dict), for example from a C(lookup('file')).
        type: dict
        default: {}
      configmap_name:
        description: Name of the ConfigMap.
        type: str
        default: gpuaas-grafana-dashboards
      configmap_labels:
        description: Labels the Grafana sidecar looks for.
        type: dict
        default: {grafana_dashboard: "1"}
      folder:
        description: Grafana folder (sidecar annotation C(grafana_folder), GrafanaDashboard C(spec.folder)).
        type: str
        default: GPUaaS
      instance_selector:
        description: C(spec.instanceSelector.matchLabels) of GrafanaDashboard objects.
        type: dict
        default: {dashboards: grafana}
notes:
  - On OpenShift, user-workload monitoring picks up ServiceMonitors and PrometheusRules in user namespaces; the
    GPU Operator already ships a ServiceMonitor for the DCGM exporter in C(nvidia-gpu-operator) (cluster monitoring).
"""

EXAMPLES = r"""
- name: Monitor Kueue and the DCGM exporter, install alerts and the dashboard
  gpuaas.platform.monitoring_objects:
    namespace: gpuaas-monitoring
    labels: {release: kube-prometheus-stack}
    rules:
      groups: "{{ (lookup('ansible.builtin.file', 'gpuaas-alerts.rules.yml') | from_yaml).groups }}"
      tenants: "{{ gpuaas_tenants }}"
    dashboards:
      files:
        gpuaas-gpu-dashboard.json: "{{ lookup('ansible.builtin.file', 'gpuaas-gpu-dashboard.json') }}"

- name: Alert later on idle GPUs, with a lower severity
  gpuaas.platform.monitoring_objects:
    rules:
      groups: "{{ (lookup('ansible.builtin.file', 'gpuaas-alerts.rules.yml') | from_yaml).groups }}"
      alert_overrides:
        GpuaasGpuAllocatedIdle: {for: 1h, labels: {severity: info}}
    dashboards:
      enabled: false
"""

RETURN = r"""
changed:
  description: Whether an object was created, updated or deleted.
  returned: always
  type: bool
created:
  description: Objects created (C(apiVersion), C(kind), C(namespace), C(name)).
  returned: always
  type: list
  elements: dict
updated:
  description: Objects updated.
  returned: always
  type: list
  elements: dict
deleted:
  description: Objects deleted (no longer desired, or O(state=absent)).
  returned: always
  type: list
  elements: dict
summary:
  description: Count per action.
  returned: always
  type: dict
  sample: {"created": 4, "updated": 0, "unchanged": 0, "deleted": 0}
objects:
  description: Every desired object (C(apiVersion), C(kind), C(namespace), C(name)).
  returned: always
  type: list
  elements: dict
not_applied:
  description: Objects not applied because the cluster does not serve their API or their namespace is missing, with the reason.
  returned: always
  type: list
  elements: dict
diff:
  description: Per-object before/after, with C(--diff).
  returned: when diff mode is on
  type: list
  elements: dict
"""

import copy
import json
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, PruneScope
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    K8S_AUTH_ARG_SPEC,
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.utilization import tenant_mapping_rule_group

MONITORING = "monitoring.coreos.com/v1"
GRAFANA = "grafana.integreatly.org/v1beta1"
PART_OF = {"app.kubernetes.io/part-of": "gpuaas-observability"}
INSTANCE_LABEL = "app.kubernetes.io/instance"
KINDS = {
    "ServiceMonitor": MONITORING,
    "PodMonitor": MONITORING,
    "PrometheusRule": MONITORING,
    "ConfigMap": "v1",
    "GrafanaDashboard": GRAFANA,
}


def _meta(name: str, namespace: t.Optional[str], labels: t.Mapping[str, str],
          annotations: t.Optional[t.Mapping[str, str]] = None) -> t.Dict[str, t.Any]:
    meta: t.Dict[str, t.Any] = {"name": name, "labels": dict(labels)}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def apply_overrides(groups: t.Sequence[t.Mapping[str, t.Any]], overrides: t.Mapping[str, t.Any]) -> t.List[t.Dict[str, t.Any]]:
    """Rule groups with per-alert ``for``/``labels`` overrides; unknown alert names are an error."""
    out = copy.deepcopy([dict(g) for g in groups])
    seen = set()
    for group in out:
        for rule in group.get("rules") or []:
            name = rule.get("alert")
            if name and name in overrides:
                seen.add(name)
                change = overrides[name] or {}
                if change.get("for"):
                    rule["for"] = str(change["for"])
                if change.get("labels"):
                    rule.setdefault("labels", {}).update({str(k): str(v) for k, v in change["labels"].items()})
    unknown = sorted(set(overrides) - seen)
    if unknown:
        alerts = sorted({r["alert"] for g in out for r in g.get("rules") or [] if r.get("alert")})
        raise GpuaasError("alert_overrides names unknown alerts: %s" % ", ".join(unknown),
                          hint="known alerts: %s" % ", ".join(alerts))
    return out


def owner_labels(namespace: str) -> t.Dict[str, str]:
    """Labels that mark the objects of one installation (keyed by its namespace): prune only touches these."""
    labels = dict(PART_OF)
    labels[INSTANCE_LABEL] = namespace
    return labels


def desired_objects(params: t.Mapping[str, t.Any], served: t.Callable[[str, str], bool]
                    ) -> t.Tuple[t.List[t.Dict[str, t.Any]], t.List[t.Dict[str, t.Any]]]:
    """``(objects, skipped)`` for the module options; ``served(api_version, kind)`` tells what the cluster serves."""
    namespace = params["namespace"]
    labels = owner_labels(namespace)
    labels.update({str(k): str(v) for k, v in (params.get("labels") or {}).items()})
    objects: t.List[t.Dict[str, t.Any]] = []
    skipped: t.List[t.Dict[str, t.Any]] = []

    def add(obj: t.Dict[str, t.Any]) -> None:
        if served(obj["apiVersion"], obj["kind"]):
            objects.append(obj)
        else:
            skipped.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
                            "namespace": obj["metadata"].get("namespace"),
                            "reason": "%s %s is not served by the cluster" % (obj["apiVersion"], obj["kind"])})

    if params.get("create_namespace") and namespace:
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(namespace, None, labels)})

    kueue = params.get("kueue_monitor") or {}
    if kueue.get("enabled", True):
        endpoint: t.Dict[str, t.Any] = {"port": kueue.get("port", "https"), "path": "/metrics",
                                        "scheme": kueue.get("scheme", "https"), "interval": kueue.get("interval", "30s")}
        if endpoint["scheme"] == "https":
            endpoint["bearerTokenFile"] = "/var/run/secrets/kubernetes.io/serviceaccount/token"
            endpoint["tlsConfig"] = {"insecureSkipVerify": bool(kueue.get("insecure_skip_verify", True))}
        add({"apiVersion": MONITORING, "kind": "ServiceMonitor",
             "metadata": _meta("gpuaas-kueue", kueue.get("namespace", "kueue-system"), labels),
             "spec": {"selector": {"matchLabels": dict(kueue.get("selector") or {})}, "endpoints": [endpoint],
                      "namespaceSelector": {"matchNames": [kueue.get("namespace", "kueue-system")]}}})

    dcgm = params.get("dcgm_monitor") or {}
    if dcgm.get("enabled", True):
        kind = dcgm.get("kind", "ServiceMonitor")
        endpoint = {"port": dcgm.get("port", "gpu-metrics"), "path": "/metrics", "interval": dcgm.get("interval", "15s"),
                    "honorLabels": bool(dcgm.get("honor_labels", True))}
        spec: t.Dict[str, t.Any] = {"selector": {"matchLabels": dict(dcgm.get("selector") or {})},
                                    "namespaceSelector": {"matchNames": [dcgm.get("namespace", "gpu-operator")]}}
        spec["endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"] = [endpoint]
        add({"apiVersion": MONITORING, "kind": kind,
             "metadata": _meta("gpuaas-dcgm-exporter", dcgm.get("namespace", "gpu-operator"), labels), "spec": spec})

    rules = params.get("rules") or {}
    if rules.get("enabled", True):
        groups = apply_overrides(rules.get("groups") or [], rules.get("alert_overrides") or {})
        groups.append(tenant_mapping_rule_group(rules.get("tenants") or []))
        add({"apiVersion": MONITORING, "kind": "PrometheusRule",
             "metadata": _meta(rules.get("name", "gpuaas-gpu-alerts"), namespace, labels),
             "spec": {"groups": groups}})

    dash = params.get("dashboards") or {}
    if dash.get("enabled", True) and dash.get("files"):
        mode = dash.get("mode", "auto")
        contents = {}
        for fname, content in sorted((dash.get("files") or {}).items()):
            text = content if isinstance(content, str) else json.dumps(content, indent=2, sort_keys=True)
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise GpuaasError("dashboard %s is not valid JSON: %s" % (fname, exc),
                                  hint="pass the dashboard file content, e.g. lookup('ansible.builtin.file', ...)")
            contents[fname] = (text, parsed)
        if mode in ("auto", "configmap", "both"):
            cm_labels = dict(labels)
            cm_labels.update({str(k): str(v) for k, v in (dash.get("configmap_labels") or {}).items()})
            add({"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": _meta(dash.get("configmap_name", "gpuaas-grafana-dashboards"), namespace, cm_labels,
                                   {"grafana_folder": dash.get("folder", "GPUaaS")}),
                 "data": {fname: text for fname, (text, _p) in contents.items()}})
        if mode in ("grafana_operator", "both") or (mode == "auto" and served(GRAFANA, "GrafanaDashboard")):
            for fname, (text, parsed) in contents.items():
                name = str(parsed.get("uid") or fname.rsplit(".", 1)[0]).lower().replace("_", "-")
                add({"apiVersion": GRAFANA, "kind": "GrafanaDashboard", "metadata": _meta(name, namespace, labels),
                     "spec": {"json": text, "folder": dash.get("folder", "GPUaaS"), "resyncPeriod": "10m",
                              "instanceSelector": {"matchLabels": dict(dash.get("instance_selector") or {})}}})
    return objects, skipped


def skip_missing_namespaces(objects: t.List[t.Dict[str, t.Any]], client: t.Any
                            ) -> t.Tuple[t.List[t.Dict[str, t.Any]], t.List[t.Dict[str, t.Any]]]:
    """Monitors live in the namespace of what they scrape (Kueue, GPU Operator): skip those whose namespace does
    not exist (the component is not installed there) instead of failing the whole apply."""
    created = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    namespaces = client.resource("v1", "Namespace")
    exists: t.Dict[str, bool] = {}
    keep, skipped = [], []
    for obj in objects:
        ns = obj["metadata"].get("namespace")
        if obj["kind"] in ("ServiceMonitor", "PodMonitor") and ns and ns not in created:
            if ns not in exists:
                try:
                    exists[ns] = namespaces.get(ns) is not None
                except ApiException as exc:
                    raise translate_api_exception(exc, "read", "Namespace %s" % ns)
            if not exists[ns]:
                what = "Kueue" if obj["metadata"]["name"] == "gpuaas-kueue" else "the DCGM exporter (GPU Operator)"
                skipped.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
                                "namespace": ns, "reason": "namespace %s does not exist: is %s installed there?" % (ns, what)})
                continue
        keep.append(obj)
    return keep, skipped


def run(module: t.Any) -> t.Dict[str, t.Any]:
    client = get_client(module)

    def served(api_version: str, kind: str) -> bool:
        try:
            client.resource(api_version, kind)
            return True
        except GpuaasError:
            return False

    engine = ApplyEngine(client, check_mode=module.check_mode)
    prune_kinds = [(KINDS[k], k) for k in KINDS if served(KINDS[k], k)]
    prune = PruneScope(prune_kinds, labels=owner_labels(module.params["namespace"]), require_tenant_label=False)
    if module.params["state"] == "absent":
        result = engine.reconcile([], prune=prune)
        out = result.to_module_result(diff=module._diff)
        out.update(objects=[], not_applied=[])
        return out
    objects, skipped = desired_objects(module.params, served)
    objects, missing = skip_missing_namespaces(objects, client)
    skipped += missing
    result = engine.reconcile(objects, prune=prune)
    out = result.to_module_result(diff=module._diff)
    out["objects"] = [ObjectRef.from_object(o).to_dict() for o in objects]
    out["not_applied"] = skipped
    return out


def main() -> None:
    spec: t.Dict[str, t.Any] = copy.deepcopy(K8S_AUTH_ARG_SPEC)
    spec.update(
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        namespace={"type": "str", "default": "gpuaas-monitoring"},
        create_namespace={"type": "bool", "default": True},
        labels={"type": "dict", "default": {}},
        kueue_monitor={"type": "dict", "default": {}, "options": {
            "enabled": {"type": "bool", "default": True},
            "namespace": {"type": "str", "default": "kueue-system"},
            "selector": {"type": "dict", "default": {"app.kubernetes.io/name": "kueue",
                                                     "app.kubernetes.io/component": "metrics-service"}},
            "port": {"type": "str", "default": "https"},
            "scheme": {"type": "str", "default": "https"},
            "insecure_skip_verify": {"type": "bool", "default": True},
            "interval": {"type": "str", "default": "30s"},
        }},
        dcgm_monitor={"type": "dict", "default": {}, "options": {
            "enabled": {"type": "bool", "default": True},
            "kind": {"type": "str", "choices": ["ServiceMonitor", "PodMonitor"], "default": "ServiceMonitor"},
            "namespace": {"type": "str", "default": "gpu-operator"},
            "selector": {"type": "dict", "default": {"app": "nvidia-dcgm-exporter"}},
            "port": {"type": "str", "default": "gpu-metrics"},
            "interval": {"type": "str", "default": "15s"},
            "honor_labels": {"type": "bool", "default": True},
        }},
        rules={"type": "dict", "default": {}, "options": {
            "enabled": {"type": "bool", "default": True},
            "name": {"type": "str", "default": "gpuaas-gpu-alerts"},
            "groups": {"type": "list", "elements": "dict", "default": []},
            "tenants": {"type": "list", "elements": "dict", "default": []},
            "alert_overrides": {"type": "dict", "default": {}},
        }},
        dashboards={"type": "dict", "default": {}, "options": {
            "enabled": {"type": "bool", "default": True},
            "mode": {"type": "str", "choices": ["auto", "configmap", "grafana_operator", "both"], "default": "auto"},
            "files": {"type": "dict", "default": {}},
            "configmap_name": {"type": "str", "default": "gpuaas-grafana-dashboards"},
            "configmap_labels": {"type": "dict", "default": {"grafana_dashboard": "1"}},
            "folder": {"type": "str", "default": "GPUaaS"},
            "instance_selector": {"type": "dict", "default": {"dashboards": "grafana"}},
        }},
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    try:
        result = run(module)
    except GpuaasError as err:
        fail_module(module, err)
        return
    for item in result.get("not_applied") or []:
        module.warn("skipped %s %s: %s" % (item["kind"], item["name"], item["reason"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
