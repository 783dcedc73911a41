# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kueue modules against the lab: create, re-run changed=0, check mode writes nothing (audit log), diff, update,
delete; kueue_info; the two-queue playbook of the issue. Everything is prefixed ``itcore-`` and removed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import audit_events_after

FILES = Path(__file__).parent / "files" / "kueue"
PREFIX = "itcore-"
NS = PREFIX + "ns"
KUEUE_KINDS = ("LocalQueue", "ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass")


def play(*tasks: dict) -> str:
    return yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "module_defaults": {"group/gpuaas.platform.k8s": {"context": "lab-admin"}},
        "tasks": list(tasks),
    }], sort_keys=False)


def task(name: str, module: str, args: dict) -> dict:
    return {"name": name, "gpuaas.platform.%s" % module: args}


def only_result(run, name):
    results = run.task_results(name)
    assert len(results) == 1, run.explain()
    return results[0]


def mine(events):
    """Audit events about this module's objects (other tests run in parallel as the same admin user)."""
    return [e for e in events if PREFIX in e.get("requestURI", "")]


def kueue_resource(kube, lab, kind):
    return kube.resources.get(api_version="kueue.x-k8s.io/%s" % lab.kueue_api, kind=kind)


def cleanup(kube, lab):
    for kind in KUEUE_KINDS:
        res = kueue_resource(kube, lab, kind)
        for item in res.get().items:
            if item.metadata.name.startswith(PREFIX) or (item.metadata.namespace or "").startswith(PREFIX):
                try:
                    res.delete(name=item.metadata.name, namespace=item.metadata.namespace)
                except Exception:  # noqa: BLE001 - already gone
                    pass


def wait_namespace_gone(ns_resource, name, timeout=300):
    """A namespace left terminating by an earlier run must be gone before it can be created again."""
    import time

    from kubernetes.dynamic.exceptions import NotFoundError

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            obj = ns_resource.get(name=name)
        except NotFoundError:
            return
        if not obj.metadata.deletionTimestamp:
            return
        time.sleep(2)
    raise AssertionError("namespace %s is still terminating after %ss" % (name, timeout))


@pytest.fixture(scope="module")
def namespace(kube, lab):
    ns = kube.resources.get(api_version="v1", kind="Namespace")
    wait_namespace_gone(ns, NS)
    # gpuaas.io/tenant: Kueue, as the collection configures it, manages jobs only in tenant namespaces (issue 11)
    ns.server_side_apply(body={"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": NS, "labels": {"gpuaas.io/tenant": NS}}},
                         field_manager="itcore-setup")
    yield NS
    cleanup(kube, lab)
    ns.delete(name=NS)


@pytest.fixture
def clean(kube, lab, namespace):
    cleanup(kube, lab)
    yield
    cleanup(kube, lab)


FLAVOR = {"name": PREFIX + "h100", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
CQ = {"name": PREFIX + "cq", "cohort": PREFIX + "cohort", "namespace_selector": {},
      "resource_groups": [{"covered_resources": ["nvidia.com/gpu", "cpu", "memory"], "flavors": [
          {"name": PREFIX + "h100", "resources": [
              {"name": "nvidia.com/gpu", "nominal_quota": 8, "borrowing_limit": 8, "lending_limit": 4},
              {"name": "cpu", "nominal_quota": 96},
              {"name": "memory", "nominal_quota": "1Ti"}]}]}],
      "preemption": {"reclaim_within_cohort": "Any", "within_cluster_queue": "LowerPriority"},
      "flavor_fungibility": {"when_can_borrow": "MayStopSearch", "when_can_preempt": "TryNextFlavor"},
      "fair_sharing_weight": 1}

# module, kind, create args, update args, (path in the live object, expected value after update)
CASES = [
    ("resource_flavor", "ResourceFlavor", FLAVOR,
     dict(FLAVOR, node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "training"}),
     (("spec", "nodeLabels", "pool"), "training")),
    ("cohort", "Cohort", {"name": PREFIX + "cohort"},
     {"name": PREFIX + "cohort", "parent": PREFIX + "root"}, (("spec", "parentName"), PREFIX + "root")),
    ("cluster_queue", "ClusterQueue", CQ, dict(CQ, stop_policy="Hold"), (("spec", "stopPolicy"), "Hold")),
    ("local_queue", "LocalQueue", {"name": PREFIX + "lq", "namespace": NS, "cluster_queue": PREFIX + "cq"},
     {"name": PREFIX + "lq", "namespace": NS, "cluster_queue": PREFIX + "cq", "stop_policy": "Hold"},
     (("spec", "stopPolicy"), "Hold")),
    ("workload_priority_class", "WorkloadPriorityClass", {"name": PREFIX + "prod", "value": 1000},
     {"name": PREFIX + "prod", "value": 2000, "description": "production"}, (("value",), 2000)),
]


def dig(obj, path):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


@pytest.mark.parametrize("module,kind,create,update,check", CASES, ids=[c[0] for c in CASES])
def test_module_lifecycle(lab, kube, clean, run_playbook, audit_writes, module, kind, create, update, check):
    ident = {"name": create["name"]}
    if "namespace" in create:
        ident["namespace"] = create["namespace"]
    res = kueue_resource(kube, lab, kind)

    # check mode on a missing object: reported as created, nothing written, dry run reached the server
    with audit_writes() as audit:
        dry = run_playbook(play(task("create", module, create)), check=True, diff=True)
    assert dry.rc == 0, dry.explain()
    assert dry.changed == 1
    assert mine(audit.events) == [], audit.describe()
    assert mine(audit.dry_run_events), "check mode must dry-run on the server"
    assert only_result(dry, "create")["created"][0]["name"] == create["name"]

    # create
    first = run_playbook(play(task("create", module, create)))
    assert first.rc == 0, first.explain()
    assert first.changed == 1
    result = only_result(first, "create")
    assert result["api_versions"] == {"kueue.x-k8s.io": lab.kueue_api}
    live = res.get(**ident).to_dict()
    assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"

    # idempotent, and no write at all on the re-run
    with audit_writes() as audit:
        second = run_playbook(play(task("create", module, create)))
    assert second.rc == 0, second.explain()
    assert second.changed == 0, json.dumps(only_result(second, "create"), indent=1)
    assert mine(audit.events) == [] and mine(audit.dry_run_events) == [], audit.describe()

    # check mode + diff of an update: shows the change, writes nothing
    with audit_writes() as audit:
        dry = run_playbook(play(task("update", module, update)), check=True, diff=True)
    assert dry.rc == 0, dry.explain()
    assert dry.changed == 1
    assert mine(audit.events) == [], audit.describe()
    diff = only_result(dry, "update")["diff"][0]
    path, value = check
    assert dig(diff["after"], path) == value
    assert dig(diff["before"], path) != value
    assert dig(res.get(**ident).to_dict(), path) != value  # not written

    # update for real
    upd = run_playbook(play(task("update", module, update)))
    assert upd.rc == 0, upd.explain()
    assert upd.changed == 1
    assert dig(res.get(**ident).to_dict(), path) == value
    assert run_playbook(play(task("update", module, update))).changed == 0

    # delete, check mode first
    absent = dict(ident, state="absent")
    with audit_writes() as audit:
        dry = run_playbook(play(task("delete", module, absent)), check=True)
    assert dry.rc == 0 and dry.changed == 1, dry.explain()
    assert mine(audit.events) == [], audit.describe()
    assert res.get(**ident) is not None
    gone = run_playbook(play(task("delete", module, dict(absent, wait=True, wait_timeout=60))))
    assert gone.rc == 0 and gone.changed == 1, gone.explain()
    assert not [i for i in res.get(namespace=ident.get("namespace")).items if i.metadata.name == create["name"]]
    assert run_playbook(play(task("delete", module, absent))).changed == 0


def test_validation_error_is_explained_and_nothing_is_sent(lab, clean, run_playbook, audit_writes):
    bad = dict(CQ, cohort=None)
    with audit_writes() as audit:
        run = run_playbook(play(task("bad queue", "cluster_queue", bad)))
    assert run.rc != 0
    result = only_result(run, "bad queue")
    assert "borrowing_limit is set but the ClusterQueue has no cohort" in result["msg"]
    assert mine(audit.events) == [] and mine(audit.dry_run_events) == []


def test_api_server_rejection_names_the_object(lab, clean, run_playbook):
    # the builders cannot know that the namespace is missing: the API server says so, the module explains it
    run = run_playbook(play(task("orphan", "local_queue", {"name": PREFIX + "lq", "namespace": PREFIX + "missing",
                                                           "cluster_queue": PREFIX + "cq"})))
    assert run.rc != 0
    result = only_result(run, "orphan")
    assert "LocalQueue %smissing/%slq" % (PREFIX, PREFIX) in result["msg"]
    assert "namespace" in result["hint"]


def test_two_queue_setup_converges_idempotent_and_check_mode_diff_writes_nothing(lab, kube, clean, run_playbook,
                                                                                 audit_writes):
    playbook = FILES / "two_queues.yml"
    extra = {"name_prefix": PREFIX, "queue_namespace": NS}
    first = run_playbook(playbook, extra_vars=extra)
    assert first.rc == 0, first.explain()
    assert first.changed == 8  # 2 flavors, 1 cohort, 2 ClusterQueues, 2 LocalQueues, 1 priority class
    with audit_writes() as audit:
        second = run_playbook(playbook, extra_vars=extra)
    assert second.rc == 0 and second.changed == 0, second.explain()
    assert mine(audit.events) == []

    changed = dict(extra, gpus_a=16)
    with audit_writes() as audit:
        dry = run_playbook(playbook, extra_vars=changed, check=True, diff=True)
    assert dry.rc == 0 and dry.changed == 1, dry.explain()
    assert mine(audit.events) == [], audit.describe()
    assert mine(audit.dry_run_events)
    assert "nominalQuota" in dry.stdout

    info = run_playbook(play(task("info", "kueue_info", {"cohort": PREFIX + "research"})))
    assert info.rc == 0, info.explain()
    report = only_result(info, "info")
    assert report["api_version"] == lab.kueue_api
    queues = {q["name"]: q for q in report["cluster_queues"]}
    assert sorted(queues) == [PREFIX + "team-a", PREFIX + "team-b"]
    gpu = queues[PREFIX + "team-a"]["flavors"][0]["resources"][0]
    assert gpu["name"] == "nvidia.com/gpu" and str(gpu["nominal_quota"]) == "8"
    assert queues[PREFIX + "team-a"]["local_queues"] == ["%s/%steam-a" % (NS, PREFIX)]
    assert report["cohort_tree"][0]["name"] == PREFIX + "research"
    assert sorted(report["cohort_tree"][0]["cluster_queues"]) == [PREFIX + "team-a", PREFIX + "team-b"]


# -- the v1beta1 path, on the v1beta1 lab (make lab-v1beta1-up: Kueue v0.14 CRDs serving only v1beta1) -------------

def _variant_env():
    # the v1beta1 lab's directory (make integration / make test: GPUAAS_V1BETA1_LAB_DIR), else .lab-v1beta1
    env_file = Path(os.environ.get("GPUAAS_V1BETA1_LAB_DIR") or Path(__file__).resolve().parents[2] / ".lab-v1beta1") / "env"
    values = {}
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                key, value = line[len("export "):].split("=", 1)
                values[key] = value
    return values


def _audit_offset(path):
    return Path(path).stat().st_size


def _audit_writes_since(path, offset):
    return [ev for ev in audit_events_after(path, offset)
            if ev.get("verb") in ("create", "update", "patch", "delete") and PREFIX in ev.get("requestURI", "")]


def test_v1beta1_cluster_gets_converted_objects(run_playbook):
    variant = _variant_env()
    if variant.get("LAB_KUEUE_API") != "v1beta1":
        pytest.skip("the v1beta1 lab is not up (make lab-v1beta1-up)")
    from kubernetes import config, dynamic

    kube = dynamic.DynamicClient(config.new_client_from_config(config_file=variant["KUBECONFIG"], context="lab-admin"))
    ns = kube.resources.get(api_version="v1", kind="Namespace")
    wait_namespace_gone(ns, NS)
    ns.server_side_apply(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                         field_manager="itcore-setup")
    env = {"KUBECONFIG": variant["KUBECONFIG"], "K8S_AUTH_KUBECONFIG": variant["KUBECONFIG"]}
    extra = {"name_prefix": PREFIX, "queue_namespace": NS}
    playbook = FILES / "two_queues.yml"
    try:
        first = run_playbook(playbook, extra_vars=extra, env=env)
        assert first.rc == 0, first.explain()
        assert first.changed == 8
        versions = {r["api_versions"]["kueue.x-k8s.io"] for r in first.task_results("") if "api_versions" in r}
        assert versions == {"v1beta1"}
        cq = kube.resources.get(api_version="kueue.x-k8s.io/v1beta1", kind="ClusterQueue").get(
            name=PREFIX + "team-a").to_dict()
        assert cq["spec"]["cohort"] == PREFIX + "research" and "cohortName" not in cq["spec"]

        offset = _audit_offset(variant["LAB_AUDIT_LOG"])
        second = run_playbook(playbook, extra_vars=extra, env=env)
        assert second.rc == 0 and second.changed == 0, second.explain()
        dry = run_playbook(playbook, extra_vars=dict(extra, gpus_a=16), env=env, check=True, diff=True)
        assert dry.rc == 0 and dry.changed == 1, dry.explain()
        writes = _audit_writes_since(variant["LAB_AUDIT_LOG"], offset)
        assert [e for e in writes if "dryRun=All" not in e["requestURI"]] == []
        assert [e for e in writes if "dryRun=All" in e["requestURI"]]

        info = run_playbook(play(task("info", "kueue_info", {"cohort": PREFIX + "research"})), env=env)
        report = only_result(info, "info")
        assert report["api_version"] == "v1beta1"
        assert sorted(q["cohort"] for q in report["cluster_queues"]) == [PREFIX + "research"] * 2
    finally:
        for kind in KUEUE_KINDS:
            res = kube.resources.get(api_version="kueue.x-k8s.io/v1beta1", kind=kind)
            for item in res.get().items:
                if item.metadata.name.startswith(PREFIX):
                    res.delete(name=item.metadata.name, namespace=item.metadata.namespace)
        ns.delete(name=NS)


def _kueue_controller_running() -> bool:
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(["bash", str(repo / "lab" / "lab.sh"), "component", "kueue", "status"], capture_output=True,
                          text=True, cwd=str(repo), check=False)
    return proc.returncode == 0


def test_kueue_info_reports_live_usage_and_borrowing(lab, kube, clean, run_playbook):
    if lab.kueue_api != "v1beta2" or not _kueue_controller_running():
        pytest.skip("needs the lab's Kueue controller (lab/components/kueue.sh)")
    import time

    converge = run_playbook(FILES / "two_queues.yml", extra_vars={"name_prefix": PREFIX, "queue_namespace": NS})
    assert converge.rc == 0, converge.explain()
    ready = run_playbook(play(task("wait active", "cluster_queue", {
        "name": PREFIX + "team-b", "cohort": PREFIX + "research", "namespace_selector": {}, "wait": True,
        "wait_timeout": 120,
        "resource_groups": [{"covered_resources": ["nvidia.com/gpu", "cpu", "memory"], "flavors": [
            {"name": PREFIX + "h100", "resources": [{"name": "nvidia.com/gpu", "nominal_quota": 8, "lending_limit": 4},
                                                    {"name": "cpu", "nominal_quota": 96},
                                                    {"name": "memory", "nominal_quota": "768Gi"}]}]}]})))
    assert ready.rc == 0 and ready.changed == 0, ready.explain()

    # 2 pods x 5 GPUs = 10 GPUs on a queue with 8 nominal: Kueue admits it by borrowing 2 from team-b
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    jobs.create(namespace=NS, body={
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": PREFIX + "train", "labels": {"kueue.x-k8s.io/queue-name": PREFIX + "team-a"}},
        "spec": {"parallelism": 2, "completions": 2, "suspend": True, "template": {
            # KWOK completes Job pods after 1s unless told otherwise: keep them running during the test
            "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "10m"}},
            "spec": {
                "restartPolicy": "Never",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "train", "image": "busybox", "resources": {
                    "requests": {"nvidia.com/gpu": "5", "cpu": "1", "memory": "1Gi"},
                    "limits": {"nvidia.com/gpu": "5"}}}]}}}})
    try:
        cqs = kueue_resource(kube, lab, "ClusterQueue")
        deadline = time.time() + 120
        usage = {}
        while time.time() < deadline:
            status = cqs.get(name=PREFIX + "team-a").to_dict().get("status") or {}
            usage = {(f["name"], r["name"]): r for f in status.get("flavorsUsage") or [] for r in f["resources"]}
            if usage.get((PREFIX + "h100", "nvidia.com/gpu"), {}).get("total") == "10" and \
                    status.get("admittedWorkloads") == 1:
                break
            time.sleep(2)
        assert usage.get((PREFIX + "h100", "nvidia.com/gpu"), {}).get("total") == "10", status
        assert status.get("admittedWorkloads") == 1, status

        info = run_playbook(play(task("info", "kueue_info", {"cohort": PREFIX + "research"})))
        assert info.rc == 0, info.explain()
        report = only_result(info, "info")
        queues = {q["name"]: q for q in report["cluster_queues"]}
        team_a = queues[PREFIX + "team-a"]
        assert team_a["active"] is True
        assert team_a["admitted_workloads"] == 1
        gpu = next(r for r in team_a["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
        assert (gpu["usage"], gpu["borrowed"], str(gpu["nominal_quota"])) == ("10", "2", "8")
        assert queues[PREFIX + "team-b"]["active"] is True
        lq = next(q for q in report["local_queues"] if q["name"] == PREFIX + "team-a")
        assert lq["admitted_workloads"] == 1 and lq["cluster_queue"] == PREFIX + "team-a"
    finally:
        jobs.delete(name=PREFIX + "train", namespace=NS, body={"propagationPolicy": "Background"})
