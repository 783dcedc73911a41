# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 22 item 5 on the lab, as a second automation run on a host whose clock is skewed.

The other host is a thread of this test: it holds the run lock (Lease kube-system/gpuaas-tenants) with a 5 s lease
and renews it every second, but every ``renewTime`` it writes comes from a clock two hours behind. Judged by
comparing ``renewTime`` with this host's clock (the check the lock made before issue 22), its Lease has been
expired for two hours and would be taken over at the first look. Judged by locally observed time (client-go's
leader election; kube/lease.py), it is alive: it changes every second.

* the tenants playbook with a tenant to create waits its ``gpuaas_tenants_lock_wait`` (longer than the Lease's
  duration) and fails with the message naming the holder; the audit log shows it wrote nothing;
* the node_pools module (which can prune) runs under the same lock and is refused the same way;
* once the holder stops renewing, a run takes the lock over - after the Lease's duration of its own, locally
  observed time, and says so.

The writes of the "other host" are told apart in the audit log by its user agent.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import time
from pathlib import Path

import pytest
from conftest import LAB_USERS_PREFIXES, audit_events_after, completed_write, local_play

REPO = Path(__file__).resolve().parents[2]
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
LEASE_NAMESPACE, LEASE_NAME = "kube-system", "gpuaas-tenants"
HOLDER = "skewed-host/pid-4242/awx-job-77/5kew00"
HOLDER_AGENT = "gpuaas-test-skewed-clock-host"
SKEW = dt.timedelta(hours=2)  # the other host's clock is two hours behind this one
LEASE_SECONDS = 5  # the holder's leaseDurationSeconds (the lock's minimum)
LOCK_WAIT = 8  # longer than the Lease's duration: only the renewals, seen arriving, keep the run waiting
PREFIX = "skew-"
MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def skewed_now() -> str:
    return (dt.datetime.now(dt.timezone.utc) - SKEW).strftime(MICROTIME)


class SkewedClockHolder(threading.Thread):
    """The other automation run: holds the Lease and renews it every second with renewTime from its skewed clock."""

    def __init__(self, lab) -> None:
        super().__init__(daemon=True)
        from kubernetes import config, dynamic

        api = config.new_client_from_config(config_file=lab.kubeconfig, context=lab.admin_context)
        api.user_agent = HOLDER_AGENT
        self.leases = dynamic.DynamicClient(api).resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
        self.stop = threading.Event()
        self.renewals = 0
        self.lost: str | None = None

    def get(self) -> dict | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            return self.leases.get(name=LEASE_NAME, namespace=LEASE_NAMESPACE).to_dict()
        except NotFoundError:
            return None

    def take(self) -> None:
        current = self.get()
        assert current is None or not (current.get("spec") or {}).get("holderIdentity"), (
            "another run holds the lock already: %s" % current)
        if current is not None:
            self.leases.delete(name=LEASE_NAME, namespace=LEASE_NAMESPACE)
        now = skewed_now()
        self.leases.create(namespace=LEASE_NAMESPACE, body={
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": HOLDER, "leaseDurationSeconds": LEASE_SECONDS, "acquireTime": now,
                     "renewTime": now, "leaseTransitions": 0}})

    def run(self) -> None:
        while not self.stop.wait(1.0):
            lease = self.get()
            if lease is None or lease["spec"].get("holderIdentity") != HOLDER:
                self.lost = "the lock was taken from the live holder: %s" % lease
                return
            lease["spec"]["renewTime"] = skewed_now()
            try:
                self.leases.replace(namespace=LEASE_NAMESPACE, body=lease)  # compare-and-swap on resourceVersion
                self.renewals += 1
            except Exception as exc:  # noqa: BLE001 - a conflict means someone else wrote the Lease
                self.lost = "renewal failed: %s" % exc
                return

    def halt(self) -> None:
        self.stop.set()
        self.join(timeout=10)


def tenant_inventory(**extra) -> dict:
    inv = {"gpuaas_flavors": [{"name": PREFIX + "cpu"}], "gpuaas_cohorts": [], "gpuaas_priorities": [],
           "gpuaas_prometheus": {},
           "gpuaas_tenants": [{"name": PREFIX + "a", "namespaces": [PREFIX + "a"],
                               "quotas": [{"flavor": PREFIX + "cpu", "resources": {"cpu": 1}}]}],
           "gpuaas_tenants_lock_wait": LOCK_WAIT}
    inv.update(extra)
    return inv


NODE_POOLS_PLAY = local_play("""
  tasks:
    - name: Node pools under the run lock
      gpuaas.platform.node_pools:
        flavors: [{name: skew-h100, node_labels: {node.cluster.x-k8s.io/gpuaas-pool: skew-pool}}]
        tenants: [{name: skew-a, namespaces: [skew-a], quotas: [{flavor: skew-h100, resources: {nvidia.com/gpu: 4}}]}]
        node_pools:
          - name: skew-pool
            flavor: skew-h100
            target: {kind: MachineDeployment, name: skew-pool, namespace: default}
            min_nodes: 0
            max_nodes: 2
            gpus_per_node: 2
            node_labels: {node.cluster.x-k8s.io/gpuaas-pool: skew-pool}
        prometheus: {url: "http://127.0.0.1:9"}
        check_templates: false
        check_capacity: false
        lock_wait: 3
""")


def only_result(run, task: str) -> dict:
    results = run.task_results(task)
    assert len(results) == 1, run.explain()
    return results[0]


def refusal(holder: str, waited: int) -> re.Pattern:
    return re.compile(r"another run \(holder %s\) holds the lock Lease %s/%s since \S+ \(last renewed \S+; a waiting "
                      r"run takes it over after %ds without a renewal\); gave up after waiting %ds"
                      % (re.escape(holder), LEASE_NAMESPACE, LEASE_NAME, LEASE_SECONDS, waited))


@pytest.fixture
def skewed_holder(lab):
    holder = SkewedClockHolder(lab)
    holder.take()
    holder.start()
    yield holder
    holder.halt()
    lease = holder.get()
    if lease is not None and lease["spec"].get("holderIdentity") == HOLDER:
        holder.leases.delete(name=LEASE_NAME, namespace=LEASE_NAMESPACE)


def test_a_run_on_a_host_with_a_skewed_clock_neither_takes_a_live_lock_nor_waits_for_a_dead_one(
        lab, run_playbook, skewed_holder):
    lease = skewed_holder.get()
    renewed = dt.datetime.strptime(lease["spec"]["renewTime"], MICROTIME).replace(tzinfo=dt.timezone.utc)
    # the premise: by this host's clock the Lease expired long ago (a renewTime-vs-local-clock check takes it over)
    assert dt.datetime.now(dt.timezone.utc) - renewed > dt.timedelta(hours=1), lease

    offset = os.path.getsize(lab.audit_log)
    tenants = run_playbook(TENANTS_PLAYBOOK, extra_vars=tenant_inventory())
    pools = run_playbook(NODE_POOLS_PLAY)
    events = audit_events_after(lab.audit_log, offset)

    assert tenants.rc != 0, tenants.explain()
    msg = only_result(tenants, "Reconcile the GPU tenancy")["msg"]
    assert refusal(HOLDER, LOCK_WAIT).match(msg), msg
    assert pools.rc != 0, pools.explain()
    msg = only_result(pools, "Node pools under the run lock")["msg"]
    assert refusal(HOLDER, 3).match(msg), msg
    # the holder kept its lock all along (no takeover, no lost renewal) ...
    assert skewed_holder.lost is None, skewed_holder.lost
    assert skewed_holder.renewals >= LOCK_WAIT, skewed_holder.renewals
    lease = skewed_holder.get()
    assert lease["spec"]["holderIdentity"] == HOLDER and lease["spec"]["leaseTransitions"] == 0, lease
    # ... and the two refused runs wrote nothing at all: every completed write in the window by anyone but the lab's
    # controllers (kwok's node leases, ...) is the holder's renewal
    others = ["%s %s by %s (%s) -> %s" % (e["verb"], e["requestURI"], e["user"].get("username"), e.get("userAgent"),
                                          e.get("responseStatus", {}).get("code"))
              for e in events if completed_write(e) and e.get("userAgent") != HOLDER_AGENT
              and not e.get("user", {}).get("username", "").startswith(LAB_USERS_PREFIXES)]
    assert others == [], "\n".join(others)
    assert any(completed_write(e) and e.get("userAgent") == HOLDER_AGENT for e in events)  # the log is read

    # the holder dies (stops renewing, as a killed job would): a run takes the lock over after the Lease's
    # duration, timed on its own clock - not at once (the renewTime is two hours old), not never
    skewed_holder.halt()
    absent = tenant_inventory(gpuaas_tenants=[{"name": PREFIX + "a", "state": "absent"}], gpuaas_flavors=[],
                              gpuaas_tenants_lock_wait=30)
    started = time.monotonic()
    takeover = run_playbook(TENANTS_PLAYBOOK, extra_vars=absent)
    elapsed = time.monotonic() - started
    assert takeover.rc == 0, takeover.explain()
    result = only_result(takeover, "Reconcile the GPU tenancy")
    assert result["lock"]["took_over"] == HOLDER, result["lock"]
    assert LEASE_SECONDS <= result["lock"]["waited"] < 30, result["lock"]
    assert elapsed >= LEASE_SECONDS
    assert any("took over the lock Lease %s/%s from %s" % (LEASE_NAMESPACE, LEASE_NAME, HOLDER) in w
               for w in result.get("warnings", [])), result.get("warnings")
    assert skewed_holder.get() is None  # released at the end of the run
