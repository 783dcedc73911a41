# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Brownfield (issue 17) on the lab: the tenants run never takes over hand-made objects silently, adopts them on
request, and kueue_import writes an inventory of a hand-built Kueue setup that converges with label changes only
and imports back to itself.

Every object is named ``brown-*`` and removed with kubectl at the end. A full tenants reconcile is cluster-wide:
without gpuaas_tenants_prune (never set here) it only reports other suites' tenants as drift.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
IMPORT_PLAYBOOK = REPO / "playbooks" / "kueue_import.yml"
TENANTS_TASK = "Reconcile the GPU tenancy"
IMPORT_TASK = "Read ResourceFlavors"
PREFIX = "brown-"
SELECTOR_LABEL = "brown.gpuaas.io/test"  # marks the hand-built setup of the import test
KUEUE_KINDS = ("ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue")
MANAGED_BY = "app.kubernetes.io/managed-by"


def kubectl(lab, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def create(lab, *objects: dict) -> None:
    """Hand-made objects: created by kubectl (field manager kubectl-create), without the collection's labels."""
    out = kubectl(lab, "create", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))
    assert out.returncode == 0, out.stderr


def get(lab, resource: str, name: str, namespace: str | None = None) -> dict | None:
    args = ["get", resource, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    out = kubectl(lab, *args)
    return json.loads(out.stdout) if out.returncode == 0 else None


def module_result(run, task: str) -> dict:
    results = run.task_results(task)
    assert len(results) == 1, run.explain()
    return results[0]


def kv(lab) -> str:
    return "kueue.x-k8s.io/%s" % lab.kueue_api


def resource_group(*flavors: tuple) -> dict:
    """(flavor, {resource: {nominalQuota, borrowingLimit, lendingLimit}}) ... as one Kueue resource group."""
    covered: list[str] = []
    for _flavor, resources in flavors:
        covered.extend(r for r in resources if r not in covered)
    return {"coveredResources": covered,
            "flavors": [{"name": f, "resources": [dict({"name": r}, **q) for r, q in res.items()]} for f, res in flavors]}


def tenants_vars(inventory: dict, **extra) -> dict:
    out = {"gpuaas_flavors": [], "gpuaas_cohorts": [], "gpuaas_priorities": [], "gpuaas_tenants": [],
           "gpuaas_tenants_check_capacity": False}  # the lab's GPU nodes are not what these tests are about
    out.update(inventory)
    out.update(extra)
    return out


def cleanup(lab) -> None:
    names = kubectl(lab, "get", "clusterqueues.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,cohorts.kueue.x-k8s.io,"
                    "workloadpriorityclasses.kueue.x-k8s.io,namespaces,clusterroles,clusterrolebindings", "-o", "name")
    doomed = [n for n in names.stdout.split() if n.split("/", 1)[1].startswith(PREFIX)
              or n.split("/", 1)[1].startswith("gpuaas-tenant-" + PREFIX)]
    namespaces = [n for n in doomed if n.startswith("namespace/")]
    for ns in namespaces:  # LocalQueues first: a ClusterQueue with LocalQueues keeps a finalizer
        kubectl(lab, "delete", "localqueues.kueue.x-k8s.io", "--all", "-n", ns.split("/", 1)[1], "--ignore-not-found")
    others = [n for n in doomed if not n.startswith("namespace/")]
    if others:
        kubectl(lab, "delete", "--ignore-not-found", "--wait=false", *others)
    if namespaces:
        kubectl(lab, "delete", "--ignore-not-found", "--wait=false", *namespaces)
    # leave the lab as the other suites expect it: no tenant policy (as test_isolation does)
    kubectl(lab, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "gpuaas-require-kueue-queue",
            "--ignore-not-found")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        left = kubectl(lab, "get", "clusterqueues.kueue.x-k8s.io,namespaces", "-o", "name").stdout.split()
        if not [n for n in left if n.split("/", 1)[1].startswith(PREFIX)]:
            return
        time.sleep(2)


@pytest.fixture(scope="module", autouse=True)
def clean_lab(lab):
    cleanup(lab)
    yield
    cleanup(lab)


# -- (a) the ownership guard ---------------------------------------------------------------------------------------

GUARD_INVENTORY = {
    "gpuaas_flavors": [{"name": PREFIX + "gpu", "node_labels": {"brown.gpuaas.io/pool": "gpu"}}],
    "gpuaas_tenants": [{"name": PREFIX + "a", "namespaces": [PREFIX + "a-ns"],
                        "quotas": [{"flavor": PREFIX + "gpu", "resources": {"nvidia.com/gpu": 2}}]}],
}


def gpu_deployment(name: str, namespace: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "c", "image": "registry.invalid/lab/vllm:1",
                          "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def test_hand_made_objects_fail_the_run_with_nothing_written_until_adopted(lab, run_playbook, audit_writes):
    create(lab,
           {"apiVersion": kv(lab), "kind": "ResourceFlavor", "metadata": {"name": PREFIX + "gpu"},
            "spec": {"nodeLabels": {"brown.gpuaas.io/pool": "gpu"}}},
           {"apiVersion": kv(lab), "kind": "ClusterQueue", "metadata": {"name": PREFIX + "a"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [resource_group(
                (PREFIX + "gpu", {"nvidia.com/gpu": {"nominalQuota": "2"}}))]}},
           # on the platform allow-list only while the GPU Deployment is created: on a lab where a tenants run made the
           # admission policy already, this is how a GPU workload that predates the platform looks
           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PREFIX + "a-ns",
                                                                  "labels": {"gpuaas.io/platform": "brownfield-setup"}}})
    create(lab, gpu_deployment("vllm", PREFIX + "a-ns"))
    unlabelled = kubectl(lab, "label", "namespace", PREFIX + "a-ns", "gpuaas.io/platform-")
    assert unlabelled.returncode == 0, unlabelled.stderr
    extra = tenants_vars(GUARD_INVENTORY)
    for check in (True, False):
        with audit_writes() as audit:
            refused = run_playbook(TENANTS_PLAYBOOK, extra_vars=extra, check=check)
        assert refused.rc != 0, refused.explain()
        failed = module_result(refused, TENANTS_TASK)
        assert failed["msg"].startswith("refusing to take over 3 existing objects that gpuaas.platform does not manage"), failed
        # the creator first; Kueue may have written the ClusterQueue's status already ("kueue (Update, status)")
        problems = sorted(failed["problems"])
        assert len(problems) == 3, problems
        for problem, name in zip(problems, ("ClusterQueue/%sa" % PREFIX, "Namespace/%sa-ns" % PREFIX, "ResourceFlavor/%sgpu" % PREFIX)):
            assert problem.startswith("%s is not managed by gpuaas.platform; field managers: kubectl-create (Update)" % name), problems
        assert "gpuaas_tenants_adopt" in failed["hint"]
        # nothing written: no apply, no dry run, not even the lock
        assert audit.events == [] and audit.dry_run_events == [], audit.describe()
    assert MANAGED_BY not in (get(lab, "clusterqueues.kueue.x-k8s.io", PREFIX + "a")["metadata"].get("labels") or {})

    adopt = ["ClusterQueue/%sa" % PREFIX, "ResourceFlavor/%sgpu" % PREFIX, "Namespace/%sa-ns" % PREFIX]
    preview = run_playbook(TENANTS_PLAYBOOK, extra_vars=dict(extra, gpuaas_tenants_adopt=adopt), check=True)
    assert preview.rc == 0, preview.explain()
    assert sorted(a["name"] for a in module_result(preview, TENANTS_TASK)["adopted"]) == [PREFIX + "a", PREFIX + "a-ns", PREFIX + "gpu"]

    adopted_run = run_playbook(TENANTS_PLAYBOOK, extra_vars=dict(extra, gpuaas_tenants_adopt=adopt))
    assert adopted_run.rc == 0, adopted_run.explain()
    result = module_result(adopted_run, TENANTS_TASK)
    assert sorted((a["kind"], a["name"], a["reason"]) for a in result["adopted"]) == [
        ("ClusterQueue", PREFIX + "a", "adopt list"), ("Namespace", PREFIX + "a-ns", "adopt list"),
        ("ResourceFlavor", PREFIX + "gpu", "adopt list")]
    assert all(a["managers"][0] == "kubectl-create (Update)" for a in result["adopted"]), result["adopted"]
    assert result["adopted_namespace_workloads"] == [
        {"kind": "Deployment", "namespace": PREFIX + "a-ns", "name": "vllm", "resources": ["nvidia.com/gpu"]}]
    assert any("Deployment %sa-ns/vllm" % PREFIX in w and "kueue.x-k8s.io/queue-name" in w
               for w in result.get("warnings", [])), result.get("warnings")
    cq = get(lab, "clusterqueues.kueue.x-k8s.io", PREFIX + "a")
    assert cq["metadata"]["labels"][MANAGED_BY] == "gpuaas.platform"
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"gpuaas.io/tenant": PREFIX + "a"}}

    again = run_playbook(TENANTS_PLAYBOOK, extra_vars=extra)  # owned now: no adopt list needed
    assert again.rc == 0, again.explain()
    assert again.changed == 0, again.explain()
    assert module_result(again, TENANTS_TASK)["adopted"] == []


# -- (b) kueue_import -------------------------------------------------------------------------------------------

def hand_built_setup(lab) -> list[dict]:
    """Several flavors, a cohort tree, ClusterQueues with borrowing and lending limits, LocalQueues."""
    labels = {SELECTOR_LABEL: "import"}

    def meta(name, namespace=None, extra=None):
        out = {"name": name, "labels": dict(labels, **(extra or {}))}
        if namespace:
            out["namespace"] = namespace
        return out

    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    nlp, vision = PREFIX + "nlp", PREFIX + "vision"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(nlp + "-train", extra={"gpuaas.io/tenant": nlp})},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(nlp + "-serve", extra={"gpuaas.io/tenant": nlp})},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(vision)},  # not labelled: must be adopted
        {"apiVersion": kv(lab), "kind": "ResourceFlavor", "metadata": meta(PREFIX + "h100"),
         "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "tolerations": [toleration]}},
        {"apiVersion": kv(lab), "kind": "ResourceFlavor", "metadata": meta(PREFIX + "a100"),
         "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, "tolerations": [toleration]}},
        {"apiVersion": kv(lab), "kind": "ResourceFlavor", "metadata": meta(PREFIX + "cpu"),
         "spec": {"nodeLabels": {"brown.gpuaas.io/pool": "cpu"}}},
        {"apiVersion": kv(lab), "kind": "Cohort", "metadata": meta(PREFIX + "org"), "spec": {}},
        {"apiVersion": kv(lab), "kind": "Cohort", "metadata": meta(PREFIX + "research"), "spec": {"parentName": PREFIX + "org"}},
        {"apiVersion": kv(lab), "kind": "Cohort", "metadata": meta(PREFIX + "serving"), "spec": {"parentName": PREFIX + "org"}},
        {"apiVersion": kv(lab), "kind": "WorkloadPriorityClass", "metadata": meta(PREFIX + "high"), "value": 1000,
         "description": "production inference"},
        {"apiVersion": kv(lab), "kind": "ClusterQueue", "metadata": meta(nlp), "spec": {
            "cohortName": PREFIX + "research", "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": nlp}},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [resource_group(
                (PREFIX + "h100", {"nvidia.com/gpu": {"nominalQuota": "8", "borrowingLimit": "4", "lendingLimit": "2"}}),
                (PREFIX + "a100", {"nvidia.com/gpu": {"nominalQuota": "4"}}))]}},
        {"apiVersion": kv(lab), "kind": "ClusterQueue", "metadata": meta(vision), "spec": {
            "cohortName": PREFIX + "serving", "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": vision}},
            "queueingStrategy": "StrictFIFO",
            "resourceGroups": [resource_group((PREFIX + "cpu", {
                "cpu": {"nominalQuota": "16", "lendingLimit": "8"}, "memory": {"nominalQuota": "64Gi", "borrowingLimit": "32Gi"}}))]}},
        {"apiVersion": kv(lab), "kind": "LocalQueue", "metadata": meta("default", nlp + "-train"), "spec": {"clusterQueue": nlp}},
        {"apiVersion": kv(lab), "kind": "LocalQueue", "metadata": meta("default", nlp + "-serve"), "spec": {"clusterQueue": nlp}},
        {"apiVersion": kv(lab), "kind": "LocalQueue", "metadata": meta("batch", nlp + "-train"), "spec": {"clusterQueue": nlp}},
        {"apiVersion": kv(lab), "kind": "LocalQueue", "metadata": meta("serve", vision), "spec": {"clusterQueue": vision}},
    ]


def kueue_specs(lab) -> dict:
    """spec (or value/description) of every brown-* Kueue object, by (kind, namespace, name)."""
    out = {}
    for kind in KUEUE_KINDS:
        plural = kind.lower() + ("es" if kind.endswith("s") else "s")
        items = json.loads(kubectl(lab, "get", "%s.kueue.x-k8s.io" % plural, "-A", "-o", "json").stdout)["items"]
        for item in items:
            meta = item["metadata"]
            if meta["name"].startswith(PREFIX) or meta.get("namespace", "").startswith(PREFIX):
                body = {k: v for k, v in item.items() if k in ("spec", "value", "description")}
                out[(kind, meta.get("namespace"), meta["name"])] = body
    return out


def run_import(run_playbook, dest: Path) -> tuple[dict, dict]:
    run = run_playbook(IMPORT_PLAYBOOK, extra_vars={"gpuaas_kueue_import_dest": str(dest),
                                                    "gpuaas_kueue_import_label_selector": "%s=import" % SELECTOR_LABEL})
    assert run.rc == 0, run.explain()
    assert run.changed in (0, 1), run.explain()
    return module_result(run, IMPORT_TASK), yaml.safe_load(dest.read_text())


def test_import_of_a_hand_built_setup_converges_with_labels_only_and_round_trips(lab, run_playbook, tmp_path):
    create(lab, *hand_built_setup(lab))
    first, written = run_import(run_playbook, tmp_path / "tenants.yml")
    assert first["import_warnings"] == [], first["import_warnings"]
    inventory = {k: written[k] for k in ("gpuaas_flavors", "gpuaas_cohorts", "gpuaas_priorities", "gpuaas_tenants")}
    assert inventory == first["inventory"]
    nlp, vision = PREFIX + "nlp", PREFIX + "vision"
    assert inventory["gpuaas_cohorts"] == [{"name": PREFIX + "org"}, {"name": PREFIX + "research", "parent": PREFIX + "org"},
                                           {"name": PREFIX + "serving", "parent": PREFIX + "org"}]
    assert [f["name"] for f in inventory["gpuaas_flavors"]] == [PREFIX + "a100", PREFIX + "cpu", PREFIX + "h100"]
    assert inventory["gpuaas_priorities"] == [{"name": PREFIX + "high", "value": 1000, "description": "production inference"}]
    assert inventory["gpuaas_tenants"] == [
        {"name": nlp, "namespaces": [nlp + "-serve", nlp + "-train"], "cohort": PREFIX + "research",
         "quotas": [{"flavor": PREFIX + "h100", "resources": {"nvidia.com/gpu": "8"},
                     "borrowing_limit": {"nvidia.com/gpu": "4"}, "lending_limit": {"nvidia.com/gpu": "2"}},
                    {"flavor": PREFIX + "a100", "resources": {"nvidia.com/gpu": "4"}}],
         "preemption": {"reclaim_within_cohort": "Any", "within_cluster_queue": "LowerPriority"},
         "queues": [{"name": "batch", "namespaces": [nlp + "-train"]}]},
        {"name": vision, "namespaces": [vision], "cohort": PREFIX + "serving", "queueing_strategy": "StrictFIFO",
         "quotas": [{"flavor": PREFIX + "cpu", "resources": {"cpu": "16", "memory": "64Gi"},
                     "borrowing_limit": {"memory": "32Gi"}, "lending_limit": {"cpu": "8"}}],
         "default_queue": False, "queues": [{"name": "serve"}]},
    ]
    # everything hand-made, except the namespaces already labelled for their tenant
    assert sorted(written["gpuaas_tenants_adopt"]) == sorted(
        ["ResourceFlavor/%s" % f for f in (PREFIX + "a100", PREFIX + "cpu", PREFIX + "h100")]
        + ["Cohort/%s" % c for c in (PREFIX + "org", PREFIX + "research", PREFIX + "serving")]
        + ["WorkloadPriorityClass/%shigh" % PREFIX, "ClusterQueue/" + nlp, "ClusterQueue/" + vision,
           "LocalQueue/%s-serve/default" % nlp, "LocalQueue/%s-train/batch" % nlp, "LocalQueue/%s-train/default" % nlp,
           "LocalQueue/%s/serve" % vision, "Namespace/" + vision])

    before = kueue_specs(lab)
    converge = run_playbook(TENANTS_PLAYBOOK, extra_vars=tenants_vars(inventory, gpuaas_tenants_adopt=written["gpuaas_tenants_adopt"]))
    assert converge.rc == 0, converge.explain()
    result = module_result(converge, TENANTS_TASK)
    assert sorted("%s/%s" % (a["kind"], "/".join(p for p in (a.get("namespace"), a["name"]) if p)) for a in result["adopted"]) \
        == sorted(written["gpuaas_tenants_adopt"] + ["Namespace/%s-serve" % nlp, "Namespace/%s-train" % nlp])
    assert not [c for c in result["created"] if c["kind"] in KUEUE_KINDS], result["created"]
    assert kueue_specs(lab) == before  # the Kueue objects changed in their labels only
    for kind, resource, name in (("ClusterQueue", "clusterqueues.kueue.x-k8s.io", nlp), ("Cohort", "cohorts.kueue.x-k8s.io", PREFIX + "org")):
        assert get(lab, resource, name)["metadata"]["labels"][MANAGED_BY] == "gpuaas.platform", kind

    again = run_playbook(TENANTS_PLAYBOOK, extra_vars=tenants_vars(inventory))
    assert again.rc == 0, again.explain()
    assert again.changed == 0, again.explain()

    second, rewritten = run_import(run_playbook, tmp_path / "again.yml")
    assert second["inventory"] == inventory  # import again: the same inventory
    assert second["adopt"] == [] and "gpuaas_tenants_adopt" not in rewritten
    assert second["import_warnings"] == [], second["import_warnings"]
