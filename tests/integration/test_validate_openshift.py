# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation and observability on the variant lab: OpenShift flavour (ClusterVersion served) with the real Kueue,
installed the OpenShift way in openshift-kueue-operator (lab/components/kueue.sh, issue 23)."""
from __future__ import annotations

import json
import time
import uuid
from conftest import local_play

from conftest import wait_until

ID = uuid.uuid4().hex[:5]
MON_NS = "itocp-mon-%s" % ID
TENANT = "itocp%s" % ID
TENANT_NS = "itocp-ns-%s" % ID


def test_observability_openshift_defaults(variant_run_playbook, variant_kube):
    from pathlib import Path

    playbook = Path(__file__).resolve().parents[2] / "playbooks" / "observability.yml"
    run = variant_run_playbook(playbook, extra_vars={"gpuaas_observability_namespace": MON_NS})
    try:
        assert run.rc == 0, run.explain()
        res = run.task_results("Apply the monitoring objects")[0]
        created = sorted((o["kind"], o.get("namespace"), o["name"]) for o in res["created"])
        # OpenShift: no DCGM monitor of ours (the GPU Operator ships one); Kueue's namespace is openshift-kueue-operator,
        # where the lab's Kueue was installed through OLM
        assert created == [("ConfigMap", MON_NS, "gpuaas-grafana-dashboards"), ("Namespace", None, MON_NS),
                           ("PrometheusRule", MON_NS, "gpuaas-gpu-alerts"),
                           ("ServiceMonitor", "openshift-kueue-operator", "gpuaas-kueue")]
        # the lab runs no cluster monitoring operator, so its two namespaces do not exist here: the monitoring
        # ConfigMaps the OpenShift run merges are skipped and named (test_openshift_monitoring_config.py makes the
        # namespaces and proves the merge)
        assert sorted((o["kind"], o["namespace"], o["name"]) for o in res["not_applied"]) == [
            ("ConfigMap", "openshift-monitoring", "cluster-monitoring-config"),
            ("ConfigMap", "openshift-user-workload-monitoring", "user-workload-monitoring-config")]
    finally:
        gone = variant_run_playbook(playbook, extra_vars={"gpuaas_observability_namespace": MON_NS,
                                                          "gpuaas_observability_state": "absent"})
        assert gone.rc == 0, gone.explain()
        variant_kube.resources.get(api_version="v1", kind="Namespace").delete(name=MON_NS)


def test_health_and_quota_from_cluster_queues(variant_run_playbook, variant_kube, variant_lab):
    api = "kueue.x-k8s.io/%s" % variant_lab.kueue_api
    cq_api = variant_kube.resources.get(api_version=api, kind="ClusterQueue")
    rf_api = variant_kube.resources.get(api_version=api, kind="ResourceFlavor")
    flavor = "itocp-h100-%s" % ID
    rf_api.create(body={"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": flavor}})
    cq_api.create(body={"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": TENANT},
                        "spec": {"namespaceSelector": {}, "resourceGroups": [{
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 6}]},
                                        {"name": "missing-%s" % ID, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}})
    try:
        # the real Kueue judges the queue first: inactive, for the flavor that does not exist
        wait_until(lambda: any(c["type"] == "Active" for c in (cq_api.get(name=TENANT).to_dict().get("status") or {})
                               .get("conditions", [])), 60, "Kueue to set the ClusterQueue's Active condition")
        args = {"tenants": [{"name": TENANT, "namespaces": [TENANT_NS]}], "window": "30s", "step": "5s",
                "time": str(int(time.time()) - 5), "kueue_source": "cluster"}
        run = variant_run_playbook(local_play("""
  tasks:
    - name: health
      gpuaas.platform.platform_health_info:
        checks: [gpu_operator, kueue]
    - name: measure
      gpuaas.platform.gpu_utilization_info: %s
""") % json.dumps(args))
        assert run.rc == 0, run.explain()
        health = run.task_results("health")[0]
        mine = next(c for c in health["checks"] if c["object"] == "ClusterQueue/%s" % TENANT)
        assert not mine["ok"]
        # both the collection's own finding and Kueue's verdict on the queue
        assert mine["message"].startswith("ClusterQueue %s references missing ResourceFlavor missing-%s; is not active: "
                                          "FlavorNotFound" % (TENANT, ID)), mine["message"]
        report = run.task_results("measure")[0]["report"]
        assert report["kueue_source"] == "cluster" and report["cluster"]["gpus"] == 23
        tenant = next(x for x in report["tenants"] if x["tenant"] == TENANT)
        assert [(q["flavor"], q["nominal"], q["usage"]) for q in tenant["quota"]] == [(flavor, 6.0, 0.0), ("missing-%s" % ID, 2.0, 0.0)]
        assert tenant["gpu_quota_nominal"] == 8.0 and tenant["gpus"] == 0
    finally:
        cq_api.delete(name=TENANT)
        rf_api.delete(name=flavor)
