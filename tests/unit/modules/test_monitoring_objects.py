# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""monitoring_objects: the objects built from the options (pure builder)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.modules import monitoring_objects as mo

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FILES = os.path.join(ROOT, "roles", "observability", "files")


def params(**over):
    base = {
        "namespace": "gpuaas-monitoring", "create_namespace": True, "labels": {"release": "kps"},
        "kueue_monitor": {"enabled": True, "namespace": "kueue-system",
                          "selector": {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/component": "metrics-service"},
                          "port": "https", "scheme": "https", "insecure_skip_verify": False, "interval": "30s",
                          "ca_secret": {"name": "metrics-server-cert", "key": "ca.crt"}, "ca_configmap": None,
                          "server_name": None},
        "dcgm_monitor": {"enabled": True, "kind": "ServiceMonitor", "namespace": "gpu-operator",
                         "selector": {"app": "nvidia-dcgm-exporter"}, "port": "gpu-metrics", "interval": "15s",
                         "honor_labels": True},
        "rules": {"enabled": True, "name": "gpuaas-gpu-alerts",
                  "groups": yaml.safe_load(open(os.path.join(FILES, "gpuaas-alerts.rules.yml")))["groups"],
                  "tenants": [{"name": "nlp", "namespaces": ["nlp-train"]}], "alert_overrides": {}},
        "dashboards": {"enabled": True, "mode": "auto",
                       "files": {"gpuaas-gpu-dashboard.json": open(os.path.join(FILES, "gpuaas-gpu-dashboard.json")).read()},
                       "configmap_name": "gpuaas-grafana-dashboards", "configmap_labels": {"grafana_dashboard": "1"},
                       "folder": "GPUaaS", "instance_selector": {"dashboards": "grafana"}},
    }
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = dict(base[key], **value)
        else:
            base[key] = value
    return base


def served_all(api_version, kind):
    return True


def by_kind(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_all_objects_when_everything_is_served():
    objects, skipped = mo.desired_objects(params(), served_all)
    assert skipped == []
    objs = by_kind(objects)
    assert sorted(objs) == [("ConfigMap", "gpuaas-grafana-dashboards"), ("GrafanaDashboard", "gpuaas-gpu-utilization"),
                            ("Namespace", "gpuaas-monitoring"), ("PrometheusRule", "gpuaas-gpu-alerts"),
                            ("ServiceMonitor", "gpuaas-dcgm-exporter"), ("ServiceMonitor", "gpuaas-kueue")]
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpuaas-observability"
        assert obj["metadata"]["labels"]["release"] == "kps"
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "gpuaas-monitoring"
    kueue = objs[("ServiceMonitor", "gpuaas-kueue")]
    assert kueue["metadata"]["namespace"] == "kueue-system"
    assert kueue["spec"]["endpoints"] == [{"port": "https", "path": "/metrics", "scheme": "https", "interval": "30s",
                                           "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                                           "tlsConfig": {"insecureSkipVerify": False,
                                                         "serverName": "kueue-controller-manager-metrics-service"
                                                                       ".kueue-system.svc",
                                                         "ca": {"secret": {"name": "metrics-server-cert",
                                                                           "key": "ca.crt"}}}}]
    assert kueue["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "metrics-service"
    dcgm = objs[("ServiceMonitor", "gpuaas-dcgm-exporter")]
    assert dcgm["spec"]["endpoints"][0]["honorLabels"] is True
    assert dcgm["spec"]["namespaceSelector"] == {"matchNames": ["gpu-operator"]}
    rule = objs[("PrometheusRule", "gpuaas-gpu-alerts")]
    names = [g["name"] for g in rule["spec"]["groups"]]
    assert names == ["gpuaas-recording", "gpuaas-gpu", "gpuaas-kueue", "gpuaas-tenants"]
    assert rule["spec"]["groups"][-1]["rules"][0]["labels"] == {"namespace": "nlp-train", "tenant": "nlp"}
    cm = objs[("ConfigMap", "gpuaas-grafana-dashboards")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "GPUaaS"}
    assert json.loads(cm["data"]["gpuaas-gpu-dashboard.json"])["uid"] == "gpuaas-gpu-utilization"
    gd = objs[("GrafanaDashboard", "gpuaas-gpu-utilization")]
    assert gd["spec"]["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}


def test_without_prometheus_operator_only_the_configmap():
    objects, skipped = mo.desired_objects(params(), lambda api_version, kind: api_version == "v1")
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == [
        ("ConfigMap", "gpuaas-grafana-dashboards"), ("Namespace", "gpuaas-monitoring")]
    assert sorted(s["kind"] for s in skipped) == ["PrometheusRule", "ServiceMonitor", "ServiceMonitor"]
    assert skipped[0]["reason"].endswith("is not served by the cluster")


def test_podmonitor_http_kueue_and_disabled_parts():
    objects = mo.desired_objects(params(
        dcgm_monitor={"kind": "PodMonitor"}, kueue_monitor={"scheme": "http"},
        dashboards={"enabled": False}, create_namespace=False), served_all)[0]
    objs = by_kind(objects)
    assert ("PodMonitor", "gpuaas-dcgm-exporter") in objs
    assert objs[("PodMonitor", "gpuaas-dcgm-exporter")]["spec"]["podMetricsEndpoints"][0]["port"] == "gpu-metrics"
    endpoint = objs[("ServiceMonitor", "gpuaas-kueue")]["spec"]["endpoints"][0]
    assert "bearerTokenFile" not in endpoint and "tlsConfig" not in endpoint
    assert not any(k in ("ConfigMap", "Namespace", "GrafanaDashboard") for k, _n in objs)


def test_alert_overrides():
    objects = mo.desired_objects(params(rules={"alert_overrides": {
        "GpuaasGpuAllocatedIdle": {"for": "1h", "labels": {"severity": "info", "team": "platform"}}}}), served_all)[0]
    rule = by_kind(objects)[("PrometheusRule", "gpuaas-gpu-alerts")]
    idle = next(r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "GpuaasGpuAllocatedIdle")
    assert idle["for"] == "1h" and idle["labels"] == {"severity": "info", "component": "gpu", "team": "platform"}
    with pytest.raises(GpuaasError, match="unknown alerts: NoSuchAlert"):
        mo.desired_objects(params(rules={"alert_overrides": {"NoSuchAlert": {"for": "1m"}}}), served_all)


def test_bad_dashboard_json():
    with pytest.raises(GpuaasError, match="dashboard x.json is not valid JSON"):
        mo.desired_objects(params(dashboards={"files": {"x.json": "{not json"}}), served_all)


def test_monitors_in_missing_namespaces_are_skipped():
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from fake_kube import FakeKube  # pylint: disable=import-outside-toplevel

    kube = FakeKube()
    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
    objects = mo.desired_objects(params(), served_all)[0]
    keep, skipped = mo.skip_missing_namespaces(objects, kube)
    assert [(s["kind"], s["name"], s["namespace"]) for s in skipped] == [("ServiceMonitor", "gpuaas-dcgm-exporter", "gpu-operator")]
    assert skipped[0]["reason"] == "namespace gpu-operator does not exist: is the DCGM exporter (GPU Operator) installed there?"
    assert ("ServiceMonitor", "gpuaas-kueue") in by_kind(keep) and ("PrometheusRule", "gpuaas-gpu-alerts") in by_kind(keep)
    # a monitor in the namespace the module creates itself is kept
    objects = mo.desired_objects(params(dcgm_monitor={"namespace": "gpuaas-monitoring"}), served_all)[0]
    keep, skipped = mo.skip_missing_namespaces(objects, kube)
    assert skipped == [] and ("ServiceMonitor", "gpuaas-dcgm-exporter") in by_kind(keep)


def test_prometheus_rule_spec_passes_promtool(tmp_path):
    import shutil
    import subprocess

    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    assert os.path.exists(promtool), "promtool is missing: apt-get install prometheus"
    tenants = [{"name": "nlp", "namespaces": ["nlp-train", "nlp-serve"]}, {"name": "vision", "namespaces": ["vision-dev"]}]
    objects = mo.desired_objects(params(rules={"tenants": tenants}), served_all)[0]
    groups = by_kind(objects)[("PrometheusRule", "gpuaas-gpu-alerts")]["spec"]["groups"]
    path = tmp_path / "spec.rules.yml"
    path.write_text(yaml.safe_dump({"groups": groups}))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "SUCCESS: 10 rules found" in proc.stdout, proc.stdout + proc.stderr


def test_kueue_monitor_tls_ca_from_configmap_or_explicitly_insecure():
    """Issue 11: the token is sent only over verified TLS unless insecure is asked for explicitly."""
    tls = by_kind(mo.desired_objects(params(kueue_monitor={
        "namespace": "openshift-kueue-operator", "ca_configmap": {"name": "openshift-service-ca.crt",
                                                                  "key": "service-ca.crt"}}), served_all)[0])[
        ("ServiceMonitor", "gpuaas-kueue")]["spec"]["endpoints"][0]["tlsConfig"]
    assert tls == {"insecureSkipVerify": False,
                   "serverName": "kueue-controller-manager-metrics-service.openshift-kueue-operator.svc",
                   "ca": {"configMap": {"name": "openshift-service-ca.crt", "key": "service-ca.crt"}}}
    insecure = by_kind(mo.desired_objects(params(kueue_monitor={"insecure_skip_verify": True}), served_all)[0])[
        ("ServiceMonitor", "gpuaas-kueue")]["spec"]["endpoints"][0]["tlsConfig"]
    assert insecure == {"insecureSkipVerify": True}


# ---- OpenShift's monitoring ConfigMaps: created on a fresh cluster, merged into an admin's (issue 23) ---------------
CMO = ("openshift-monitoring", "cluster-monitoring-config")
UWM = ("openshift-user-workload-monitoring", "user-workload-monitoring-config")


def merged(live):
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.monitoring import (
        openshift_monitoring_configmaps)
    objects = openshift_monitoring_configmaps(live, "gpuaas-monitoring")
    return {(o["metadata"]["namespace"], o["metadata"]["name"]): o["data"]["config.yaml"] for o in objects}


def test_a_fresh_openshift_gets_both_monitoring_configmaps():
    out = merged({})
    assert set(out) == {CMO, UWM}
    assert yaml.safe_load(out[CMO]) == {"enableUserWorkload": True}
    assert yaml.safe_load(out[UWM]) == {"namespacesWithoutLabelEnforcement": ["gpuaas-monitoring"]}


def test_an_admins_monitoring_settings_are_kept():
    cmo = "prometheusK8s:\n  retention: 15d\nenableUserWorkload: false\n"
    uwm = "prometheus:\n  retention: 24h\nnamespacesWithoutLabelEnforcement: [team-rules]\n"
    out = merged({CMO: cmo, UWM: uwm})
    assert yaml.safe_load(out[CMO]) == {"prometheusK8s": {"retention": "15d"}, "enableUserWorkload": True}
    assert yaml.safe_load(out[UWM]) == {"prometheus": {"retention": "24h"},
                                        "namespacesWithoutLabelEnforcement": ["team-rules", "gpuaas-monitoring"]}


def test_a_config_that_already_has_the_keys_is_not_rewritten():
    cmo = "# the admin's comment\nenableUserWorkload: true\n"
    uwm = "namespacesWithoutLabelEnforcement:\n- gpuaas-monitoring   # ours\n"
    assert merged({CMO: cmo, UWM: uwm}) == {CMO: cmo, UWM: uwm}  # byte for byte: comments and layout stay


@pytest.mark.parametrize("live,what", [
    ({CMO: "enableUserWorkload: [true"}, "not YAML"),
    ({CMO: "- a list\n"}, "not a mapping"),
    ({UWM: "namespacesWithoutLabelEnforcement: gpuaas-monitoring\n"}, "is not a list"),
])
def test_an_unreadable_monitoring_config_is_refused_not_replaced(live, what):
    with pytest.raises(GpuaasError) as err:
        merged(live)
    assert what in str(err.value)
