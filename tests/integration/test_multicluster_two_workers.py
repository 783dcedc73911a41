# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MultiKueue fleet of one manager and TWO workers (issue 27, "Done when"): the manager is the lab of LAB_DIR,
worker A the lab of GPUAAS_WORKER_LAB_DIR (``make lab-worker-up``, ports +200), worker B the lab of
GPUAAS_WORKER2_LAB_DIR (``make lab-worker2-up``, ports +250). All three run the real kube-apiserver and the real Kueue
v0.19.2; the workers' pods run on KWOK nodes. Every fleet write goes through ``playbooks/multicluster.yml``.

The tenant's quota is 6 GPUs; both workers declare 16, so each holds a share of 3 (docs/multicluster.md, the quota
model). Every Job asks for 2 GPUs: one Job fills a worker's share, the manager's quota admits three.

1. a Job runs on the worker with free quota; with one worker full the next goes to the other (both directions);
2. worker A's kube-apiserver is killed mid-run (SIGKILL, as a crash): a Workload pending on both workers is admitted
   by B as soon as B has room — it does not wait for A; the Workload admitted on A keeps its admission for Kueue's
   ``workerLostTimeout`` (the manager lab runs 30 s: playbooks/inventory/lab), then is evicted on the manager and
   dispatched to B; A is restarted and its stale copies are removed (the Job never runs twice once A is back);
3. playbooks/rotate_fleet_credentials.yml rotates worker B's token: the old one is refused, B stays connected;
4. a second run of the playbook changes nothing on the manager or either worker (audit logs).

The measured times are printed (``-s``) and recorded in docs/multicluster.md "Failure modes".
"""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import ssl
import time
import urllib.error
import urllib.request
import uuid

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import (REPO, _audit_window_factory, apiserver_cmdline, kwok_job,  # pylint: disable=import-error
                      lab_component, process_gone, start_apiserver, wait_until)
from test_multicluster import _cleanup, _condition, module_result, writes  # pylint: disable=import-error

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue

pytestmark = pytest.mark.skipif(not (os.environ.get("GPUAAS_WORKER_LAB_DIR") and os.environ.get("GPUAAS_WORKER2_LAB_DIR")),
                                reason="needs two worker labs beside the manager lab: GPUAAS_WORKER_LAB_DIR and "
                                       "GPUAAS_WORKER2_LAB_DIR (make lab-worker-up lab-worker2-up; docs/multicluster.md)")
PLAYBOOK = REPO / "playbooks" / "multicluster.yml"
TENANT = "mk2-vision"
FLAVOR = "mk2-h100"
WORKER_A, WORKER_B = "lab-worker-a", "lab-worker-b"
# each worker lab has two H100 KWOK nodes of 8 GPUs (lab/topology.yaml)
CAPACITY = {"nvidia.com/gpu": 16, "cpu": 448, "memory": "4Ti"}
# 6 GPUs over two workers of 16: a share of 3 on each (the split is tested with hand-written values in
# tests/unit/test_multikueue_inventory.py; here the share is read from the worker's ClusterQueue)
QUOTA = {"nvidia.com/gpu": 6, "cpu": 24, "memory": "96Gi"}
JOB = {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1Gi"}
# the role's Kueue Configuration on the manager lab (playbooks/inventory/lab: release gpuaas-kueue)
KUEUE_CONFIGMAP = ("gpuaas-kueue", "gpuaas-kueue-manager-config")


def fleet_vars(lab, worker_lab, worker2_lab, **extra):
    out = {
        "gpuaas_platform": "kubernetes",
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_tenants": [{"name": TENANT, "namespaces": [TENANT],
                            "quotas": [{"flavor": FLAVOR, "resources": dict(QUOTA)}]}],
        "gpuaas_clusters": {
            "manager": {"name": "lab-manager", "auth": {"kubeconfig": lab.kubeconfig, "context": lab.admin_context}},
            "workers": [{"name": name, "api_server": w.apiserver,
                         "auth": {"kubeconfig": w.kubeconfig, "context": w.admin_context},
                         "flavors": [{"name": FLAVOR, "capacity": CAPACITY}]}
                        for name, w in ((WORKER_A, worker_lab), (WORKER_B, worker2_lab))]},
    }
    out.update(extra)
    return out


def _active(kube, name):
    return (_condition(kube, "MultiKueueCluster", name) or {}).get("status") == "True"


@pytest.fixture(scope="module")
def fleet2(lab, worker_lab, worker2_lab, kube, worker_kube, worker2_kube, run_playbook):
    first = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, worker2_lab))
    assert first.rc == 0, first.explain()
    assert set(module_result(first)["clusters"]) == {"lab-manager", WORKER_A, WORKER_B}
    for name in (WORKER_A, WORKER_B):
        wait_until(lambda n=name: _active(kube, n), 120, "MultiKueueCluster %s Active" % name)
    wait_until(lambda: (_condition(kube, "ClusterQueue", TENANT) or {}).get("status") == "True", 90,
               "the manager's ClusterQueue Active")
    yield
    # Leave the three labs as found (jobs first: their workloads hold the queues), whatever a test left behind.
    for client in (kube, worker_kube, worker2_kube):
        jobs = client.resources.get(api_version="batch/v1", kind="Job")
        for job in jobs.get(namespace=TENANT).items:
            try:
                jobs.delete(name=job.metadata.name, namespace=TENANT, body={"propagationPolicy": "Background"})
            except NotFoundError:
                pass
    model = TenantModel.from_inventory(fleet_vars(lab, worker_lab, worker2_lab))
    manager_objs = multikueue.manager_objects(model)
    manager_objs += [{"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": multikueue.kubeconfig_secret_name(w), "namespace": "kueue-system"}} for w in model.fleet.workers]
    _cleanup(kube, manager_objs)
    for client, worker in zip((worker_kube, worker2_kube), model.fleet.workers):
        _cleanup(client, multikueue.worker_objects(model, worker, frameworks=multikueue.MULTIKUEUE_FRAMEWORKS))


def _manager_workload(kube, job_name):
    """The manager's Workload of Job ``job_name`` (as a dict), or None."""
    for wl in kube.resources.get(api_version=multikueue.KUEUE_V, kind="Workload").get(namespace=TENANT).items:
        wl = wl.to_dict()
        if any(ref.get("name") == job_name for ref in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def _status(wl):
    return (wl or {}).get("status") or {}


def _cond_true(wl, ctype):
    return any(c["type"] == ctype and c["status"] == "True" for c in _status(wl).get("conditions") or [])


def _admitted_on(kube, job_name):
    """The worker the manager's Workload of ``job_name`` is admitted on (status.clusterName), or None."""
    wl = _manager_workload(kube, job_name)
    return _status(wl).get("clusterName") if _cond_true(wl, "Admitted") else None


def _remote_workloads(worker_kube, job_name):
    """The copies of the manager's Workload of ``job_name`` on a worker (same name as the manager's)."""
    return [w.to_dict() for w in worker_kube.resources.get(api_version=multikueue.KUEUE_V, kind="Workload").get(
        namespace=TENANT).items if w.metadata.name.startswith("job-%s-" % job_name)]


def _job_exists(client, name):
    try:
        client.resources.get(api_version="batch/v1", kind="Job").get(name=name, namespace=TENANT)
        return True
    except NotFoundError:
        return False


def _submit(client, name, complete_after="1h"):
    job = kwok_job(JOB, name=name, annotations={"pod-complete.stage.kwok.x-k8s.io/delay": complete_after})
    client.resources.get(api_version="batch/v1", kind="Job").create(body=job, namespace=TENANT)
    return time.monotonic()


def _delete_job(client, name):
    client.resources.get(api_version="batch/v1", kind="Job").delete(
        name=name, namespace=TENANT, body={"propagationPolicy": "Background"})


def _worker_share(worker_kube):
    cq = worker_kube.resources.get(api_version=multikueue.KUEUE_V, kind="ClusterQueue").get(name=TENANT).to_dict()
    resources = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    return {r["name"]: str(r["nominalQuota"]) for r in resources}["nvidia.com/gpu"]


STATE: dict[str, str] = {}  # the manager Jobs test 1 leaves running, for test 2: {"on_a": name, "on_b": name}


def test_a_job_runs_on_the_worker_with_free_quota_and_goes_to_the_other_when_one_is_full(
        fleet2, kube, worker_kube, worker2_kube):
    # the shares as the workers hold them: one 2-GPU Job fills a worker, the second does not fit there
    assert (_worker_share(worker_kube), _worker_share(worker2_kube)) == ("3", "3")
    suffix = uuid.uuid4().hex[:6]
    fill_a, first, second = "fill-a-" + suffix, "mk2-first-" + suffix, "mk2-second-" + suffix
    # worker A full: its tenant share used by a Job running there (submitted on A itself, as another manager would)
    _submit(worker_kube, fill_a)
    wait_until(lambda: [w for w in worker_kube.resources.get(api_version=multikueue.KUEUE_V, kind="Workload").get(
        namespace=TENANT).items if fill_a in w.metadata.name and _cond_true(w.to_dict(), "Admitted")], 90,
        "the Job filling worker A admitted there")

    start = _submit(kube, first)
    assert wait_until(lambda: _admitted_on(kube, first), 120, "%s admitted on a worker" % first) == WORKER_B
    took_first = time.monotonic() - start
    wait_until(lambda: _job_exists(worker2_kube, first), 60, "the copy of %s on worker B" % first)
    # only B runs it: MultiKueue removed the copy it had offered A (pending there), and no Job was created on A
    wait_until(lambda: not _remote_workloads(worker_kube, first), 60, "the pending copy of %s on A removed" % first)
    assert not _job_exists(worker_kube, first)

    # the other direction: A has room again, B's share is used by the first Job
    _delete_job(worker_kube, fill_a)
    wait_until(lambda: not _job_exists(worker_kube, fill_a), 60, "the Job filling A gone")
    start = _submit(kube, second)
    assert wait_until(lambda: _admitted_on(kube, second), 120, "%s admitted on a worker" % second) == WORKER_A
    took_second = time.monotonic() - start
    wait_until(lambda: _job_exists(worker_kube, second), 60, "the copy of %s on worker A" % second)
    wait_until(lambda: not _remote_workloads(worker2_kube, second), 60, "the pending copy of %s on B removed" % second)
    assert not _job_exists(worker2_kube, second)
    assert _admitted_on(kube, first) == WORKER_B  # nothing moved
    print("created on the manager -> Admitted: %.1f s (to B, A full), %.1f s (to A, B full)" % (took_first, took_second))
    STATE.update(on_a=second, on_b=first)


def _multikueue_setting(kube, key):
    """A MultiKueue setting of the Configuration the manager lab's Kueue runs (the role's ConfigMap, rendered from
    playbooks/inventory/lab)."""
    cm = kube.resources.get(api_version="v1", kind="ConfigMap").get(
        name=KUEUE_CONFIGMAP[1], namespace=KUEUE_CONFIGMAP[0]).to_dict()
    config = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
    return (config.get("multiKueue") or {}).get(key)


def _seconds(duration):
    """A Go duration of the forms Kueue's configuration uses here ("30s", "1m30s", "15m") in seconds."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, duration
    hours, minutes, seconds = (int(p or 0) for p in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def _check_state(wl):
    for check in _status(wl).get("admissionChecks") or []:
        if check["name"] == multikueue.ADMISSION_CHECK_NAME:
            return check["state"]
    return None


def test_a_worker_stopped_mid_run_its_workloads_go_to_the_other_as_kueue_guarantees(
        fleet2, worker_lab, kube, worker_kube, worker2_kube):
    assert STATE, "needs the Jobs of the previous test running on A and B"
    on_a, on_b = STATE["on_a"], STATE["on_b"]
    lost_timeout = _seconds(_multikueue_setting(kube, "workerLostTimeout") or "15m")
    assert lost_timeout <= 120, "the manager lab should run a short workerLostTimeout (playbooks/inventory/lab)"
    pending = "mk2-pending-" + uuid.uuid4().hex[:6]
    # quota on the manager (4 of 6 GPUs used), no room on either worker (2 of 3 used on each): offered to both, pending
    _submit(kube, pending, complete_after="5s")
    wait_until(lambda: _remote_workloads(worker_kube, pending) and _remote_workloads(worker2_kube, pending), 90,
               "%s offered to both workers" % pending)
    time.sleep(3)
    assert _admitted_on(kube, pending) is None and _check_state(_manager_workload(kube, pending)) == "Pending"

    pid, cmdline = apiserver_cmdline(worker_lab)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    timeline = {}
    try:
        wait_until(lambda: process_gone(pid), 60, "worker A's kube-apiserver to stop")
        wait_until(lambda: not _active(kube, WORKER_A), 120, "MultiKueueCluster %s inactive" % WORKER_A, 0.2)
        timeline["A inactive"] = time.monotonic() - killed

        # B gets room (the Job on B ends): the pending Workload is admitted there, without waiting for A
        _delete_job(kube, on_b)
        freed = time.monotonic()
        assert wait_until(lambda: _admitted_on(kube, pending), 120, "%s admitted" % pending, 0.2) == WORKER_B
        timeline["pending admitted on B after B had room"] = time.monotonic() - freed
        timeline["pending admitted on B"] = time.monotonic() - killed
        # ... while the Workload admitted on A still holds its admission there (Kueue waits workerLostTimeout)
        assert _admitted_on(kube, on_a) == WORKER_A, _status(_manager_workload(kube, on_a))

        # the Workload admitted on A: kept Admitted on A until workerLostTimeout after the loss, then evicted
        def moved():
            wl = _manager_workload(kube, on_a)
            return (not _cond_true(wl, "Admitted") or _status(wl).get("clusterName") != WORKER_A) and wl
        wait_until(moved, lost_timeout + 120, "%s released by A" % on_a, 0.2)
        timeline["A's Workload released"] = time.monotonic() - killed
        # ... and dispatched to B (the pending Job ran 5 s there and finished: B has room)
        assert wait_until(lambda: _admitted_on(kube, on_a), 120, "%s admitted again" % on_a, 0.2) == WORKER_B
        timeline["A's Workload admitted on B"] = time.monotonic() - killed
        wait_until(lambda: _job_exists(worker2_kube, on_a), 60, "the copy of %s on worker B" % on_a)
    finally:
        start_apiserver(worker_lab, cmdline)
        restarted = time.monotonic()
    print("worker A killed at 0 s; workerLostTimeout %d s; %s" % (
        lost_timeout, ", ".join("%s %.1f s" % item for item in timeline.items())))
    # Kueue's guarantee: no second admission before workerLostTimeout has passed since the loss (A may still run it)
    assert timeline["A's Workload released"] >= lost_timeout, timeline

    # A back. Measured on Kueue v0.19.2 (docs/multicluster.md "Failure modes"): MultiKueue keeps the copy admitted
    # FIRST (workload.go bestMatchByCondition: earliest Admitted) — A's, which kept running on A through the outage —
    # and deletes the newer copy on B; one copy of the Job is left, but the work done on B is lost.
    status = lab_component(worker_lab, "kueue", "status")
    if status.returncode != 0:  # Kueue exits when its API server stays away too long: the lab restarts it
        assert lab_component(worker_lab, "kueue", "up").returncode == 0, status.stdout + status.stderr
    wait_until(lambda: _active(kube, WORKER_A), 180, "MultiKueueCluster %s Active again" % WORKER_A)

    def one_copy_left():
        holders = [name for name, client in ((WORKER_A, worker_kube), (WORKER_B, worker2_kube))
                   if _job_exists(client, on_a) or _remote_workloads(client, on_a)]
        return holders if len(holders) == 1 else None
    kept = wait_until(one_copy_left, 180, "one copy of %s left on the workers" % on_a)
    settled = time.monotonic() - restarted
    time.sleep(5)
    assert one_copy_left() == kept, "a second copy of %s came back" % on_a
    print("A restarted: one copy left (on %s) %.1f s after its API server was back; the manager's Workload says %s"
          % (kept[0], settled, _status(_manager_workload(kube, on_a)).get("clusterName")))
    assert kept == [WORKER_A], kept


ROTATE = REPO / "playbooks" / "rotate_fleet_credentials.yml"


def _manager_token(kube, worker):
    """The token in the manager's kubeconfig Secret of ``worker`` (what MultiKueue uses)."""
    secret = kube.resources.get(api_version="v1", kind="Secret").get(
        name="gpuaas-multikueue-%s" % worker, namespace="kueue-system").to_dict()
    kubeconfig = json.loads(base64.b64decode(secret["data"]["kubeconfig"]))
    return kubeconfig["users"][0]["user"]["token"]


def _status_with_token(worker_lab, token):
    """HTTP status of a read MultiKueue makes (list Workloads) on the worker's API server, as ``token``."""
    request = urllib.request.Request(worker_lab.apiserver + "/apis/%s/workloads?limit=1" % multikueue.KUEUE_V,
                                     headers={"Authorization": "Bearer %s" % token})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=worker_lab.ca),
                                    timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_rotating_a_workers_credential_refuses_the_old_token_and_keeps_the_fleet_connected(
        fleet2, lab, worker_lab, worker2_lab, kube, run_playbook):
    """playbooks/rotate_fleet_credentials.yml for worker B only: afterwards B refuses the token the manager held (as
    an attacker who copied the old kubeconfig would use it), the manager's Secret carries a new one that B accepts,
    B's MultiKueueCluster is Active again, and worker A's credential is untouched."""
    old_b, old_a = _manager_token(kube, WORKER_B), _manager_token(kube, WORKER_A)
    assert _status_with_token(worker2_lab, old_b) == 200  # the control: the old token works before the rotation
    run = run_playbook(ROTATE, extra_vars=fleet_vars(lab, worker_lab, worker2_lab, rotate_workers=[WORKER_B]))
    ended = time.monotonic()
    assert run.rc == 0, run.explain()
    assert old_b not in run.stdout + run.stderr
    new_b = _manager_token(kube, WORKER_B)
    assert new_b != old_b
    # the API server caches a token's successful authentication for 10 s (kube-apiserver's token cache): the old
    # token, used just before, may pass until then — not longer
    wait_until(lambda: _status_with_token(worker2_lab, old_b) == 401, 30, "the old token refused by worker B", 0.5)
    refused = time.monotonic() - ended
    assert _status_with_token(worker2_lab, new_b) == 200
    assert _manager_token(kube, WORKER_A) == old_a
    wait_until(lambda: _active(kube, WORKER_B), 120, "MultiKueueCluster %s Active with the new token" % WORKER_B)
    print("rotation: the old token refused %.1f s and %s Active %.1f s after the playbook ended"
          % (refused, WORKER_B, time.monotonic() - ended))
    # a name the fleet does not have is refused before any token is revoked
    bad = run_playbook(ROTATE, extra_vars=fleet_vars(lab, worker_lab, worker2_lab, rotate_workers=["lab-worker-x"]))
    assert bad.rc != 0 and "rotate_workers" in bad.stdout, bad.explain()
    assert _manager_token(kube, WORKER_B) == new_b


def _kubectl(some_lab, *args, context=None, stdin=None):
    cmd = [str(some_lab.dir / "bin" / "kubectl"), "--kubeconfig", some_lab.kubeconfig,
           "--context", context or some_lab.admin_context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def test_a_tenant_on_worker_a_can_neither_read_nor_use_the_fleets_credentials(
        fleet2, lab, worker_lab, worker2_lab, kube):
    """Adversarial ("Done when": a tenant on worker A cannot read or use worker B's credentials), as alice made admin
    of the tenant's namespace on worker A, the most a tenant user holds there: the worker's MultiKueue token Secret,
    a new token for its ServiceAccount and a pod running as it are refused; no Secret she can read carries a fleet
    token; on the manager she cannot read B's kubeconfig; and A's token, were it leaked, is refused by B."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "mk2-alice-admin", "namespace": TENANT},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}
    made = _kubectl(worker_lab, "apply", "-f", "-", stdin=json.dumps(binding))
    assert made.returncode == 0, made.stderr
    try:
        def as_alice(*args, stdin=None):
            return _kubectl(worker_lab, *args, context=worker_lab.tenant_context, stdin=stdin)

        def refused(out):
            assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (out.stdout, out.stderr)

        # the controls: the token Secret is there, and she is admin in the tenant's namespace on A
        assert _kubectl(worker_lab, "get", "secret", multikueue.WORKER_TOKEN_SECRET, "-n", "kueue-system").returncode == 0
        assert as_alice("auth", "can-i", "create", "rolebindings", "-n", TENANT).stdout.strip() == "yes"
        refused(as_alice("get", "secret", multikueue.WORKER_TOKEN_SECRET, "-n", "kueue-system"))
        refused(as_alice("get", "secrets", "-n", "kueue-system"))
        refused(as_alice("create", "token", multikueue.WORKER_SERVICE_ACCOUNT, "-n", "kueue-system"))
        # a pod of hers cannot run as the MultiKueue ServiceAccount (it lives in kueue-system, not her namespace)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "steal", "namespace": TENANT},
               "spec": {"serviceAccountName": multikueue.WORKER_SERVICE_ACCOUNT,
                        "containers": [{"name": "c", "image": "registry.invalid/x:1"}]}}
        out = as_alice("create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod))
        assert out.returncode != 0, out.stdout
        # no Secret she can read on A carries either token the manager holds
        tokens = {_manager_token(kube, WORKER_A), _manager_token(kube, WORKER_B)}
        listed = as_alice("get", "secrets", "-n", TENANT, "-o", "json")
        assert listed.returncode == 0, listed.stderr
        readable = [base64.b64decode(v).decode(errors="replace") for item in json.loads(listed.stdout)["items"]
                    for v in (item.get("data") or {}).values()]
        assert not any(tok in text for tok in tokens for text in readable)
        # on the manager, B's (and A's) kubeconfig Secret is out of her reach
        for worker in (WORKER_A, WORKER_B):
            refused(_kubectl(lab, "get", "secret", "gpuaas-multikueue-%s" % worker, "-n", "kueue-system",
                             context=lab.tenant_context))
        # A's credential, were it leaked from A, is not a credential on B (another issuer): 401
        assert _status_with_token(worker2_lab, _manager_token(kube, WORKER_A)) == 401
        assert _status_with_token(worker_lab, _manager_token(kube, WORKER_A)) == 200  # the control
    finally:
        _kubectl(worker_lab, "delete", "rolebinding", "mk2-alice-admin", "-n", TENANT, "--ignore-not-found")


def test_a_second_run_changes_nothing_on_the_manager_or_either_worker(
        fleet2, lab, worker_lab, worker2_lab, run_playbook, audit_writes):
    with audit_writes() as manager_events, _audit_window_factory(worker_lab)() as a_events, \
            _audit_window_factory(worker2_lab)() as b_events:
        again = run_playbook(PLAYBOOK, extra_vars=fleet_vars(lab, worker_lab, worker2_lab))
    assert again.rc == 0, again.explain()
    result = module_result(again)
    assert result["changed"] is False, result["summary"]
    assert {k: v["changed"] for k, v in result["clusters"].items()} == {
        "lab-manager": False, WORKER_A: False, WORKER_B: False}
    for events in (manager_events, a_events, b_events):
        assert writes(events.events) == [], events.describe()
