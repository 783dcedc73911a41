# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants role against the lab, as a new user would try it (issue 5, "Done when").

The example inventory (playbooks/inventory/lab) is converged for real (it is the demo's tenancy and stays);
extra tenants made by these tests are prefixed ``itten-`` and removed again.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import wait_until as _wait_until

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "playbooks" / "inventory" / "lab"
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
OFFBOARD_PLAYBOOK = REPO / "playbooks" / "offboard_tenant.yml"
EXAMPLE = INVENTORY / "group_vars" / "all" / "tenants.yml"
PREFIX = "itten-"
TASK = "Reconcile the GPU tenancy"
MANAGED = "app.kubernetes.io/managed-by=gpuaas.platform,gpuaas.io/component=tenants"


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def kubectl(lab, *args: str, context: str = "lab-admin", check: bool = False, stdin: str | None = None):
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=check, timeout=120, input=stdin)


def wait_until(predicate, timeout: float, what: str, interval: float = 1.0):
    return _wait_until(predicate, timeout, what, interval)  # this file polls every 1.0 s


def example_refs() -> tuple[set, set]:
    """(cluster-scoped names, namespaces) of everything the example inventory manages."""
    inv = example()
    names = {f["name"] for f in inv["gpuaas_flavors"]} | {c["name"] for c in inv["gpuaas_cohorts"]}
    names |= {p["name"] for p in inv["gpuaas_priorities"]}
    names |= {"gpuaas-require-kueue-queue", "gpuaas-tenant-queue-reader", "gpuaas-prometheus"}
    namespaces = set()
    for tenant in inv["gpuaas_tenants"]:
        names |= {tenant["name"], "gpuaas-tenant-%s" % tenant["name"]}
        namespaces |= set(tenant["namespaces"])
    return names, namespaces


def tenancy_writes(events: list[dict]) -> list[dict]:
    """Audit events touching the example tenancy (the lab is shared: other suites write other objects meanwhile)."""
    names, namespaces = example_refs()
    out = []
    for ev in events:
        ref = ev.get("objectRef") or {}
        if ref.get("namespace") in namespaces or (not ref.get("namespace") and ref.get("name") in names | namespaces):
            out.append(ev)
    return out


def module_result(run) -> dict:
    results = run.task_results(TASK)
    assert len(results) == 1, run.explain()
    return results[0]


def owned_versions(kube, lab, tenant: str) -> dict:
    """Per object of ``tenant``: generation, labels and when our field manager last applied it.

    (resourceVersion also moves with status updates by Kueue and KEDA, which are not our changes.)
    """
    out = {}
    kinds = [("v1", "Namespace"), ("kueue.x-k8s.io/%s" % lab.kueue_api, "ClusterQueue"),
             ("kueue.x-k8s.io/%s" % lab.kueue_api, "LocalQueue"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
             ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
             ("keda.sh/v1alpha1", "ScaledObject")]
    for api_version, kind in kinds:
        res = kube.resources.get(api_version=api_version, kind=kind)
        for item in res.get(label_selector="%s,gpuaas.io/tenant=%s" % (MANAGED, tenant)).items:
            applied = [m.time for m in item.metadata.managedFields or []
                       if m.manager == "gpuaas.platform" and m.operation == "Apply"]
            out[(kind, item.metadata.namespace, item.metadata.name)] = (
                item.metadata.generation, json.dumps(dict(item.metadata.labels or {}), sort_keys=True), applied)
    return out


def cleanup_prefixed(kube, lab):
    """Remove every itten- object (queues first, namespaces last) whatever state a failed test left."""
    kinds = [("keda.sh/v1alpha1", "ScaledObject"), ("batch/v1", "Job"),
             ("kueue.x-k8s.io/%s" % lab.kueue_api, "LocalQueue"),
             ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
             ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("kueue.x-k8s.io/%s" % lab.kueue_api, "ClusterQueue")]
    for api_version, kind in kinds:
        res = kube.resources.get(api_version=api_version, kind=kind)
        for item in res.get().items:
            name, ns = item.metadata.name, item.metadata.namespace
            if PREFIX in name or (ns or "").startswith(PREFIX):
                try:
                    res.delete(name=name, namespace=ns, body={"propagationPolicy": "Background"})
                except Exception:  # noqa: BLE001 - already gone
                    pass
    nsres = kube.resources.get(api_version="v1", kind="Namespace")
    for item in nsres.get().items:
        if item.metadata.name.startswith(PREFIX):
            try:
                nsres.delete(name=item.metadata.name)
            except Exception:  # noqa: BLE001
                pass


@pytest.fixture(scope="module")
def converged(run_playbook, kube, lab):
    """The example inventory converged with playbooks/tenants.yml (first run)."""
    cleanup_prefixed(kube, lab)
    # An earlier suite's cleanup (a prune with gpuaas_delete_namespaces) may still be deleting the example's
    # namespaces: nothing can be created in a terminating namespace, so wait (bounded) until they are gone.
    _names, namespaces = example_refs()
    nsres = kube.resources.get(api_version="v1", kind="Namespace")

    def terminating() -> list:
        return [n.metadata.name for n in nsres.get().items
                if n.metadata.name in namespaces and n.metadata.deletionTimestamp]

    wait_until(lambda: not terminating(), 240, "an earlier cleanup to finish deleting the example namespaces", 2.0)
    first = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY)
    assert first.rc == 0, first.explain()
    yield first
    cleanup_prefixed(kube, lab)


# 41 objects of the lab inventory + the policy and binding gpuaas-namespace-labels (issue 22 item 1): the count
# tests/unit/module_utils/test_tenancy_output_unchanged.py also gives the lab inventory
LAB_INVENTORY_OBJECTS = 43


def test_example_inventory_converges_and_second_run_is_noop(converged, run_playbook, kube, lab):
    result = module_result(converged)
    assert result["objects"] == LAB_INVENTORY_OBJECTS
    assert result["capacity"]["h100"] == {"nvidia.com/gpu": "16"}
    cq = kube.resources.get(api_version="kueue.x-k8s.io/%s" % lab.kueue_api, kind="ClusterQueue").get(name="nlp")
    assert cq.spec.namespaceSelector.matchLabels["gpuaas.io/tenant"] == "nlp"
    lq = kube.resources.get(api_version="kueue.x-k8s.io/%s" % lab.kueue_api, kind="LocalQueue").get(
        name="default", namespace="nlp-train")
    assert lq.spec.clusterQueue == "nlp"

    second = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.explain()
    again = module_result(second)
    assert again["summary"] == {"created": 0, "updated": 0, "unchanged": LAB_INVENTORY_OBJECTS, "deleted": 0}
    # nothing to change: LISTs only, not one request per object
    assert again["requests"]["apply"] == 0 and again["requests"]["get"] == 0
    assert again["requests"]["list"] < 20


def test_check_diff_shows_quota_change_and_writes_nothing(converged, run_playbook, audit_writes):
    tenants = example()["gpuaas_tenants"]
    tenants[0]["quotas"][0]["resources"]["nvidia.com/gpu"] = 6
    with audit_writes() as audit:
        run = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_tenants": tenants},
                           check=True, diff=True)
    assert run.rc == 0, run.explain()
    assert tenancy_writes(audit.events) == [], audit.describe()
    assert tenancy_writes(audit.dry_run_events), "check mode must still ask the API server (dry run)"
    result = module_result(run)
    assert result["updated"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "nlp"}]
    (diff,) = result["diff"]
    before = diff["before"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    after = diff["after"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert before["name"] == after["name"] == "nvidia.com/gpu"
    assert (str(before["nominalQuota"]), str(after["nominalQuota"])) == ("8", "6")


def test_broken_inventory_lists_every_mistake_and_changes_nothing(converged, run_playbook, audit_writes):
    inv = example()
    inv["gpuaas_tenants"][0]["quotas"][0]["flavor"] = "h200"                        # unknown flavor
    inv["gpuaas_tenants"][1]["namespaces"] = ["nlp-train", "vision-dev"]           # claimed twice
    inv["gpuaas_tenants"][2]["quotas"][0]["borrowing_limit"] = {"nvidia.com/gpu": 1}
    del inv["gpuaas_tenants"][2]["cohort"]                                          # limit without cohort
    inv["gpuaas_tenants"][1]["quotas"][0]["lending_limit"] = {"nvidia.com/gpu": 9}  # above nominal
    inv["gpuaas_cohorts"].append({"name": "loop", "parent": "loop"})               # cycle
    inv["gpuaas_tenants"].append({"name": PREFIX + "Bad", "namespaces": [PREFIX + "bad"]})  # bad name
    with audit_writes() as audit:
        run = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={
            "gpuaas_tenants": inv["gpuaas_tenants"], "gpuaas_cohorts": inv["gpuaas_cohorts"]})
    assert run.rc != 0
    assert tenancy_writes(audit.events) == [], audit.describe()
    assert not [e for e in audit.events + audit.dry_run_events
                if (e.get("objectRef") or {}).get("name", "").startswith(PREFIX)], audit.describe()
    # the role's one call (the tenancy and its node pools) validates the whole inventory and stops before any write
    (result,) = run.task_results(TASK)
    assert result["failed"] is True and result.get("changed") is False
    assert not run.task_results("Show what the tenancy reconcile did"), "a task after the failed validation ran"
    problems = "\n".join(result["problems"])
    for expected in ("gpuaas_tenants[0].quotas[0].flavor: unknown flavor 'h200'",
                     "gpuaas_tenants[1].namespaces[0]: namespace 'nlp-train' is already claimed by gpuaas_tenants[0] (nlp)",
                     "gpuaas_tenants[2].quotas[0].borrowing_limit: borrowing_limit needs the tenant to be in a cohort",
                     "gpuaas_tenants[1].quotas[0].lending_limit.nvidia.com/gpu: lending limit 9 is above the nominal quota 6",
                     "cohort cycle loop -> loop",
                     "gpuaas_tenants[3].name: 'itten-Bad' is not a DNS-1123 label"):
        assert expected in problems, problems
    assert len(result["problems"]) == 6, problems
    assert "6 problems; nothing was changed" in result["msg"]


def test_tenant_user_can_submit_but_not_change_cluster_queues(converged, lab, kube):
    ns = "nlp-train"
    assert kubectl(lab, "auth", "can-i", "create", "jobs.batch", "-n", ns, context=lab.tenant_context).stdout.strip() == "yes"
    for verb in ("update", "patch", "delete", "create"):
        out = kubectl(lab, "auth", "can-i", verb, "clusterqueues.kueue.x-k8s.io", context=lab.tenant_context)
        assert out.stdout.strip() == "no", (verb, out.stdout, out.stderr)
    assert kubectl(lab, "auth", "can-i", "get", "clusterqueues.kueue.x-k8s.io/nlp",
                   context=lab.tenant_context).stdout.strip() == "yes"
    assert kubectl(lab, "auth", "can-i", "list", "localqueues.kueue.x-k8s.io", "-n", ns,
                   context=lab.tenant_context).stdout.strip() == "yes"
    # really try it as alice: the edit is refused by the API server
    denied = kubectl(lab, "patch", "clusterqueue", "nlp", "--type=merge", "-p", '{"spec":{"stopPolicy":"Hold"}}',
                     context=lab.tenant_context)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    # and submit a GPU job through the queue
    name = PREFIX + "job-" + uuid.uuid4().hex[:5]
    job = gpu_job(name, ns, queue="default")
    created = kubectl(lab, "create", "-f", "-", context=lab.tenant_context, stdin=json.dumps(job))
    try:
        assert created.returncode == 0, created.stderr
    finally:
        kubectl(lab, "delete", "job", name, "-n", ns, "--ignore-not-found", "--wait=false")


def gpu_job(name: str, namespace: str, queue: str | None = None) -> dict:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"suspend": True, "template": {"spec": {
                "restartPolicy": "Never",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "train", "image": "registry.example/train:1",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def gpu_pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "registry.example/x:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_gpu_work_without_queue_is_refused_with_a_helpful_message(converged, run_playbook, lab, kube):
    # 1. A namespace with a `default` LocalQueue: Kueue's LocalQueueDefaulting (GA since 0.17, a mutating webhook
    #    that runs before the policy) puts unlabelled GPU work into that queue, gated until Kueue admits it. Without
    #    Kueue's webhook the policy refuses it. Either way it cannot bypass Kueue.
    ns = "nlp-serve"
    name = PREFIX + uuid.uuid4().hex[:5]
    pod = kubectl(lab, "create", "-f", "-", "-o", "json", context=lab.tenant_context, stdin=json.dumps(gpu_pod(name, ns)))
    kubectl(lab, "delete", "pod", name, "-n", ns, "--ignore-not-found", "--wait=false")
    if pod.returncode == 0:
        created = json.loads(pod.stdout)
        assert created["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") == "default", pod.stdout
        assert {"name": "kueue.x-k8s.io/admission"} in created["spec"].get("schedulingGates", []), pod.stdout
    else:
        assert "must go through Kueue: add the label kueue.x-k8s.io/queue-name: default" in pod.stderr, pod.stderr

    # 2. A tenant without a `default` queue (default_queue: false): nothing defaults the queue, the policy refuses
    #    unlabelled GPU work and says which label to add.
    strict = PREFIX + "strict"
    tenant = extra_tenant(strict, [strict])
    tenant.update({"default_queue": False, "queues": [{"name": "training"}], "access": {"users": ["nlp-team"]}})
    up = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY,
                      extra_vars={"gpuaas_tenants": example()["gpuaas_tenants"] + [tenant]})
    assert up.rc == 0, up.explain()
    for obj in (gpu_job(name, strict), gpu_pod(name, strict)):
        refused = kubectl(lab, "create", "-f", "-", context=lab.tenant_context, stdin=json.dumps(obj))
        assert refused.returncode != 0, "a GPU %s without queue label was admitted" % obj["kind"]
        assert ("denied request: GPU workloads in tenant namespace %s must go through Kueue: add the label "
                "kueue.x-k8s.io/queue-name: training (or another LocalQueue of this namespace: kubectl get localqueues "
                "-n %s) to the %s metadata.labels." % (strict, strict, obj["kind"])) in refused.stderr, refused.stderr
    # with the label it is accepted; CPU-only work needs no queue
    ok = kubectl(lab, "create", "-f", "-", context=lab.tenant_context, stdin=json.dumps(gpu_job(name, strict, "training")))
    assert ok.returncode == 0, ok.stderr
    cpu = gpu_pod(name + "-cpu", strict)
    cpu["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    ok = kubectl(lab, "create", "-f", "-", context=lab.tenant_context, stdin=json.dumps(cpu))
    assert ok.returncode == 0, ok.stderr
    kubectl(lab, "delete", "job", name, "-n", strict, "--ignore-not-found", "--wait=false")
    kubectl(lab, "delete", "pod", name + "-cpu", "-n", strict, "--ignore-not-found", "--wait=false")
    down = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_delete_namespaces": True,
                                                                           "gpuaas_tenants_prune": True})
    assert down.rc == 0, down.explain()
    assert module_result(down)["offboarded"] == [strict]


def extra_tenant(name: str, namespaces: list[str]) -> dict:
    return {"name": name, "namespaces": namespaces, "cohort": "org",
            "quotas": [{"flavor": "cpu", "resources": {"cpu": 4, "memory": "8Gi"}}],
            "access": {"users": [PREFIX + "team"]}}


def test_removing_a_tenant_drains_and_deletes_it_and_leaves_others_untouched(converged, run_playbook, kube, lab):
    name = PREFIX + "off"
    namespaces = [PREFIX + "off-a", PREFIX + "off-b"]
    tenants = example()["gpuaas_tenants"] + [extra_tenant(name, namespaces)]
    up = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_tenants": tenants})
    assert up.rc == 0, up.explain()
    assert module_result(up)["summary"]["created"] == 9  # 2 Namespaces, ClusterQueue, 2 LocalQueues, 2 RoleBindings, ClusterRole+Binding
    cqs = kube.resources.get(api_version="kueue.x-k8s.io/%s" % lab.kueue_api, kind="ClusterQueue")
    # a running workload in the tenant: Kueue admits it, the drain must evict it before anything is deleted
    job_name = PREFIX + "busy"
    job = gpu_job(job_name, namespaces[0], queue="default")
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    job["spec"]["suspend"] = True
    assert kubectl(lab, "create", "-f", "-", stdin=json.dumps(job)).returncode == 0
    wait_until(lambda: (cqs.get(name=name).status or {}).get("admittedWorkloads", 0) == 1, 90,
               "Kueue to admit the tenant's job")

    others_before = {t: owned_versions(kube, lab, t) for t in ("nlp", "vision", "analytics")}
    # removal by absence is opt-in since issue 11 (safe mode): this test means prune
    down = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_drain_timeout": 120,
                                                                           "gpuaas_tenants_prune": True})
    assert down.rc == 0, down.explain()
    result = module_result(down)
    assert result["offboarded"] == [name]
    deleted = {(d["kind"], d.get("namespace"), d["name"]) for d in result["deleted"]}
    assert ("ClusterQueue", None, name) in deleted
    assert {("LocalQueue", ns, "default") for ns in namespaces} <= deleted
    assert {("RoleBinding", ns, "gpuaas-users") for ns in namespaces} <= deleted
    assert result["kept_namespaces"] == sorted(namespaces)
    wait_until(lambda: not [c for c in cqs.get().items if c.metadata.name == name], 60, "the ClusterQueue to be gone")
    # namespaces stay (gpuaas_delete_namespaces is false) ...
    nsres = kube.resources.get(api_version="v1", kind="Namespace")
    assert all(nsres.get(name=ns).status.phase == "Active" for ns in namespaces)
    # ... and other tenants' objects were not touched at all
    others_after = {t: owned_versions(kube, lab, t) for t in ("nlp", "vision", "analytics")}
    assert others_after == others_before
    assert second_run_noop(run_playbook)


def second_run_noop(run_playbook) -> bool:
    again = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY)
    assert again.rc == 0 and again.changed == 0, again.explain()
    return True


def test_offboard_playbook_deletes_namespaces_on_request(converged, run_playbook, kube, lab):
    name = PREFIX + "gone"
    namespaces = [PREFIX + "gone-a"]
    tenants = example()["gpuaas_tenants"] + [extra_tenant(name, namespaces)]
    up = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_tenants": tenants})
    assert up.rc == 0, up.explain()
    down = run_playbook(OFFBOARD_PLAYBOOK, inventory=INVENTORY,
                        extra_vars={"tenant_name": name, "delete_namespaces": True, "drain_timeout": 60,
                                    "gpuaas_tenants": tenants})
    assert down.rc == 0, down.explain()
    result = module_result(down)
    assert result["offboarded"] == [name]
    assert ("Namespace", namespaces[0]) in {(d["kind"], d["name"]) for d in result["deleted"]}
    assert result["tenants"] == {}
    nsres = kube.resources.get(api_version="v1", kind="Namespace")
    wait_until(lambda: not [n for n in nsres.get().items if n.metadata.name == namespaces[0]], 120,
               "the namespace to be deleted")


def test_moving_a_namespace_recreates_its_local_queue(converged, run_playbook, kube, lab):
    a, b = PREFIX + "mv-a", PREFIX + "mv-b"
    ns = PREFIX + "mv-shared"
    base = example()["gpuaas_tenants"]
    first = base + [extra_tenant(a, [ns, PREFIX + "mv-a1"]), extra_tenant(b, [PREFIX + "mv-b1"])]
    moved = base + [extra_tenant(a, [PREFIX + "mv-a1"]), extra_tenant(b, [PREFIX + "mv-b1", ns])]
    setup = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_tenants": first})
    assert setup.rc == 0, setup.explain()
    run = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_tenants": moved})
    assert run.rc == 0, run.explain()
    assert module_result(run)["recreated_local_queues"] == ["%s/default" % ns]
    lq = kube.resources.get(api_version="kueue.x-k8s.io/%s" % lab.kueue_api, kind="LocalQueue").get(
        name="default", namespace=ns)
    assert lq.spec.clusterQueue == b
    assert kube.resources.get(api_version="v1", kind="Namespace").get(name=ns).metadata.labels["gpuaas.io/tenant"] == b
    back = run_playbook(TENANTS_PLAYBOOK, inventory=INVENTORY, extra_vars={"gpuaas_delete_namespaces": True,
                                                                           "gpuaas_tenants_prune": True})
    assert back.rc == 0, back.explain()
    assert sorted(module_result(back)["offboarded"]) == [a, b]
