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
  - Kinds whose API the cluster does not serve (no Prometheus Operator, no Grafana Operator), and monitors whose
    namespace does not exist (Kueue or the GPU Operator not installed there), are skipped and listed in RV(not_applied)
    with a warning.
author:
  - gpuaas.platform contributors (@gpuaas)
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
  openshift_monitoring:
    description:
      - On OpenShift, create or merge the two ConfigMaps of OpenShift's cluster monitoring operator, neither of which
        exists on a fresh cluster. C(openshift-monitoring/cluster-monitoring-config) gets C(enableUserWorkload) set to
        true (the user-workload stack evaluates the PrometheusRule), and
        C(openshift-user-workload-monitoring/user-workload-monitoring-config) gets O(namespace) in
        C(namespacesWithoutLabelEnforcement) (otherwise every query of the rules is restricted to O(namespace) and the
        recording rules and alerts over the DCGM and Kueue series see nothing).
      - Only those two keys are merged into the live C(config.yaml); every other setting is kept, and a C(config.yaml)
        that already has them is not rewritten. The ConfigMaps are not the collection's - O(state=absent) leaves them.
    type: bool
    default: false
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
        description: Create the Kueue ServiceMonitor.
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
        description:
          - Do not verify Kueue's metrics certificate. An explicit opt-in only; the Prometheus ServiceAccount token is
            then sent to whatever answers on the Service's address. Prefer O(kueue_monitor.ca_secret) or
            O(kueue_monitor.ca_configmap).
        type: bool
        default: false
      ca_secret:
        description:
          - Secret in Kueue's namespace holding the CA that signed Kueue's metrics certificate (upstream Kueue with
            cert-manager writes C(metrics-server-cert), key C(ca.crt)). Used unless O(kueue_monitor.ca_configmap) is set.
        type: dict
        default: {name: metrics-server-cert, key: ca.crt}
        suboptions:
          name:
            description: Secret name.
            type: str
            default: metrics-server-cert
          key:
            description: Key of the CA certificate.
            type: str
            default: ca.crt
      ca_configmap:
        description:
          - "ConfigMap in Kueue's namespace holding the CA bundle, for example OpenShift's service CA
            C({name: openshift-service-ca.crt, key: service-ca.crt}) (present in every namespace there)."
        type: dict
        suboptions:
          name:
            description: ConfigMap name.
            type: str
            required: true
          key:
            description: Key of the CA bundle.
            type: str
            default: service-ca.crt
      server_name:
        description: Name the certificate must carry; default the metrics Service's C(<service>.<namespace>.svc).
        type: str
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
        description: Create the DCGM exporter's ServiceMonitor or PodMonitor.
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
        description: Create the PrometheusRule.
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
attributes:
  check_mode:
    description: A server-side dry run (C(dryRun=All)); the API server still validates, nothing is written.
    support: full
  diff_mode:
    description: Per object, the fields this collection manages, before and after.
    support: full
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
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
created:
  description: Objects created, each as C(apiVersion), C(kind), C(name) and, when namespaced, C(namespace).
  returned: always
  type: list
  elements: dict
updated:
  description: Objects updated, like RV(created).
  returned: always
  type: list
  elements: dict
deleted:
  description: Objects deleted because they are no longer desired, or by O(state=absent).
  returned: always
  type: list
  elements: dict
summary:
  description: Number of objects created, updated, unchanged and deleted.
  returned: always
  type: dict
  sample: {"created": 1, "updated": 0, "unchanged": 0, "deleted": 0}
diff:
  description: Per changed object, the fields this collection manages before and after.
  returned: in diff mode
  type: list
  elements: dict
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult, PruneScope
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.monitoring import (
    KINDS,
    OPENSHIFT_MONITORING_CONFIGS,
    desired_objects,
    openshift_monitoring_configmaps,
    owner_labels,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule


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


# (namespace, name) -> the live ConfigMap or None; a merged partial ConfigMap with its live object
LiveConfigMaps = t.Dict[t.Tuple[str, str], t.Optional[t.Dict[str, t.Any]]]
PlannedConfigMap = t.Tuple[t.Dict[str, t.Any], t.Optional[t.Dict[str, t.Any]]]


def read_monitoring_configs(client: t.Any) -> t.Tuple[LiveConfigMaps, t.List[str]]:
    """The live OpenShift monitoring ConfigMaps (None when missing) and the namespaces of them that do not exist."""
    configmaps = client.resource("v1", "ConfigMap")
    namespaces = client.resource("v1", "Namespace")
    live: LiveConfigMaps = {}
    missing = []
    for namespace, name in OPENSHIFT_MONITORING_CONFIGS:
        try:
            if namespaces.get(namespace) is None:
                missing.append(namespace)
                continue
            live[(namespace, name)] = configmaps.get(name, namespace=namespace)
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "ConfigMap %s/%s" % (namespace, name))
    return live, missing


def plan_monitoring_configs(client: t.Any, rules_namespace: str
                            ) -> t.Tuple[t.List[PlannedConfigMap], t.List[t.Dict[str, t.Any]]]:
    """OpenShift's monitoring ConfigMaps with the collection's keys merged (manifests.monitoring
    openshift_monitoring_configmaps), each with its live object, read and checked before anything is written; and
    those whose namespace does not exist."""
    live, missing = read_monitoring_configs(client)
    texts = {key: ((obj or {}).get("data") or {}).get("config.yaml") for key, obj in live.items()}
    planned, skipped = [], []
    for partial in openshift_monitoring_configmaps(texts, rules_namespace):
        meta = partial["metadata"]
        if meta["namespace"] in missing:
            skipped.append({"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "namespace": meta["namespace"],
                            "reason": "namespace %s does not exist: is this OpenShift?" % meta["namespace"]})
            continue
        planned.append((partial, live.get((meta["namespace"], meta["name"]))))
    return planned, skipped


def merge_monitoring_configs(engine: ApplyEngine, planned: t.Sequence[PlannedConfigMap]) -> t.List[ObjectResult]:
    """Server-side apply of data.config.yaml only, without the collection's labels (the ConfigMaps are never pruned);
    nothing when the live config.yaml already holds the keys."""
    results = []
    for partial, current in planned:
        outcome = engine.apply_fields(partial, current or {})
        if current is None and outcome.action == "updated":
            outcome = ObjectResult(outcome.ref, "created", None, outcome.after, obj=outcome.object)
        results.append(outcome)
    return results


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
    planned: t.List[PlannedConfigMap] = []
    if module.params["openshift_monitoring"]:  # read and checked before the first write
        planned, not_planned = plan_monitoring_configs(client, module.params["namespace"])
        skipped += not_planned
    result = engine.reconcile(objects, prune=prune)
    for outcome in merge_monitoring_configs(engine, planned):
        result.add(outcome)
    out = result.to_module_result(diff=module._diff)
    out["objects"] = [ObjectRef.from_object(o).to_dict() for o in objects]
    out["not_applied"] = skipped
    return out


def run_and_warn(module: t.Any) -> t.Dict[str, t.Any]:
    """:func:`run`, then the warnings about what was skipped or is unsafe (only when the run succeeded)."""
    result = run(module)
    for item in result.get("not_applied") or []:
        module.warn("skipped %s %s: %s" % (item["kind"], item["name"], item["reason"]))
    kueue = module.params.get("kueue_monitor") or {}
    if (module.params.get("state") == "present" and kueue.get("enabled") and kueue.get("scheme") == "https"
            and kueue.get("insecure_skip_verify")):
        module.warn("kueue_monitor.insecure_skip_verify is true: Prometheus sends its ServiceAccount token to Kueue's "
                    "metrics endpoint without verifying its certificate; set ca_secret or ca_configmap instead")
    return result


def main() -> None:
    spec: t.Dict[str, t.Any] = dict(
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        namespace={"type": "str", "default": "gpuaas-monitoring"},
        create_namespace={"type": "bool", "default": True},
        openshift_monitoring={"type": "bool", "default": False},
        labels={"type": "dict", "default": {}},
        kueue_monitor={"type": "dict", "default": {}, "options": {
            "enabled": {"type": "bool", "default": True},
            "namespace": {"type": "str", "default": "kueue-system"},
            "selector": {"type": "dict", "default": {"app.kubernetes.io/name": "kueue",
                                                     "app.kubernetes.io/component": "metrics-service"}},
            "port": {"type": "str", "default": "https"},
            "scheme": {"type": "str", "default": "https"},
            "insecure_skip_verify": {"type": "bool", "default": False},
            "ca_secret": {"type": "dict", "no_log": False, "default": {"name": "metrics-server-cert", "key": "ca.crt"}, "options": {
                "name": {"type": "str", "default": "metrics-server-cert"},
                "key": {"type": "str", "default": "ca.crt", "no_log": False}}},
            "ca_configmap": {"type": "dict", "options": {
                "name": {"type": "str", "required": True},
                "key": {"type": "str", "default": "service-ca.crt", "no_log": False}}},
            "server_name": {"type": "str"},
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
    module = GpuaasModule(argument_spec=spec, supports_check_mode=True)
    module.run(run_and_warn)


if __name__ == "__main__":
    main()
