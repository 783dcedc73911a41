# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's cluster-autoscaler SIMULATOR decides ProvisioningRequests as upstream's classes do (expected values
written from k8s.io/autoscaler cluster-autoscaler/provisioningrequest: conditions/conditions.go and
besteffortatomic/provisioning_class.go): capacity found without a scale-up, an atomic scale-up of one node group
within its max size, or "not found" (check-capacity never scales). The lab run is
tests/integration/test_node_pools_provisioning.py."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SIM_DIR = Path(__file__).resolve().parents[2] / "lab" / "simulators"
sys.path.insert(0, str(SIM_DIR))
SPEC = importlib.util.spec_from_file_location("autoscaler_simulator", SIM_DIR / "autoscaler_simulator.py")
sim = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sim)  # type: ignore[union-attr]

POOL = {"gpuaas.io/pool": "h100"}
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
BEST, CHECK = sim.BEST_EFFORT_ATOMIC, sim.CHECK_CAPACITY


def pod(gpus, selector=None, tolerations=None):
    return sim.pod_shape({"nodeSelector": POOL if selector is None else selector,
                          "tolerations": TOLERATE if tolerations is None else tolerations,
                          "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]})


def group(replicas=0, nodes=0, maximum=2, gpus=8):
    return {"name": "MachineSet/openshift-machine-api/gpu-h100", "labels": dict(POOL), "taints": [TAINT],
            "capacity": {"nvidia.com/gpu": float(gpus)}, "replicas": replicas, "max": maximum, "nodes": nodes}


def node(free, labels=None):
    return {"labels": POOL if labels is None else labels, "taints": [TAINT], "free": {"nvidia.com/gpu": float(free)}}


def test_pod_shape_reads_limits_as_requests_and_only_accelerators():
    shape = sim.pod_shape({"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "8"}}},
        {"resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "3"}}}]})
    assert shape["need"] == {"nvidia.com/gpu": 6.0}


def test_a_scale_up_from_zero_asks_for_whole_nodes_of_one_group():
    decision = sim.plan([pod(8), pod(8), pod(4)], [], [], [group()], BEST)
    assert decision["provisioned"] is False  # 3 nodes needed (8, 8, 4), the group's max is 2
    assert decision["reason"] == ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
    decision = sim.plan([pod(8), pod(4), pod(4)], [], [], [group()], BEST)
    assert decision["provisioned"] is True and decision["reason"] == ("CapacityIsProvisioned", "Capacity is found in the cluster")
    assert decision["scale"][1] == 2


def test_fragmentation_is_judged_per_node_not_by_the_sum():
    """3 x 5 GPUs = 15 <= 2 nodes x 8 GPUs, but no two such pods share an 8-GPU node: 3 nodes, beyond max 2."""
    assert sim.plan([pod(5)] * 3, [], [], [group()], BEST)["provisioned"] is False
    assert sim.plan([pod(5)] * 2, [], [], [group()], BEST)["scale"][1] == 2


def test_existing_free_capacity_is_found_without_a_scale_up():
    decision = sim.plan([pod(4)], [], [node(4)], [group(replicas=1, nodes=1)], BEST)
    assert decision == {"provisioned": True, "reason": ("CapacityIsFound", "Capacity is found in the cluster"), "scale": None}


def test_upcoming_nodes_and_bookings_count():
    # replicas 1 without a node yet: one upcoming empty node of 8 GPUs
    assert sim.plan([pod(8)], [], [], [group(replicas=1, nodes=0)], BEST)["scale"] is None
    # ... but it is booked by another Provisioned request whose pod has not arrived: a new node is needed
    decision = sim.plan([pod(8)], [pod(8)], [], [group(replicas=1, nodes=0)], BEST)
    assert decision["provisioned"] is True and decision["scale"][1] == 1


def test_check_capacity_never_scales():
    assert sim.plan([pod(8)], [], [], [group()], CHECK) == {
        "provisioned": False, "reason": ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later."),
        "scale": None}
    assert sim.plan([pod(8)], [], [node(8)], [group(replicas=1, nodes=1)], CHECK)["reason"][0] == "CapacityIsFound"


def test_selector_and_taints_decide_which_nodes_and_groups_fit():
    other = node(8, labels={"gpuaas.io/pool": "a100"})
    assert sim.plan([pod(8)], [], [other], [], BEST)["provisioned"] is False  # wrong labels, no group
    untolerated = pod(8, tolerations=[])
    assert sim.plan([untolerated], [], [node(8)], [group()], BEST)["provisioned"] is False  # tainted node and group
    assert sim.plan([pod(16)], [], [], [group()], BEST)["provisioned"] is False  # bigger than any node of the group


# -- one round of the process on an in-memory cluster (the planning above, the reads and writes around it) -----

class FakeApis:
    """Just what the SIMULATOR calls, on dicts: ProvisioningRequests, MachineSets, PodTemplates, Pods, Nodes."""

    def __init__(self, prs, targets, templates, pods=(), nodes=()):
        from types import SimpleNamespace
        self.ns = SimpleNamespace
        self.prs, self.targets, self.templates = prs, targets, templates
        self.pods, self.nodes = list(pods), list(nodes)
        self.writes = []

    # CustomObjectsApi
    def list_cluster_custom_object(self, group, version, plural, **_):
        if plural == "provisioningrequests":
            return {"items": self.prs}
        if plural == "machinesets":
            return {"items": self.targets}
        from kubernetes.client import ApiException
        raise ApiException(status=404, reason="not served")

    def patch_namespaced_custom_object_status(self, group, version, namespace, plural, name, body):
        pr = next(p for p in self.prs if p["metadata"]["name"] == name)
        pr["status"] = body["status"]
        self.writes.append(("status", name, [(c["type"], c["status"], c["reason"]) for c in body["status"]["conditions"]]))
        return pr

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        target = next(t for t in self.targets if t["metadata"]["name"] == name)
        target["spec"].update(body["spec"])
        self.writes.append(("scale", name, body["spec"]["replicas"]))
        return target

    # CoreV1Api
    def read_namespaced_pod_template(self, name, namespace):
        return self.ns(template=self.ns(spec=self.templates[name]))

    def list_pod_for_all_namespaces(self):
        return self.ns(items=self.pods)

    def list_node(self):
        return self.ns(items=self.nodes)


def simulator(apis):
    from kubernetes import client
    out = object.__new__(sim.Simulator)
    out.client, out.custom, out.core = client, apis, apis
    out.classes, out.booking_seconds = {BEST, CHECK}, 600.0
    return out


def request(name, template, count, cls=BEST):
    return {"metadata": {"name": name, "namespace": "nlp", "generation": 1, "creationTimestamp": "2026-12-03T10:00:00Z"},
            "spec": {"provisioningClassName": cls, "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}}


def machineset(replicas=0, maximum="2"):
    return {"metadata": {"name": "gpu-h100", "namespace": "openshift-machine-api",
                         "annotations": {"capacity.cluster-autoscaler.kubernetes.io/gpu-count": "8",
                                         sim.MAX_SIZE["MachineSet"]: maximum}},
            "spec": {"replicas": replicas, "template": {"spec": {"metadata": {"labels": dict(POOL)}, "taints": [TAINT]}}}}


TEMPLATE = {"nodeSelector": dict(POOL), "tolerations": TOLERATE,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}


def test_a_round_accepts_scales_one_group_and_reports_provisioned_once():
    apis = FakeApis([request("wl-check-1", "ppt-a", 2)], [machineset()], {"ppt-a": TEMPLATE})
    sim_ = simulator(apis)
    sim_.round()
    assert apis.writes == [
        ("status", "wl-check-1", [("Accepted", "True", "Accepted")]),
        ("scale", "gpu-h100", 2),
        ("status", "wl-check-1", [("Accepted", "True", "Accepted"), ("Provisioned", "True", "CapacityIsProvisioned")])]
    apis.writes.clear()
    sim_.round()  # provisioned: nothing more to do, nothing written
    assert apis.writes == []
    # a second request while the two upcoming nodes are booked by the first (its pods not bound yet): beyond max
    apis.prs.append(request("wl2-check-1", "ppt-a", 1))
    sim_.round()
    assert apis.writes[-1] == ("status", "wl2-check-1", [("Accepted", "True", "Accepted"),
                                                         ("Provisioned", "False", "CapacityIsNotFound")])
    assert apis.targets[0]["spec"]["replicas"] == 2
    apis.writes.clear()
    sim_.round()  # still not found: the same condition is not written again
    assert apis.writes == []


def test_a_round_leaves_targets_without_the_autoscalers_size_annotation_alone():
    target = machineset()
    del target["metadata"]["annotations"][sim.MAX_SIZE["MachineSet"]]
    apis = FakeApis([request("wl-check-1", "ppt-a", 1)], [target], {"ppt-a": TEMPLATE})
    simulator(apis).round()
    assert ("scale", "gpu-h100", 1) not in apis.writes
    assert apis.writes[-1][2][-1] == ("Provisioned", "False", "CapacityIsNotFound")
