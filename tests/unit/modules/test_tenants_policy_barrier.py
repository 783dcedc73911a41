# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 22 item 8: a policy update is enforced before the objects it governs are applied.

The fake API server below keeps its admission policy cache the way kube-apiserver does: behind the stored object.
After the tenants run writes ``gpuaas-require-kueue-queue``, the server keeps judging ScaledObjects by the version it
enforced before for ``lag`` more requests, and that version pins the platform credential to the previous Prometheus
URL (or to none). The integration test on the lab is tests/integration/test_isolation.py::
test_a_prometheus_migration_converges_in_one_run.
"""

from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.barrier import Barrier
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import tenancy_runner

from test_tenants import NODES, SERVED, params  # noqa: E402  (tests/unit/modules, on sys.path through conftest)
from fake_kube import FakeKube  # noqa: E402
from module_utils.fake_kube import api_exception  # noqa: E402  (the shared fake, on sys.path through fake_kube)

NEW_URL = "http://prometheus-new.monitoring:9090"
POLICY = ("ValidatingAdmissionPolicy", None, admission.POLICY_NAME)


def pinned_url(policy):
    """The Prometheus URL a policy object's credential rule pins (rule 11), '' when none is configured."""
    rule = next(v for v in policy["spec"]["validations"] if "tr.metadata.serverAddress ==" in v["expression"])
    return re.search(r"tr\.metadata\.serverAddress == '([^']*)'", rule["expression"]).group(1)


class LaggingClient(FakeKube):
    """The tenants fake whose validating admission judges ScaledObjects by a policy version ``lag`` requests old."""

    def __init__(self, nodes=()):
        super().__init__(SERVED)
        for obj in nodes:
            self.add(obj)
        self.enforced = None  # the policy version the fake API server judges by
        self.lag = 0
        self.admission.append(self.lagging_policy_cache)
        self.hooks.append(self.first_policy_enforced)

    def lagging_policy_cache(self, resource, body, dry_run):
        if resource.kind != "ScaledObject" or self.enforced is None:
            return
        uses = [tr for tr in body["spec"].get("triggers") or [] if tr.get("authenticationRef")]
        if self.lag > 0:
            self.lag -= 1  # the informer has not delivered the update yet
        else:
            self.enforced = copy.deepcopy(self.objects.get(POLICY))
        url = pinned_url(self.enforced) if self.enforced else None
        if uses and url is not None and any(tr["metadata"].get("serverAddress") != url for tr in uses):
            raise api_exception(403, "Forbidden", (
                'scaledobjects.keda.sh "%s" is forbidden: ValidatingAdmissionPolicy \'%s\' with binding \'%s\' '
                'denied request: The credential gpuaas-prometheus may only be sent to the platform Prometheus %s'
                % (body["metadata"]["name"], admission.POLICY_NAME, admission.POLICY_NAME, url or "(none configured)")))

    def first_policy_enforced(self, kind, obj):
        if kind == "ValidatingAdmissionPolicy" and self.enforced is None:
            self.enforced = {}  # first policy: enforced from now on (lag counts from the next update)


def without_prometheus():
    p = params(prometheus={})
    p["tenants"] = copy.deepcopy(p["tenants"])
    for tenant in p["tenants"]:
        tenant.pop("autoscaling", None)
    return p


def with_prometheus():
    return params(prometheus={"url": NEW_URL, "token": "platform-token"})


class Clock:
    """Monotonic time that moves only when the runner sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def converge(client, p, clock):
    return tenancy_runner.TenancyRunner(client, p, sleep=clock.sleep, clock=lambda: clock.now).run()


@pytest.fixture
def migrated_cluster():
    """A cluster the tenants run reconciled without gpuaas_prometheus (the policy pins the credential to no URL)."""
    client = LaggingClient(NODES)
    converge(client, without_prometheus(), Clock())
    client.enforced = copy.deepcopy(client.objects[POLICY])
    assert pinned_url(client.enforced) == ""
    client.reset_calls()
    return client


def test_prometheus_migration_converges_in_one_run(migrated_cluster):
    client = migrated_cluster
    client.lag = 3
    clock = Clock()
    result = converge(client, with_prometheus(), clock)
    so = client.objects[("ScaledObject", "nlp-serve", "vllm")]
    assert so["spec"]["triggers"][0]["metadata"]["serverAddress"] == NEW_URL
    assert result["changed"] is True
    # three probes refused by the previous version, the fourth admitted, then the real apply: never refused
    kinds = [c for c in client.verbs() if c[1] == "ScaledObject" and c[0] != "list" and c[0] != "get"]
    assert kinds == [("refused-dry", "ScaledObject")] * 3 + [("apply-dry", "ScaledObject"), ("apply", "ScaledObject")]
    assert clock.sleeps == [0.1, 0.2, 0.4]
    # the policy was written before the first probe
    first_probe = client.verbs().index(("refused-dry", "ScaledObject"))
    assert ("apply", "ValidatingAdmissionPolicy") in client.verbs()[:first_probe]


def test_without_the_barrier_the_same_migration_fails(migrated_cluster, monkeypatch):
    """The fake reproduces the lab's failure when nothing waits (the guard above can fail)."""
    monkeypatch.setattr(tenancy_runner.TenancyRunner, "wait_for_policies", lambda self, engine, written, pending: None)
    migrated_cluster.lag = 3
    with pytest.raises(GpuaasError) as err:
        converge(migrated_cluster, with_prometheus(), Clock())
    assert "may only be sent to the platform Prometheus (none configured)" in str(err.value.message)


def test_a_policy_never_enforced_stops_the_run_before_what_it_governs(migrated_cluster):
    client = migrated_cluster
    client.lag = 10 ** 6
    clock = Clock()
    with pytest.raises(GpuaasError) as err:
        converge(client, with_prometheus(), clock)
    assert err.value.details["reason"] == "PolicyNotEnforced"
    assert "with the previous version of the admission policy %s" % admission.POLICY_NAME in err.value.message
    assert "ScaledObject nlp-serve/vllm" in err.value.message and "kubectl get validatingadmissionpolicy" in err.value.hint
    assert ("apply", "ScaledObject") not in client.verbs() and ("refused", "ScaledObject") not in client.verbs()
    assert tenancy_runner.POLICY_ENFORCEMENT_TIMEOUT <= clock.now <= tenancy_runner.POLICY_ENFORCEMENT_TIMEOUT + 2.0
    assert max(clock.sleeps) == 2.0


def test_a_refusal_by_anything_else_ends_the_wait_at_once(migrated_cluster, monkeypatch):
    """The new version refusing the object (or another admission plugin) is the real apply's error to report."""
    engine = ApplyEngine(migrated_cluster)
    other = GpuaasError('admission webhook "vscaledobject.keda.sh" denied the request: the target does not exist')
    monkeypatch.setattr(tenancy_runner, "dry_run_refusal", lambda engine, obj: other)
    clock = Clock()
    runner = tenancy_runner.TenancyRunner(migrated_cluster, with_prometheus(), sleep=clock.sleep, clock=lambda: clock.now)
    runner.wait_enforced(engine, admission.POLICY_NAME, {"kind": "ScaledObject", "metadata": {"name": "x"}})
    assert clock.sleeps == []


def test_no_wait_when_no_policy_changed(migrated_cluster):
    client = migrated_cluster
    converge(client, without_prometheus(), Clock())  # policy unchanged: no probe
    assert not [c for c in client.verbs() if c[0] in ("apply-dry", "refused-dry")]


def test_check_mode_previews_the_migration_without_a_dry_run_the_live_policy_would_refuse(migrated_cluster):
    """--check of the same migration: the ScaledObject is reported (not dry-run: the live, previous policy version
    would refuse it, though the real run passes), nothing is written, nothing waited for."""
    client = migrated_cluster
    client.lag = 3
    before = copy.deepcopy(dict(client.objects))
    result = tenancy_runner.TenancyRunner(client, with_prometheus(), check_mode=True, sleep=lambda s: None,
                                          clock=lambda: 0.0).run()
    assert result["changed"] is True
    assert {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": "vllm", "namespace": "nlp-serve"} \
        in result["created"]
    assert not [c for c in client.verbs() if c[1] == "ScaledObject" and c[0] not in ("list", "get")]
    assert dict(client.objects) == before and client.lag == 3


def test_engine_barrier_runs_after_the_last_tier_of_its_kinds_with_what_follows():
    """kube/engine.py, generic: the barrier sees what was written of its kinds and the later tiers' objects."""
    client = LaggingClient()
    engine = ApplyEngine(client)
    seen = []
    engine.barriers.append(Barrier(("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"),
                                   lambda written, pending: seen.append(
                                       ([r.ref.kind for r in written], [o["kind"] for o in pending], len(client.calls)))))
    policy, binding = admission.namespace_labels_policy()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    so = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "s", "namespace": "team"},
          "spec": {"scaleTargetRef": {"name": "d"}, "triggers": []}}
    engine.reconcile([so, binding, ns, policy])
    assert len(seen) == 1
    written, pending, calls_then = seen[0]
    assert sorted(written) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert pending == ["ScaledObject"]
    assert ("apply", "ScaledObject") not in client.verbs()[:calls_then]
    seen.clear()
    engine.reconcile([so, binding, ns, policy])  # nothing written: no wait
    assert seen == []


def test_enforcement_probes_are_the_objects_pinned_by_the_policy():
    pinned = {"kind": "ScaledObject", "spec": {"triggers": [{"authenticationRef": {
        "name": "gpuaas-prometheus", "kind": "ClusterTriggerAuthentication"}}]}}
    own = {"kind": "ScaledObject", "spec": {"triggers": [{"authenticationRef": {"name": "mine"}}]}}
    ns = {"kind": "Namespace", "metadata": {"name": "a"}}
    assert admission.enforcement_probes(admission.POLICY_NAME, [own, ns, pinned]) == [pinned]
    assert admission.enforcement_probes(admission.NAMESPACE_POLICY_NAME, [own, ns, pinned]) == [ns]
    assert admission.enforcement_probes("someone-elses-policy", [own, ns, pinned]) == []
