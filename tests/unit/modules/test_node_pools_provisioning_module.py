# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node_pools run with a ``scale_by: provisioning_request`` pool (issue 23) on the unit fake of the API server:
the ProvisioningRequestConfig and AdmissionCheck are applied with the pool objects (no Prometheus needed, no
ScaledObject), a second run changes nothing, they are pruned with them; node_pool_scaledown leaves such a pool alone."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_runner import NodePoolsRunner
from ansible_collections.gpuaas.platform.plugins.modules.node_pool_scaledown import ScaleDown

import fake_kube  # noqa: E402  (tests/unit/modules/fake_kube.py, on sys.path through conftest)
from fake_kube import FakeKube

fake_kube.NAMESPACED.add("MachineSet")
MS_V = "machine.openshift.io/v1beta1"
KUEUE_V = "kueue.x-k8s.io/v1beta2"
SERVED = [("v1", "Secret"), ("v1", "Node"), ("keda.sh/v1alpha1", "ScaledObject"),
          ("keda.sh/v1alpha1", "ClusterTriggerAuthentication"), (MS_V, "MachineSet"),
          (KUEUE_V, "AdmissionCheck"), (KUEUE_V, "ProvisioningRequestConfig")]
NAME = "gpuaas-provisioning-h100-elastic"


SIZE = "machine.openshift.io/cluster-api-autoscaler-node-group-%s-size"


def machineset(labels, min_size="0", max_size="4"):
    """The pool's MachineSet as a MachineAutoscaler (minReplicas 0, maxReplicas 4) leaves it."""
    annotations = {k: v for k, v in ((SIZE % "min", min_size), (SIZE % "max", max_size)) if v is not None}
    return {"apiVersion": MS_V, "kind": "MachineSet",
            "metadata": {"name": "gpu-a", "namespace": "openshift-machine-api", "annotations": annotations},
            "spec": {"replicas": 0, "template": {"spec": {"metadata": {"labels": labels}}}}}


def params(pools=True, token_file=None):
    prometheus = {"token_file": token_file} if token_file else {}
    return {"flavors": [{"name": "h100-elastic", "node_labels": {"gpuaas.io/pool": "h100"}}],
            "tenants": [{"name": "nlp", "namespaces": ["nlp"],
                         "quotas": [{"flavor": "h100-elastic", "resources": {"nvidia.com/gpu": 32}}]}],
            "prometheus": prometheus, "check_capacity": True, "check_templates": True, "allow_overcommit": not pools,
            "node_pools": [{"name": "h100", "flavor": "h100-elastic", "target": {"name": "gpu-a"}, "max_nodes": 4,
                            "gpus_per_node": 8, "node_labels": {"gpuaas.io/pool": "h100"},
                            "scale_by": "provisioning_request"}] if pools else []}


def owned(kube):
    return sorted((k[0], k[2]) for k, o in kube.objects.items()
                  if (o["metadata"].get("labels") or {}).get("gpuaas.io/component") == "node-pools")


def test_config_and_check_are_applied_without_prometheus_then_nothing_then_pruned(tmp_path):
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    # no Prometheus URL, and a token file that does not exist: a ProvisioningRequest pool reads no metric
    first = NodePoolsRunner(kube, params(token_file=str(tmp_path / "missing"))).run()
    assert first["changed"]
    assert owned(kube) == [("AdmissionCheck", NAME), ("ProvisioningRequestConfig", NAME)]
    check = kube.objects[("AdmissionCheck", None, NAME)]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    second = NodePoolsRunner(kube, params()).run()
    assert not second["changed"] and second["summary"]["unchanged"] == 2
    kept = NodePoolsRunner(kube, params(pools=False)).run()
    drift = sorted((d["kind"], d["name"]) for d in kept["drift"])
    assert drift == [("AdmissionCheck", NAME), ("ProvisioningRequestConfig", NAME)]
    pruned = NodePoolsRunner(kube, dict(params(pools=False), prune=True)).run()
    assert sorted(d["name"] for d in pruned["deleted"]) == [NAME, NAME] and owned(kube) == []


def test_the_template_check_still_applies_to_a_provisioning_request_pool():
    """The autoscaler creates the pool's nodes from the template: without the flavor's labels the workloads Kueue
    places on the flavor could never use them."""
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "a100"}))
    with pytest.raises(GpuaasError) as info:
        NodePoolsRunner(kube, params()).run()
    assert len(info.value.problems) == 1
    assert "does not give its nodes the node labels of flavor 'h100-elastic': gpuaas.io/pool=h100" in info.value.problems[0]
    assert owned(kube) == []


def test_scaledown_leaves_a_provisioning_request_pool_to_the_autoscaler():
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    out = ScaleDown(kube, {"flavors": params()["flavors"], "node_pools": params()["node_pools"]}).run()
    assert not out["changed"]
    assert out["pools"]["h100"]["removed"] == [] and "cluster autoscaler" in out["pools"]["h100"]["skipped"]
    assert kube.side_effects() == []  # nothing cordoned, marked or scaled


def test_the_autoscalers_node_group_bounds_must_be_the_pools():
    """Without its size annotations the autoscaler does not treat the MachineSet as a node group: every request for
    the flavor would wait forever. Refused before anything is written, both problems at once."""
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}, min_size=None, max_size="8"))
    with pytest.raises(GpuaasError) as info:
        NodePoolsRunner(kube, params()).run()
    assert info.value.problems == [
        "gpuaas_node_pools[0].target: the cluster autoscaler does not size MachineSet openshift-machine-api/gpu-a: "
        "annotation machine.openshift.io/cluster-api-autoscaler-node-group-min-size is missing (give it a "
        "MachineAutoscaler with minReplicas 0 and maxReplicas 4)",
        "gpuaas_node_pools[0].target: annotation machine.openshift.io/cluster-api-autoscaler-node-group-max-size of "
        "MachineSet openshift-machine-api/gpu-a is 8, but the pool's max_nodes is 4 (give it a MachineAutoscaler with "
        "minReplicas 0 and maxReplicas 4)"]
    assert owned(kube) == []
    # a KEDA pool on the same MachineSet needs no autoscaler annotations
    keda = params()
    keda["node_pools"][0]["scale_by"] = "keda"
    keda["prometheus"] = {"url": "http://prom:9090"}
    assert NodePoolsRunner(kube, keda).run()["changed"]
