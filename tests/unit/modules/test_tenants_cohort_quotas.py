# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants run with cohort quotas (issue 26): applied as the Cohort's resourceGroups, and refused before any
write on a cluster whose Kueue cannot hold them (no Cohort kind: Kueue before v0.9)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

from test_tenants import cluster, params, run  # noqa: E402  (tests/unit/modules, on sys.path through conftest)

BUDGET = [{"flavor": "h100", "resources": {"cpu": 10}}]


def with_research_budget() -> dict:
    p = params()
    p["cohorts"] = copy.deepcopy(p["cohorts"])
    research = [c for c in p["cohorts"] if c["name"] == "research"][0]
    research["quotas"] = copy.deepcopy(BUDGET)
    return p


def no_cohort_kind():
    """A cluster whose Kueue serves ClusterQueues but no Cohort kind."""
    return cluster(unserved=["Cohort"])


def test_the_cohort_budget_is_applied_as_its_resource_groups():
    client = cluster()
    run(client, with_research_budget())
    spec = client.objects[("Cohort", None, "research")]["spec"]
    assert spec["resourceGroups"] == [{"coveredResources": ["cpu"], "flavors": [
        {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "10"}]}]}]
    assert not run(client, with_research_budget())["changed"]


def test_a_cluster_without_the_cohort_kind_is_refused_before_any_write():
    client = no_cohort_kind()
    with pytest.raises(GpuaasError) as info:
        run(client, with_research_budget())
    assert "serves no Kueue Cohort API" in info.value.message
    assert "gpuaas_cohorts[1].quotas (research)" in info.value.message
    assert info.value.hint and info.value.details["reason"] == "CohortQuotaUnsupported"
    assert client.side_effects() == []


def test_a_limited_run_applies_no_cohort_so_it_is_not_refused():
    client = no_cohort_kind()
    result = run(client, dict(with_research_budget(), limit_tenants=["nlp"]))
    assert result["changed"] and ("Cohort", None, "research") not in client.objects
