# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""health.py and the platform_health_info module (with an in-memory API)."""

from __future__ import annotations

import os
import sys

from ansible_collections.gpuaas.platform.plugins.module_utils.observe import health
from ansible_collections.gpuaas.platform.plugins.modules import platform_health_info

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "modules"))
from fake_kube import FakeKube  # noqa: E402  pylint: disable=wrong-import-position


def node(name, labels=None, allocatable=None, capacity=None):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": allocatable or {}, "capacity": capacity or allocatable or {}}}


def cq(name, flavors, active="True", reason="Ready", message="Can admit new workloads", stop=None):
    spec = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                "flavors": [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]} for f in flavors]}]}
    if stop:
        spec["stopPolicy"] = stop
    status = {"conditions": [{"type": "Active", "status": active, "reason": reason, "message": message}]} if active else {}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec, "status": status}


def rf(name):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}}


def so(ns, name, ready=None, reason=None, message=None):
    conds = [{"type": "Ready", "status": ready, "reason": reason, "message": message}] if ready else []
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"namespace": ns, "name": name},
            "status": {"conditions": conds}}


def test_gpu_operator():
    assert health.gpu_operator_checks(None)[0]["ok"] is True
    missing = health.gpu_operator_checks([])[0]
    assert missing["ok"] and "there is no ClusterPolicy: check skipped" in missing["message"]
    ready, broken, new = health.gpu_operator_checks([
        {"metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}},
        {"metadata": {"name": "other"}, "status": {"state": "notReady"}},
        {"metadata": {"name": "fresh"}},
    ])
    assert ready == {"check": "gpu_operator", "object": "ClusterPolicy/cluster-policy", "ok": True,
                     "message": "ClusterPolicy cluster-policy is ready", "hint": None}
    assert not broken["ok"] and broken["message"] == "ClusterPolicy other is notReady, not ready"
    assert "device-plugin" in broken["hint"]
    assert not new["ok"] and "without a status" in new["message"]


def test_gpu_nodes():
    nodes = [
        node("gpu-h100-0", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8", "cpu": "128"}),
        node("gpu-a100-mig-0", {"nvidia.com/mig.config": "all-1g.10gb"}, {"nvidia.com/mig-1g.10gb": "7"}),
        node("gpu-broken", {"nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "0", "cpu": "64"}),
        node("cpu-0", {"nvidia.com/gpu.present": "false"}, {"cpu": "32"}),
        node("unlabelled-gpu", {}, {}, capacity={"nvidia.com/gpu": "4"}),
    ]
    results = {r["object"]: r for r in health.gpu_node_checks(nodes)}
    assert sorted(results) == ["Node/gpu-a100-mig-0", "Node/gpu-broken", "Node/gpu-h100-0", "Node/unlabelled-gpu"]
    assert results["Node/gpu-h100-0"]["ok"] and results["Node/gpu-h100-0"]["message"] == "node gpu-h100-0 offers 8 nvidia.com/gpu"
    assert results["Node/gpu-a100-mig-0"]["message"] == "node gpu-a100-mig-0 offers 7 nvidia.com/mig-1g.10gb"
    assert not results["Node/gpu-broken"]["ok"] and "device plugin" in results["Node/gpu-broken"]["hint"]
    assert not results["Node/unlabelled-gpu"]["ok"]
    none = health.gpu_node_checks([node("cpu-0", {}, {"cpu": "4"})])
    assert len(none) == 1 and not none[0]["ok"] and none[0]["message"].startswith("no GPU node found")


def test_kueue():
    assert not health.kueue_checks(None, None)[0]["ok"]
    assert health.kueue_checks([], [])[0]["ok"]
    results = {r["object"]: r for r in health.kueue_checks([
        cq("nlp", ["h100"]),
        cq("vision", ["h100", "h200"], active="False", reason="FlavorNotFound",
           message="Can't admit new workloads: references missing ResourceFlavor(s): h200"),
        cq("old", ["h100"], active="False", reason="Stopped", message="Can't admit new workloads: is stopped", stop="HoldAndDrain"),
        cq("new", ["h100"], active=None),
    ], [rf("h100")])}
    assert results["ClusterQueue/nlp"]["ok"]
    vision = results["ClusterQueue/vision"]
    assert not vision["ok"]
    assert vision["message"] == ("ClusterQueue vision references missing ResourceFlavor h200; is not active: FlavorNotFound"
                                 " - Can't admit new workloads: references missing ResourceFlavor(s): h200")
    assert "gpuaas_flavors" in vision["hint"]
    assert "stopPolicy HoldAndDrain" in results["ClusterQueue/old"]["hint"]
    assert "no Active condition" in results["ClusterQueue/new"]["message"]


def test_keda():
    assert health.keda_checks(None)[0]["ok"] and health.keda_checks([])[0]["ok"]
    ok, bad, fresh = health.keda_checks([so("nlp-serve", "vllm", "True"),
                                         so("nlp-serve", "broken", "False", "ScaledObjectCheckFailed", "Target resource doesn't exist"),
                                         so("vision-prod", "new")])
    assert ok["ok"] and ok["object"] == "ScaledObject/nlp-serve/vllm"
    assert not bad["ok"] and bad["message"] == ("ScaledObject nlp-serve/broken is not ready: ScaledObjectCheckFailed - "
                                                "Target resource doesn't exist")
    assert bad["hint"].startswith("kubectl describe scaledobject -n nlp-serve broken")
    assert not fresh["ok"] and "no Ready condition" in fresh["message"]
    assert health.summarize([ok, bad, fresh]) == {"keda": {"checked": 3, "failed": 2, "ok": False}}


def test_module_run_checks_with_discovery():
    kube = FakeKube([("v1", "Node"), ("kueue.x-k8s.io/v1beta1", "ClusterQueue"), ("kueue.x-k8s.io/v1beta1", "ResourceFlavor")])
    kube.add(node("gpu-h100-0", {"nvidia.com/gpu.product": "H100"}, {"nvidia.com/gpu": "8"}))
    v1 = cq("nlp", ["h100"])
    v1["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    kube.add(v1)
    kube.add(dict(rf("h100"), apiVersion="kueue.x-k8s.io/v1beta1"))
    out = platform_health_info.run_checks(kube, ["gpu_operator", "gpu_nodes", "kueue", "keda"], list(health.GPU_NODE_LABELS))
    assert out["ok"] is True and out["failed_checks"] == []
    assert [r["object"] for r in out["checks"]] == ["ClusterPolicy", "Node/gpu-h100-0", "ClusterQueue/nlp", "ScaledObject"]
    kube.add(cq("vision", ["h200"]))
    out = platform_health_info.run_checks(kube, ["kueue"], [])
    assert out["ok"] is False and [r["object"] for r in out["failed_checks"]] == ["ClusterQueue/vision"]
    assert out["summary"] == {"kueue": {"checked": 2, "failed": 1, "ok": False}}
    assert out["problems"] == ["ClusterQueue vision references missing ResourceFlavor h200 - fix: declare the flavor in "
                               "gpuaas_flavors (or fix the tenant's quotas[].flavor) and converge the tenants"]
