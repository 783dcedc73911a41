# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 11: retries with bounded backoff, one message when the API server is gone, the Lease lock, waits that
check observedGeneration, secrets of a kubeconfig dict registered no_log."""

from __future__ import annotations

import datetime

import pytest
import urllib3

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import client as kc
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import engine as ae
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import (
    LeaseLock,
    LockHeld,
    LockLost,
    format_time,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.waiter import Waiter

from .fake_kube import FakeClient, api_exception


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def retrying_client(clock: Clock, **policy) -> kc.KubeClient:
    from kubernetes.client import Configuration
    client = kc.KubeClient(Configuration(host="https://127.0.0.1:1"))
    client.retry = kc.RetryPolicy(jitter=0.0, **policy)
    client.sleep = clock.sleep
    client.clock = clock
    return client


def scripted(client: kc.KubeClient, outcomes: list) -> list:
    calls: list = []

    def once(*_args, **_kw):
        calls.append(1)
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    client._request_once = once  # type: ignore[method-assign]
    return calls


def refused() -> Exception:
    return urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")


def status(code: int, message: str = "", retry_after: str | None = None) -> Exception:
    exc = api_exception(code, "TooManyRequests" if code == 429 else "InternalError", message or "boom")
    exc.headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return exc


# -- retries ------------------------------------------------------------------------------------------------

def test_connection_reset_then_success_is_retried_with_exponential_backoff():
    clock = Clock()
    client = retrying_client(clock)
    calls = scripted(client, [refused(), urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104)),
                              ConnectionResetError(104, "reset"), {"ok": True}])
    assert client.request("GET", "/api/v1") == {"ok": True}
    assert len(calls) == 4
    assert clock.sleeps == [0.5, 1.0, 2.0]
    assert client.unreachable is None


def test_429_honours_retry_after_and_5xx_and_etcd_timeouts_are_retried():
    clock = Clock()
    client = retrying_client(clock)
    scripted(client, [status(429, retry_after="3"), status(500, "etcdserver: request timed out"),
                      status(503), status(504, "Timeout: request did not complete"), {"done": 1}])
    assert client.request("PATCH", "/apis/x") == {"done": 1}
    assert clock.sleeps == [3.0, 1.0, 2.0, 4.0]


def test_retry_after_is_capped_by_max_delay():
    clock = Clock()
    client = retrying_client(clock, max_delay=5.0)
    scripted(client, [status(429, retry_after="3600"), {}])
    client.request("GET", "/x")
    assert clock.sleeps == [5.0]


@pytest.mark.parametrize("exc", [
    api_exception(422, "Invalid", "spec.x: Invalid value"),
    api_exception(403, "Forbidden", "forbidden"),
    api_exception(409, "Conflict", "conflict"),
    api_exception(500, "InternalError", 'Internal error occurred: failed calling webhook "x": connection refused'),
])
def test_errors_that_are_not_transient_are_raised_at_once(exc):
    clock = Clock()
    client = retrying_client(clock)
    calls = scripted(client, [exc, {}])
    with pytest.raises(kc.ApiException):
        client.request("GET", "/x")
    assert len(calls) == 1 and clock.sleeps == []


def test_unreachable_api_fails_with_one_message_within_the_budget_and_later_requests_fail_fast():
    clock = Clock()
    client = retrying_client(clock, attempts=6, budget=30.0)
    calls = scripted(client, [refused() for _attempt in range(20)])
    with pytest.raises(kc.ApiUnreachable) as info:
        client.request("GET", "/api/v1/nodes")
    assert len(calls) == 6
    assert sum(clock.sleeps) == 0.5 + 1 + 2 + 4 + 8
    assert info.value.message.startswith("the Kubernetes API server at https://127.0.0.1:1 is unreachable")
    assert "(6 attempts in 16s)" in info.value.message
    assert info.value.details["attempts"] == 6
    # the circuit is open: the next request gives up after one attempt instead of waiting the budget again
    with pytest.raises(kc.ApiUnreachable):
        client.request("GET", "/api/v1/namespaces")
    assert len(calls) == 7 and sum(clock.sleeps) == 15.5
    # ... and closes again with the first success
    scripted(client, [{"ok": 1}])
    assert client.request("GET", "/api/v1") == {"ok": 1} and client.unreachable is None


def test_budget_bounds_the_total_wait():
    clock = Clock()
    client = retrying_client(clock, attempts=100, budget=10.0, max_delay=4.0)
    scripted(client, [refused() for _attempt in range(100)])
    with pytest.raises(kc.ApiUnreachable):
        client.request("GET", "/x")
    assert sum(clock.sleeps) <= 10.0


def test_tls_errors_are_not_retried():
    assert not kc.is_connection_error(urllib3.exceptions.SSLError("certificate verify failed"))
    assert not kc.is_connection_error(urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.SSLError("x")))
    assert kc.is_connection_error(urllib3.exceptions.MaxRetryError(None, "/", refused()))
    assert kc.is_connection_error(urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"))


# -- the engine stops at the first connection failure ----------------------------------------------------------

def namespaces(n: int) -> list:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-%03d" % i}} for i in range(n)]


def test_engine_stops_scheduling_after_the_first_unreachable_and_says_so_once():
    client = FakeClient()
    gone = kc.ApiUnreachable("the Kubernetes API server at https://x is unreachable: Connection refused (6 attempts in 16s)",
                             hint="check that the API server is up")
    for i in range(5, 200):
        client.fail_apply["ns-%03d" % i] = gone
    engine = ae.ApplyEngine(client, concurrency=1)
    desired = namespaces(200) + [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                  "metadata": {"name": "later-tier", "namespace": "ns-000"},
                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}]
    with pytest.raises(kc.ApiUnreachable) as info:
        engine.reconcile(desired)
    applies = [c for c in client.calls if c[0] == "apply"]
    assert len(applies) == 6  # five written, the sixth failed, nothing else was sent
    message = str(info.value)
    assert message.count("\n") <= 1  # the message and one hint line, not one line per object
    assert "5 created" in message and "196 changes not applied" in message  # 194 skipped + the failed + RoleBinding
    assert "re-running the same playbook once the API server is back converges" in message
    assert info.value.details["not_applied_count"] == 196
    import json
    json.dumps(info.value.to_fail_kwargs())  # the module returns it: plain JSON, no ObjectRef inside
    assert "RoleBinding ns-000/later-tier" in " ".join(info.value.details["not_applied"]) or \
        len(info.value.details["not_applied"]) == 50
    assert info.value.problems == []


# -- the Lease lock ------------------------------------------------------------------------------------------

class LeaseApi(FakeClient):
    """FakeClient plus create/replace/delete-with-preconditions for Leases (compare-and-swap on resourceVersion)."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds["coordination.k8s.io/v1"] = {"Lease": ("leases", True)}
        self.rv = 0
        self.leases: dict = {}

    def resource(self, api_version, kind):
        if kind == "Lease":
            return LeaseResource(self)
        return super().resource(api_version, kind)


class LeaseResource:
    def __init__(self, api: LeaseApi) -> None:
        self.api = api

    def get(self, name, namespace=None):
        import copy
        obj = self.api.leases.get((namespace, name))
        return copy.deepcopy(obj)

    def _stamp(self, body, uid):
        import copy
        self.api.rv += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.api.rv)
        obj["metadata"]["uid"] = uid
        return obj

    def create(self, body, field_manager=None):
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if key in self.api.leases:
            raise api_exception(409, "AlreadyExists", "exists")
        self.api.leases[key] = self._stamp(body, "uid-%d" % self.api.rv)
        return self.get(key[1], key[0])

    def replace(self, body, field_manager=None):
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        live = self.api.leases.get(key)
        if live is None:
            raise api_exception(404, "NotFound", "gone")
        if body["metadata"].get("resourceVersion") != live["metadata"]["resourceVersion"]:
            raise api_exception(409, "Conflict", "the object has been modified")
        self.api.leases[key] = self._stamp(body, live["metadata"]["uid"])
        return self.get(key[1], key[0])

    def delete(self, name, namespace=None, preconditions=None, **_kw):
        live = self.api.leases.get((namespace, name))
        if live is None:
            return None
        if preconditions and preconditions.get("resourceVersion") != live["metadata"]["resourceVersion"]:
            raise api_exception(409, "Conflict", "precondition failed")
        return self.api.leases.pop((namespace, name))


T0 = datetime.datetime(2026, 12, 1, 9, 0, 0, tzinfo=datetime.timezone.utc)


def lock(api, identity, clock=None, now=T0, wait=10.0, duration=60):
    clock = clock or Clock()
    return LeaseLock(api, "gpuaas-tenants", "kube-system", identity=identity, wait=wait, duration=duration, poll=2.0,
                     sleep=clock.sleep, clock=clock, now=lambda: now)


def test_second_run_waits_then_fails_naming_the_holder_and_since_when():
    api = LeaseApi()
    first = lock(api, "host-a/pid-1").acquire()
    clock = Clock()
    with pytest.raises(LockHeld) as info:
        lock(api, "host-b/pid-2", clock=clock, now=T0 + datetime.timedelta(seconds=5)).acquire()
    assert info.value.message.startswith(
        "another run (holder host-a/pid-1) holds the lock Lease kube-system/gpuaas-tenants since %s" % format_time(T0))
    assert "gave up after waiting 10s" in info.value.message
    assert sum(clock.sleeps) == pytest.approx(10.0)
    assert "kubectl delete lease -n kube-system gpuaas-tenants" in info.value.hint
    assert api.leases[("kube-system", "gpuaas-tenants")]["spec"]["holderIdentity"] == "host-a/pid-1"
    assert first.held is not None


def test_lock_is_free_again_after_release_and_taken_over_when_expired():
    api = LeaseApi()
    first = lock(api, "a")
    first.acquire()
    assert first.release() is None
    assert api.leases == {}
    second = lock(api, "b").acquire()
    assert second.took_over is None
    # b dies without releasing; c sees b's Lease unchanged for 60s of its own time (duration 60): takes over
    clock = Clock()
    third = lock(api, "c", clock=clock, wait=70).acquire()
    assert third.took_over == "b" and clock.now == pytest.approx(60.0)
    spec = api.leases[("kube-system", "gpuaas-tenants")]["spec"]
    assert spec["holderIdentity"] == "c" and spec["leaseTransitions"] == 1
    # b wakes up: its renewal is a stale compare-and-swap, so it learns it lost the lock and does not delete c's
    assert second.renew() is False and second.lost is True
    assert second.release() is None
    assert api.leases[("kube-system", "gpuaas-tenants")]["spec"]["holderIdentity"] == "c"


def test_a_lock_renewed_in_time_is_not_taken_over():
    api = LeaseApi()
    holder = lock(api, "a", now=T0)
    holder.acquire()
    holder.now = lambda: T0 + datetime.timedelta(seconds=50)
    assert holder.renew() is True
    with pytest.raises(LockHeld):
        lock(api, "b", now=T0 + datetime.timedelta(seconds=100), wait=0).acquire()


def test_the_wait_ends_as_soon_as_the_holder_releases():
    api = LeaseApi()
    holder = lock(api, "a")
    holder.acquire()
    clock = Clock()
    waiting = lock(api, "b", clock=clock, wait=60)
    original = clock.sleep

    def sleep_and_release(seconds):
        original(seconds)
        if clock.now >= 4:
            holder.release()

    waiting.sleep = sleep_and_release
    waiting.acquire()
    assert api.leases[("kube-system", "gpuaas-tenants")]["spec"]["holderIdentity"] == "b"
    assert waiting.waited == pytest.approx(4.0)


def test_a_waiter_with_a_skewed_clock_never_takes_over_a_holder_that_keeps_renewing():
    """The waiter's clock is a day ahead: by it, the holder's renewTime is always far in the past. The holder keeps
    renewing (its resourceVersion moves), so the waiter gives up after its wait and never takes the lock over."""
    api = LeaseApi()
    holder = lock(api, "host-a/pid-1", now=T0)
    holder.acquire()
    clock = Clock()
    skewed = lock(api, "host-b/pid-2", clock=clock, now=T0 + datetime.timedelta(days=1), wait=300)
    original = clock.sleep

    def sleep_while_the_holder_renews(seconds):
        original(seconds)
        if int(clock.now) % 20 == 0:  # the holder's renewal thread: every third of its 60s duration
            assert holder.renew() is True

    skewed.sleep = sleep_while_the_holder_renews
    with pytest.raises(LockHeld) as info:
        skewed.acquire()
    assert "holder host-a/pid-1" in info.value.message and "gave up after waiting 300s" in info.value.message
    assert api.leases[("kube-system", "gpuaas-tenants")]["spec"]["holderIdentity"] == "host-a/pid-1"
    holder.confirm("before applying")  # still the holder: no LockLost


def test_a_holder_that_stops_renewing_is_taken_over_after_the_duration_of_local_time_whatever_the_clocks_say():
    """The waiter's clock is a day behind (the holder's renewTime is in its future): it still takes the Lease over
    after leaseDurationSeconds of its own time without a renewal, not earlier and not never."""
    api = LeaseApi()
    lock(api, "host-a/pid-1", now=T0).acquire()  # then dies: no renewal, no release
    clock = Clock()
    waiter = lock(api, "host-b/pid-2", clock=clock, now=T0 - datetime.timedelta(days=1), wait=120)
    waiter.acquire()
    assert waiter.took_over == "host-a/pid-1"
    assert clock.now == pytest.approx(60.0) and waiter.waited == pytest.approx(60.0)
    assert api.leases[("kube-system", "gpuaas-tenants")]["spec"]["holderIdentity"] == "host-b/pid-2"


def test_the_default_wait_equal_to_the_duration_is_enough_to_take_over_a_dead_run():
    api = LeaseApi()
    lock(api, "killed-run").acquire()
    clock = Clock()
    rerun = lock(api, "rerun", clock=clock, wait=60, duration=60).acquire()
    assert rerun.took_over == "killed-run" and clock.now == pytest.approx(60.0)


def test_a_second_run_that_took_over_stops_the_first_before_its_next_write_naming_the_new_holder():
    api = LeaseApi()
    first = lock(api, "host-a/pid-1")
    first.acquire()
    clock = Clock()
    lock(api, "host-b/pid-2", clock=clock, wait=120).acquire()  # host-a's renewals stalled for 60s
    with pytest.raises(LockLost) as info:
        first.confirm("before pruning 3 objects")
    assert info.value.message == (
        "this run lost the lock Lease kube-system/gpuaas-tenants (another run (holder host-b/pid-2) holds it now, "
        "since %s) and stopped before pruning 3 objects: nothing more was written" % format_time(T0))
    assert first.release() is None  # lost: host-b's Lease is not deleted
    assert api.leases[("kube-system", "gpuaas-tenants")]["spec"]["holderIdentity"] == "host-b/pid-2"


def test_a_failed_renewal_is_recorded_and_stops_the_run_at_its_next_check_with_the_error(monkeypatch):
    api = LeaseApi()
    holder = lock(api, "host-a/pid-1")
    holder.acquire()

    def unavailable(self, body, field_manager=None):
        raise api_exception(503, "ServiceUnavailable", "etcdserver: request timed out")

    with monkeypatch.context() as patched:
        patched.setattr(LeaseResource, "replace", unavailable)
        assert holder.renew() is False and holder.lost is False
    assert holder.renew() is True  # later renewals succeed, but the gap stays recorded: a waiter may have run
    with pytest.raises(LockLost) as info:
        holder.confirm("before applying 2 changes (ClusterQueue)")
    assert info.value.message.startswith("this run lost the lock Lease kube-system/gpuaas-tenants (its renewal failed: ")
    assert "etcdserver: request timed out" in info.value.message
    assert info.value.message.endswith("stopped before applying 2 changes (ClusterQueue): nothing more was written")


# -- waits check observedGeneration ---------------------------------------------------------------------------------

def test_a_condition_for_an_older_generation_is_not_trusted():
    cond = {"type": "Available", "status": "True"}
    stale = {"metadata": {"generation": 3}, "status": {"observedGeneration": 2, "conditions": [cond]}}
    assert Waiter.condition_met(stale, cond) is False
    current = {"metadata": {"generation": 3}, "status": {"observedGeneration": 3, "conditions": [cond]}}
    assert Waiter.condition_met(current, cond) is True
    per_condition = {"metadata": {"generation": 5}, "status": {"conditions": [dict(cond, observedGeneration=4)]}}
    assert Waiter.condition_met(per_condition, cond) is False
    per_condition["status"]["conditions"][0]["observedGeneration"] = 5
    assert Waiter.condition_met(per_condition, cond) is True
    no_generation_info = {"metadata": {"generation": 2}, "status": {"conditions": [cond]}}
    assert Waiter.condition_met(no_generation_info, cond) is True


def test_wait_timeout_says_the_condition_is_for_an_older_spec():
    client = FakeClient()
    client.store[("Deployment", "ns", "d")] = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns", "generation": 2},
        "status": {"observedGeneration": 1, "conditions": [{"type": "Available", "status": "True"}]}}
    if "apps/v1" not in client.kinds:
        client.kinds["apps/v1"] = {"Deployment": ("deployments", True)}
    from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult
    with pytest.raises(GpuaasError) as info:
        Waiter(client).wait_ready([ObjectResult(ObjectRef("apps/v1", "Deployment", "d", "ns"), "updated")],
                                  timeout=0, sleep=0)
    assert "is for an older spec (observedGeneration 1, generation 2)" in info.value.problems[0]


# -- secrets ----------------------------------------------------------------------------------------------------

class Module:
    def __init__(self, params):
        self.params = params
        self.no_log_values: set = set()


def test_kubeconfig_dict_credentials_are_registered_no_log():
    kubeconfig = {"apiVersion": "v1", "kind": "Config",
                  "clusters": [{"name": "c", "cluster": {"server": "https://k:6443", "certificate-authority-data": "Q0E="}}],
                  "users": [{"name": "u", "user": {"token": "sekret-token", "client-key-data": "S0VZ",
                                                   "auth-provider": {"config": {"refresh-token": "rt", "id-token": "it"}}}}],
                  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    module = Module({"kubeconfig": kubeconfig})
    kc.register_secrets(module)
    assert module.no_log_values == {"Q0E=", "sekret-token", "S0VZ", "rt", "it"}
    path_module = Module({"kubeconfig": "/home/me/.kube/config"})
    kc.register_secrets(path_module)
    assert path_module.no_log_values == set()


def test_tenants_module_registers_secrets_before_the_invocation_is_logged(monkeypatch):
    from ansible.module_utils import basic
    from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import entry

    logged = []
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, msg, log_args=None: logged.append(msg))
    module = entry.InventoryModule.__new__(entry.InventoryModule)  # the tenants and node_pools modules' class
    module.params = {"prometheus": {"url": "https://p", "token": "prom-token-123"},
                     "kubeconfig": {"users": [{"name": "u", "user": {"token": "kube-token-456"}}]}}
    module.no_log_values = set()
    module.argument_spec = {"prometheus": {"type": "dict", "no_log": False}, "kubeconfig": {"type": "raw"}}
    module.aliases = {}
    module.no_log = False
    module._name = "tenants"
    module._log_invocation()
    assert logged and "prom-token-123" not in logged[0] and "kube-token-456" not in logged[0]
    assert {"prom-token-123", "kube-token-456"} <= module.no_log_values
