# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Strict readiness, as kubernetes.core's k8s/waiter.py: a workload is ready when its rollout is complete for the
current spec, never on a condition alone (issue 21)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import waiter
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.waiter import (
    Waiter,
    daemonset_not_ready,
    deployment_not_ready,
    readiness_check,
    statefulset_not_ready,
)

AVAILABLE = {"type": "Available", "status": "True"}


def deployment(**status):
    ready = {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
             "readyReplicas": 3, "conditions": [dict(AVAILABLE), {"type": "Progressing", "status": "True"}]}
    ready.update(status)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns", "generation": 4},
            "spec": {"replicas": 3}, "status": ready}


def statefulset(spec=None, **status):
    ready = {"observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
             "currentRevision": "s-1", "updateRevision": "s-1"}
    ready.update(status)
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "ns", "generation": 2},
            "spec": dict({"replicas": 2}, **(spec or {})), "status": ready}


def daemonset(spec=None, **status):
    ready = {"observedGeneration": 7, "desiredNumberScheduled": 4, "currentNumberScheduled": 4,
             "updatedNumberScheduled": 4, "numberReady": 4, "numberAvailable": 4}
    ready.update(status)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "ns", "generation": 7},
            "spec": dict(spec or {}), "status": ready}


# -- Deployment -----------------------------------------------------------------------------------------------------

def test_deployment_with_a_complete_rollout_is_ready():
    assert deployment_not_ready(deployment()) is None


def test_deployment_available_for_an_older_generation_is_not_ready():
    why = deployment_not_ready(deployment(observedGeneration=3))
    assert why and "is for an older spec (observedGeneration 3, generation 4)" in why


def test_deployment_without_observed_generation_or_status_is_not_ready():
    no_observed = deployment()
    del no_observed["status"]["observedGeneration"]
    assert deployment_not_ready(no_observed)
    fresh = deployment()
    fresh["status"] = {}
    assert "no status yet" in deployment_not_ready(fresh)


@pytest.mark.parametrize("status", [
    {"updatedReplicas": 1},                          # new ReplicaSet still scaling up
    {"replicas": 4, "availableReplicas": 3},         # surge: an old replica still runs
    {"availableReplicas": 2},                        # updated but not yet available
    {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},  # scaling up to spec.replicas
])
def test_deployment_rollout_in_progress_is_not_ready_even_when_available(status):
    why = deployment_not_ready(deployment(**status))
    assert why and why.startswith("rollout in progress")


def test_deployment_with_unavailable_replicas_or_not_available_is_not_ready():
    assert "unavailable" in deployment_not_ready(deployment(unavailableReplicas=1))
    not_available = deployment(conditions=[{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                                            "message": "Deployment does not have minimum availability."}])
    assert "Available=False (MinimumReplicasUnavailable" in deployment_not_ready(not_available)
    assert deployment_not_ready(deployment(conditions=[])) == "no Available condition yet"


def test_deployment_scaled_to_zero_is_ready():
    zero = deployment(replicas=None, updatedReplicas=None, availableReplicas=None, readyReplicas=None)
    zero["spec"]["replicas"] = 0
    assert deployment_not_ready(zero) is None
    default_one = deployment(replicas=1, updatedReplicas=1, availableReplicas=1)
    del default_one["spec"]["replicas"]
    assert deployment_not_ready(default_one) is None


# -- StatefulSet ----------------------------------------------------------------------------------------------------

def test_statefulset_with_a_complete_rollout_is_ready():
    assert statefulset_not_ready(statefulset()) is None


def test_statefulset_stale_generation_is_not_ready():
    assert "older spec" in statefulset_not_ready(statefulset(observedGeneration=1))


@pytest.mark.parametrize("status,expected", [
    ({"readyReplicas": 1}, "1 of 2 replicas ready, 2 in total"),
    ({"replicas": 1, "readyReplicas": 1}, "1 of 2 replicas ready, 1 in total"),
    ({"updatedReplicas": 1, "updateRevision": "s-2"}, "rollout in progress: 1 of 2 replicas updated"),
    ({"updateRevision": "s-2"}, "rollout in progress: current revision s-1, update revision s-2"),
])
def test_statefulset_rollout_in_progress_is_not_ready(status, expected):
    assert statefulset_not_ready(statefulset(**status)) == expected


def test_statefulset_partition_and_on_delete():
    partitioned = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}
    assert statefulset_not_ready(statefulset(partitioned, updatedReplicas=1, updateRevision="s-2")) is None
    assert statefulset_not_ready(statefulset(partitioned, updatedReplicas=0, updateRevision="s-2"))
    on_delete = {"updateStrategy": {"type": "OnDelete"}}
    assert statefulset_not_ready(statefulset(on_delete, updatedReplicas=0, updateRevision="s-2")) is None
    assert statefulset_not_ready(statefulset(on_delete, readyReplicas=1))


# -- DaemonSet ------------------------------------------------------------------------------------------------------

def test_daemonset_with_a_complete_rollout_is_ready():
    assert daemonset_not_ready(daemonset()) is None


def test_daemonset_stale_generation_or_unscheduled_is_not_ready():
    assert "older spec" in daemonset_not_ready(daemonset(observedGeneration=6))
    assert "not scheduled yet" in daemonset_not_ready(daemonset(desiredNumberScheduled=None))


@pytest.mark.parametrize("status", [{"updatedNumberScheduled": 3}, {"numberReady": 3}, {"numberAvailable": 2}])
def test_daemonset_rollout_in_progress_is_not_ready(status):
    assert daemonset_not_ready(daemonset(**status)).startswith("rollout in progress")


def test_daemonset_unavailable_pods_and_on_delete():
    assert "1 pods unavailable" == daemonset_not_ready(daemonset(numberUnavailable=1))
    assert daemonset_not_ready(daemonset({"updateStrategy": {"type": "OnDelete"}}, updatedNumberScheduled=1)) is None


# -- which check a kind gets ------------------------------------------------------------------------------------------

def test_readiness_check_per_kind():
    assert readiness_check("Deployment") is deployment_not_ready
    assert readiness_check("StatefulSet") is statefulset_not_ready
    assert readiness_check("DaemonSet") is daemonset_not_ready
    assert readiness_check("ConfigMap") is None
    active = readiness_check("ClusterQueue")
    assert active({"status": {"conditions": [{"type": "Active", "status": "True"}]}}) is None
    assert active({}) == "no Active condition yet"
    # an explicit condition wins over the rollout check (wait_condition of the object modules)
    explicit = readiness_check("Deployment", {"type": "Progressing", "status": "True"})
    progressing = deployment(updatedReplicas=1, conditions=[{"type": "Progressing", "status": "True"}])
    assert explicit(progressing) is None


class OneObject:
    """A client with one stored object, read by wait_ready."""

    def __init__(self, obj):
        self.obj = obj

    def resource(self, api_version, kind):
        return self

    def get(self, name, namespace=None):
        return copy.deepcopy(self.obj)


def test_wait_ready_refuses_an_available_deployment_in_mid_rollout():
    ref = ObjectRef("apps/v1", "Deployment", "d", "ns")
    with pytest.raises(GpuaasError) as info:
        Waiter(OneObject(deployment(updatedReplicas=1))).wait_ready([ObjectResult(ref, "updated")], timeout=0, sleep=0)
    assert info.value.problems == ["%s: rollout in progress: 1 of 3 replicas updated, 3 available, 3 in total" % ref]
    done = ObjectResult(ref, "updated")
    Waiter(OneObject(deployment())).wait_ready([done], timeout=0, sleep=0)
    assert done.object["status"]["updatedReplicas"] == 3
    assert waiter.ROLLOUT_CHECKS["Deployment"] is deployment_not_ready
