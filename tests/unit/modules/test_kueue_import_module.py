# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kueue_import module on the unit fake of the API server: read-only, dest written once, check mode, selector."""

from __future__ import annotations

import functools
import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException
from ansible_collections.gpuaas.platform.plugins.modules.kueue_import import run_import

from fake_kube import FakeKube
from module_utils.fake_kube import foreign_object  # noqa: E402  (the shared fake, on sys.path through fake_kube)

KV = "kueue.x-k8s.io/v1beta2"
SERVED = [(KV, k) for k in ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")] + [
    ("rbac.authorization.k8s.io/v1", "RoleBinding")]


# objects a kubectl user made, to import
obj = functools.partial(foreign_object, manager="kubectl-create")


def cluster(selected=True):
    kube = FakeKube(SERVED)
    labels = {"migrate": "yes"} if selected else {}
    kube.add(obj("ResourceFlavor", "h100", spec={"nodeLabels": {"pool": "h100"}}, labels=labels))
    kube.add(obj("Cohort", "org", spec={}, labels=labels))
    kube.add(obj("Cohort", "research", spec={"parentName": "org"}, labels=labels))
    kube.add(obj("ClusterQueue", "nlp", labels=labels, spec={
        "cohortName": "research", "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": "nlp"}},
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4", "lendingLimit": "2"}]}]}]}))
    kube.add(obj("LocalQueue", "default", "nlp-train", {"clusterQueue": "nlp"}, labels=labels))
    kube.add(obj("Namespace", "nlp-train", api_version="v1"))
    return kube


def test_import_writes_dest_once_and_never_writes_the_cluster(tmp_path):
    kube = cluster()
    dest = str(tmp_path / "tenants.yml")
    first, warnings = run_import(kube, {"dest": dest})
    assert first["changed"] is True and kube.writes == []
    with open(dest) as handle:
        text = handle.read()
    assert text.startswith("---\n# Written by gpuaas.platform.kueue_import")
    written = yaml.safe_load(text)
    assert written["gpuaas_tenants"] == [{
        "name": "nlp", "namespaces": ["nlp-train"], "cohort": "research",
        "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "8"}, "borrowing_limit": {"nvidia.com/gpu": "4"},
                    "lending_limit": {"nvidia.com/gpu": "2"}}]}]
    assert written["gpuaas_cohorts"] == [{"name": "org"}, {"name": "research", "parent": "org"}]
    assert written["gpuaas_tenants_adopt"] == first["adopt"]
    assert "Namespace/nlp-train" in first["adopt"] and "ClusterQueue/nlp" in first["adopt"]
    TenantModel.from_inventory(written)
    assert first["objects"] == {"ResourceFlavor": 1, "Cohort": 2, "WorkloadPriorityClass": 0, "ClusterQueue": 1,
                                "LocalQueue": 1}
    assert warnings == first["import_warnings"]
    again, _warnings = run_import(kube, {"dest": dest})
    assert again["changed"] is False


def test_check_mode_says_it_would_write_and_does_not(tmp_path):
    dest = str(tmp_path / "tenants.yml")
    out, _warnings = run_import(cluster(), {"dest": dest}, check_mode=True, diff=True)
    assert out["changed"] is True and not os.path.exists(dest)
    assert "gpuaas_tenants:" in out["diff"]["after"] and out["diff"]["before"] == ""


def test_without_dest_nothing_changes():
    out, _warnings = run_import(cluster(), {})
    assert out["changed"] is False and "dest" not in out
    assert [x["name"] for x in out["inventory"]["gpuaas_tenants"]] == ["nlp"]


def test_label_selector_limits_the_kueue_objects():
    kube = cluster(selected=False)
    kube.add(obj("ClusterQueue", "picked", labels={"migrate": "yes"}, spec={
        "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": "picked"}}}))
    kube.add(obj("LocalQueue", "default", "picked-ns", {"clusterQueue": "picked"}, labels={"migrate": "yes"}))
    out, _warnings = run_import(kube, {"label_selector": "migrate=yes"})
    assert [x["name"] for x in out["inventory"]["gpuaas_tenants"]] == ["picked"]
    assert out["inventory"]["gpuaas_flavors"] == []


def test_a_missing_directory_is_an_error_that_says_what_to_do(tmp_path):
    with pytest.raises(GpuaasError) as info:
        run_import(cluster(), {"dest": str(tmp_path / "nope" / "tenants.yml")})
    assert "does not exist" in info.value.message and "create the inventory directory" in info.value.hint


def test_forbidden_role_bindings_are_a_warning():
    kube = cluster()
    res = kube.resource("rbac.authorization.k8s.io/v1", "RoleBinding")

    def forbidden(namespace=None, label_selector=None, field_selector=None):
        raise ApiException(status=403, reason="Forbidden")

    res.list = forbidden
    out, warnings = run_import(kube, {})
    assert any(w.startswith("cannot list RoleBinding (forbidden)") for w in warnings)
    assert out["inventory"]["gpuaas_tenants"][0]["name"] == "nlp"
