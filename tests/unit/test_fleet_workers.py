# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which workers a fleet run keeps, removes or refuses to remove (reconcile/fleet_workers.py, issue 27): expected
values written by hand from the rules in docs/multicluster.md "Removing a worker"."""

from __future__ import annotations

from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import fleet_workers as fw


def workload(name, namespace="vision", cluster=None, finished=False, origin=False):
    obj = {"metadata": {"name": name, "namespace": namespace, "labels": {}}, "status": {"conditions": []}}
    if cluster:
        obj["status"]["clusterName"] = cluster
    if finished:
        obj["status"]["conditions"].append({"type": "Finished", "status": "True"})
    if origin:
        obj["metadata"]["labels"][fw.ORIGIN_LABEL] = "multikueue"
    return obj


def test_a_workload_dispatched_to_the_worker_holds_it_until_finished():
    wls = [workload("a", cluster="old"), workload("b", cluster="old", finished=True), workload("c", cluster="east"),
           workload("d"), workload("e", namespace="nlp", cluster="old")]
    assert fw.dispatched_to(wls, "old") == ["nlp/e", "vision/a"]
    assert fw.dispatched_to(wls, "gone") == []
    # Finished=False is not finished
    wls[0]["status"]["conditions"].append({"type": "Finished", "status": "False"})
    assert fw.dispatched_to(wls, "old") == ["nlp/e", "vision/a"]


def test_on_the_worker_multikueue_copies_and_workloads_in_tenant_namespaces_hold_it():
    wls = [workload("copy", namespace="other", origin=True), workload("local"), workload("done", finished=True),
           workload("foreign", namespace="kube-system")]
    assert fw.unfinished_on_worker(wls, {"vision"}) == ["other/copy", "vision/local"]


def test_without_prune_workers_a_removed_worker_is_kept_and_reported():
    plan = fw.plan_removed_workers(live=["east", "old"], present=["east"], retired=[], holders={}, prune_workers=False)
    assert (plan.keep, plan.remove, plan.problems) == (["old"], [], [])
    assert len(plan.warnings) == 1 and "'old'" in plan.warnings[0] and "gpuaas_fleet_prune_workers" in plan.warnings[0]


def test_with_prune_workers_a_drained_worker_is_removed_and_a_busy_one_refuses():
    holders = {"busy": ["vision/%d" % i for i in range(7)], "idle": []}
    plan = fw.plan_removed_workers(live=["east", "busy", "idle"], present=["east"], retired=["gone"],
                                   holders=holders, prune_workers=True)
    assert plan.remove == ["gone", "idle"]  # a retired entry without a MultiKueueCluster is still torn out
    assert plan.keep == ["busy"]
    assert plan.problems == ["worker 'busy' cannot be removed: 7 workloads dispatched to it have not finished: "
                             "vision/0, vision/1, vision/2, vision/3, vision/4 …"]


def test_present_workers_are_never_removed_even_if_listed_as_retired_elsewhere():
    plan = fw.plan_removed_workers(live=["east"], present=["east"], retired=[], holders={}, prune_workers=True)
    assert (plan.keep, plan.remove, plan.problems, plan.warnings) == ([], [], [], [])


def test_the_teardown_order_deletes_queues_before_what_they_use():
    kinds = [k for _av, k, _ns in fw.teardown_kinds("kueue-system")]
    assert kinds.index("LocalQueue") < kinds.index("ClusterQueue") < kinds.index("ResourceFlavor")
    assert kinds.index("RoleBinding") < kinds.index("ClusterRole")
    assert kinds.index("Secret") < kinds.index("ServiceAccount")
    assert "Namespace" not in kinds
    assert dict((k, ns) for _av, k, ns in fw.teardown_kinds("kq"))["Secret"] == "kq"
