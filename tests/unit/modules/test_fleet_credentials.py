# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MultiKueue's credentials on the workers (issue 27).

Bound tokens (gpuaas_clusters.workers[].token_expiration_seconds): the manager's kubeconfig
of such a worker carries a token the worker's API server issued for MultiKueue's ServiceAccount with that lifetime
(TokenRequest), kept by a run while it is good for the live ServiceAccount with half its lifetime left, renewed
after that, never requested in check mode; no long-lived token Secret is left on the worker. The fake API servers
of test_fleet_runner issue the tokens here; the lab test (tests/integration/test_multicluster.py) has the real one.

Rotation (option rotate_workers, playbooks/rotate_fleet_credentials.yml): under the locks, MultiKueue's
ServiceAccount and token Secret deleted on the named workers only and written again (a new UID), the manager's
kubeconfig following; bad names, an unreachable worker or limit_tenants refused before any write. The lab test is
tests/integration/test_multicluster_two_workers.py (the old token refused by the real API server)."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import InventoryError
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.fleet_runner import FleetRunner

from fake_kube import FakeKube  # noqa: E402  (tests/unit/modules, on sys.path)
from test_fleet_runner import FLEET_SERVED, fleet_cluster, fleet_params, token_controller  # noqa: E402
from test_tenants import SERVED, tenancy_writes  # noqa: E402

NOW = 1_800_000_000
LIFETIME = 3600
ROOT_CA = "-----BEGIN CERTIFICATE-----\nworker-root-ca\n-----END CERTIFICATE-----\n"
TOKEN_PATH = "/api/v1/namespaces/kueue-system/serviceaccounts/gpuaas-multikueue/token"


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


class IssuingCluster(FakeKube):
    """A worker of the fleet (test_fleet_runner's kinds and token controller) whose API server answers TokenRequests
    like a real one: a JWT bound to the ServiceAccount's UID, expiring expirationSeconds after the (test's) wall
    clock; the root CA published in ConfigMap kube-root-ca.crt; every token issued is recorded."""

    def __init__(self, clock):
        super().__init__(SERVED + FLEET_SERVED + [("v1", "ConfigMap")])
        self.hooks.append(token_controller)
        self.clock = clock
        self.issued = []
        self.add({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "kube-root-ca.crt", "namespace": "kueue-system"}, "data": {"ca.crt": ROOT_CA}})

    def request(self, method, path, query=None, body=None, content_type=None, timeout=None):
        if method != "POST" or path != TOKEN_PATH:
            return super().request(method, path, query, body, content_type, timeout)
        self.calls.append(("request", method, path))
        account = self.objects[("ServiceAccount", "kueue-system", "gpuaas-multikueue")]
        lifetime = body["spec"]["expirationSeconds"]
        claims = {"exp": self.clock[0] + lifetime, "iat": self.clock[0], "sub": "system:serviceaccount:kueue-system:"
                  "gpuaas-multikueue", "kubernetes.io": {"namespace": "kueue-system", "serviceaccount": {
                      "name": "gpuaas-multikueue", "uid": account["metadata"]["uid"]}}}
        token = "%s.%s.sig%d" % (b64url({"alg": "RS256"}), b64url(claims), len(self.issued))
        self.issued.append((lifetime, token))
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "status": {"token": token}}


@pytest.fixture(name="clock")
def _clock():
    return [NOW]


@pytest.fixture(name="fleet")
def _fleet(clock):
    return {"hub": fleet_cluster(), "east": IssuingCluster(clock), "west": fleet_cluster()}


def bound_params(lifetime=LIFETIME):
    p = fleet_params()
    p["clusters"] = copy.deepcopy(p["clusters"])
    p["clusters"]["workers"][0]["token_expiration_seconds"] = lifetime  # east bound, west long-lived
    return p


def run(fleet, clock, p, check=False, diff=False):
    runner = FleetRunner(None, p, check_mode=check, diff=diff, sleep=lambda s: None, clock=lambda: 0.0,
                         clients=fleet)
    runner.wall_clock = lambda: float(clock[0])
    return runner.run()


def manager_token(fleet, worker="east"):
    secret = fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-" + worker)]
    return multikueue.kubeconfig_token(secret), json.loads(base64.b64decode(secret["data"]["kubeconfig"]))


def test_a_bound_worker_gets_a_token_of_its_lifetime_for_its_service_account_and_no_token_secret(fleet, clock):
    result = run(fleet, clock, bound_params())
    assert result["changed"] is True
    assert [issued[0] for issued in fleet["east"].issued] == [LIFETIME]
    token, kubeconfig = manager_token(fleet)
    assert token == fleet["east"].issued[0][1]
    claims = multikueue.token_claims(token)
    account = fleet["east"].objects[("ServiceAccount", "kueue-system", "gpuaas-multikueue")]
    assert claims["kubernetes.io"]["serviceaccount"]["uid"] == account["metadata"]["uid"]
    assert claims["exp"] == NOW + LIFETIME
    # the CA comes from the worker's kube-root-ca.crt, the server from the inventory
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == ROOT_CA
    assert cluster["server"] == "https://east.example:6443"
    # no long-lived token on the bound worker; the other worker keeps its Secret-based one
    assert ("Secret", "kueue-system", "gpuaas-multikueue-token") not in fleet["east"].objects
    assert ("Secret", "kueue-system", "gpuaas-multikueue-token") in fleet["west"].objects


def test_the_token_is_kept_while_half_its_lifetime_is_left_then_renewed(fleet, clock):
    run(fleet, clock, bound_params())
    first = manager_token(fleet)[0]
    clock[0] = NOW + LIFETIME // 2 - 60  # just under half spent: kept, nothing written anywhere
    for cluster in fleet.values():
        cluster.reset_calls()
    again = run(fleet, clock, bound_params())
    assert again["changed"] is False and len(fleet["east"].issued) == 1
    assert not [w for c in fleet.values() for w in tenancy_writes(c)]
    clock[0] = NOW + LIFETIME // 2 + 60  # past half: check mode says it would change and asks for no token ...
    preview = run(fleet, clock, bound_params(), check=True)
    assert preview["changed"] is True and len(fleet["east"].issued) == 1
    assert manager_token(fleet)[0] == first
    renewed = run(fleet, clock, bound_params())  # ... the run renews it
    assert renewed["changed"] is True and len(fleet["east"].issued) == 2
    token = manager_token(fleet)[0]
    assert token != first and multikueue.token_claims(token)["exp"] == clock[0] + LIFETIME


def test_a_recreated_service_account_gets_a_new_token_at_once(fleet, clock):
    """What playbooks/rotate_fleet_credentials.yml does: the ServiceAccount deleted (every token of it refused by the
    worker from then on) and written again with a new UID; the next run must not keep the dead token."""
    run(fleet, clock, bound_params())
    first = manager_token(fleet)[0]
    del fleet["east"].objects[("ServiceAccount", "kueue-system", "gpuaas-multikueue")]
    run(fleet, clock, bound_params())
    token = manager_token(fleet)[0]
    account = fleet["east"].objects[("ServiceAccount", "kueue-system", "gpuaas-multikueue")]
    assert token != first
    assert multikueue.token_claims(token)["kubernetes.io"]["serviceaccount"]["uid"] == account["metadata"]["uid"]


def test_switching_a_worker_to_bound_tokens_revokes_its_long_lived_token(fleet, clock):
    run(fleet, clock, fleet_params())
    assert ("Secret", "kueue-system", "gpuaas-multikueue-token") in fleet["east"].objects
    run(fleet, clock, bound_params())
    assert ("Secret", "kueue-system", "gpuaas-multikueue-token") not in fleet["east"].objects
    assert manager_token(fleet)[0] == fleet["east"].issued[-1][1]


@pytest.mark.parametrize("bad", [599, "an hour", True, 2 ** 31])
def test_a_lifetime_the_api_server_would_refuse_is_an_inventory_error(fleet, clock, bad):
    with pytest.raises(InventoryError) as info:
        run(fleet, clock, bound_params(bad))
    assert any("gpuaas_clusters.workers[0].token_expiration_seconds" in p for p in info.value.problems), \
        info.value.problems
    assert not [w for c in fleet.values() for w in c.writes]


def test_reusable_only_for_the_same_account_and_a_readable_expiry():
    claims = {"exp": NOW + 1000, "kubernetes.io": {"serviceaccount": {"uid": "u1"}}}
    token = "h.%s.s" % b64url(claims)
    assert multikueue.bound_token_reusable(token, "u1", 1800, NOW) is True       # 1000 s left of 1800: more than half
    assert multikueue.bound_token_reusable(token, "u1", 2400, NOW) is False      # 1000 of 2400: less than half
    assert multikueue.bound_token_reusable(token, "u2", 1800, NOW) is False      # another ServiceAccount
    assert multikueue.bound_token_reusable(token, None, 1800, NOW) is False      # no ServiceAccount now
    assert multikueue.bound_token_reusable("not-a-jwt", "u1", 1800, NOW) is False
    assert multikueue.token_claims("a.!!!.c") == {}


def account_uid(cluster):
    return cluster.objects[("ServiceAccount", "kueue-system", "gpuaas-multikueue")]["metadata"]["uid"]


def test_rotating_one_worker_recreates_its_account_and_token_and_touches_no_other(fleet, clock):
    run(fleet, clock, bound_params())
    east_uid, west_uid = account_uid(fleet["east"]), account_uid(fleet["west"])
    east_token = manager_token(fleet)[0]
    west_secret = fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-west")]["data"]
    for cluster in fleet.values():
        cluster.reset_calls()
    result = run(fleet, clock, dict(bound_params(), rotate_workers=["east"]))
    assert result["changed"] is True and result["workers"]["rotated"] == ["east"]
    assert ("delete", "ServiceAccount") in fleet["east"].verbs()
    assert not [c for c in fleet["west"].verbs() if c[0].startswith("delete") and c[1] != "Lease"]  # its lock only
    assert account_uid(fleet["east"]) != east_uid and account_uid(fleet["west"]) == west_uid
    token = manager_token(fleet)[0]  # east is bound: a new token, for the new account
    assert token != east_token
    assert multikueue.token_claims(token)["kubernetes.io"]["serviceaccount"]["uid"] == account_uid(fleet["east"])
    assert fleet["hub"].objects[("Secret", "kueue-system", "gpuaas-multikueue-west")]["data"] == west_secret
    deleted = {(d["kind"], d["name"]) for d in result["clusters"]["east"]["deleted"]}
    assert ("ServiceAccount", "gpuaas-multikueue") in deleted


def test_rotating_every_worker_with_a_star_and_a_long_lived_token_secret_is_written_again(fleet, clock):
    run(fleet, clock, fleet_params())
    uids = {name: account_uid(fleet[name]) for name in ("east", "west")}
    result = run(fleet, clock, dict(fleet_params(), rotate_workers=["*"]))
    assert result["workers"]["rotated"] == ["east", "west"]
    for name in ("east", "west"):
        assert account_uid(fleet[name]) != uids[name]
        secret = fleet[name].objects[("Secret", "kueue-system", "gpuaas-multikueue-token")]
        assert secret["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "gpuaas-multikueue"
    # the next run without rotation changes nothing
    assert run(fleet, clock, fleet_params())["changed"] is False


@pytest.mark.parametrize("extra, words", [
    ({"rotate_workers": ["north"]}, "north, not a present worker"),
    ({"rotate_workers": ["east"], "limit_tenants": ["vision"]}, "not with limit_tenants"),
])
def test_a_rotation_that_cannot_be_done_writes_nothing_anywhere(fleet, clock, extra, words):
    run(fleet, clock, fleet_params())
    for cluster in fleet.values():
        cluster.reset_calls()
    with pytest.raises(GpuaasError) as info:
        run(fleet, clock, dict(fleet_params(), **extra))
    assert "rotate_workers" in info.value.message
    assert any(words in p for p in info.value.problems), info.value.problems
    assert not [w for c in fleet.values() for w in c.writes]


def test_check_mode_reports_the_rotation_and_deletes_nothing(fleet, clock):
    run(fleet, clock, fleet_params())
    uid = account_uid(fleet["east"])
    for cluster in fleet.values():
        cluster.reset_calls()
    result = run(fleet, clock, dict(fleet_params(), rotate_workers=["east"]), check=True)
    assert result["changed"] is True and result["workers"]["rotated"] == ["east"]
    assert ("delete-dry", "ServiceAccount") in fleet["east"].verbs()
    assert not [w for c in fleet.values() for w in c.writes] and account_uid(fleet["east"]) == uid
