# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run with limit_tenants (onboard/offboard one tenant) reads what that tenant has, not the whole tenancy.

Issue 15: onboarding one tenant at 500 tenants must cost what one tenant costs. Its LISTs carry the label
selector ``gpuaas.io/tenant in (<limit>)``; the cross-tenant checks work on the inventory and the nodes, so they
still see every tenant, and prune, drain and moved LocalQueues still work on the named tenant's objects.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_scope import tenants_selector

from test_tenants import cluster, params, run  # noqa: E402  (tests/unit/modules, on sys.path through conftest)
from module_utils.fake_kube import FakeResource  # noqa: E402  (the shared fake, on sys.path through test_tenants)

TENANT = "gpuaas.io/tenant"


@pytest.fixture
def lists(monkeypatch):
    """Every LIST: (kind, namespace, selector, tenants of the objects returned)."""
    seen = []
    original = FakeResource.list

    def recording(self, namespace=None, label_selector=None, field_selector=None):
        out = original(self, namespace=namespace, label_selector=label_selector, field_selector=field_selector)
        seen.append((self.kind, namespace, label_selector, {(o["metadata"].get("labels") or {}).get(TENANT) for o in out}))
        return out

    monkeypatch.setattr(FakeResource, "list", recording)
    return seen


def _converged():
    client = cluster()
    run(client, params())
    return client


def _owned_by(client, tenant):
    return {k for k, o in client.objects.items() if (o["metadata"].get("labels") or {}).get(TENANT) == tenant}


def test_the_selector():
    assert tenants_selector(None) == "app.kubernetes.io/managed-by=gpuaas.platform,gpuaas.io/component=tenants"
    assert tenants_selector(["vision", "nlp", "vision"]) == \
        "app.kubernetes.io/managed-by=gpuaas.platform,gpuaas.io/component=tenants,gpuaas.io/tenant in (nlp,vision)"


def test_onboarding_one_tenant_lists_only_its_objects_and_changes_no_other(lists):
    client = _converged()
    before = copy.deepcopy(dict(client.objects))
    p = params(limit_tenants=["speech"])
    p["tenants"] = p["tenants"] + [{"name": "speech", "namespaces": ["speech-dev"], "cohort": "research",
                                    "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 0}}],
                                    "access": {"users": ["speech-team"]}}]
    del lists[:]
    result = run(client, p)
    assert result["summary"]["created"] == len(_owned_by(client, "speech")) > 0
    assert result["summary"]["deleted"] == 0 and result["tenants"] == {"speech": ["speech-dev"]}
    assert {k: v for k, v in client.objects.items() if k in before and k[0] != "Lease"} == \
        {k: v for k, v in before.items() if k[0] != "Lease"}
    # no LIST of the tenancy's kinds came back with another tenant's objects (nodes are read for the capacity check)
    tenancy = [x for x in lists if x[0] not in ("Node", "Lease")]
    assert tenancy and all(x[3] <= {"speech"} for x in tenancy), tenancy
    assert all("gpuaas.io/tenant in (speech)" in x[2] or x[1] == "speech-dev" for x in tenancy), tenancy


def test_a_limited_run_still_checks_namespace_claims_and_capacity_across_every_tenant():
    client = _converged()
    p = params(limit_tenants=["speech"])
    p["tenants"] = p["tenants"] + [{"name": "speech", "namespaces": ["nlp-train"],
                                    "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}}]}]
    before = copy.deepcopy(dict(client.objects))
    with pytest.raises(GpuaasError) as info:
        run(client, p)
    text = " ".join([info.value.message] + list(info.value.problems or []))
    assert "already claimed by gpuaas_tenants[0] (nlp)" in text, text
    assert "quotas ask for 17 nvidia.com/gpu on flavor 'h100'" in text and "nlp=8" in text, text
    assert dict(client.objects) == before


def test_a_limited_run_prunes_what_the_named_tenant_no_longer_has():
    client = _converged()
    p = params(limit_tenants=["vision"])
    p["tenants"][1]["namespaces"] = ["vision-dev"]
    result = run(client, p)
    deleted = {(d["kind"], d.get("namespace"), d["name"]) for d in result["deleted"]}
    assert ("LocalQueue", "vision-prod", "default") in deleted
    assert all(ns == "vision-prod" for _kind, ns, _name in deleted), deleted
    assert result["kept_namespaces"] == ["vision-prod"]


def test_a_limited_run_recreates_a_local_queue_moved_from_another_tenant(lists):
    client = _converged()
    p = params(limit_tenants=["analytics"])
    p["tenants"][1]["namespaces"] = ["vision-dev"]
    p["tenants"][2]["namespaces"] = ["analytics", "vision-prod"]
    del lists[:]
    result = run(client, p)
    assert result["recreated_local_queues"] == ["vision-prod/default"]
    assert client.objects[("LocalQueue", "vision-prod", "default")]["spec"]["clusterQueue"] == "analytics"
    # read whatever tenant it belonged to: outside the tenant's LIST selector, so by GET (one read for the run)
    assert ("get", "LocalQueue") in client.verbs()
    assert all("gpuaas.io/tenant in (analytics)" in x[2] for x in lists if x[0] == "LocalQueue"), lists
