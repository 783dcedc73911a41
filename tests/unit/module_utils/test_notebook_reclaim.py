# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Notebook (workbench) idle stop (issue 23): the inventory entry, the checks against the live Notebook, the
decisions, and the run against the fake API server with a fake clock (what is written, what never is)."""

from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import parse_autoscaling, ray_reclaim_namespaces
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import InventoryError
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import notebook_reclaim as nr
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.tenancy import desired_objects
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.ray_reclaim_runner import opted_in
from .reclaim_fakes import NOW, reclaim_cluster, reclaim_run

PROM = "http://prometheus:9090"
STOP = "kubeflow-resource-stopped"  # the notebook controller's annotation, written here as upstream spells it
RECORD = "gpuaas.io/idle-reclaim"
WAKE = "gpuaas.io/wake"


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


HOUR_AGO = iso(NOW - 3600)


def entry(name="alice", **over):
    base = {"name": name, "namespace": "nlp", "target": {"kind": "Notebook", "name": name},
            "idle_scale_to_zero": {"after_seconds": 60}, "cooldown_period": 120}
    base.update(over)
    return base


def model_of(*entries):
    return TenantModel.from_inventory({"gpuaas_prometheus": {"url": PROM},
                                       "gpuaas_tenants": [{"name": "nlp", "namespaces": ["nlp"],
                                                           "autoscaling": list(entries)}]})


def notebook(name="alice", gpus=1, annotations=None):
    limits = {"cpu": "1", "memory": "2Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
            "metadata": {"name": name, "namespace": "nlp", "labels": {"kueue.x-k8s.io/queue-name": "default"},
                         "annotations": dict(annotations or {})},
            "spec": {"template": {"spec": {"containers": [{"name": name, "image": "jupyter",
                                                           "resources": {"limits": limits}}]}}}}


def pod(name="alice", started=HOUR_AGO, phase="Running"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name + "-0", "namespace": "nlp",
                         "labels": {"notebook-name": name, "statefulset": name}},
            "status": {"phase": phase, "startTime": started}}


def fake_cluster(*objects):
    return reclaim_cluster(*objects, notebooks=True)


def run(client, util, now=NOW, entries=None, check_mode=False, scrape=5):
    entries = entries if entries is not None else opted_in(model_of(entry()))
    return reclaim_run(client, util, entries, now, check_mode, scrape)


def stored(client, name="alice"):
    return client.store[("Notebook", "nlp", name)]


def annotations(client, name="alice"):
    return stored(client, name)["metadata"].get("annotations") or {}


# --- the inventory ----------------------------------------------------------------------------------------------
def test_a_notebook_entry_opts_the_workbench_in_and_builds_no_scaled_object():
    model = model_of(entry())
    [tenant] = model.tenants
    assert tenant.autoscaling == []
    [auto] = tenant.ray_reclaim
    assert (auto.target_kind, auto.target_api_version, auto.idle_window_seconds) == ("Notebook", "kubeflow.org/v1", 60)
    kinds = {o["kind"] for o in desired_objects(model)}
    assert "ScaledObject" not in kinds
    assert ray_reclaim_namespaces([{"name": "nlp", "namespaces": ["nlp", "other"],
                                    "autoscaling": [entry()]}]) == ["nlp"]


def test_keda_settings_and_worker_groups_on_a_notebook_entry_are_refused_all_at_once():
    bad = entry(max_replicas=1, worker_groups=["gpu"], idle_scale_to_zero={"after_seconds": 60, "wake_query": "up"})
    with pytest.raises(InventoryError) as info:
        model_of(bad)
    text = "\n".join(info.value.problems)
    assert "autoscaling[0].max_replicas: is a KEDA setting: a Notebook is not scaled by KEDA" in text
    assert "autoscaling[0].worker_groups: is for a RayCluster target only" in text
    assert "autoscaling[0].idle_scale_to_zero.wake_query: does not apply to a Notebook" in text
    assert len(info.value.problems) == 3, info.value.problems
    with pytest.raises(InventoryError) as info:
        model_of(entry(idle_scale_to_zero=None))
    assert "is required for a Notebook target" in "\n".join(info.value.problems)


def test_the_scaled_object_module_refuses_a_notebook_and_says_why():
    with pytest.raises(InventoryError) as info:
        parse_autoscaling({"name": "nb", "target": {"kind": "Notebook", "name": "alice"},
                           "idle_scale_to_zero": {"after_minutes": 5}}, "nlp", PROM)
    assert "its controller owns its StatefulSet's replicas" in "\n".join(info.value.problems)


# --- the live checks --------------------------------------------------------------------------------------------
def test_every_problem_of_every_kind_is_reported_before_anything_is_written():
    cpu_only = notebook("cpu", gpus=0)
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "tune", "namespace": "nlp", "annotations": {}},  # not elastic: a Ray problem
           "spec": {"workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "template": {"spec": {"containers": [
               {"name": "w", "image": "ray", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}]}}
    client = fake_cluster(notebook(), cpu_only, ray, pod())
    entries = opted_in(model_of(entry(), entry("cpu"),
                                {"name": "tune", "namespace": "nlp", "target": {"kind": "RayCluster", "name": "tune"},
                                 "idle_scale_to_zero": {"after_seconds": 60}},
                                entry("short", idle_scale_to_zero={"after_seconds": 10}), entry("missing")))
    client.store[("Notebook", "nlp", "short")] = notebook("short")
    with pytest.raises(GpuaasError) as info:
        run(client, {"alice-0": 0.0}, entries=entries, now=NOW, scrape=30)
    problems = info.value.problems
    assert "nothing was changed" in str(info.value) and len(problems) == 3, problems
    assert any("Notebook nlp/cpu" in p and "asks for no GPU" in p for p in problems)
    assert any("RayCluster nlp/tune" in p and "elastic-job" in p for p in problems)
    assert any("Notebook nlp/short" in p and "shorter than the Prometheus scrape interval" in p for p in problems)
    assert client.writes == []


# --- the decisions and the run ------------------------------------------------------------------------------------
def test_an_idle_workbench_is_stopped_with_the_time_and_the_record_once():
    client = fake_cluster(notebook(), pod())
    out = run(client, {"alice-0": 0.0})
    [row] = out["clusters"]
    assert (row["kind"], row["action"], row["changed"]) == ("Notebook", "reclaim", True), row
    ann = annotations(client)
    assert ann[STOP] == iso(NOW)  # RFC 3339, as the Kubeflow culler writes it
    assert json.loads(ann[RECORD]) == {"stopped": iso(NOW)}
    live = stored(client)
    assert live["spec"] == notebook()["spec"] and live["metadata"]["labels"] == notebook()["metadata"]["labels"]
    assert out["diff"][0]["after"]["metadata"]["annotations"][STOP] == iso(NOW)
    # the controller scales the StatefulSet to 0 and the pod goes: the next run writes nothing
    del client.store[("Pod", "nlp", "alice-0")]
    client.reset_calls()
    again = run(client, {}, now=NOW + 30)
    assert not again["changed"] and client.writes == []
    assert "set the annotation gpuaas.io/wake" in again["clusters"][0]["reason"]


@pytest.mark.parametrize("pods, util, reason", [
    ([pod()], {"alice-0": 40.0}, "busy: pod alice-0"),
    ([pod(started=iso(NOW - 30))], {"alice-0": 0.0}, "less than the idle window"),
    ([pod()], {}, "no GPU utilization series"),
    ([pod(phase="Pending")], {"alice-0": 0.0}, "is not running"),
    ([], {}, "no pod of the workbench is running"),
])
def test_a_busy_young_unmeasured_or_absent_workbench_is_kept(pods, util, reason):
    client = fake_cluster(notebook(), *pods)
    out = run(client, util)
    assert out["clusters"][0]["action"] == "keep" and reason in out["clusters"][0]["reason"], out
    assert client.writes == []


def test_check_mode_writes_nothing_and_reports_the_stop():
    client = fake_cluster(notebook(), pod())
    out = run(client, {"alice-0": 0.0}, check_mode=True)
    assert out["changed"] and out["clusters"][0]["action"] == "reclaim"
    assert client.writes == [] and ("apply", "Notebook", "nlp", "alice", True) in client.calls
    assert stored(client) == notebook()


def test_the_wake_removes_the_stop_annotation_the_collection_set_and_cooldown_follows():
    client = fake_cluster(notebook(), pod())
    run(client, {"alice-0": 0.0})
    del client.store[("Pod", "nlp", "alice-0")]
    stored(client)["metadata"]["annotations"][WAKE] = "1800000100"  # the tenant's kubectl annotate
    out = run(client, {}, now=NOW + 100)
    assert out["clusters"][0]["action"] == "wake" and out["clusters"][0]["changed"], out
    ann = annotations(client)
    assert STOP not in ann, ann  # server-side apply dropped the field the collection's manager set
    assert json.loads(ann[RECORD]) == {"woken": iso(NOW + 100), "wake": "1800000100"}
    assert ann[WAKE] == "1800000100"
    assert out["diff"][0]["before"]["metadata"]["annotations"][STOP] == iso(NOW)
    # idle again at once (the controller started the pod): the cooldown keeps it running
    client.store[("Pod", "nlp", "alice-0")] = pod(started=iso(NOW + 110))
    kept = run(client, {"alice-0": 0.0}, now=NOW + 200)
    assert kept["clusters"][0]["action"] == "keep" and "cooldown 120s" in kept["clusters"][0]["reason"]
    # the same wake value later does not start a second stop's workbench
    client.store[("Pod", "nlp", "alice-0")] = pod(started=iso(NOW + 110))
    stop = run(client, {"alice-0": 0.0}, now=NOW + 400)
    assert stop["clusters"][0]["action"] == "reclaim"
    again = run(client, {}, now=NOW + 430)
    assert again["clusters"][0]["action"] == "keep" and STOP in annotations(client)


def test_a_workbench_its_user_stopped_is_never_started_by_the_collection():
    # stopped from the dashboard (no record) and a wake value: the collection leaves it stopped
    client = fake_cluster(notebook(annotations={STOP: "2026-12-03T09:00:00Z", WAKE: "go"}))
    out = run(client, {})
    assert out["clusters"][0]["action"] == "keep" and "stopped by its user" in out["clusters"][0]["reason"]
    assert client.writes == []
    # stopped by the collection, then started and stopped again by the user: her stop (another time) is hers
    client = fake_cluster(notebook(), pod())
    run(client, {"alice-0": 0.0})
    stored(client)["metadata"]["annotations"][STOP] = "2026-12-03T12:00:00Z"
    stored(client)["metadata"]["annotations"][WAKE] = "later"
    out = run(client, {}, now=NOW + 60)
    assert out["clusters"][0]["action"] == "keep" and "stopped by its user" in out["clusters"][0]["reason"]
    assert annotations(client)[STOP] == "2026-12-03T12:00:00Z"


def test_a_wake_value_seen_before_the_stop_does_not_start_it():
    client = fake_cluster(notebook(annotations={WAKE: "old"}), pod())
    run(client, {"alice-0": 0.0})
    assert json.loads(annotations(client)[RECORD])["wake"] == "old"
    del client.store[("Pod", "nlp", "alice-0")]
    out = run(client, {}, now=NOW + 60)
    assert out["clusters"][0]["action"] == "keep" and STOP in annotations(client)


def test_a_notebook_and_a_raycluster_of_the_same_name_are_two_targets():
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "alice", "namespace": "nlp", "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
           "spec": {"workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "maxReplicas": 2, "template": {"spec": {
               "containers": [{"name": "w", "image": "ray", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}]}}
    client = fake_cluster(notebook(), ray, pod())
    entries = opted_in(model_of(entry(), {"name": "alice-ray", "namespace": "nlp",
                                          "target": {"kind": "RayCluster", "name": "alice"},
                                          "idle_scale_to_zero": {"after_seconds": 60}}))
    out = run(client, {"alice-0": 0.0}, entries=entries)
    assert [(r["kind"], r["action"]) for r in out["clusters"]] == [("Notebook", "reclaim"), ("RayCluster", "keep")]
    assert client.store[("RayCluster", "nlp", "alice")] == ray


def test_a_stop_annotation_another_manager_also_owns_fails_the_wake_with_a_hint():
    """Server-side apply removes only fields no other manager owns: the engine says so instead of claiming a change."""
    client = fake_cluster(notebook(), pod())
    run(client, {"alice-0": 0.0})
    del client.store[("Pod", "nlp", "alice-0")]
    stored(client)["metadata"]["annotations"][WAKE] = "go"
    real = client.resource

    class KeepsStop:  # the API server's answer when a second manager owns the annotation
        def __init__(self, res):
            self.res = res
            self.get = res.get

        def apply(self, body, field_manager, force=False, dry_run=False):
            kept = stored(client)["metadata"]["annotations"][STOP]
            out = self.res.apply(body, field_manager, force=force, dry_run=dry_run)
            out["metadata"]["annotations"][STOP] = kept
            return out

    client.resource = lambda api_version, kind: KeepsStop(real(api_version, kind)) if kind == "Notebook" else real(api_version, kind)
    with pytest.raises(GpuaasError) as info:
        run(client, {}, now=NOW + 60)
    assert "metadata.annotations.kubeflow-resource-stopped stayed after the apply" in str(info.value)
    assert "kubectl annotate" in info.value.hint


def test_the_decision_never_reads_the_pods_of_a_stopped_workbench():
    [(tenant, auto)] = opted_in(model_of(entry()))
    targets, problems, _warnings = nr.resolve_targets([(tenant, auto)], {("nlp", "alice"): notebook()}, 5)
    assert not problems
    stopped = notebook(annotations={STOP: iso(NOW), RECORD: json.dumps({"stopped": iso(NOW)})})
    # a pod still terminating after the stop, busy or idle, changes nothing
    assert nr.decide(targets[0], stopped, [pod()], {"alice-0": 0.0}, NOW + 60).action == "keep"
