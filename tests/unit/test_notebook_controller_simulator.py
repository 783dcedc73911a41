# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's notebook controller SIMULATOR writes a Notebook's StatefulSet as opendatahub-io/kubeflow does
(expected values written from components/notebook-controller/controllers/notebook_controller.go generateStatefulSet
and Reconcile, and components/common/reconcilehelper/util.go CopyStatefulSetFields); the lab run is
tests/integration/test_notebook_idle_reclaim.py."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

SIM_PATH = Path(__file__).resolve().parents[2] / "lab" / "simulators" / "notebook_controller_simulator.py"
SPEC = importlib.util.spec_from_file_location("notebook_controller_simulator", SIM_PATH)
sim = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sim)  # type: ignore[union-attr]

QUEUE = "kueue.x-k8s.io/queue-name"


def notebook(annotations=None):
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
            "metadata": {"name": "alice", "namespace": "nlp", "uid": "nb-uid", "labels": {QUEUE: "default"},
                         "annotations": dict(annotations or {})},
            "spec": {"template": {"spec": {"containers": [{"name": "alice", "image": "jupyter",
                                                           "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def test_the_statefulset_is_named_after_the_notebook_with_its_labels_and_upstreams_defaults():
    sts = sim.desired_statefulset(notebook({"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                            "notebooks.kubeflow.org/x": "y", "team": "nlp"}))
    assert sts["metadata"]["name"] == "alice" and sts["spec"]["replicas"] == 1
    assert sts["metadata"]["labels"] == {QUEUE: "default"}
    assert sts["metadata"]["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "name": "alice",
                                                   "uid": "nb-uid", "controller": True, "blockOwnerDeletion": True}]
    assert sts["spec"]["selector"] == {"matchLabels": {"statefulset": "alice"}}
    template = sts["spec"]["template"]
    assert template["metadata"]["labels"] == {"statefulset": "alice", "notebook-name": "alice",
                                              "opendatahub.io/workbenches": "true", QUEUE: "default"}
    assert template["metadata"]["annotations"] == {"team": "nlp"}  # keys with kubectl or notebook are not copied
    [container] = template["spec"]["containers"]
    assert container["workingDir"] == "/home/jovyan"
    assert container["ports"] == [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}]
    assert container["env"] == [{"name": "NB_PREFIX", "value": "/notebook/nlp/alice"}]
    assert template["spec"]["securityContext"] == {"fsGroup": 100}


def test_the_stop_annotation_sets_zero_replicas_whatever_its_value():
    assert sim.desired_statefulset(notebook({"kubeflow-resource-stopped": "2026-12-03T11:00:00Z"}))["spec"]["replicas"] == 0
    assert sim.desired_statefulset(notebook({"kubeflow-resource-stopped": ""}))["spec"]["replicas"] == 0


def test_a_statefulset_scaled_to_zero_by_someone_else_is_set_back_to_one():
    desired = sim.desired_statefulset(notebook())
    live = copy.deepcopy(desired)
    live["spec"]["replicas"] = 0  # KEDA's scale
    live["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"  # an API server default: not a difference
    assert sim.copy_statefulset_fields(desired, live) is True
    assert live["spec"]["replicas"] == 1
    unchanged = copy.deepcopy(live)
    unchanged["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
    assert sim.copy_statefulset_fields(desired, unchanged) is False


def test_labels_and_annotations_are_replaced_and_a_replica_change_copies_the_template_labels():
    desired = sim.desired_statefulset(notebook({"kubeflow-resource-stopped": "t"}))
    live = sim.desired_statefulset(notebook())
    live["metadata"]["labels"]["extra"] = "x"
    live["metadata"]["annotations"] = {"someone": "else"}
    live["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    assert sim.copy_statefulset_fields(desired, live) is True
    assert live["metadata"]["labels"] == {QUEUE: "default"} and live["metadata"]["annotations"] == {}
    assert live["spec"]["replicas"] == 0
    assert "kueue.x-k8s.io/pod-group-name" not in live["spec"]["template"]["metadata"]["labels"]
    # same replicas: the template's labels are left as they are (only its spec is copied)
    again = sim.desired_statefulset(notebook())
    again["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    assert sim.copy_statefulset_fields(sim.desired_statefulset(notebook()), again) is False
    assert again["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "g"
