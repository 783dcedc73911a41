# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpuaas_clusters`` (issue 27): the fleet contract, its validation before any write, and the quota split.

Every expected value is written by hand from the inventory in the test (the split arithmetic is spelled out in the
comments), never copied from the implementation's output.
"""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import clusters
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import (
    InventoryError,
    TenantModel,
    worker_quotas,
)

MANAGER = {"name": "hub", "auth": {"kubeconfig": "/etc/gpuaas/hub.kubeconfig"}}


def _worker(name, gpus, cpu="64", memory="512Gi", **extra):
    entry = {"name": name, "auth": {"kubeconfig": "/etc/gpuaas/fleet.kubeconfig", "context": name},
             "flavors": [{"name": "a100", "capacity": {"nvidia.com/gpu": gpus, "cpu": cpu, "memory": memory}}]}
    entry.update(extra)
    return entry


def _inventory(**overrides):
    inv = {
        "gpuaas_flavors": [{"name": "a100", "node_labels": {"gpu": "a100"}}],
        "gpuaas_tenants": [
            {"name": "vision", "namespaces": ["vision"],
             "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 12, "cpu": 48, "memory": "384Gi"}}]},
            {"name": "nlp", "namespaces": ["nlp"],
             "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 5, "cpu": "1500m", "memory": "10Gi"}}]},
        ],
        "gpuaas_clusters": {"manager": copy.deepcopy(MANAGER),
                            "workers": [_worker("east", 16), _worker("west", 8)]},
    }
    inv.update(overrides)
    return inv


def _problems(inv):
    with pytest.raises(InventoryError) as err:
        TenantModel.from_inventory(inv)
    return err.value.problems


# -- the contract ------------------------------------------------------------------------------------------

def test_without_gpuaas_clusters_the_model_has_no_fleet():
    inv = _inventory()
    del inv["gpuaas_clusters"]
    assert TenantModel.from_inventory(inv).fleet is None


def test_a_valid_fleet_is_parsed_with_defaults():
    fleet = TenantModel.from_inventory(_inventory()).fleet
    assert fleet.manager.name == "hub"
    assert fleet.manager.auth == {"kubeconfig": "/etc/gpuaas/hub.kubeconfig"}
    assert fleet.manager.kueue_namespace == "kueue-system"
    assert [w.name for w in fleet.workers] == ["east", "west"]
    assert fleet.worker("west").auth == {"kubeconfig": "/etc/gpuaas/fleet.kubeconfig", "context": "west"}
    assert fleet.worker("west").capacity == {"a100": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"}}
    assert fleet.worker("west").api_server is None


def test_auth_aliases_are_the_modules_aliases_and_credentials_are_never_printed():
    inv = _inventory()
    inv["gpuaas_clusters"]["workers"][0]["auth"] = {"host": "https://east.example:6443", "api_key": "s3cr3t",
                                                    "verify_ssl": True, "ssl_ca_cert": "/ca.pem"}
    fleet = TenantModel.from_inventory(inv).fleet
    assert fleet.worker("east").auth == {"host": "https://east.example:6443", "api_key": "s3cr3t",
                                         "validate_certs": True, "ca_cert": "/ca.pem"}
    assert "s3cr3t" not in repr(fleet)


# -- bad input: every problem at once, before any write --------------------------------------------------------

def test_every_fleet_problem_is_reported_at_once():
    inv = _inventory()
    workers = inv["gpuaas_clusters"]["workers"]
    workers.append(_worker("east", 4))                         # a second cluster named east
    workers.append(dict(_worker("hub", 4)))                    # the manager listed as a worker
    workers.append({"name": "nocreds", "flavors": workers[0]["flavors"]})          # no auth at all
    workers.append({"name": "bare", "auth": {"validate_certs": True},               # auth that names no cluster
                    "flavors": workers[0]["flavors"]})
    workers.append({"name": "h100-only", "auth": {"context": "h100"},               # no flavor a tenant names
                    "flavors": []})
    problems = _problems(inv)
    assert problems == [
        # (hub, index 3, has connection options of its own: it is refused by name below)
        "gpuaas_clusters.workers[4].auth: is required: how to reach this cluster (kubeconfig and/or context, or host "
        "with api_key)",
        "gpuaas_clusters.workers[5].auth: names no cluster: set kubeconfig and/or context, or host (with api_key, "
        "client_cert and client_key, or username and password); without them every cluster would reach the same "
        "ambient KUBECONFIG",
        "gpuaas_clusters.workers[2].name: duplicate cluster 'east' (also at gpuaas_clusters.workers[0])",
        # east (index 2) has the same kubeconfig and context as east (index 0)
        "gpuaas_clusters.workers[2].auth: reaches the same API server as worker 'east' (identical kubeconfig, "
        "context and host); each cluster of the fleet needs its own connection options",
        "gpuaas_clusters.workers[3].name: 'hub' is the manager: a MultiKueue manager cannot be one of its own "
        "workers; give the worker its own cluster",
        "gpuaas_clusters.workers[6].flavors: worker 'h100-only' has no flavor 'a100', which a quota of tenant 'vision' "
        "names; add it with its capacity (MultiKueue may dispatch the tenant's workloads to any worker)",
        "gpuaas_clusters.workers[6].flavors: worker 'h100-only' has no flavor 'a100', which a quota of tenant 'nlp' "
        "names; add it with its capacity (MultiKueue may dispatch the tenant's workloads to any worker)",
    ]


def test_the_manager_reached_through_a_workers_connection_options_is_refused():
    inv = _inventory()
    inv["gpuaas_clusters"]["workers"][1]["auth"] = {"kubeconfig": "/etc/gpuaas/hub.kubeconfig"}
    assert _problems(inv) == [
        "gpuaas_clusters.workers[1].auth: reaches the same API server as the manager 'hub' (identical kubeconfig, "
        "context and host); each cluster of the fleet needs its own connection options"]


def test_the_manager_and_the_workers_are_required_and_typed():
    problems = _problems(_inventory(gpuaas_clusters={"workers": [], "extra": 1}))
    assert problems == [
        "gpuaas_clusters.extra: unknown key (allowed: manager, workers)",
        "gpuaas_clusters.manager: is required: the cluster whose Kueue dispatches the tenants' workloads to the workers",
        "gpuaas_clusters.workers: needs at least one worker cluster",
    ]


def test_auth_option_types_unknown_keys_and_a_host_without_credential():
    inv = _inventory()
    inv["gpuaas_clusters"]["manager"]["auth"] = {"host": "https://hub:6443", "validate_certs": "yes",
                                                 "impersonate_groups": "admins", "kubeconfg": "/x"}
    problems = _problems(inv)
    assert problems == [
        "gpuaas_clusters.manager.auth.kubeconfg: unknown key (did you mean 'kubeconfig'?)",
        "gpuaas_clusters.manager.auth.validate_certs: must be true or false, got str",
        "gpuaas_clusters.manager.auth.impersonate_groups: must be a list of strings, got str",
        "gpuaas_clusters.manager.auth: host 'https://hub:6443' has no credential: add api_key, client_cert and "
        "client_key, or username and password (or a kubeconfig)",
    ]


def test_worker_flavor_capacity_and_api_server_are_checked():
    inv = _inventory()
    east = inv["gpuaas_clusters"]["workers"][0]
    east["api_server"] = "http://east:6443"
    east["flavors"] = [{"name": "a10"}, {"name": "a100", "capacity": {"nvidia.com/gpu": 16, "cpu": 64}}]
    problems = _problems(inv)
    assert problems == [
        "gpuaas_clusters.workers[0].api_server: 'http://east:6443' is not an https:// URL (MultiKueue refuses "
        "kubeconfigs without TLS verification)",
        "gpuaas_clusters.workers[0].flavors[0].name: unknown flavor 'a10' (did you mean 'a100'?); defined: a100",
        "gpuaas_clusters.workers[0].flavors[0].capacity: is required (e.g. {nvidia.com/gpu: 16, cpu: 256, memory: 2Ti})",
        "gpuaas_clusters.workers[0].flavors[a100].capacity: worker 'east' declares no memory capacity for flavor "
        "'a100', which a quota of tenant 'vision' names",
        "gpuaas_clusters.workers[0].flavors[a100].capacity: worker 'east' declares no memory capacity for flavor "
        "'a100', which a quota of tenant 'nlp' names",
    ]


def test_more_than_twenty_workers_do_not_fit_one_multikueue_config():
    inv = _inventory()
    inv["gpuaas_clusters"]["workers"] = [_worker("w%d" % i, 1) for i in range(21)]
    assert "gpuaas_clusters.workers: Kueue's MultiKueueConfig lists at most 20 clusters, got 21" in _problems(inv)


def test_an_absent_tenant_needs_no_flavor_on_the_workers():
    inv = _inventory()
    inv["gpuaas_tenants"].append({"name": "old", "namespaces": ["old"], "state": "absent",
                                  "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}}]})
    inv["gpuaas_flavors"].append({"name": "h100"})
    assert TenantModel.from_inventory(inv).fleet is not None


# -- the quota split -----------------------------------------------------------------------------------------

def test_each_tenant_quota_is_split_over_the_workers_by_capacity():
    model = TenantModel.from_inventory(_inventory())
    vision = worker_quotas(model.fleet, model.tenant("vision"))
    # GPUs: 12 x 16/24 = 8 on east, 12 x 8/24 = 4 on west.
    # cpu and memory capacities are equal (64 / 512Gi on both): 48 -> 24 + 24, 384Gi -> 192Gi + 192Gi (in bytes).
    assert [(q.flavor, q.resources) for q in vision["east"]] == [
        ("a100", {"nvidia.com/gpu": "8", "cpu": "24", "memory": str(192 * 2 ** 30)})]
    assert [(q.flavor, q.resources) for q in vision["west"]] == [
        ("a100", {"nvidia.com/gpu": "4", "cpu": "24", "memory": str(192 * 2 ** 30)})]
    nlp = worker_quotas(model.fleet, model.tenant("nlp"))
    # GPUs: 5 x 16/24 = 3.33 -> 3, 5 x 8/24 = 1.67 -> 1; the unit left goes to the larger remainder: west -> 2.
    # cpu 1500m over equal capacity: 750m each.
    assert nlp["east"][0].resources["nvidia.com/gpu"] == "3"
    assert nlp["west"][0].resources["nvidia.com/gpu"] == "2"
    assert nlp["east"][0].resources["cpu"] == "750m"
    assert nlp["west"][0].resources["cpu"] == "750m"


def test_borrowing_and_lending_limits_stay_on_the_manager():
    inv = _inventory(gpuaas_cohorts=[{"name": "research"}])
    inv["gpuaas_tenants"][0].update(cohort="research")
    inv["gpuaas_tenants"][0]["quotas"][0].update(borrowing_limit={"nvidia.com/gpu": 4},
                                                 lending_limit={"nvidia.com/gpu": 2})
    model = TenantModel.from_inventory(inv)
    east = worker_quotas(model.fleet, model.tenant("vision"))["east"][0]
    assert (east.borrowing_limit, east.lending_limit) == ({}, {})


@pytest.mark.parametrize("total, weights, unit, expected", [
    # 10 over 1:1:1 -> 3.33 each; one unit left goes to the first of the tied remainders
    (Decimal(10), [Decimal(1)] * 3, Decimal(1), [Decimal(4), Decimal(3), Decimal(3)]),
    # 7 over 0 and 0: no capacity anywhere -> evenly, 3.5 -> 4 + 3
    (Decimal(7), [Decimal(0), Decimal(0)], Decimal(1), [Decimal(4), Decimal(3)]),
    # a zero-capacity worker gets nothing
    (Decimal(6), [Decimal(0), Decimal(2)], Decimal(1), [Decimal(0), Decimal(6)]),
    # 1 CPU over 3 equal workers in milli-units: 334m + 333m + 333m
    (Decimal(1), [Decimal(1)] * 3, Decimal("0.001"), [Decimal("0.334"), Decimal("0.333"), Decimal("0.333")]),
])
def test_split_adds_up_to_the_total(total, weights, unit, expected):
    assert clusters.split(total, weights, unit) == expected


def test_quotas_above_the_fleet_capacity_are_refused_unless_overcommit_is_allowed():
    inv = _inventory()
    inv["gpuaas_tenants"][0]["quotas"][0]["resources"]["nvidia.com/gpu"] = 20   # 20 + 5 > 16 + 8
    assert _problems(inv) == [
        "gpuaas_clusters.workers: tenants' quotas ask for 25 nvidia.com/gpu on flavor 'a100' but the workers declare "
        "24; lower the quotas, raise the workers' capacity, or set gpuaas_allow_overcommit: true",
        # east: 20 x 16/24 = 13.33 -> 13 (+ the unit left: remainders .33 vs .67 -> west), nlp 3 -> 13 + 3 = 16 fits;
        # west: 20 x 8/24 = 6.67 -> 7, nlp 2 -> 9 > 8
        "gpuaas_clusters.workers[1].flavors[a100].capacity.nvidia.com/gpu: the tenants' shares on worker 'west' add "
        "up to 9, above its capacity 8; lower the quotas, raise the workers' capacity, or set gpuaas_allow_overcommit: true",
    ]
    inv["gpuaas_allow_overcommit"] = True
    model = TenantModel.from_inventory(inv)
    assert model.warnings == [
        "gpuaas_clusters.workers: tenants' quotas ask for 25 nvidia.com/gpu on flavor 'a100' but the workers declare "
        "24 (allowed by gpuaas_allow_overcommit)",
        "gpuaas_clusters.workers[1].flavors[a100].capacity.nvidia.com/gpu: the tenants' shares on worker 'west' add "
        "up to 9, above its capacity 8 (allowed by gpuaas_allow_overcommit)",
    ]


def test_rounding_alone_can_put_a_worker_above_its_capacity():
    # Two tenants of 1 GPU each on two workers of 1 GPU: each tenant's 1 GPU goes to the first worker on the tie
    # (0.5 / 0.5), so east gets 2 shares for 1 GPU although the fleet (2) fits the quotas (2).
    inv = _inventory()
    inv["gpuaas_tenants"][0]["quotas"][0]["resources"] = {"nvidia.com/gpu": 1}
    inv["gpuaas_tenants"][1]["quotas"][0]["resources"] = {"nvidia.com/gpu": 1}
    inv["gpuaas_clusters"]["workers"] = [_worker("east", 1), _worker("west", 1)]
    assert _problems(inv) == [
        "gpuaas_clusters.workers[0].flavors[a100].capacity.nvidia.com/gpu: the tenants' shares on worker 'east' add "
        "up to 2, above its capacity 1; lower the quotas, raise the workers' capacity, or set gpuaas_allow_overcommit: true"]
