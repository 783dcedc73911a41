# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 22 item 5: a tenants run that loses its Lease lock midway stops before its next write.

Written as the identity that breaks the guarantee: a second automation run (another host, another AWX job) whose
renewals it saw stall for the lease duration of its own clock, and which therefore took the Lease over while the
first run was still applying or about to prune.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import LeaseLock, LockLost
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.live import LiveState
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import entry
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.run_lock import RunLock

from test_tenants import cluster, params, run  # noqa: E402  (tests/unit/modules, on sys.path through conftest)
from fake_kube import FakeKube  # noqa: E402
from module_utils.fake_kube import FakeResource  # noqa: E402  (the shared fake, on sys.path through fake_kube)
from test_kueue_modules import run as run_module_main
from ansible_collections.gpuaas.platform.plugins.modules import node_pools as node_pools_module
from ansible_collections.gpuaas.platform.plugins.modules import tenants as tenants_module
import test_node_pools_module  # noqa: E402  (tests/unit/modules, on sys.path through conftest)

LEASE_KEY = ("Lease", "kube-system", "gpuaas-tenants")
SECOND_RUN = "awx-node-2/pid-7/awx-job-8"


class LocalClock:
    """The second run's monotonic clock; its sleeps pass no real time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def second_run_takes_over(client: FakeKube) -> LeaseLock:
    """The second run waits for the lock; the first run's renewals (every 20s of real time) do not come within the
    60s of the second run's own clock, so it sees the Lease unchanged for its duration and takes it over."""
    clock = LocalClock()
    second = LeaseLock(client, "gpuaas-tenants", "kube-system", identity=SECOND_RUN, wait=120,
                       sleep=clock.sleep, clock=clock)
    second.acquire()
    assert second.took_over is not None and clock.now == pytest.approx(60.0)
    return second


def writes_after(client: FakeKube, mark: int) -> list:
    """(verb, kind) of the applies and deletes after call ``mark``, dry runs and the lock's Lease apart."""
    return [c for c in client.verbs()[mark:] if c[0] in ("apply", "delete") and c[1] != "Lease"]


def test_a_second_run_taking_over_between_apply_tiers_stops_the_first_before_its_next_tier(monkeypatch):
    client = cluster()
    apply = FakeResource.apply
    taken: dict = {}

    def apply_then_lose_the_lock(self, body, field_manager, force=False, dry_run=False):
        applied = apply(self, body, field_manager, force=force, dry_run=dry_run)
        if not taken:
            taken["mark"] = len(client.calls)
            taken["kind"] = self.kind
            taken["second"] = second_run_takes_over(client)
        return applied

    monkeypatch.setattr(FakeResource, "apply", apply_then_lose_the_lock)
    with pytest.raises(LockLost) as info:
        run(client, params())
    message = info.value.message
    assert message.startswith("this run lost the lock Lease kube-system/gpuaas-tenants (another run (holder %s) "
                              "holds it now, since " % SECOND_RUN), message
    assert "stopped before applying " in message and message.endswith(": nothing more was written")
    # the tier under way finishes (each object is written whole); no later tier is started
    later = writes_after(client, taken["mark"])
    assert all(c == ("apply", taken["kind"]) for c in later), later
    assert info.value.details["partial_result"]["summary"]["created"] >= 1
    # the first run does not delete the second run's Lease when it ends
    assert client.objects[LEASE_KEY]["spec"]["holderIdentity"] == SECOND_RUN


def test_a_second_run_taking_over_before_prune_stops_the_first_with_nothing_pruned(monkeypatch):
    client = cluster()
    run(client, params())
    p = params(prune=True)
    gone = p["tenants"].pop(1)["name"]
    before = set(client.objects) - {LEASE_KEY}
    candidates = LiveState.candidates
    taken: dict = {}

    def candidates_then_lose_the_lock(state, scope):
        out = candidates(state, scope)
        if scope is not None and not taken:
            taken["mark"] = len(client.calls)
            taken["second"] = second_run_takes_over(client)
        return out

    monkeypatch.setattr(LiveState, "candidates", candidates_then_lose_the_lock)
    with pytest.raises(LockLost) as info:
        run(client, p)
    assert "holder %s" % SECOND_RUN in info.value.message
    assert info.value.message.endswith("stopped before pruning 9 objects: nothing more was written"), \
        info.value.message
    assert writes_after(client, taken["mark"]) == []
    assert before <= set(client.objects), "%s was pruned after the lock was lost" % gone


def test_a_failed_renewal_stops_the_run_before_its_next_write_with_the_renewal_error(monkeypatch):
    client = cluster()
    apply = FakeResource.apply
    locks: list = []
    marks: list = []

    def unavailable(_res, _body, field_manager=None):
        raise ApiException(status=503, reason="ServiceUnavailable")

    def apply_while_the_renewal_fails(self, body, field_manager, force=False, dry_run=False):
        applied = apply(self, body, field_manager, force=force, dry_run=dry_run)
        if not marks:
            marks.append((len(client.calls), self.kind))
            with monkeypatch.context() as outage:
                outage.setattr(FakeResource, "replace", unavailable)
                assert locks[0].renew() is False  # what the renewal thread does on its tick
        return applied

    take_lock = RunLock.take

    def take_lock_and_keep_it(run_lock):
        held = take_lock(run_lock)
        locks.append(run_lock.lease)
        return held

    monkeypatch.setattr(RunLock, "take", take_lock_and_keep_it)
    monkeypatch.setattr(FakeResource, "apply", apply_while_the_renewal_fails)
    with pytest.raises(LockLost) as info:
        run(client, params())
    assert "(its renewal failed: " in info.value.message
    assert info.value.message.endswith(": nothing more was written")
    mark, kind = marks[0]
    assert all(c == ("apply", kind) for c in writes_after(client, mark))


def tenants_module_run():
    return cluster(), tenants_module, params()


def node_pools_module_run():
    kube = test_node_pools_module.FakeKube(test_node_pools_module.SERVED)
    kube.add(test_node_pools_module.machineset({"gpuaas.io/pool": "h100"}))
    return kube, node_pools_module, test_node_pools_module.params()


@pytest.mark.parametrize("module_run", [tenants_module_run, node_pools_module_run], ids=["tenants", "node_pools"])
def test_the_module_makes_one_client_and_builds_its_runner_and_lock_with_it(monkeypatch, module_run):
    """entry.run_module makes the client once, before the runner: the run and its Lease use that one client."""
    client, module, args = module_run()
    made = []
    monkeypatch.setattr(entry, "get_client", lambda module: made.append(module) or client)
    result = run_module_main(module, args)
    assert len(made) == 1
    assert result["lock"]["lease"] == "Lease kube-system/gpuaas-tenants"
    assert [c for c in client.calls if c[1] == "Lease"]
