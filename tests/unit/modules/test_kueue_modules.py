# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kueue modules against the in-memory fake cluster: present/absent, idempotence, check mode, diff, errors."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuaas.platform.plugins.module_utils.kube import object_module as module_runner
from ansible_collections.gpuaas.platform.plugins.modules import (
    cluster_queue,
    cohort,
    kueue_info,
    local_queue,
    resource_flavor,
    workload_priority_class,
)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from module_utils.fake_kube import FakeClient  # noqa: E402  pylint: disable=wrong-import-position


class Exit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


@pytest.fixture
def cluster(monkeypatch):
    client = FakeClient()
    monkeypatch.setattr(module_runner, "get_client", lambda module=None, params=None: client)
    monkeypatch.setattr(kueue_info, "get_client", lambda module=None, params=None: client)
    return client


def run(module, args, check=False, diff=False, fail=False):
    args = dict(args)
    args["_ansible_check_mode"] = check
    args["_ansible_diff"] = diff
    from ansible.module_utils import basic

    def exit_json(self, **kw):
        raise Exit(dict(kw, failed=False))

    def fail_json(self, **kw):
        raise Exit(dict(kw, failed=True))

    warnings = []
    with patch_module_args(args), pytest.MonkeyPatch.context() as mp:
        mp.setattr(basic.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
        mp.setattr(basic.AnsibleModule, "exit_json", exit_json)
        mp.setattr(basic.AnsibleModule, "fail_json", fail_json)
        with pytest.raises(Exit) as caught:
            module.main()
    result = caught.value.result
    result["warnings"] = warnings
    assert result["failed"] is fail, json.dumps(result, default=str)
    return result


CQ_ARGS = {
    "name": "team-a", "cohort": "research", "namespace_selector": {},
    "resource_groups": [{"covered_resources": ["nvidia.com/gpu"], "flavors": [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominal_quota": 8, "borrowing_limit": 4}]}]}],
}


def test_cluster_queue_lifecycle(cluster):
    dry = run(cluster_queue, CQ_ARGS, check=True, diff=True)
    assert dry["changed"] and cluster.store == {}
    assert dry["diff"][0]["after"]["spec"]["cohortName"] == "research"

    created = run(cluster_queue, CQ_ARGS)
    assert created["changed"] and created["created"] == [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "team-a"}]
    assert created["result"]["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert "managedFields" not in created["result"]["metadata"]

    again = run(cluster_queue, CQ_ARGS)
    assert not again["changed"]

    update = dict(CQ_ARGS, stop_policy="Hold")
    changed = run(cluster_queue, update, diff=True)
    assert changed["changed"] and changed["updated"][0]["name"] == "team-a"
    assert changed["diff"][0]["after"]["spec"]["stopPolicy"] == "Hold"

    gone = run(cluster_queue, {"name": "team-a", "state": "absent"})
    assert gone["changed"] and cluster.store == {}
    assert not run(cluster_queue, {"name": "team-a", "state": "absent"})["changed"]


def test_cluster_queue_validation_failure_lists_problems(cluster):
    bad = dict(CQ_ARGS, cohort=None)
    result = run(cluster_queue, bad, fail=True)
    assert "borrowing_limit is set but the ClusterQueue has no cohort" in result["msg"]
    assert result["problems"] and result["hint"]
    assert cluster.calls == []


def test_cluster_queue_warns_without_namespace_selector(cluster):
    args = dict(CQ_ARGS)
    del args["namespace_selector"]
    result = run(cluster_queue, args)
    assert any("namespace_selector is not set" in w for w in result["warnings"])
    assert not run(cluster_queue, CQ_ARGS)["warnings"]


def test_flavor_cohort_priority(cluster):
    assert run(resource_flavor, {"name": "h100", "node_labels": {"nvidia.com/gpu.product": "H100"},
                                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                  "effect": "NoSchedule"}]})["changed"]
    assert run(cohort, {"name": "research"})["changed"]
    assert run(cohort, {"name": "nlp", "parent": "research", "fair_sharing_weight": 2})["changed"]
    assert not run(cohort, {"name": "nlp", "parent": "research", "fair_sharing_weight": "2"})["changed"]
    assert run(workload_priority_class, {"name": "prod", "value": 1000})["changed"]
    assert not run(workload_priority_class, {"name": "prod", "value": 1000})["changed"]
    assert run(workload_priority_class, {"name": "prod"}, fail=True)["msg"].startswith("state is present but")


def test_local_queue_move_needs_recreate(cluster):
    args = {"name": "default", "namespace": "team-a", "cluster_queue": "team-a"}
    assert run(local_queue, args)["changed"]
    moved = dict(args, cluster_queue="team-b")
    failed = run(local_queue, moved, fail=True)
    assert "cannot be changed to team-b in place" in failed["msg"] and "recreate" in failed["hint"]
    dry = run(local_queue, dict(moved, recreate=True), check=True)
    assert dry["changed"] and len(dry["deleted"]) == 1 and len(dry["created"]) == 1
    assert cluster.store[("LocalQueue", "team-a", "default")]["spec"]["clusterQueue"] == "team-a"
    done = run(local_queue, dict(moved, recreate=True))
    assert done["changed"] and cluster.store[("LocalQueue", "team-a", "default")]["spec"]["clusterQueue"] == "team-b"


def test_kueue_info_reports_usage_and_cohort_tree(cluster):
    run(cohort, {"name": "research"})
    run(cohort, {"name": "nlp", "parent": "research"})
    run(cluster_queue, dict(CQ_ARGS, cohort="nlp"))
    run(local_queue, {"name": "default", "namespace": "team-a", "cluster_queue": "team-a"})
    cluster.store[("ClusterQueue", "", "team-a")]["status"] = {
        "pendingWorkloads": 2, "admittedWorkloads": 1, "reservingWorkloads": 1,
        "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "10", "borrowed": "2"}]}],
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
    info = run(kueue_info, {})
    assert not info["changed"] and info["api_version"] == "v1beta2"
    cq = info["cluster_queues"][0]
    assert cq["active"] and cq["cohort"] == "nlp" and cq["pending_workloads"] == 2
    assert cq["local_queues"] == ["team-a/default"]
    assert cq["flavors"][0]["resources"][0] == {
        "name": "nvidia.com/gpu", "nominal_quota": "8", "borrowing_limit": "4", "lending_limit": None,
        "usage": "10", "borrowed": "2", "reserved": "0"}
    assert info["cohort_tree"] == [{"name": "research", "cluster_queues": [], "children": [
        {"name": "nlp", "cluster_queues": ["team-a"], "children": []}]}]
    assert info["local_queues"][0]["cluster_queue"] == "team-a"
    only = run(kueue_info, {"cohort": "nlp", "include": ["cluster_queues", "cohorts"]})
    assert [c["name"] for c in only["cluster_queues"]] == ["team-a"]
    assert [c["name"] for c in only["cohorts"]] == ["nlp"]
    assert "local_queues" not in only


def test_cohort_quotas_in_the_inventorys_words(cluster):
    args = {"name": "dept", "parent": "org",
            "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 4, "cpu": 32}, "lending_limit": {"nvidia.com/gpu": 6}}]}
    created = run(cohort, args)
    # a Cohort may lend more than its own nominal quota (its subtree's), unlike a ClusterQueue
    assert created["result"]["spec"] == {"parentName": "org", "resourceGroups": [
        {"coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [{"name": "h100", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "4", "lendingLimit": "6"}, {"name": "cpu", "nominalQuota": "32"}]}]}]}
    assert not run(cohort, args)["changed"]
    root = {"name": "org", "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": -1}, "borrowing_limit": {"cpu": 1}}]}
    calls = len(cluster.calls)
    failed = run(cohort, root, fail=True)
    assert failed["problems"] == [
        "quotas[0].resources.nvidia.com/gpu: must not be negative, got -1",
        "quotas[0].borrowing_limit: borrowing_limit needs the cohort to have a parent: a Cohort's limits bound what its "
        "subtree borrows from and lends to its parent, and Kueue refuses them on a root Cohort (set parent)",
        "quotas[0].borrowing_limit.cpu: resource 'cpu' has no nominal quota in resources"]
    assert len(cluster.calls) == calls
    both = run(cohort, dict(args, resource_groups=[{"flavors": [{"name": "h100", "resources": {"cpu": 1}}]}]), fail=True)
    assert "mutually exclusive" in both["msg"]
