# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/observability.yml and platform_health_info against the lab's real apiserver (Prometheus Operator CRDs
are served there; the Grafana Operator's are not)."""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import local_play

REPO = Path(__file__).resolve().parents[2]
ID = uuid.uuid4().hex[:5]
MON_NS, KUEUE_NS, GPU_NS = "itobs-mon-%s" % ID, "itobs-kueue-%s" % ID, "itobs-gpu-%s" % ID
TENANTS = [{"name": "itobs%s" % ID, "namespaces": ["itobs-a-%s" % ID, "itobs-b-%s" % ID]}]


def extra(**over):
    base = {"gpuaas_platform": "kubernetes", "gpuaas_observability_namespace": MON_NS,
            "gpuaas_observability_kueue_namespace": KUEUE_NS, "gpuaas_observability_dcgm_namespace": GPU_NS,
            "gpuaas_observability_dcgm_monitor": "true", "gpuaas_tenants": TENANTS,
            "gpuaas_observability_labels": {"itobs": ID}}
    base.update(over)
    return base


@pytest.fixture(scope="module")
def component_namespaces(kube):
    ns_api = kube.resources.get(api_version="v1", kind="Namespace")
    for ns in (KUEUE_NS, GPU_NS):
        ns_api.create(body={"metadata": {"name": ns}})
    yield
    for ns in (KUEUE_NS, GPU_NS, MON_NS):
        try:
            ns_api.delete(name=ns)
        except Exception:  # pylint: disable=broad-except  # MON_NS may not exist if a test failed early
            pass


def live(kube, kind, name, namespace):
    api = kube.resources.get(api_version="v1" if kind == "ConfigMap" else "monitoring.coreos.com/v1", kind=kind)
    try:
        return api.get(name=name, namespace=namespace).to_dict()
    except Exception:  # pylint: disable=broad-except
        return None


def test_observability_role_converges_idempotent_check_mode_and_absent(component_namespaces, kube, run_playbook,
                                                                       audit_writes, lab, tmp_path):
    playbook = REPO / "playbooks" / "observability.yml"
    first = run_playbook(playbook, extra_vars=extra())
    assert first.rc == 0, first.explain()
    result = first.task_results("Apply the monitoring objects")[0]
    created = sorted((o["kind"], o.get("namespace"), o["name"]) for o in result["created"])
    assert created == [("ConfigMap", MON_NS, "gpuaas-grafana-dashboards"), ("Namespace", None, MON_NS),
                       ("PrometheusRule", MON_NS, "gpuaas-gpu-alerts"), ("ServiceMonitor", GPU_NS, "gpuaas-dcgm-exporter"),
                       ("ServiceMonitor", KUEUE_NS, "gpuaas-kueue")]
    assert result["not_applied"] == []  # GrafanaDashboard only in auto mode when served: not listed

    sm = live(kube, "ServiceMonitor", "gpuaas-dcgm-exporter", GPU_NS)
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True
    assert sm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
    assert sm["metadata"]["labels"]["itobs"] == ID
    kueue_sm = live(kube, "ServiceMonitor", "gpuaas-kueue", KUEUE_NS)
    assert kueue_sm["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "kueue", "app.kubernetes.io/component": "metrics-service"}
    cm = live(kube, "ConfigMap", "gpuaas-grafana-dashboards", MON_NS)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["gpuaas-gpu-dashboard.json"])
    assert dashboard["uid"] == "gpuaas-gpu-utilization"

    # the PrometheusRule the apiserver stored is valid for promtool, with the tenant mapping of the inventory
    rule = live(kube, "PrometheusRule", "gpuaas-gpu-alerts", MON_NS)
    groups = rule["spec"]["groups"]
    assert [g["name"] for g in groups] == ["gpuaas-recording", "gpuaas-gpu", "gpuaas-kueue", "gpuaas-tenants"]
    assert len(groups[-1]["rules"]) == 2
    assert groups[-1]["rules"][0]["labels"] == {"namespace": "itobs-a-%s" % ID, "tenant": "itobs%s" % ID}
    rules_file = tmp_path / "live.rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": groups}))
    proc = subprocess.run(["promtool", "check", "rules", str(rules_file)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "SUCCESS: 9 rules found" in proc.stdout, proc.stdout + proc.stderr

    # second run: nothing to change, no write reaches the apiserver
    with audit_writes() as writes:
        second = run_playbook(playbook, extra_vars=extra())
    assert second.rc == 0, second.explain()
    assert second.task_results("Apply the monitoring objects")[0]["changed"] is False
    assert [e for e in writes.events if ID in e["requestURI"]] == [], writes.describe()

    # check mode with an alert override: reported as an update, nothing written
    override = extra(gpuaas_observability_alert_overrides={"GpuaasGpuAllocatedIdle": {"for": "1h"}})
    with audit_writes() as writes:
        check = run_playbook(playbook, extra_vars=override, check=True, diff=True)
    assert check.rc == 0, check.explain()
    res = check.task_results("Apply the monitoring objects")[0]
    assert res["changed"] is True and [o["kind"] for o in res["updated"]] == ["PrometheusRule"]
    assert [e for e in writes.events if ID in e["requestURI"]] == [], writes.describe()
    live_idle = next(r for g in live(kube, "PrometheusRule", "gpuaas-gpu-alerts", MON_NS)["spec"]["groups"]
                     for r in g["rules"] if r.get("alert") == "GpuaasGpuAllocatedIdle")
    assert live_idle["for"] == "30m"

    # a monitor whose component namespace is missing is skipped with a reason, the rest applies
    skipped_run = run_playbook(playbook, extra_vars=extra(gpuaas_observability_dcgm_namespace="itobs-none-%s" % ID))
    assert skipped_run.rc == 0, skipped_run.explain()
    res = skipped_run.task_results("Apply the monitoring objects")[0]
    assert [(s["kind"], s["namespace"]) for s in res["not_applied"]] == [("ServiceMonitor", "itobs-none-%s" % ID)]
    assert [(o["kind"], o["namespace"]) for o in res["deleted"]] == [("ServiceMonitor", GPU_NS)]

    # absent: every object of the role goes (the namespace stays)
    gone = run_playbook(playbook, extra_vars=extra(gpuaas_observability_state="absent"))
    assert gone.rc == 0, gone.explain()
    deleted = sorted((o["kind"], o["name"]) for o in gone.task_results("Apply the monitoring objects")[0]["deleted"]
                     if ID in (o.get("namespace") or ""))
    assert deleted == [("ConfigMap", "gpuaas-grafana-dashboards"), ("PrometheusRule", "gpuaas-gpu-alerts"),
                       ("ServiceMonitor", "gpuaas-kueue")]
    assert live(kube, "PrometheusRule", "gpuaas-gpu-alerts", MON_NS) is None


def test_platform_health_reports_missing_flavor(kube, lab, run_playbook):
    version = "kueue.x-k8s.io/%s" % lab.kueue_api
    cq_api = kube.resources.get(api_version=version, kind="ClusterQueue")
    name = "itobs-broken-%s" % ID
    cq_api.create(body={"apiVersion": version, "kind": "ClusterQueue", "metadata": {"name": name},
                        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                 "flavors": [{"name": "no-such-flavor-%s" % ID,
                                              "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}]}]}})
    try:
        run = run_playbook(local_play("""
  tasks:
    - name: health
      gpuaas.platform.platform_health_info:
        checks: [gpu_nodes, kueue]
"""))
        assert run.rc == 0, run.explain()
        res = run.task_results("health")[0]
        nodes = {c["object"]: c for c in res["checks"] if c["check"] == "gpu_nodes"}
        assert nodes["Node/gpu-h100-0"]["ok"] and nodes["Node/gpu-h100-0"]["message"] == "node gpu-h100-0 offers 8 nvidia.com/gpu"
        assert nodes["Node/gpu-a100-mig-0"]["message"] == "node gpu-a100-mig-0 offers 7 nvidia.com/mig-1g.10gb"
        assert "Node/cpu-0" not in nodes
        broken = next(c for c in res["failed_checks"] if c["object"] == "ClusterQueue/%s" % name)
        assert broken["message"].startswith("ClusterQueue %s references missing ResourceFlavor no-such-flavor-%s" % (name, ID))
        assert "gpuaas_flavors" in broken["hint"]
        assert res["ok"] is False
    finally:
        cq_api.delete(name=name)


def kueue_monitors(kube, namespace: str) -> list[str]:
    """Every ServiceMonitor (any namespace) that makes Prometheus scrape the Kueue metrics Service of ``namespace``:
    its selector is a subset of the Service's labels and its namespaceSelector takes ``namespace`` (what the
    Prometheus Operator turns into one scrape target per monitor)."""
    service = kube.resources.get(api_version="v1", kind="Service").get(
        name="gpuaas-kueue-controller-manager-metrics-service", namespace=namespace).to_dict()
    labels = service["metadata"].get("labels") or {}
    found = []
    for sm in kube.resources.get(api_version="monitoring.coreos.com/v1", kind="ServiceMonitor").get().to_dict()["items"]:
        spec, meta = sm.get("spec") or {}, sm["metadata"]
        wanted = (spec.get("selector") or {}).get("matchLabels") or {}
        if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
            continue
        spaces = spec.get("namespaceSelector") or {}
        if spaces.get("any") or namespace in (spaces.get("matchNames") or [meta["namespace"]]):
            found.append("%s/%s" % (meta["namespace"], meta["name"]))
    return found


def test_kueue_is_scraped_by_exactly_one_monitor(kube, run_playbook, audit_writes):
    """Issue 24: the lab's Kueue was installed by the kueue role with its defaults (lab-up), the observability role
    adds gpuaas-kueue: one ServiceMonitor selects Kueue's metrics Service, not the chart's as well. Asking for both
    is refused before anything is written."""
    kueue_ns = "gpuaas-kueue"  # the lab inventory's Kueue release namespace (gpuaas_kueue_namespace)
    playbook = REPO / "playbooks" / "observability.yml"
    over = extra(gpuaas_observability_kueue_namespace=kueue_ns, gpuaas_observability_dcgm_monitor="false",
                 gpuaas_observability_rules=False, gpuaas_observability_dashboards=False)
    try:
        run = run_playbook(playbook, extra_vars=over)
        assert run.rc == 0, run.explain()
        assert kueue_monitors(kube, kueue_ns) == ["%s/gpuaas-kueue" % kueue_ns]

        with audit_writes() as writes:
            both = run_playbook(playbook, extra_vars=dict(over, gpuaas_kueue_service_monitor=True))
        assert both.rc != 0
        assert "scrape every Kueue series twice" in both.stdout, both.explain()
        assert writes.events == [], writes.describe()
    finally:
        gone = run_playbook(playbook, extra_vars=dict(over, gpuaas_observability_state="absent"))
        try:
            kube.resources.get(api_version="v1", kind="Namespace").delete(name=MON_NS)
        except Exception:  # pylint: disable=broad-except  # not created when the first run failed early
            pass
        assert gone.rc == 0, gone.explain()
