# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ApplyEngine.read: one read of the live state that the ownership guard and the reconcile share (issue 21)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import engine as ae
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import results

from .fake_kube import FakeClient
from .test_apply_engine import cq, ns

KV = "kueue.x-k8s.io/v1beta2"


def test_reconcile_on_a_read_state_reads_nothing_again():
    client = FakeClient()
    ae.ApplyEngine(client).reconcile([ns("a"), cq("old")], tenant="t")
    client.reset_calls()
    engine = ae.ApplyEngine(client, guard_ownership=True)
    scope = results.PruneScope([(KV, "ClusterQueue")], tenant="t")
    desired = [ns("a"), cq("new")]
    state = engine.read(desired, prune=scope, tenant="t", also=[("v1", "ConfigMap")])
    assert engine.guard(state) == []
    reads = list(client.calls)
    assert sorted(c[1] for c in reads if c[0] == "list") == ["ClusterQueue", "ConfigMap", "Namespace"]
    assert [i["metadata"]["name"] for i in state.of_kind("ClusterQueue")] == ["old"]
    result = engine.reconcile(desired, prune=scope, tenant="t", state=state)
    assert [c for c in client.calls[len(reads):] if c[0] in ("list", "get")] == []  # nothing read twice
    assert result.requests["list"] == 3  # the read's requests are the reconcile's
    assert [r.ref.name for r in result.by_action("created")] == ["new"]
    assert [r.ref.name for r in result.by_action("deleted")] == ["old"]


def test_guard_on_a_read_state_refuses_before_any_write():
    client = FakeClient()
    client.resource(KV, "ClusterQueue").apply(cq("hand-made"), "kubectl")
    client.reset_calls()
    engine = ae.ApplyEngine(client, guard_ownership=True)
    state = engine.read([cq("hand-made")])
    with pytest.raises(GpuaasError) as info:
        engine.guard(state)
    assert info.value.details["reason"] == "NotOwned"
    assert client.writes == []


def test_forgotten_objects_are_created_again():
    client = FakeClient()
    engine = ae.ApplyEngine(client)
    engine.reconcile([cq("a")])
    state = engine.read([cq("a")])
    key = ("ClusterQueue", "", "a")
    client.store.pop(key)  # deleted since the read (a recreate)
    state.forget([key])
    result = engine.reconcile([cq("a")], state=state)
    assert [r.ref.name for r in result.by_action("created")] == ["a"]
