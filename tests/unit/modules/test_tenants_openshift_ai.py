# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants run with OpenShift AI HardwareProfiles (issue 23) against the in-memory fake API: applied with the
tenant, unchanged on the second run, pruned when the tenant is offboarded, and nothing written on a cluster that does
not serve the API. (The real API server and the upstream schema: tests/integration/test_openshift_ai.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from test_tenants import cluster, run, tenancy_writes  # noqa: E402  (tests/unit/modules, on sys.path)

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
EXAMPLE = (Path(__file__).resolve().parents[3] / "playbooks" / "inventory" / "examples" / "openshift-ai" / "group_vars"
           / "all" / "tenants.yml")
HWP_V = "infrastructure.opendatahub.io/v1"


def serves_profiles():
    """The tenants fake (no nodes: the capacity check is off) also serving OpenShift AI's HardwareProfiles."""
    return cluster(served=[(HWP_V, "HardwareProfile")], nodes=())


def names(client, kind):
    return sorted((ns, name) for (k, ns, name) in client.objects if k == kind)


def params(**extra):
    inv = yaml.safe_load(EXAMPLE.read_text())
    out = {"flavors": inv["gpuaas_flavors"], "cohorts": inv["gpuaas_cohorts"], "priorities": inv["gpuaas_priorities"],
           "tenants": inv["gpuaas_tenants"], "openshift_ai": inv["gpuaas_openshift_ai"], "prometheus": {},
           "allow_overcommit": False, "check_capacity": False, "delete_namespaces": False, "drain_timeout": 30,
           "limit_tenants": None, "platform": "openshift", "keda_namespace": "openshift-keda", "concurrency": 4}
    out.update(extra)
    return out


def test_profiles_converge_stay_unchanged_and_go_with_their_tenant():
    client = serves_profiles()
    first = run(client, params())
    assert first["changed"] is True
    assert names(client, "HardwareProfile") == [
        ("ds-notebooks", "gpuaas-a100-mig-1g"), ("llm-notebooks", "gpuaas-h100-batch"),
        ("llm-notebooks", "gpuaas-h100-production"), ("llm-train", "gpuaas-h100-batch"),
        ("llm-train", "gpuaas-h100-production")]
    client.reset_calls()
    again = run(client, params())
    assert again["changed"] is False and tenancy_writes(client) == []
    offboard = params()
    offboard["tenants"][0]["state"] = "absent"  # llm-finetune
    gone = run(client, offboard)
    assert sorted((d["namespace"], d["name"]) for d in gone["deleted"] if d["kind"] == "HardwareProfile") == [
        ("llm-notebooks", "gpuaas-h100-batch"), ("llm-notebooks", "gpuaas-h100-production"),
        ("llm-train", "gpuaas-h100-batch"), ("llm-train", "gpuaas-h100-production")]
    assert names(client, "HardwareProfile") == [("ds-notebooks", "gpuaas-a100-mig-1g")]


def test_turning_a_tenant_off_prunes_only_its_profiles():
    client = serves_profiles()
    run(client, params())
    p = params()
    p["tenants"][1]["hardware_profiles"] = False  # data-science
    result = run(client, p)
    assert [(d["kind"], d["namespace"], d["name"]) for d in result["deleted"]] == [
        ("HardwareProfile", "ds-notebooks", "gpuaas-a100-mig-1g")]


def test_no_api_no_write():
    client = cluster(nodes=())
    with pytest.raises(GpuaasError) as info:
        run(client, params())
    assert "does not serve infrastructure.opendatahub.io/v1" in info.value.message
    assert tenancy_writes(client) == [] and client.count("apply") == 0  # not even a dry run
