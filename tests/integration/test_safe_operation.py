# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 11 items 5-7 against the real lab: destructive changes are opt-in, faults end cleanly, runs do not overlap.

* a full run with a missing inventory writes nothing (audit log) and reports every tenant as drift;
* a tenant missing from the inventory is kept and listed unless gpuaas_tenants_prune is on; with prune it is drained
  and removed; check mode shows what prune would do;
* the kube-apiserver stopped mid-run: the run fails with one short message within the retry budget, the re-run
  converges and a third run is changed=0;
* two runs at once: the second fails with "another run (holder …) holds the lock since …" or waits; nothing is pruned
  by mistake.

Own tenancy (``safe-`` prefix: one CPU flavor, one cohort) so it can run on a lab no other suite uses.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import apiserver_cmdline, process_gone, start_apiserver  # pylint: disable=import-error
from conftest import wait_until as _wait_until

REPO = Path(__file__).resolve().parents[2]
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
TASK = "Reconcile the GPU tenancy"
PREFIX = "safe-"
LEASE = ("kube-system", "gpuaas-tenants")
# objects the collection writes for one tenant with one namespace (Namespace, ClusterQueue, LocalQueue, RoleBinding,
# ClusterRole + ClusterRoleBinding for reading its ClusterQueue)
STORM_TENANTS = 60


def tenant(name: str, state: str = "present") -> dict:
    out = {"name": name, "namespaces": [name], "cohort": PREFIX + "org",
           "quotas": [{"flavor": PREFIX + "cpu", "resources": {"cpu": 1, "memory": "1Gi"}}],
           "access": {"users": [name + "-team"]}}
    if state != "present":
        out["state"] = state
    return out


def inventory(names: list[str], **extra) -> dict:
    inv = {"gpuaas_flavors": [{"name": PREFIX + "cpu"}], "gpuaas_cohorts": [{"name": PREFIX + "org"}],
           "gpuaas_priorities": [], "gpuaas_prometheus": {},
           "gpuaas_tenants": [tenant(n) if isinstance(n, str) else n for n in names],
           "gpuaas_tenants_lock_duration": 15}
    inv.update(extra)
    return inv


def mine(names: list[str]) -> list[str]:
    """This suite's tenants among ``names``."""
    return [n for n in names if n.startswith(PREFIX)]


def module_result(run) -> dict:
    results = run.task_results(TASK)
    assert len(results) == 1, run.explain()
    return results[0]


def kubectl(lab, *args: str, check: bool = False, stdin: str | None = None):
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=check, timeout=60, input=stdin)


def cluster_queues(lab) -> set[str]:
    out = kubectl(lab, "get", "clusterqueues", "-l", "app.kubernetes.io/managed-by=gpuaas.platform", "-o", "name")
    return {line.split("/", 1)[1] for line in out.stdout.split() if line}


def writes(events: list[dict], lease_too: bool = False) -> list[dict]:
    """Writes to the cluster other than the run's own lock Lease (unless lease_too)."""
    out = []
    for ev in events:
        ref = ev.get("objectRef") or {}
        if not lease_too and ref.get("resource") == "leases" and (ref.get("namespace"), ref.get("name")) == LEASE:
            continue
        out.append(ev)
    return out


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    return _wait_until(predicate, timeout, what, interval)  # this file polls every 0.2 s


def terminating_namespaces(lab) -> list[str]:
    out = kubectl(lab, "get", "namespaces", "-o", "json")
    items = json.loads(out.stdout or "{}").get("items", [])
    return [n["metadata"]["name"] for n in items
            if n["metadata"]["name"].startswith(PREFIX) and n["metadata"].get("deletionTimestamp")]


@pytest.fixture(scope="module")
def base(run_playbook, lab):
    """Two tenants converged with the default settings (safe mode, lock on)."""
    # namespaces of an earlier session's cleanup may still be terminating
    wait_until(lambda: not terminating_namespaces(lab), 180, "earlier safe- namespaces to be deleted", 2.0)
    run = run_playbook(TENANTS_PLAYBOOK, extra_vars=inventory([PREFIX + "a", PREFIX + "b"]))
    assert run.rc == 0, run.explain()
    assert {PREFIX + "a", PREFIX + "b"} <= cluster_queues(lab)
    yield run
    # leave the lab empty of this suite's tenancy (prune on, empty list explicitly allowed)
    run_playbook(TENANTS_PLAYBOOK, extra_vars=inventory([], gpuaas_flavors=[], gpuaas_cohorts=[],
                                                        gpuaas_tenants_prune=True, gpuaas_tenants_allow_empty=True,
                                                        gpuaas_delete_namespaces=True, gpuaas_drain_timeout=30))


def test_missing_inventory_writes_nothing_and_reports_every_tenant_as_drift(base, run_playbook, audit_writes, lab):
    # a forgotten -i: the role's defaults (no flavors, cohorts, priorities, tenants)
    with audit_writes() as audit:
        run = run_playbook(TENANTS_PLAYBOOK)
    assert run.rc == 0, run.explain()
    assert audit.events == [] and audit.dry_run_events == [], audit.describe()  # not even the lock
    result = module_result(run)
    assert result["changed"] is False and result["deleted"] == [] and result["offboarded"] == []
    assert result["drift"]["skipped_writes"] is True
    assert {PREFIX + "a", PREFIX + "b"} <= set(result["drift"]["unmanaged_tenants"])
    drift = {(o["kind"], o["name"]) for o in result["drift"]["unmanaged_objects"]}
    assert {("ClusterQueue", PREFIX + "a"), ("ResourceFlavor", PREFIX + "cpu"), ("Cohort", PREFIX + "org")} <= drift
    assert any("the tenant list is empty but the cluster has" in w for w in result.get("warnings", [])), result
    assert {PREFIX + "a", PREFIX + "b"} <= cluster_queues(lab)

    # the same with prune on: refused, with the way out, still nothing written
    with audit_writes() as audit:
        refused = run_playbook(TENANTS_PLAYBOOK, extra_vars={"gpuaas_tenants_prune": True})
    assert refused.rc != 0
    failed = module_result(refused)
    assert failed["msg"].startswith("refusing to prune with an empty tenant list: it would drain and remove every "
                                    "tenant on the cluster"), failed["msg"]
    assert "gpuaas_tenants_allow_empty: true" in failed["msg"]
    assert audit.events == [], audit.describe()
    assert {PREFIX + "a", PREFIX + "b"} <= cluster_queues(lab)


def test_tenant_missing_from_the_inventory_is_kept_unless_prune_is_on(base, run_playbook, audit_writes, lab):
    only_a = inventory([PREFIX + "a"])
    with audit_writes() as audit:
        kept = run_playbook(TENANTS_PLAYBOOK, extra_vars=only_a)
    assert kept.rc == 0, kept.explain()
    result = module_result(kept)
    assert result["changed"] is False and result["offboarded"] == [] and result["deleted"] == []
    # the lab is shared with the other suites: other tenants may be on it too (they are drift here as well)
    assert mine(result["drift"]["unmanaged_tenants"]) == [PREFIX + "b"]
    assert ("ClusterQueue", PREFIX + "b") in {(o["kind"], o["name"]) for o in result["drift"]["unmanaged_objects"]}
    assert any(PREFIX + "b" in w and "gpuaas_tenants_prune" in w for w in result.get("warnings", [])), result
    # the only writes were the lock's (taken and released)
    assert writes(audit.events) == [], audit.describe()
    lock_writes = {(e["verb"], e["objectRef"].get("name")) for e in writes(audit.events, lease_too=True)}
    assert ("create", None) in lock_writes or ("create", "gpuaas-tenants") in lock_writes, lock_writes
    assert ("delete", "gpuaas-tenants") in lock_writes, lock_writes
    assert PREFIX + "b" in cluster_queues(lab)

    # check mode with prune shows what prune would do, and writes nothing
    with audit_writes() as audit:
        preview = run_playbook(TENANTS_PLAYBOOK, extra_vars=dict(only_a, gpuaas_tenants_prune=True), check=True)
    assert preview.rc == 0, preview.explain()
    would = module_result(preview)
    assert mine(would["offboarded"]) == [PREFIX + "b"] and would["changed"] is True
    assert {("ClusterQueue", None, PREFIX + "b"), ("LocalQueue", PREFIX + "b", "default")} <= {
        (d["kind"], d.get("namespace"), d["name"]) for d in would["deleted"]}
    assert audit.events == [], audit.describe()
    assert PREFIX + "b" in cluster_queues(lab)

    # prune on: drained and removed as before safe mode
    pruned = run_playbook(TENANTS_PLAYBOOK, extra_vars=dict(only_a, gpuaas_tenants_prune=True, gpuaas_drain_timeout=60))
    assert pruned.rc == 0, pruned.explain()
    done = module_result(pruned)
    assert mine(done["offboarded"]) == [PREFIX + "b"]
    deleted = {(d["kind"], d.get("namespace"), d["name"]) for d in done["deleted"]}
    assert {("ClusterQueue", None, PREFIX + "b"), ("LocalQueue", PREFIX + "b", "default"),
            ("RoleBinding", PREFIX + "b", "gpuaas-users")} <= deleted
    assert done["drift"]["unmanaged_tenants"] == []
    wait_until(lambda: PREFIX + "b" not in cluster_queues(lab), 30, "the ClusterQueue to be gone")
    assert PREFIX + "a" in cluster_queues(lab)


def _count_writes(audit_log: str, offset: int, needle: str) -> int:
    with open(audit_log, encoding="utf-8") as f:
        f.seek(offset)
        return sum(1 for line in f if needle in line and '"verb":"patch"' in line)


def test_api_server_stopped_mid_run_fails_once_and_the_rerun_converges(base, run_playbook, lab):
    storm = inventory([PREFIX + "a"] + [PREFIX + "s%02d" % i for i in range(STORM_TENANTS)],
                      gpuaas_tenants_concurrency=1)
    pid, cmdline = apiserver_cmdline(lab)
    offset = os.path.getsize(lab.audit_log)
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(run_playbook, TENANTS_PLAYBOOK, extra_vars=storm, timeout=300)
        # stop the API server once the run is writing (20 server-side applies of this run seen)
        wait_until(lambda: _count_writes(lab.audit_log, offset, PREFIX + "s") >= 20 or future.done(), 120,
                   "the storm run to start writing")
        assert not future.done(), "the run finished before the API server could be stopped: %s" % future.result().explain()
        stopped_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)  # as a crash would; lab.sh down/up still work (pidfile updated)
        wait_until(lambda: process_gone(pid), 60, "kube-apiserver to stop")
        try:
            failed = future.result(timeout=240)
        finally:
            start_apiserver(lab, cmdline)
    ended_after = time.monotonic() - stopped_at
    assert failed.rc != 0, failed.explain()
    result = module_result(failed)
    msg = result["msg"]
    print("run failed %.1fs after the API server was killed, %d bytes of output:\n%s" % (ended_after, len(failed.stdout), msg))
    # one short message: what was applied, what was not, that a re-run converges — not one line per object
    assert msg.count("\n") <= 1 and len(msg) < 900, msg
    assert "unreachable" in msg and "re-running the same playbook once the API server is back converges" in msg, msg
    assert re.search(r"Stopped during apply: \d+ (created|updated)", msg), msg
    assert re.search(r"\d+ changes? not applied; nothing pruned", msg), msg
    assert "problems" not in result
    assert len(failed.stdout) < 60_000, len(failed.stdout)
    # within the retry budget (30 s of backoff per request) plus the module's start and end
    assert ended_after < 90, ended_after

    again = run_playbook(TENANTS_PLAYBOOK, extra_vars=storm)
    assert again.rc == 0, again.explain()
    rerun = module_result(again)
    assert rerun["changed"] is True
    # the killed run could not release its lock: the re-run took it over once it expired, and says so
    assert rerun["lock"]["took_over"], rerun["lock"]
    assert any("took over the lock" in w for w in rerun.get("warnings", [])), rerun.get("warnings")
    third = run_playbook(TENANTS_PLAYBOOK, extra_vars=storm)
    assert third.rc == 0 and third.changed == 0, third.explain()
    assert {PREFIX + "s%02d" % i for i in range(STORM_TENANTS)} <= cluster_queues(lab)


def _lease_holder(lab) -> str | None:
    out = kubectl(lab, "get", "lease", "-n", LEASE[0], LEASE[1], "-o", "json")
    if out.returncode != 0:
        return None
    return (json.loads(out.stdout).get("spec") or {}).get("holderIdentity")


def _feed_fifo(path: Path, data: bytes, timeout: float) -> None:
    """Write to the FIFO once its reader (the blocked run) has it open; never block the test forever."""
    end = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            if time.monotonic() > end:
                raise AssertionError("run 1 never opened its token_file FIFO %s" % path)
            time.sleep(0.2)
            continue
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return


def test_concurrent_runs_wait_or_fail_with_the_lock_message_and_prune_nothing_by_mistake(base, run_playbook, lab,
                                                                                         audit_writes, tmp_path):
    names = [PREFIX + "a"] + [PREFIX + "s%02d" % i for i in range(STORM_TENANTS)]
    new = PREFIX + "new"
    setup = run_playbook(TENANTS_PLAYBOOK, extra_vars=inventory(names + [new]))
    assert setup.rc == 0, setup.explain()
    # Run 1 holds the lock while it reads gpuaas_prometheus.token_file, a FIFO the test feeds only later (as a slow
    # network file system would): the overlap of the runs does not depend on timing or on the Kueue controller.
    fifo = tmp_path / "prometheus-token"
    os.mkfifo(fifo)
    first_inv = inventory(names + [new], gpuaas_prometheus={"url": "http://127.0.0.1:9", "token_file": str(fifo)})
    # run 2: an older inventory without safe-new, prune on (another AWX template): unguarded, it would delete safe-new
    second_inv = inventory(names, gpuaas_tenants_prune=True, gpuaas_tenants_lock_wait=3)
    with audit_writes() as audit, ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(run_playbook, TENANTS_PLAYBOOK, extra_vars=first_inv, timeout=300)
        holder = wait_until(lambda: _lease_holder(lab) or first.done(), 120, "run 1 to hold the lock")
        assert not first.done(), first.result().explain()
        second = run_playbook(TENANTS_PLAYBOOK, extra_vars=second_inv)
        # run 3: the same inventory as run 1 (no FIFO), waiting for the lock (bounded)
        third = pool.submit(run_playbook, TENANTS_PLAYBOOK,
                            extra_vars=inventory(names + [new], gpuaas_tenants_lock_wait=120), timeout=300)
        # long enough for run 3 to get through its validation and node pools task to the lock, on a loaded machine too
        time.sleep(20)
        assert _lease_holder(lab) == holder and not third.done()  # run 1 still holds it; run 3 waits
        _feed_fifo(fifo, b"lab-token\n", 60)
        first_run = first.result(timeout=240)
        third_run = third.result(timeout=240)

    assert second.rc != 0, second.explain()
    msg = module_result(second)["msg"]
    assert re.match(r"another run \(holder %s\) holds the lock Lease kube-system/gpuaas-tenants since "
                    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z" % re.escape(holder), msg), msg
    assert "gave up after waiting 3s" in msg, msg
    assert first_run.rc == 0, first_run.explain()
    assert third_run.rc == 0, third_run.explain()
    lock = module_result(third_run)["lock"]
    assert lock["waited"] >= 1 and lock["took_over"] is None, lock
    # nothing pruned by mistake: no delete at all in the window, and every tenant is there
    deletes = [e for e in writes(audit.events) if e["verb"] == "delete"]
    assert deletes == [], deletes
    assert set(names) | {new} <= cluster_queues(lab)
    assert _lease_holder(lab) is None  # released


def test_kueue_service_monitor_verifies_tls_with_a_ca(run_playbook, kube, lab):
    """Hygiene (issue 11): the ServiceMonitor that makes Prometheus send its token to Kueue verifies the certificate;
    the API server (the Prometheus Operator's CRD schema) accepts the CA Secret / ConfigMap references."""
    ns = PREFIX + "kueue-tls"
    kubectl(lab, "create", "namespace", ns)
    sm_api = kube.resources.get(api_version="monitoring.coreos.com/v1", kind="ServiceMonitor")
    base_vars = {"gpuaas_platform": "kubernetes", "gpuaas_observability_namespace": ns,
                 "gpuaas_observability_kueue_namespace": ns, "gpuaas_observability_dcgm_monitor": "false",
                 "gpuaas_observability_rules": False, "gpuaas_observability_dashboards": False}
    try:
        run = run_playbook(REPO / "playbooks" / "observability.yml", extra_vars=base_vars)
        assert run.rc == 0, run.explain()
        endpoint = sm_api.get(name="gpuaas-kueue", namespace=ns).to_dict()["spec"]["endpoints"][0]
        assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
        assert endpoint["tlsConfig"] == {"insecureSkipVerify": False,
                                         "serverName": "kueue-controller-manager-metrics-service.%s.svc" % ns,
                                         "ca": {"secret": {"name": "metrics-server-cert", "key": "ca.crt"}}}
        # a ConfigMap CA (OpenShift's service CA bundle shape) replaces the Secret: the Secret reference is removed
        ca_configmap = {"name": "openshift-service-ca.crt", "key": "service-ca.crt"}
        cm = run_playbook(REPO / "playbooks" / "observability.yml",
                          extra_vars=dict(base_vars, gpuaas_observability_kueue_ca_configmap=ca_configmap))
        assert cm.rc == 0, cm.explain()
        tls = sm_api.get(name="gpuaas-kueue", namespace=ns).to_dict()["spec"]["endpoints"][0]["tlsConfig"]
        assert tls["ca"] == {"configMap": {"name": "openshift-service-ca.crt", "key": "service-ca.crt"}}, tls
        # insecure only as an explicit opt-in, and then with a warning
        insecure = run_playbook(REPO / "playbooks" / "observability.yml", extra_vars=dict(
            base_vars, gpuaas_observability_kueue_insecure_skip_verify=True))
        assert insecure.rc == 0, insecure.explain()
        tls = sm_api.get(name="gpuaas-kueue", namespace=ns).to_dict()["spec"]["endpoints"][0]["tlsConfig"]
        assert tls == {"insecureSkipVerify": True}, tls
        warnings = [w for r in insecure.task_results("Apply the monitoring objects") for w in r.get("warnings", [])]
        assert any("insecure_skip_verify is true" in w for w in warnings), warnings
    finally:
        run_playbook(REPO / "playbooks" / "observability.yml",
                     extra_vars=dict(base_vars, gpuaas_observability_state="absent"))
        kubectl(lab, "delete", "namespace", ns, "--wait=false")
