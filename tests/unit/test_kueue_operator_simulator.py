# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's Kueue operator SIMULATOR translates the Red Hat ``Kueue`` operand as openshift/kueue-operator's
pkg/configmap/configmap.go does (expected values written from that file); the lab run is
tests/integration/test_openshift_kueue.py."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SIM_PATH = Path(__file__).resolve().parents[2] / "lab" / "simulators" / "kueue_operator_simulator.py"
SPEC = importlib.util.spec_from_file_location("kueue_operator_simulator", SIM_PATH)
sim = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sim)  # type: ignore[union-attr]


def test_the_collections_operand_becomes_the_operators_configuration():
    spec = {"managementState": "Managed", "config": {
        "integrations": {"frameworks": ["BatchJob", "RayJob", "PyTorchJob", "AppWrapper"],
                         "externalFrameworks": [{"group": "example.com", "resource": "widgets", "version": "v1"}],
                         "labelKeysToCopy": [{"key": "team"}]},
        "workloadManagement": {"labelPolicy": "QueueName"},
        "preemption": {"preemptionPolicy": "FairSharing"}}}
    cfg = sim.configuration("openshift-kueue-operator", spec)
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta1" and cfg["namespace"] == "openshift-kueue-operator"
    assert cfg["integrations"] == {
        "frameworks": ["batch/job", "ray.io/rayjob", "kubeflow.org/pytorchjob", "workload.codeflare.dev/appwrapper"],
        "externalFrameworks": ["widgets.v1.example.com"], "labelKeysToCopy": ["team"]}
    assert cfg["managedJobsNamespaceSelector"] == {"matchLabels": {"kueue.openshift.io/managed": "true"}}
    assert cfg["manageJobsWithoutQueueName"] is False
    assert cfg["fairSharing"] == {"enable": True,
                                  "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    assert cfg["waitForPodsReady"] == {"enable": False}
    assert cfg["metrics"]["enableClusterQueueResources"] is True
    assert cfg["internalCertManagement"] == {"enable": False}


@pytest.mark.parametrize("gang, expected", [
    ({}, {"enable": False}),
    ({"policy": "None"}, {"enable": False}),
    ({"policy": "ByWorkload"}, {"enable": True, "blockAdmission": False}),
    ({"policy": "ByWorkload", "byWorkload": {"admission": "Parallel"}}, {"enable": True, "blockAdmission": False}),
    ({"policy": "ByWorkload", "byWorkload": {"admission": "Sequential"}}, {"enable": True, "blockAdmission": True}),
])
def test_gang_scheduling_becomes_wait_for_pods_ready(gang, expected):
    assert sim.configuration("ns", {"config": {"gangScheduling": gang}})["waitForPodsReady"] == expected


def test_label_policy_none_manages_jobs_without_queue_name_and_classical_has_no_fair_sharing():
    cfg = sim.configuration("ns", {"config": {"workloadManagement": {"labelPolicy": "None"},
                                              "preemption": {"preemptionPolicy": "Classical"}}})
    assert cfg["manageJobsWithoutQueueName"] is True and cfg["fairSharing"] == {"enable": False}


def test_a_framework_outside_the_operators_names_is_not_invented():
    with pytest.raises(ValueError, match="Notebook"):
        sim.configuration("ns", {"config": {"integrations": {"frameworks": ["BatchJob", "Notebook"]}}})
