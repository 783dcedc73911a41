# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MultiKueue fleet on two labs (issue 27): the manager is the lab of LAB_DIR, the worker the lab of
GPUAAS_WORKER_LAB_DIR (``make lab-worker-up``: its own ports). Both run the real kube-apiserver and the real Kueue
(v0.19.2, MultiKueue beta and on by default); the worker's pods run on KWOK nodes.

Every fleet write goes through the collection's entry point: ``playbooks/multicluster.yml`` (the tenants role, the
tenants module with ``clusters`` = gpuaas_clusters, reconcile/fleet_runner.py), as an admin runs it.
"""
from __future__ import annotations

import base64
import json
import os
import statistics
import subprocess
import time
import uuid
from datetime import datetime, timezone

import pytest
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO, _audit_window_factory, wait_until  # pylint: disable=import-error

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue

WORKER_LAB_DIR = os.environ.get("GPUAAS_WORKER_LAB_DIR")
pytestmark = pytest.mark.skipif(not WORKER_LAB_DIR, reason="needs a worker lab beside the manager lab: "
                                                           "GPUAAS_WORKER_LAB_DIR=<its LAB_DIR> (docs/multicluster.md)")
PLAYBOOK = REPO / "playbooks" / "multicluster.yml"
OFFBOARD = REPO / "playbooks" / "offboard_tenant.yml"
TASK = "Reconcile the GPU tenancy"
TENANT, OTHER = "mk-vision", "mk-nlp"
FLAVOR = "mk-h100"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LEASE = ("kube-system", "gpuaas-tenants")
# the worker lab's two H100 KWOK nodes (lab/topology.yaml)
CAPACITY = {"nvidia.com/gpu": 16, "cpu": 448, "memory": "4Ti"}
# Jobs dispatched by the suite (one after the other); the ≥ 20-job figures come from bench/multicluster/dispatch.py.
LATENCY_JOBS = int(os.environ.get("GPUAAS_MK_LATENCY_JOBS", "3"))


def fleet_vars(lab, worker_lab, gpus=4, tenants=None, extra_workers=(), **extra):
    """The inventory of the fleet, as extra vars of playbooks/multicluster.yml."""
    tenants = tenants if tenants is not None else [
        {"name": TENANT, "namespaces": [TENANT], "access": {"admins": ["user:alice"]},
         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": gpus, "cpu": 16, "memory": "64Gi"}}]},
        {"name": OTHER, "namespaces": [OTHER],
         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 4, "cpu": 16, "memory": "64Gi"}}]}]
    out = {
        "gpuaas_platform": "kubernetes",
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_tenants": tenants,
        "gpuaas_clusters": {
            "manager": {"name": "lab-manager", "auth": {"kubeconfig": lab.kubeconfig, "context": lab.admin_context}},
            "workers": [{"name": "lab-worker1", "api_server": worker_lab.apiserver,
                         "auth": {"kubeconfig": worker_lab.kubeconfig, "context": worker_lab.admin_context},
                         "flavors": [{"name": FLAVOR, "capacity": CAPACITY}]}] + list(extra_workers)},
    }
    out.update(extra)
    return out


def module_result(run):
    results = run.task_results(TASK)
    assert len(results) == 1, run.explain()
    return results[0]


def writes(events):
    """Writes other than the run lock's Lease."""
    return [e for e in events if not ((e.get("objectRef") or {}).get("resource") == "leases"
                                      and ((e["objectRef"].get("namespace"), e["objectRef"].get("name")) == LEASE))]


def _condition(kube, kind, name, ctype="Active"):
    try:
        obj = kube.resources.get(api_version=multikueue.KUEUE_V, kind=kind).get(name=name).to_dict()
    except NotFoundError:
        return None
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return cond
    return None


@pytest.fixture(scope="module")
def fleet(lab, worker_lab, kube, worker_kube, run_playbook):
    first = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab))
    assert first.rc == 0, first.explain()
    yield {"first": module_result(first)}
    # Leave both labs as found: a ClusterQueue still carrying the MultiKueue check would be inactive (and fail the
    # validate suites) once the worker lab is gone.
    model = TenantModel.from_inventory(fleet_vars(lab, worker_lab))
    manager_objs = multikueue.manager_objects(model)
    manager_objs += [{"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": multikueue.kubeconfig_secret_name(w), "namespace": "kueue-system"}} for w in model.fleet.workers]
    worker_objs = [o for w in model.fleet.workers
                   for o in multikueue.worker_objects(model, w, frameworks=multikueue.MULTIKUEUE_FRAMEWORKS)]
    for client, objs in ((kube, manager_objs), (worker_kube, worker_objs)):
        _cleanup(client, objs)


def _cleanup(client, objs):
    """Delete ``objs`` from ``client``'s cluster, last first, whatever is already gone."""
    for obj in reversed(objs):
        meta = obj["metadata"]
        try:
            client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).delete(
                name=meta["name"], namespace=meta.get("namespace"))
        except NotFoundError:
            pass


def test_one_playbook_run_connects_the_fleet(fleet, kube, worker_kube):
    result = fleet["first"]
    assert set(result["clusters"]) == {"lab-manager", "lab-worker1"}
    cond = wait_until(lambda: (_condition(kube, "MultiKueueCluster", "lab-worker1") or {}).get("status") == "True"
                      and _condition(kube, "MultiKueueCluster", "lab-worker1"), 90, "MultiKueueCluster Active")
    assert cond["reason"] == "Active", cond
    assert wait_until(lambda: (_condition(kube, "AdmissionCheck", multikueue.ADMISSION_CHECK_NAME) or {}).get("status")
                      == "True", 60, "the AdmissionCheck Active")
    assert wait_until(lambda: (_condition(kube, "ClusterQueue", TENANT) or {}).get("status") == "True", 60,
                      "the manager's ClusterQueue Active")
    # the only worker holds the tenant's whole share (4 GPUs), without the check (it runs what it admits)
    cq = worker_kube.resources.get(api_version=multikueue.KUEUE_V, kind="ClusterQueue").get(name=TENANT).to_dict()
    assert "admissionChecksStrategy" not in cq["spec"]
    gpu = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert (gpu["name"], str(gpu["nominalQuota"])) == ("nvidia.com/gpu", "4"), gpu


def test_check_mode_with_diff_then_a_second_run_change_nothing_anywhere(
        fleet, lab, worker_lab, run_playbook, audit_writes):
    worker_audit = _audit_window_factory(worker_lab)
    with audit_writes() as manager_events, worker_audit() as worker_events:
        check = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab), check=True, diff=True)
        again = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab))
    assert check.rc == 0 and again.rc == 0, check.explain() + again.explain()
    for run in (check, again):
        result = module_result(run)
        assert result["changed"] is False, result["summary"]
        assert {k: v["changed"] for k, v in result["clusters"].items()} == {"lab-manager": False,
                                                                            "lab-worker1": False}
    assert writes(manager_events.events) == [] and writes(worker_events.events) == [], \
        (manager_events.describe(), worker_events.describe())
    # the kubeconfig Secret's data never shows: masked by the module's no_log values or redacted in diffs
    assert "certificate-authority-data" not in check.stdout


def test_check_mode_previews_a_quota_change_on_every_cluster_with_diff(fleet, lab, worker_lab, run_playbook):
    check = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, gpus=6), check=True, diff=True)
    result = module_result(check)
    assert check.rc == 0 and result["changed"] is True, check.explain()
    updated = {(r["cluster"], r["kind"], r["name"]) for r in result["updated"]}
    assert {("lab-manager", "ClusterQueue", TENANT), ("lab-worker1", "ClusterQueue", TENANT)} <= updated, updated
    headers = {d["after_header"].split(":")[0] for d in result["diff"]}
    assert headers == {"lab-manager", "lab-worker1"}, headers


def _job(name, namespace=TENANT, queue="default"):
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"},
                                              "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def test_a_tenant_job_submitted_on_the_manager_runs_on_the_worker(fleet, kube, worker_kube):
    wait_until(lambda: (_condition(kube, "ClusterQueue", TENANT) or {}).get("status") == "True", 90, "CQ Active")
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    worker_jobs = worker_kube.resources.get(api_version="batch/v1", kind="Job")
    latencies = []
    for _index in range(LATENCY_JOBS):
        name = "mk-%s" % uuid.uuid4().hex[:8]
        start = time.monotonic()
        jobs.create(body=_job(name), namespace=TENANT)

        def remote(job=name):
            try:
                return worker_jobs.get(name=job, namespace=TENANT).to_dict()
            except NotFoundError:  # until MultiKueue copies the Job
                return None
        remote_job = wait_until(remote, 60, "the copy of %s on the worker" % name, interval=0.05)
        latencies.append(time.monotonic() - start)
        # the copy is MultiKueue's (its origin label) and its pod is the worker's (KWOK), never the manager's
        assert remote_job["metadata"]["labels"].get("kueue.x-k8s.io/multikueue-origin"), remote_job["metadata"]
        local = jobs.get(name=name, namespace=TENANT).to_dict()
        assert local["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue", local["spec"]
        # the status flows back: the manager's Job completes when the worker's does
        wait_until(lambda job=name: (jobs.get(name=job, namespace=TENANT).to_dict().get("status") or {}).get(
            "succeeded"), 90, "%s succeeded on the manager" % name)
        pods = kube.resources.get(api_version="v1", kind="Pod").get(
            namespace=TENANT, label_selector="job-name=%s" % name).items
        assert not pods, "a dispatched Job must not run pods on the manager"
    median, worst = statistics.median(latencies), max(latencies)
    print("dispatch latency n=%d: p50 %.2fs max %.2fs" % (len(latencies), median, worst))


def _as_service_account(worker_lab, token):
    from kubernetes import client, dynamic  # pylint: disable=import-outside-toplevel

    configuration = client.Configuration()
    configuration.host = worker_lab.apiserver
    configuration.ssl_ca_cert = worker_lab.ca
    configuration.api_key = {"authorization": "Bearer %s" % token}
    return dynamic.DynamicClient(client.ApiClient(configuration))


def _worker_token(kube):
    secret = kube.resources.get(api_version="v1", kind="Secret").get(
        name="gpuaas-multikueue-lab-worker1", namespace="kueue-system").to_dict()
    kubeconfig = json.loads(base64.b64decode(secret["data"]["kubeconfig"]))
    return kubeconfig["users"][0]["user"]["token"]


def test_the_worker_credential_cannot_write_outside_the_tenants_namespaces(fleet, kube, worker_lab):
    """Adversarial: with the token the manager holds for the worker, write where MultiKueue never writes."""
    from kubernetes.dynamic.exceptions import ForbiddenError  # pylint: disable=import-outside-toplevel

    sa = _as_service_account(worker_lab, _worker_token(kube))
    sa_jobs = sa.resources.get(api_version="batch/v1", kind="Job")
    for namespace in ("kube-system", "default", "kueue-system"):
        with pytest.raises(ForbiddenError):
            sa_jobs.create(body=dict(_job("escape"), metadata={"name": "escape", "namespace": namespace}),
                           namespace=namespace, query_params=[("dryRun", "All")])
    with pytest.raises(ForbiddenError):
        sa.resources.get(api_version="v1", kind="Secret").get(namespace="kueue-system")
    with pytest.raises(ForbiddenError):
        sa.resources.get(api_version="v1", kind="ConfigMap").get(namespace=TENANT)
    # what MultiKueue does is allowed: create a Job in the tenant's namespace (dry run), list Workloads everywhere
    sa_jobs.create(body=_job("allowed"), namespace=TENANT, query_params=[("dryRun", "All")])
    sa.resources.get(api_version=multikueue.KUEUE_V, kind="Workload").get()


def _review(worker_lab, token):
    """Who the worker's API server says ``token`` is (SelfSubjectReview); raises UnauthorizedError for a dead one."""
    review = _as_service_account(worker_lab, token).resources.get(
        api_version="authentication.k8s.io/v1", kind="SelfSubjectReview").create(
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return review.to_dict()["status"]["userInfo"]["username"]


def _bound(workers, lifetime):
    return [dict(w, token_expiration_seconds=lifetime) for w in workers]


def test_a_bound_token_replaces_the_long_lived_one_and_is_kept_until_half_its_life(
        fleet, lab, worker_lab, kube, worker_kube, run_playbook, audit_writes):
    """token_expiration_seconds on the worker: the run asks the worker's API server for a token of that lifetime
    (TokenRequest) and gives it to MultiKueue; the long-lived token Secret is deleted, and its token is refused from
    then on (tried against the worker as that credential); MultiKueue stays connected; a second run keeps the token
    and writes nothing. Then the worker goes back to the long-lived token for the tests after this one."""
    from kubernetes.dynamic.exceptions import UnauthorizedError  # pylint: disable=import-outside-toplevel

    lifetime = 900
    plain = fleet_vars(lab, worker_lab)
    bound = dict(plain, gpuaas_clusters=dict(plain["gpuaas_clusters"],
                                             workers=_bound(plain["gpuaas_clusters"]["workers"], lifetime)))
    long_lived = _worker_token(kube)
    assert _review(worker_lab, long_lived) == "system:serviceaccount:kueue-system:gpuaas-multikueue"
    try:
        started = time.time()
        run = run_playbook(PLAYBOOK, extra_vars=bound)
        assert run.rc == 0, run.explain()
        token = _worker_token(kube)
        claims = multikueue.token_claims(token)
        assert token != long_lived and claims["exp"] - claims["iat"] == lifetime, claims
        assert started - 5 <= claims["iat"] <= time.time() + 5, claims
        account = worker_kube.resources.get(api_version="v1", kind="ServiceAccount").get(
            name="gpuaas-multikueue", namespace="kueue-system").to_dict()
        assert claims["kubernetes.io"]["serviceaccount"]["uid"] == account["metadata"]["uid"]
        assert _review(worker_lab, token) == "system:serviceaccount:kueue-system:gpuaas-multikueue"
        with pytest.raises(NotFoundError):
            worker_kube.resources.get(api_version="v1", kind="Secret").get(
                name="gpuaas-multikueue-token", namespace="kueue-system")
        # the revoked long-lived token: the worker's API server refuses it (its Secret is gone)
        wait_until(lambda: _refused(worker_lab, long_lived, UnauthorizedError), 30, "the old token to be refused")
        assert wait_until(lambda: (_condition(kube, "MultiKueueCluster", "lab-worker1") or {}).get("status") == "True",
                          90, "MultiKueueCluster Active with the bound token")
        with audit_writes() as manager_events:
            again = run_playbook(PLAYBOOK, extra_vars=bound)
        assert again.rc == 0 and module_result(again)["changed"] is False, again.explain()
        assert _worker_token(kube) == token and writes(manager_events.events) == [], manager_events.describe()
    finally:
        back = run_playbook(PLAYBOOK, extra_vars=plain)
        assert back.rc == 0, back.explain()
    assert _review(worker_lab, _worker_token(kube)) == "system:serviceaccount:kueue-system:gpuaas-multikueue"
    assert wait_until(lambda: (_condition(kube, "MultiKueueCluster", "lab-worker1") or {}).get("status") == "True",
                      90, "MultiKueueCluster Active with the long-lived token again")


def _refused(worker_lab, token, error):
    try:
        _review(worker_lab, token)
    except error:
        return True
    return False


def kubectl(lab, *args, context=None, stdin=None):
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context or lab.admin_context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def test_a_tenant_on_the_manager_cannot_reach_another_tenants_queue_or_a_worker(fleet, lab):
    """Adversarial, as alice (admin of mk-vision only, context lab-tenant) on the manager: every way to put work on
    mk-nlp's quota or to talk to a worker directly is refused by the API server (server-side dry runs)."""
    def as_alice(*args, stdin=None):
        return kubectl(lab, *args, "--dry-run=server", context=lab.tenant_context, stdin=stdin)

    def refused(out):
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (out.stdout, out.stderr)

    # a Job in the other tenant's namespace (its LocalQueue, its quota)
    refused(as_alice("create", "-f", "-", stdin=json.dumps(_job("steal", namespace=OTHER))))
    # a LocalQueue of her own pointing at the other tenant's ClusterQueue
    lq = {"apiVersion": multikueue.KUEUE_V, "kind": "LocalQueue", "metadata": {"name": "steal", "namespace": TENANT},
          "spec": {"clusterQueue": OTHER}}
    refused(as_alice("create", "-f", "-", stdin=json.dumps(lq)))
    # her ClusterQueue without the MultiKueue check (run on the manager), or with another tenant's quota
    refused(as_alice("patch", "clusterqueue", TENANT, "--type=merge", "-p",
                     json.dumps({"spec": {"admissionChecksStrategy": None}})))
    # a worker of her own: a MultiKueueCluster, the MultiKueueConfig, a worker's kubeconfig
    mkc = {"apiVersion": multikueue.KUEUE_V, "kind": "MultiKueueCluster", "metadata": {"name": "alice-worker"},
           "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "alice"}}}}
    refused(as_alice("create", "-f", "-", stdin=json.dumps(mkc)))
    refused(as_alice("patch", "multikueueconfig", multikueue.CONFIG_NAME, "--type=merge", "-p",
                     json.dumps({"spec": {"clusters": ["alice-worker"]}})))
    refused(kubectl(lab, "get", "secret", "gpuaas-multikueue-lab-worker1", "-n", "kueue-system",
                    context=lab.tenant_context))
    # the control: her own Job on her own queue is admitted by the API server (dry run)
    own = as_alice("create", "-f", "-", stdin=json.dumps(_job("own")))
    assert own.returncode == 0, own.stderr


def test_an_unreachable_worker_stops_the_run_before_any_write_on_any_cluster(fleet, lab, worker_lab, run_playbook,
                                                                             audit_writes):
    gone = {"name": "lab-worker-gone", "api_server": "https://127.0.0.1:1",
            "auth": {"host": "https://127.0.0.1:1", "api_key": "not-a-real-token-0123456789"},
            "flavors": [{"name": FLAVOR, "capacity": CAPACITY}]}
    worker_audit = _audit_window_factory(worker_lab)
    with audit_writes() as manager_events, worker_audit() as worker_events:
        run = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, gpus=6, extra_workers=[gone]))
    assert run.rc != 0, run.explain()
    result = module_result(run)
    assert "nothing was written on any cluster" in result["msg"], result["msg"]
    assert [p for p in result.get("problems") or [] if p.startswith("worker 'lab-worker-gone'")], result
    assert "gpuaas_clusters" in result.get("hint", ""), result
    assert writes(manager_events.events) == [] and writes(worker_events.events) == [], \
        (manager_events.describe(), worker_events.describe())
    assert "not-a-real-token-0123456789" not in run.stdout + run.stderr  # the worker's api_key is masked


def _hold_lease(worker_lab, holder):
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": LEASE[1], "namespace": LEASE[0]},
             "spec": {"holderIdentity": holder, "leaseDurationSeconds": 300, "acquireTime": now, "renewTime": now}}
    out = kubectl(worker_lab, "create", "-f", "-", stdin=json.dumps(lease))
    assert out.returncode == 0, out.stderr


def test_a_run_while_another_run_holds_a_workers_lock_writes_nothing_anywhere(
        fleet, lab, worker_lab, run_playbook, audit_writes):
    """Adversarial: another automation job holds the run lock on the worker (a single-cluster tenants run there, or a
    second fleet run). A fleet run with a change to make waits (bounded), then fails naming the worker and the
    holder, having written nothing on the manager either; the locks it took are given back."""
    _hold_lease(worker_lab, "another-automation-run")
    worker_audit = _audit_window_factory(worker_lab)
    try:
        with audit_writes() as manager_events, worker_audit() as worker_events:
            run = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, gpus=6, gpuaas_tenants_lock_wait=3))
    finally:
        kubectl(worker_lab, "delete", "lease", LEASE[1], "-n", LEASE[0])
    assert run.rc != 0, run.explain()
    msg = module_result(run)["msg"]
    assert msg.startswith("worker 'lab-worker1': another run (holder another-automation-run) holds the lock"), msg
    assert "nothing was written on any cluster" in msg, msg
    assert writes(manager_events.events) == [] and writes(worker_events.events) == [], \
        (manager_events.describe(), worker_events.describe())
    # the manager's lock was given back: the next run proceeds at once (and changes nothing: same inventory as before)
    again = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, gpuaas_tenants_lock_wait=3))
    assert again.rc == 0 and module_result(again)["changed"] is False, again.explain()


def test_two_fleet_runs_at_once_both_finish_and_agree(fleet, lab, worker_lab, run_playbook):
    """Two automation jobs against the same fleet at the same moment: one waits for the other's locks (same order
    on every run: no deadlock), both succeed, the fleet ends as the inventory says."""
    from concurrent.futures import ThreadPoolExecutor  # pylint: disable=import-outside-toplevel

    with ThreadPoolExecutor(max_workers=2) as pool:
        both = fleet_vars(lab, worker_lab, gpus=5, gpuaas_tenants_lock_wait=180)
        runs = [pool.submit(run_playbook, PLAYBOOK, extra_vars=both, timeout=400) for _run in range(2)]
        results = [r.result(timeout=420) for r in runs]
    assert all(r.rc == 0 for r in results), "\n".join(r.explain() for r in results)
    changed = sorted(module_result(r)["changed"] for r in results)
    assert changed == [False, True], changed  # the second saw the first's writes under the lock
    back = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab))
    assert back.rc == 0, back.explain()


def test_offboarding_a_tenant_removes_its_share_on_every_worker(
        fleet, lab, worker_lab, kube, worker_kube, run_playbook):
    extra = fleet_vars(lab, worker_lab)
    extra.update(tenant_name=OTHER, drain_timeout=60)
    run = run_playbook(OFFBOARD, extra_vars=extra)
    assert run.rc == 0, run.explain()
    for name, client in (("manager", kube), ("worker", worker_kube)):
        queues = client.resources.get(api_version=multikueue.KUEUE_V, kind="ClusterQueue")
        with pytest.raises(NotFoundError):
            queues.get(name=OTHER)
        assert queues.get(name=TENANT), name  # the other tenant stays
        bindings = client.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding").get(
            namespace=OTHER, label_selector="gpuaas.io/tenant=%s" % OTHER).items
        assert not bindings, (name, [b.metadata.name for b in bindings])


def _owned(client, av, kind, namespace=None):
    """Names of the objects of ``kind`` carrying the tenancy's or MultiKueue's ownership labels."""
    items = client.resources.get(api_version=av, kind=kind).get(
        namespace=namespace, label_selector="app.kubernetes.io/managed-by=gpuaas.platform,"
                                            "gpuaas.io/component in (tenants,multikueue)").items
    return sorted(i.metadata.name for i in items)


def test_removing_the_worker_waits_for_its_workloads_then_removes_only_what_the_collection_made(
        fleet, lab, worker_lab, kube, worker_kube, run_playbook, audit_writes):
    """Issue 27 "safe operation", on the two labs. The lab worker is retired (state: absent) with
    gpuaas_fleet_prune_workers; the fleet keeps one present worker, unreachable (a closed port), converged around with
    gpuaas_fleet_reachable_only — the only other worker this machine can offer. Adversarial: a Job running on the
    worker refuses the removal with nothing written on either lab; objects of the same kinds or names that the
    collection did not make survive the teardown. Then the inventory as before (the unreachable worker's entry gone)
    with prune_workers removes that worker's MultiKueueCluster and restores the fleet."""
    gone = {"name": "lab-worker-gone", "api_server": "https://127.0.0.1:1",
            "auth": {"host": "https://127.0.0.1:1", "api_key": "not-a-real-token-0123456789"},
            "flavors": [{"name": FLAVOR, "capacity": CAPACITY}]}
    retire = fleet_vars(lab, worker_lab, gpuaas_fleet_prune_workers=True, gpuaas_fleet_reachable_only=True)
    retire["gpuaas_clusters"]["workers"] = [gone, {
        "name": "lab-worker1", "state": "absent",
        "auth": {"kubeconfig": worker_lab.kubeconfig, "context": worker_lab.admin_context}}]
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    name = "mk-hold-%s" % uuid.uuid4().hex[:6]
    job = _job(name)
    # KWOK completes the pod after this delay: the Job runs on the worker for the whole test
    job["spec"]["template"]["metadata"] = {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}}
    wait_until(lambda: (_condition(kube, "ClusterQueue", TENANT) or {}).get("status") == "True", 90, "CQ Active")
    jobs.create(body=job, namespace=TENANT)
    worker_jobs = worker_kube.resources.get(api_version="batch/v1", kind="Job")

    def copied():
        try:
            return worker_jobs.get(name=name, namespace=TENANT)
        except NotFoundError:
            return None
    wait_until(copied, 90, "the copy of %s on the worker" % name)
    worker_audit = _audit_window_factory(worker_lab)
    with audit_writes() as manager_events, worker_audit() as worker_events:
        refused = run_playbook(PLAYBOOK, extra_vars=retire)
    assert refused.rc != 0, refused.explain()
    result = module_result(refused)
    assert result["error_details"]["reason"] == "WorkerNotDrained", result
    assert [p for p in result["problems"] if p.startswith("worker 'lab-worker1' cannot be removed: 1 workload")
            and "%s/job-%s-" % (TENANT, name) in p], result["problems"]
    assert writes(manager_events.events) == [] and writes(worker_events.events) == [], \
        (manager_events.describe(), worker_events.describe())

    # the Job ends (deleted on the manager: MultiKueue deletes its copy), nothing holds the worker any more
    jobs.delete(name=name, namespace=TENANT, body={"propagationPolicy": "Foreground"})
    workloads = kube.resources.get(api_version=multikueue.KUEUE_V, kind="Workload")
    wait_until(lambda: not [w for w in workloads.get(namespace=TENANT).items if name in w.metadata.name], 120,
               "the manager's Workload of %s gone" % name)
    remote = worker_kube.resources.get(api_version=multikueue.KUEUE_V, kind="Workload")
    wait_until(lambda: not remote.get(namespace=TENANT).items, 120, "the worker's copy gone")
    # what the collection did not make: same kinds on the worker, the name a removed worker's Secret would have
    kubectl(worker_lab, "create", "clusterrole", "mk-team-own", "--verb=get", "--resource=pods")
    kubectl(lab, "create", "secret", "generic", "gpuaas-multikueue-lab-worker-gone", "-n", "kueue-system",
            "--from-literal=note=hand-made")
    try:
        removed = run_playbook(PLAYBOOK, extra_vars=retire)
        assert removed.rc == 0, removed.explain()
        result = module_result(removed)
        assert result["workers"]["removed"] == ["lab-worker1"], result["workers"]
        assert list(result["workers"]["skipped"]) == ["lab-worker-gone"], result["workers"]
        config = kube.resources.get(api_version=multikueue.KUEUE_V, kind="MultiKueueConfig").get(
            name=multikueue.CONFIG_NAME).to_dict()
        assert config["spec"]["clusters"] == ["lab-worker-gone"], config["spec"]
        with pytest.raises(NotFoundError):
            kube.resources.get(api_version=multikueue.KUEUE_V, kind="MultiKueueCluster").get(name="lab-worker1")
        secrets = kube.resources.get(api_version="v1", kind="Secret")
        with pytest.raises(NotFoundError):
            secrets.get(name="gpuaas-multikueue-lab-worker1", namespace="kueue-system")
        # on the worker: nothing of the tenancy or of MultiKueue's identity left; namespaces and the rest stay
        for av, kind, ns in (("kueue.x-k8s.io/v1beta2", "ClusterQueue", None),
                             ("kueue.x-k8s.io/v1beta2", "LocalQueue", None),
                             ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", None),
                             ("rbac.authorization.k8s.io/v1", "ClusterRole", None),
                             ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None),
                             ("rbac.authorization.k8s.io/v1", "RoleBinding", None),
                             ("v1", "ServiceAccount", "kueue-system"), ("v1", "Secret", "kueue-system")):
            assert _owned(worker_kube, av, kind, ns) == [], kind
        assert worker_kube.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole").get(
            name="mk-team-own")
        assert worker_kube.resources.get(api_version="v1", kind="Namespace").get(name=TENANT)

        # back to the fleet of the other tests; the unreachable worker's entry is gone: removed (it holds nothing),
        # the hand-made Secret of its name stays
        back = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, gpuaas_fleet_prune_workers=True))
        assert back.rc == 0, back.explain()
        assert module_result(back)["workers"]["removed"] == ["lab-worker-gone"], module_result(back)["workers"]
        with pytest.raises(NotFoundError):
            kube.resources.get(api_version=multikueue.KUEUE_V, kind="MultiKueueCluster").get(name="lab-worker-gone")
        assert kube.resources.get(api_version="v1", kind="Secret").get(
            name="gpuaas-multikueue-lab-worker-gone", namespace="kueue-system").data["note"]
        assert wait_until(lambda: (_condition(kube, "MultiKueueCluster", "lab-worker1") or {}).get("status")
                          == "True", 90, "lab-worker1 connected again")
    finally:
        kubectl(worker_lab, "delete", "clusterrole", "mk-team-own", "--ignore-not-found")
        kubectl(lab, "delete", "secret", "gpuaas-multikueue-lab-worker-gone", "-n", "kueue-system",
                "--ignore-not-found")
