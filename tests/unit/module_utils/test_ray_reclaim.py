# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RayCluster idle reclaim (issue 25): the inventory entry, the checks against the live cluster, the decisions,
and the run against the fake API server (what is written, what never is)."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import parse_autoscaling, ray_reclaim_namespaces
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import InventoryError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import ray_reclaim as rr
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.tenancy import desired_objects
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.ray_reclaim_runner import (
    RayReclaimRun,
    opted_in,
    run_ray_reclaim,
)
from .reclaim_fakes import NOW, FakePrometheus, reclaim_cluster as fake_cluster, reclaim_run

PROM = "http://prometheus:9090"
HOUR_AGO = rr.iso(NOW - 3600)


def entry(**over):
    base = {"name": "tune", "namespace": "nlp", "target": {"kind": "RayCluster", "name": "tune"},
            "idle_scale_to_zero": {"after_seconds": 60}, "cooldown_period": 120}
    base.update(over)
    return base


def inventory(*entries, tenant="nlp"):
    return {"gpuaas_prometheus": {"url": PROM},
            "gpuaas_tenants": [{"name": tenant, "namespaces": [tenant], "autoscaling": list(entries)}]}


def model_of(*entries):
    return TenantModel.from_inventory(inventory(*entries))


def group(name, replicas, gpus=1, max_replicas=4, min_replicas=0):
    limits = {"cpu": "1"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    worker = {"name": "w", "image": "ray", "resources": {"limits": limits}}
    return {"groupName": name, "replicas": replicas, "minReplicas": min_replicas, "maxReplicas": max_replicas,
            "rayStartParams": {}, "template": {"spec": {"containers": [worker]}}}


HEAD = {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "head", "image": "ray"}]}}}


def cluster(groups=None, annotations=None, name="tune", namespace="nlp"):
    ann = {rr.ELASTIC_ANNOTATION: "true"}
    ann.update(annotations or {})
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": namespace, "annotations": ann,
                         "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"headGroupSpec": HEAD,
                     "workerGroupSpecs": groups if groups is not None else [group("gpu", 2), group("cpu", 1, gpus=0)]}}


def pod(name, grp="gpu", started=HOUR_AGO, phase="Running", cluster_name="tune", node_type="worker"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "nlp",
                         "labels": {rr.CLUSTER_LABEL: cluster_name, rr.GROUP_LABEL: grp, rr.NODE_TYPE_LABEL: node_type}},
            "status": {"phase": phase, "startTime": started}}


def target(**over):
    [(tenant, auto)] = opted_in(model_of(entry(**over)))
    targets, problems, _warnings = rr.resolve_targets([(tenant, auto)], {("nlp", "tune"): cluster()}, 5)
    assert not problems, problems
    return targets[0]


# --- the inventory ----------------------------------------------------------------------------------------------
def test_a_raycluster_entry_opts_the_cluster_in_and_builds_no_scaled_object():
    model = model_of(entry(worker_groups=["gpu"]))
    [tenant] = model.tenants
    assert tenant.autoscaling == []
    [auto] = tenant.ray_reclaim
    assert (auto.target_kind, auto.target_name, auto.target_api_version) == ("RayCluster", "tune", "ray.io/v1")
    assert auto.worker_groups == ["gpu"] and auto.idle_window_seconds == 60 and auto.cooldown_period == 120
    kinds = {o["kind"] for o in desired_objects(model, "kubernetes")}
    assert "ScaledObject" not in kinds and "TriggerAuthentication" not in kinds


def test_keda_settings_on_a_raycluster_entry_are_refused_all_at_once():
    bad = entry(max_replicas=3, load={"target_per_replica": 1, "query": "x"},
                idle_scale_to_zero={"after_seconds": 60, "wake_query": "sum(x)", "pod_regex": "tune-.*"},
                worker_groups=["gpu", "gpu"])
    with pytest.raises(InventoryError) as info:
        model_of(bad)
    text = "\n".join(info.value.problems)
    for path in ("autoscaling[0].max_replicas", "autoscaling[0].load", "idle_scale_to_zero.wake_query",
                 "idle_scale_to_zero.pod_regex", "autoscaling[0].worker_groups"):
        assert path in text, (path, text)
    assert "gpuaas.io/wake" in text


def test_a_raycluster_entry_needs_an_idle_window_and_prometheus():
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory({"gpuaas_tenants": [{"name": "nlp", "namespaces": ["nlp"], "autoscaling": [
            {"name": "a", "target": {"kind": "RayCluster", "name": "a"}},
            {"name": "b", "target": {"kind": "RayCluster", "name": "b"}, "idle_scale_to_zero": {"after_seconds": 30}}]}]})
    text = "\n".join(info.value.problems)
    assert "autoscaling[0].idle_scale_to_zero: is required" in text
    assert "autoscaling[1].idle_scale_to_zero: reads GPU utilization from Prometheus" in text


def test_worker_groups_belong_to_raycluster_targets_only():
    with pytest.raises(InventoryError) as info:
        model_of({"name": "v", "target": {"kind": "Deployment", "name": "v"}, "worker_groups": ["gpu"],
                  "idle_scale_to_zero": {"wake_query": "x"}})
    assert any("worker_groups: is for a RayCluster target only" in p for p in info.value.problems)


def test_the_scaled_object_module_still_refuses_a_raycluster_and_says_where_it_goes():
    with pytest.raises(InventoryError) as info:
        parse_autoscaling(entry(namespace=None), "nlp", PROM)
    assert any("ray_idle_reclaim" in p for p in info.value.problems)


# --- the checks against the live cluster ------------------------------------------------------------------------
def test_every_problem_of_every_cluster_is_reported_before_anything_is_written():
    model = TenantModel.from_inventory({"gpuaas_prometheus": {"url": PROM}, "gpuaas_tenants": [
        {"name": "nlp", "namespaces": ["nlp"], "autoscaling": [
            {"name": "a", "target": {"kind": "RayCluster", "name": "a"}, "idle_scale_to_zero": {"after_seconds": 10}},
            {"name": "b", "target": {"kind": "RayCluster", "name": "b"}, "worker_groups": ["gpu", "big", "cpu"],
             "idle_scale_to_zero": {"after_seconds": 60}},
            {"name": "c", "target": {"kind": "RayCluster", "name": "c"}, "idle_scale_to_zero": {"after_seconds": 60}},
            {"name": "d", "target": {"kind": "RayCluster", "name": "d"}, "idle_scale_to_zero": {"after_seconds": 60}}]}]})
    no_gpu = cluster([group("cpu", 2, gpus=0)], name="a")
    not_elastic = cluster(name="c")
    del not_elastic["metadata"]["annotations"][rr.ELASTIC_ANNOTATION]
    live = {("nlp", "a"): no_gpu, ("nlp", "b"): cluster(name="b"), ("nlp", "c"): not_elastic, ("nlp", "d"): None}
    _targets, problems, warnings = rr.resolve_targets(opted_in(model), live, 15)
    text = "\n".join(problems)
    assert len(problems) == 5, problems
    assert "autoscaling a (RayCluster nlp/a): idle window 10s is shorter than the Prometheus scrape interval 15s" in text
    assert "autoscaling a (RayCluster nlp/a): has no GPU worker group (groups: cpu)" in text
    assert "autoscaling b (RayCluster nlp/b): worker_groups names 'big', which the cluster does not have (groups: gpu, cpu)" in text
    assert "autoscaling b (RayCluster nlp/b): worker group 'cpu' asks for no GPU" in text
    assert "autoscaling c (RayCluster nlp/c): lacks the annotation kueue.x-k8s.io/elastic-job" in text
    assert warnings == ["tenant nlp, autoscaling d (RayCluster nlp/d): no such RayCluster; skipped (it is reclaimed once it exists)"]


def test_the_gpu_groups_are_the_default_and_mig_slices_count_as_gpus():
    mig = group("mig", 1, gpus=0)
    mig["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"] = "1"
    assert rr.gpu_groups(cluster([group("gpu", 1), group("cpu", 1, gpus=0), mig])) == ["gpu", "mig"]


# --- the decisions ----------------------------------------------------------------------------------------------
def test_idle_for_the_whole_window_is_reclaimed_with_the_replicas_recorded():
    d = rr.decide(target(), cluster(), [pod("w1"), pod("w2")], {"w1": 0.0, "w2": 1.0}, NOW)
    assert (d.action, d.groups) == ("reclaim", {"gpu": 2}), d.reason


@pytest.mark.parametrize("pods,util,reason", [
    ([pod("w1"), pod("w2")], {"w1": 0.0, "w2": 35.0}, "busy: worker w2 reached 35% GPU utilization"),
    ([pod("w1"), pod("w2", started=rr.iso(NOW - 30))], {"w1": 0.0, "w2": 0.0}, "worker w2 started 30s ago"),
    ([pod("w1"), pod("w2")], {"w1": 0.0}, "no GPU utilization series for worker w2"),
    ([pod("w1", phase="Pending")], {"w1": 0.0}, "worker w1 is not running"),
    ([], {}, "no GPU worker pod is running yet"),
])
def test_a_busy_young_unmeasured_or_missing_worker_keeps_the_cluster(pods, util, reason):
    d = rr.decide(target(), cluster(), pods, util, NOW)
    assert d.action == "keep" and reason in d.reason, d.reason


def test_a_cpu_group_is_never_reclaimed_and_its_busy_pods_do_not_matter():
    d = rr.decide(target(), cluster(), [pod("w1"), pod("w2"), pod("c1", grp="cpu")], {"w1": 0.0, "w2": 0.0}, NOW)
    assert d.action == "reclaim" and d.groups == {"gpu": 2}
    patch = rr.reclaim_patch(cluster(), d, NOW)
    cpu = next(g for g in patch["spec"]["workerGroupSpecs"] if g["groupName"] == "cpu")
    assert cpu == group("cpu", 1, gpus=0)
    assert "headGroupSpec" not in patch["spec"]


def test_reclaim_then_wake_restores_the_recorded_replicas_and_a_second_wake_value_is_needed():
    live = cluster([group("gpu", 3, min_replicas=1, max_replicas=4), group("cpu", 1, gpus=0)],
                   annotations={rr.WAKE_ANNOTATION: "old"})
    d = rr.decide(target(), live, [pod("w1"), pod("w2"), pod("w3")], {"w1": 0, "w2": 0, "w3": 0}, NOW)
    patch = rr.reclaim_patch(live, d, NOW)
    gpu = patch["spec"]["workerGroupSpecs"][0]
    assert (gpu["replicas"], gpu["minReplicas"]) == (0, 0)
    state = json.loads(patch["metadata"]["annotations"][rr.STATE_ANNOTATION])
    assert state == {"reclaimed": {"gpu": {"replicas": 3, "minReplicas": 1}}, "at": rr.iso(NOW), "wake": "old"}
    reclaimed = copy.deepcopy(live)
    reclaimed["spec"]["workerGroupSpecs"] = patch["spec"]["workerGroupSpecs"]
    reclaimed["metadata"]["annotations"].update(patch["metadata"]["annotations"])
    # the wake value seen before the reclaim does not wake it
    d2 = rr.decide(target(), reclaimed, [], {}, NOW + 10)
    assert d2.action == "keep" and "set the annotation gpuaas.io/wake to a new value" in d2.reason
    reclaimed["metadata"]["annotations"][rr.WAKE_ANNOTATION] = "now"
    d3 = rr.decide(target(), reclaimed, [], {}, NOW + 20)
    assert (d3.action, d3.groups) == ("wake", {"gpu": 3})
    woken = rr.wake_patch(reclaimed, d3, NOW + 20)
    gpu = woken["spec"]["workerGroupSpecs"][0]
    assert (gpu["replicas"], gpu["minReplicas"]) == (3, 1)
    assert json.loads(woken["metadata"]["annotations"][rr.STATE_ANNOTATION]) == {"woken": rr.iso(NOW + 20), "wake": "now"}


def test_a_tampered_record_never_restores_above_the_groups_max_replicas():
    live = cluster(annotations={rr.STATE_ANNOTATION: json.dumps({"reclaimed": {"gpu": {"replicas": 500}}}),
                                rr.WAKE_ANNOTATION: "x"})
    live["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    d = rr.decide(target(), live, [], {}, NOW)
    assert (d.action, d.groups) == ("wake", {"gpu": 4})


def test_a_reclaimed_cluster_scaled_up_by_hand_is_judged_awake_and_a_wake_does_not_override_it():
    live = cluster(annotations={rr.STATE_ANNOTATION: json.dumps({"reclaimed": {"gpu": {"replicas": 4}}}),
                                rr.WAKE_ANNOTATION: "new"})
    live["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    busy = rr.decide(target(), live, [pod("w1")], {"w1": 50.0}, NOW)
    assert busy.action == "keep" and "busy" in busy.reason
    idle = rr.decide(target(), live, [pod("w1")], {"w1": 0.0}, NOW)
    assert (idle.action, idle.groups) == ("reclaim", {"gpu": 1})


def test_no_reclaim_within_the_cooldown_after_a_wake():
    live = cluster(annotations={rr.STATE_ANNOTATION: json.dumps({"woken": rr.iso(NOW - 100), "wake": "x"})})
    busy_free = ([pod("w1"), pod("w2")], {"w1": 0.0, "w2": 0.0})
    assert rr.decide(target(), live, *busy_free, NOW).action == "keep"
    assert rr.decide(target(), live, *busy_free, NOW + 21).action == "reclaim"  # cooldown 120 s passed


# --- the run against the fake API server ------------------------------------------------------------------------
def run(client, util, check_mode=False, entries=None, now=NOW):
    entries = entries if entries is not None else opted_in(model_of(entry()))
    return reclaim_run(client, util, entries, now, check_mode)


def test_the_run_reclaims_an_idle_cluster_once_and_leaves_a_busy_one_and_the_head_alone():
    busy = cluster(name="busy")
    client = fake_cluster(cluster(), busy, pod("w1"), pod("w2"), pod("b1", cluster_name="busy"),
                          pod("head", grp="headgroup", node_type="head"))
    entries = opted_in(model_of(entry(), entry(name="busy", target={"kind": "RayCluster", "name": "busy"})))
    out = run(client, {"w1": 0.0, "w2": 0.0, "b1": 80.0}, entries=entries)
    assert [(c["name"], c["action"], c["changed"]) for c in out["clusters"]] == [("tune", "reclaim", True),
                                                                                 ("busy", "keep", False)]
    stored = client.store[("RayCluster", "nlp", "tune")]
    assert [g["replicas"] for g in stored["spec"]["workerGroupSpecs"]] == [0, 1]
    assert stored["spec"]["headGroupSpec"] == cluster()["spec"]["headGroupSpec"]
    assert "app.kubernetes.io/managed-by" not in stored["metadata"]["labels"]  # not the collection's object
    assert client.store[("RayCluster", "nlp", "busy")] == busy
    assert out["diff"][0]["after"]["spec"]["workerGroupSpecs"][0]["replicas"] == 0
    # idempotent: the next run (workers gone) writes nothing
    del client.store[("Pod", "nlp", "w1")], client.store[("Pod", "nlp", "w2")]
    client.reset_calls()
    again = run(client, {"b1": 80.0}, entries=entries)
    assert not again["changed"] and client.writes == []


def test_check_mode_writes_nothing_and_reports_the_change():
    client = fake_cluster(cluster(), pod("w1"), pod("w2"))
    out = run(client, {"w1": 0.0, "w2": 0.0}, check_mode=True)
    assert out["changed"] and out["clusters"][0]["action"] == "reclaim"
    assert client.writes == [] and ("apply", "RayCluster", "nlp", "tune", True) in client.calls
    assert client.store[("RayCluster", "nlp", "tune")] == cluster()


def test_one_bad_cluster_stops_the_run_before_any_cluster_is_written():
    bad = cluster(name="bad")
    del bad["metadata"]["annotations"][rr.ELASTIC_ANNOTATION]
    client = fake_cluster(cluster(), bad, pod("w1"), pod("w2"))
    entries = opted_in(model_of(entry(), entry(name="bad", target={"kind": "RayCluster", "name": "bad"})))
    with pytest.raises(GpuaasError) as info:
        run(client, {"w1": 0.0, "w2": 0.0}, entries=entries)
    assert "nothing was changed" in str(info.value) and len(info.value.problems) == 1
    assert client.writes == []


def test_the_run_wakes_a_reclaimed_cluster_when_its_tenant_asks():
    client = fake_cluster(cluster(), pod("w1"), pod("w2"))
    run(client, {"w1": 0.0, "w2": 0.0})
    live = client.store[("RayCluster", "nlp", "tune")]
    live["metadata"]["annotations"][rr.WAKE_ANNOTATION] = "please"
    for name in ("w1", "w2"):
        del client.store[("Pod", "nlp", name)]
    out = run(client, {}, now=NOW + 30)
    assert out["clusters"][0]["action"] == "wake" and out["clusters"][0]["replicas"] == {"gpu": 2}
    assert client.store[("RayCluster", "nlp", "tune")]["spec"]["workerGroupSpecs"][0]["replicas"] == 2


# --- watching for wakes (watch_seconds) ----------------------------------------------------------------------------
class Ticks:
    """A fake monotonic clock and sleep: each sleep advances the clock and runs the scripted event of that tick."""

    def __init__(self, events=None):
        self.now, self.slept, self.events = 0.0, [], dict(events or {})

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds
        event = self.events.pop(len(self.slept), None)
        if event:
            event()


def watch(client, util, ticks, seconds=45, interval=5, now=NOW):
    engine = ApplyEngine(client, check_mode=False)
    return RayReclaimRun(client, FakePrometheus(util), engine, 5, clock=lambda: now).watch(
        opted_in(model_of(entry())), seconds, interval, diff=True, sleep=ticks.sleep, monotonic=ticks.monotonic)


def test_a_watching_run_wakes_the_cluster_at_the_next_pass_not_the_next_run():
    """Reclaimed in the first pass; the tenant's wake arrives after the third sleep (15 s into the run): the fourth
    pass restores the 2 recorded workers, the watch goes on to 45 s (9 passes) and writes nothing more."""
    client = fake_cluster(cluster(), pod("w1"), pod("w2"))

    def tenant_wakes():
        for name in ("w1", "w2"):
            del client.store[("Pod", "nlp", name)]
        client.store[("RayCluster", "nlp", "tune")]["metadata"]["annotations"][rr.WAKE_ANNOTATION] = "now"

    ticks = Ticks({3: tenant_wakes})
    out = watch(client, {"w1": 0.0, "w2": 0.0}, ticks)
    assert out["passes"] == 9 and ticks.slept == [5] * 8
    assert out["changed"] and [(c["name"], c["action"]) for c in out["clusters"]] == [("tune", "wake")]
    assert client.store[("RayCluster", "nlp", "tune")]["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    # one reclaim and one wake written, each with its diff; the later passes wrote nothing (cooldown after the wake)
    assert [d["after"]["spec"]["workerGroupSpecs"][0]["replicas"] for d in out["diff"]] == [0, 2]
    assert [(c["action"], c["pass"]) for c in out["changes"]] == [("reclaim", 1), ("wake", 4)]


def test_a_cluster_made_unusable_while_watching_ends_the_watch_and_keeps_what_was_done():
    """The tenant removes the elastic-job annotation after the second sleep: the third pass finds the problem the
    first pass would have refused; the watch ends there with a warning, the reclaim of the first pass stays."""
    client = fake_cluster(cluster(), pod("w1"), pod("w2"))
    ticks = Ticks({2: lambda: client.store[("RayCluster", "nlp", "tune")]["metadata"]["annotations"].pop(
        rr.ELASTIC_ANNOTATION)})
    out = watch(client, {"w1": 0.0, "w2": 0.0}, ticks)
    assert out["passes"] == 2 and len(ticks.slept) == 2
    assert out["changed"] and out["clusters"][0]["action"] == "reclaim"
    assert any("the watch ended after 2 pass(es)" in w for w in out["warnings"]), out["warnings"]


def test_watch_settings_are_checked_and_check_mode_is_one_pass():
    client = fake_cluster(cluster(), pod("w1"), pod("w2"))
    prometheus = FakePrometheus({"w1": 0.0, "w2": 0.0})
    base = {"scrape_interval": 5, "_diff": False}
    for bad in ({"watch_seconds": -1}, {"watch_seconds": 45, "watch_interval": 0}):
        with pytest.raises(GpuaasError) as info:
            run_ray_reclaim(client, prometheus, dict(base, **bad), inventory(entry()), check_mode=False)
        assert "watch_seconds must be 0 or more and watch_interval 1 or more" in str(info.value)
    assert client.writes == []
    # check mode: one pass whatever watch_seconds says (a real sleep here would hang the test for 45 s)
    out = run_ray_reclaim(client, prometheus, dict(base, watch_seconds=45), inventory(entry()), check_mode=True)
    assert out["passes"] == 1 and client.writes == []


def test_the_opted_in_namespaces_the_roles_read_are_those_of_the_validated_model():
    """Filter gpuaas.platform.ray_reclaim_namespaces (automation_rbac binds the reclaim account there, aap_config renders
    the job only when it is not empty) reads the raw gpuaas_tenants: it must name exactly the namespaces of the
    RayClusters the validated model opts in, absent tenants and KEDA targets left out (issue 21: one rule)."""
    tenants = [
        {"name": "nlp", "namespaces": ["nlp"], "autoscaling": [entry(namespace=None)]},  # the only namespace
        {"name": "cv", "namespaces": ["cv-a", "cv-b"], "autoscaling": [
            entry(name="r", namespace="cv-b", target={"kind": "RayCluster", "name": "r"}),
            {"name": "web", "namespace": "cv-a", "target": {"kind": "Deployment", "name": "web"},
             "idle_scale_to_zero": {"after_minutes": 5}}]},
        {"name": "gone", "namespaces": ["gone"], "state": "absent", "autoscaling": [entry(namespace="gone")]},
        {"name": "plain", "namespaces": ["plain"]},
    ]
    assert ray_reclaim_namespaces(tenants) == ["cv-b", "nlp"]
    model = TenantModel.from_inventory({"gpuaas_prometheus": {"url": PROM}, "gpuaas_tenants": copy.deepcopy(tenants)})
    from_model = sorted({r.namespace for tenant in model.present_tenants for r in tenant.ray_reclaim})
    assert ray_reclaim_namespaces(tenants) == from_model


def test_the_opted_in_namespaces_never_guess_where_validation_would_refuse():
    """An entry without a namespace in a tenant of several, or naming another tenant's namespace, binds nothing."""
    tenants = [{"name": "cv", "namespaces": ["cv-a", "cv-b"], "autoscaling": [
        entry(namespace=None), entry(name="x", namespace="nlp", target={"kind": "RayCluster", "name": "x"})]},
        "not a tenant", {"name": "odd", "namespaces": ["odd"], "autoscaling": ["not an entry", {"target": "RayCluster"}]}]
    assert ray_reclaim_namespaces(tenants) == []
    assert ray_reclaim_namespaces(None) == []
