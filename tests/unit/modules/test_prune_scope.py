# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prune scope per kind (issue 21): a full tenancy or node pool run reads Secrets only in the KEDA namespace, where
the collection keeps its one Secret, never cluster-wide (what the shipped least-privilege account is refused), and
still finds every owned object of the other kinds, a removed tenant's included."""

from __future__ import annotations

from ansible_collections.gpuaas.platform.plugins.module_utils.kube import engine as ae
from ansible_collections.gpuaas.platform.plugins.module_utils.kube import ownership, results
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_runner import NodePoolsRunner

import fake_kube  # noqa: E402  (tests/unit/modules, on sys.path through conftest)
from test_tenants import cluster, params, run  # noqa: E402

PROM = {"url": "https://prom:9091", "token": "s3cret"}


def least_privilege_cluster(secret_namespaces=("keda",)):
    """The tenants fake with the shipped role's Secret rule: LIST Secrets only in the KEDA namespace (403 else)."""
    client = cluster()
    client.forbid("list", "Secret", except_namespaces=secret_namespaces)
    return client


def lists(client):
    """Every LIST since the last reset_calls (the forbidden ones included): (kind, namespace or None)."""
    return [(c[1], c[2]) for c in client.calls if c[0] == "list"]


def owned(kind, name, namespace=None, tenant=None, api_version="v1"):
    labels = {ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY_VALUE, ownership.COMPONENT_LABEL: "tenants"}
    if tenant:
        labels[ownership.TENANT_LABEL] = tenant
    meta = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_full_tenancy_run_reads_secrets_only_in_the_keda_namespace():
    client = least_privilege_cluster()
    first = run(client, params(prometheus=PROM))
    assert ("Secret", "keda", "gpuaas-prometheus") in client.objects and first["changed"] is True
    assert {ns for kind, ns in lists(client) if kind == "Secret"} == {"keda"}  # there only
    # prune on, the credential no longer needed: the Secret is pruned, read in the KEDA namespace only
    client.reset_calls()
    pruned = run(client, params(prometheus={"url": "http://prom:9090"}, prune=True))
    assert {"apiVersion": "v1", "kind": "Secret", "name": "gpuaas-prometheus", "namespace": "keda"} in pruned["deleted"]
    assert {ns for kind, ns in lists(client) if kind == "Secret"} == {"keda"}
    # the other namespaced kinds stay one label-selected LIST across namespaces (the role may list them)
    assert [ns for kind, ns in lists(client) if kind == "LocalQueue"][-1] is None


def test_empty_inventory_report_reads_secrets_only_in_the_keda_namespace():
    client = least_privilege_cluster()
    run(client, params(prometheus=PROM))
    client.reset_calls()
    result = run(client, params(tenants=[], flavors=[], cohorts=[], priorities=[], prometheus={}))
    assert result["drift"]["skipped_writes"] is True
    assert {"apiVersion": "v1", "kind": "Secret", "name": "gpuaas-prometheus", "namespace": "keda"} in \
        result["drift"]["unmanaged_objects"]
    assert {ns for kind, ns in lists(client) if kind == "Secret"} == {"keda"}


def test_owned_secret_outside_the_keda_namespace_is_never_read_nor_pruned():
    client = least_privilege_cluster(secret_namespaces=("keda", "elsewhere"))
    stray = owned("Secret", "gpuaas-prometheus", "elsewhere")
    client.objects[("Secret", "elsewhere", "gpuaas-prometheus")] = stray
    result = run(client, params(prune=True))
    assert ("Secret", "elsewhere", "gpuaas-prometheus") in client.objects
    assert not [d for d in result["deleted"] if d["kind"] == "Secret"]
    assert ("Secret", "elsewhere") not in lists(client) and ("Secret", None) not in lists(client)


def test_removed_tenant_is_pruned_in_every_namespace_even_one_that_lost_its_tenant_label():
    client = least_privilege_cluster()
    run(client, params(prometheus=PROM))
    # an admin removed the tenant label from one of vision's namespaces; its queue and bindings are still ours
    del client.objects[("Namespace", None, "vision-prod")]["metadata"]["labels"]["gpuaas.io/tenant"]
    p = params(prometheus=PROM, prune=True)
    p["tenants"] = [x for x in p["tenants"] if x["name"] != "vision"]
    result = run(client, p)
    deleted = {(d["kind"], d.get("namespace"), d["name"]) for d in result["deleted"]}
    for ns in ("vision-dev", "vision-prod"):
        assert ("LocalQueue", ns, "default") in deleted
        assert ("RoleBinding", ns, "gpuaas-users") in deleted
    assert ("Secret", "keda", "gpuaas-prometheus") in client.objects  # still desired
    assert ("Secret", None) not in lists(client)


def test_engine_reads_a_pinned_kind_only_in_its_namespaces_whatever_their_number():
    client = fake_kube.FakeKube([("v1", "ConfigMap")])
    engine = ae.ApplyEngine(client)
    cms = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}}
           for ns in ("a", "b", "c", "d", "e")]
    engine.reconcile(cms, tenant="t")
    client.reset_calls()
    scope = results.PruneScope([("v1", "ConfigMap")], kind_namespaces={"ConfigMap": ["a", "b", "c", "d"]})
    result = ae.ApplyEngine(client).reconcile(cms[:1], prune=scope)
    lists = sorted(c[2] for c in client.calls if c[0] == "list")
    assert lists == ["a", "b", "c", "d"]  # one LIST per pinned namespace, none cluster-wide
    assert sorted(r.ref.namespace for r in result.by_action("deleted")) == ["b", "c", "d"]
    assert ("ConfigMap", "e", "c") in client.store  # owned, but outside the kind's namespaces
    assert scope.namespaces_of("ConfigMap") == ["a", "b", "c", "d"] and scope.namespaces_of("Namespace") is None
    # not pinned: many namespaces are one cluster-wide LIST, as before
    client.reset_calls()
    ae.ApplyEngine(client).reconcile(cms, tenant="t")
    assert [c[2] for c in client.calls if c[0] == "list"] == [None]


def test_node_pools_read_secrets_only_in_the_keda_namespace():
    kube = fake_kube.FakeKube([("v1", "Secret"), ("v1", "Node"), ("keda.sh/v1alpha1", "ScaledObject"),
                               ("keda.sh/v1alpha1", "ClusterTriggerAuthentication")])
    inv = {"flavors": [], "tenants": [], "prometheus": {"url": "https://prom:9091", "token": "t"},
           "check_capacity": False, "check_templates": False, "node_pools": [], "keda_namespace": "keda"}
    kube.add(owned("Secret", "gpuaas-prometheus", "keda"))
    kube.store[("Secret", "keda", "gpuaas-prometheus")]["metadata"]["labels"][ownership.COMPONENT_LABEL] = "node-pools"
    for prune in (False, True):
        kube.reset_calls()
        out = NodePoolsRunner(kube, dict(inv, prune=prune)).run()
        secret_lists = [c[2] for c in kube.calls if c[0] == "list" and c[1] == "Secret"]
        assert secret_lists == ["keda"], (prune, kube.calls)
    assert [d["kind"] for d in out["deleted"]] == ["Secret"]
