# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenShift's monitoring ConfigMaps on the OpenShift-flavoured variant lab (issue 23).

The lab runs no cluster monitoring operator: the test makes its two namespaces (as an OpenShift cluster has them)
and checks what the observability module (``openshift_monitoring: true``, the observability role's default on
OpenShift) writes into them, as the real API server stores it:

- on a fresh cluster, where neither ConfigMap exists (``oc patch`` fails there), both are created:
  ``cluster-monitoring-config`` with ``enableUserWorkload: true``, ``user-workload-monitoring-config`` with the
  rules namespace in ``namespacesWithoutLabelEnforcement``; a second run changes nothing;
- over an administrator's ConfigMaps (other settings, ``enableUserWorkload: false``, another namespace listed), only
  those two keys change and every other setting is kept;
- a ``config.yaml`` that is not YAML stops the run before anything is written.
"""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml
from conftest import local_play

ID = uuid.uuid4().hex[:5]
RULES_NS = "itest-osmon-%s" % ID
CMO = ("openshift-monitoring", "cluster-monitoring-config")
UWM = ("openshift-user-workload-monitoring", "user-workload-monitoring-config")


def kubectl(lab, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", "lab-admin"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=False, timeout=120, input=stdin)


def config(lab, key) -> dict | None:
    out = kubectl(lab, "get", "configmap", "-n", key[0], key[1], "-o", "json")
    if out.returncode != 0:
        return None
    return yaml.safe_load(json.loads(out.stdout)["data"]["config.yaml"])


def put(lab, key, text: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": key[1], "namespace": key[0]},
            "data": {"config.yaml": text}}
    out = kubectl(lab, "apply", "-f", "-", stdin=json.dumps(body))  # client-side apply: the admin's own tool
    assert out.returncode == 0, out.stderr


def play() -> str:
    return local_play("""
  tasks:
    - gpuaas.platform.monitoring_objects:
        namespace: %s
        openshift_monitoring: true
        kueue_monitor: {enabled: false}
        dcgm_monitor: {enabled: false}
        rules: {enabled: false}
        dashboards: {enabled: false}
""" % RULES_NS)


@pytest.fixture(scope="module")
def monitoring_namespaces(variant_lab):
    if variant_lab.flavor != "openshift":
        pytest.skip("needs the OpenShift-flavoured variant lab")
    made = []
    for namespace in (CMO[0], UWM[0]):
        if kubectl(variant_lab, "get", "namespace", namespace).returncode != 0:
            assert kubectl(variant_lab, "create", "namespace", namespace).returncode == 0
            made.append(namespace)
    for key in (CMO, UWM):
        kubectl(variant_lab, "delete", "configmap", "-n", key[0], key[1], "--ignore-not-found")
    yield
    for key in (CMO, UWM):
        kubectl(variant_lab, "delete", "configmap", "-n", key[0], key[1], "--ignore-not-found")
    for namespace in made + [RULES_NS]:
        kubectl(variant_lab, "delete", "namespace", namespace, "--ignore-not-found", "--wait=false")


def test_a_fresh_cluster_gets_both_configmaps_then_nothing_changes(
        variant_lab, variant_run_playbook, monitoring_namespaces):
    assert config(variant_lab, CMO) is None and config(variant_lab, UWM) is None
    run = variant_run_playbook(play())
    assert run.rc == 0, run.explain()
    assert config(variant_lab, CMO) == {"enableUserWorkload": True}
    assert config(variant_lab, UWM) == {"namespacesWithoutLabelEnforcement": [RULES_NS]}
    again = variant_run_playbook(play())
    assert again.rc == 0 and again.changed == 0, again.explain()


def test_an_admins_settings_are_kept_and_only_the_two_keys_merged(
        variant_lab, variant_run_playbook, monitoring_namespaces):
    put(variant_lab, CMO, "prometheusK8s:\n  retention: 15d\nenableUserWorkload: false\n")
    put(variant_lab, UWM, "prometheus:\n  retention: 24h\nnamespacesWithoutLabelEnforcement: [team-rules]\n")
    run = variant_run_playbook(play())
    assert run.rc == 0, run.explain()
    assert config(variant_lab, CMO) == {"prometheusK8s": {"retention": "15d"}, "enableUserWorkload": True}
    assert config(variant_lab, UWM) == {"prometheus": {"retention": "24h"},
                                        "namespacesWithoutLabelEnforcement": ["team-rules", RULES_NS]}
    again = variant_run_playbook(play())
    assert again.rc == 0 and again.changed == 0, again.explain()


def test_an_unreadable_config_stops_the_run_before_any_write(
        variant_lab, variant_run_playbook, monitoring_namespaces, variant_audit_writes):
    put(variant_lab, CMO, "enableUserWorkload: [true\n")
    kubectl(variant_lab, "delete", "configmap", "-n", UWM[0], UWM[1], "--ignore-not-found")
    with variant_audit_writes() as window:
        run = variant_run_playbook(play().replace(RULES_NS, RULES_NS + "-x"))
    assert run.rc != 0, run.explain()
    assert "cluster-monitoring-config: data.config.yaml is not YAML" in run.stdout, run.explain()
    assert window.events == [], window.describe()  # not the rules namespace, not the other ConfigMap
    assert config(variant_lab, UWM) is None
