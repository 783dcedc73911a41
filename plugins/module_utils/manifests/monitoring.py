# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Monitoring objects: ServiceMonitor/PodMonitor for Kueue and the DCGM exporter, the PrometheusRule with the
GPU alerts and the tenant mapping, Grafana dashboards (ConfigMap and/or GrafanaDashboard). Pure functions."""

from __future__ import annotations

import copy
import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import tenant_index

TENANT_INFO_METRIC = "gpuaas:namespace_tenant:info"
RECORDED_METRICS = ("gpuaas:gpu_utilization", "gpuaas:gpu_memory_used_mib", TENANT_INFO_METRIC)


def tenant_mapping_rule_group(tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]],
                              name: str = "gpuaas-tenants") -> t.Dict[str, t.Any]:
    """A Prometheus rule group publishing ``gpuaas:namespace_tenant:info{namespace, tenant} 1`` for every
    tenant namespace, so PromQL can join GPU series to tenants
    (``... * on (namespace) group_left (tenant) gpuaas:namespace_tenant:info``)."""
    _ns_map, tenant_list = tenant_index(tenants)
    rules = []
    for tenant in tenant_list:
        for ns in tenant["namespaces"]:
            rules.append({"record": TENANT_INFO_METRIC, "expr": "vector(1)",
                          "labels": {"namespace": ns, "tenant": tenant["name"]}})
    if not rules:
        # a group must not be empty: an expression that yields nothing
        rules.append({"record": TENANT_INFO_METRIC, "expr": "vector(1) == 0"})
    return {"name": name, "rules": rules}


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


KUEUE_METRICS_SERVICE = "kueue-controller-manager-metrics-service"


def kueue_tls_config(kueue: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """tlsConfig of the Kueue ServiceMonitor: the Prometheus token goes only to a server whose certificate verifies.

    The CA comes from ``ca_secret`` ({name, key}, upstream Kueue's cert-manager Secret ``metrics-server-cert``/
    ``ca.crt`` by default) or ``ca_configmap`` ({name, key}, e.g. OpenShift's ``openshift-service-ca.crt``/
    ``service-ca.crt``), both in Kueue's namespace; ``server_name`` defaults to the metrics Service's DNS name.
    ``insecure_skip_verify`` is an explicit opt-in only.
    """
    if kueue.get("insecure_skip_verify"):
        return {"insecureSkipVerify": True}
    namespace = kueue.get("namespace") or "kueue-system"
    config: t.Dict[str, t.Any] = {
        "insecureSkipVerify": False,
        "serverName": kueue.get("server_name") or "%s.%s.svc" % (KUEUE_METRICS_SERVICE, namespace),
    }
    configmap = kueue.get("ca_configmap") or {}
    secret = kueue.get("ca_secret") or {}
    if configmap.get("name"):
        config["ca"] = {"configMap": {"name": configmap["name"], "key": configmap.get("key") or "service-ca.crt"}}
    else:
        config["ca"] = {"secret": {"name": secret.get("name") or "metrics-server-cert",
                                   "key": secret.get("key") or "ca.crt"}}
    return config


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
            endpoint["tlsConfig"] = kueue_tls_config(kueue)
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


# OpenShift's monitoring stack is configured by two ConfigMaps its cluster monitoring operator reads, neither of which
# exists on a fresh cluster (so they are created, never only patched): openshift-monitoring/cluster-monitoring-config
# (enableUserWorkload: true starts the user-workload stack that evaluates the collection's PrometheusRule) and
# openshift-user-workload-monitoring/user-workload-monitoring-config, whose namespacesWithoutLabelEnforcement lists
# the rules namespace: user-defined rules otherwise have namespace="<their namespace>" enforced on every query, and
# the collection's recording rules and alerts over DCGM (nvidia-gpu-operator) and Kueue series would see nothing.
# The admin's own settings in both are kept: only those two keys are merged into the live config.yaml.
OPENSHIFT_MONITORING_CONFIGS = (
    ("openshift-monitoring", "cluster-monitoring-config"),
    ("openshift-user-workload-monitoring", "user-workload-monitoring-config"),
)


def _parse_monitoring_config(text: t.Optional[str], namespace: str, name: str) -> t.Dict[str, t.Any]:
    import yaml  # PyYAML ships with ansible-core; imported here so the rest of this module needs none

    try:
        config = yaml.safe_load(text) if text else {}
    except yaml.YAMLError as exc:
        raise GpuaasError("ConfigMap %s/%s: data.config.yaml is not YAML (%s)" % (namespace, name, exc),
                          hint="fix the ConfigMap by hand (oc -n %s edit configmap %s); the collection merges its "
                               "keys into it and never replaces what it cannot read" % (namespace, name))
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise GpuaasError("ConfigMap %s/%s: data.config.yaml is not a mapping" % (namespace, name),
                          hint="fix the ConfigMap by hand (oc -n %s edit configmap %s)" % (namespace, name))
    return config


def openshift_monitoring_configmaps(live: t.Mapping[t.Tuple[str, str], t.Optional[str]],
                                    rules_namespace: str) -> t.List[t.Dict[str, t.Any]]:
    """The two OpenShift monitoring ConfigMaps (OPENSHIFT_MONITORING_CONFIGS) with the collection's keys merged into
    ``live`` ((namespace, name) -> the live data.config.yaml, None when the ConfigMap or key is missing): partial
    objects for server-side apply of data.config.yaml only. A config.yaml that already holds the keys is returned
    as it is (byte for byte), so a second run changes nothing."""
    import yaml

    def enable_user_workload(config: t.Dict[str, t.Any]) -> bool:
        if config.get("enableUserWorkload") is True:
            return False
        config["enableUserWorkload"] = True
        return True

    def without_label_enforcement(config: t.Dict[str, t.Any]) -> bool:
        listed = config.get("namespacesWithoutLabelEnforcement") or []
        if not isinstance(listed, list):
            raise GpuaasError("ConfigMap openshift-user-workload-monitoring/user-workload-monitoring-config: "
                              "namespacesWithoutLabelEnforcement is not a list",
                              hint="make it a list of namespace names")
        if rules_namespace in listed:
            return False
        config["namespacesWithoutLabelEnforcement"] = list(listed) + [rules_namespace]
        return True

    merge = {"cluster-monitoring-config": enable_user_workload,
             "user-workload-monitoring-config": without_label_enforcement}
    objects = []
    for namespace, name in OPENSHIFT_MONITORING_CONFIGS:
        text = live.get((namespace, name))
        config = _parse_monitoring_config(text, namespace, name)
        if merge[name](config):
            text = yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                        "data": {"config.yaml": text}})
    return objects
