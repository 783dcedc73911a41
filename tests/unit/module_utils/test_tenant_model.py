# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import copy
import os
from decimal import Decimal

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import (
    InventoryError,
    TenantModel,
    flavor_capacity,
    parse_quantity,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "playbooks", "inventory", "lab", "group_vars", "all", "tenants.yml")

LAB_NODES = [
    {"name": "gpu-h100-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
     "allocatable": {"nvidia.com/gpu": "8", "cpu": "128", "memory": "2Ti"}},
    {"name": "gpu-h100-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
     "allocatable": {"nvidia.com/gpu": "8", "cpu": "128", "memory": "2Ti"}},
    {"name": "gpu-a100-mig-0", "labels": {"nvidia.com/mig.config": "all-1g.10gb"},
     "allocatable": {"nvidia.com/mig-1g.10gb": "7", "cpu": "64"}},
    {"name": "cpu-0", "labels": {}, "allocatable": {"cpu": "32"}},
]


def example() -> dict:
    with open(EXAMPLE) as handle:
        return yaml.safe_load(handle)


def problems(inventory, nodes=None):
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inventory, nodes)
    return info.value.problems


@pytest.mark.parametrize("text,expected", [
    (8, Decimal(8)), ("96", Decimal(96)), ("500m", Decimal("0.5")), ("1Ti", Decimal(2 ** 40)),
    ("512Gi", Decimal(512 * 2 ** 30)), ("1e3", Decimal(1000)), ("2k", Decimal(2000)), (1.5, Decimal("1.5")),
])
def test_parse_quantity(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["8 GPUs", "1TB", "", None, True, "abc"])
def test_parse_quantity_rejects(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_example_inventory_is_valid_and_fits_lab_capacity():
    model = TenantModel.from_inventory(example(), LAB_NODES)
    assert [t.name for t in model.tenants] == ["nlp", "vision", "analytics"]
    nlp = model.tenant("nlp")
    assert nlp.namespaces == ["nlp-train", "nlp-serve"]
    assert nlp.access.user_groups == ["nlp-team"]
    assert nlp.quotas[0].resources == {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"}
    assert nlp.autoscaling[0].idle_after_minutes == 15
    assert nlp.queues[0].namespaces == ["nlp-train"]
    assert model.capacity["h100"] == {"nvidia.com/gpu": "16"}
    # the one warning is by design: the serving tenant is allowed the top class (issue 22 item 7)
    assert [w.split(":")[0] for w in model.warnings] == ["gpuaas_tenants[0].allowed_priorities"]


def test_many_mistakes_are_all_reported_with_paths():
    inv = example()
    inv["gpuaas_flavors"].append({"name": "h100"})                                   # duplicate flavor
    inv["gpuaas_cohorts"].append({"name": "loop-a", "parent": "loop-b"})
    inv["gpuaas_cohorts"].append({"name": "loop-b", "parent": "loop-a"})             # cycle
    inv["gpuaas_cohorts"].append({"name": "orphan", "parent": "nowhere"})            # unknown parent
    inv["gpuaas_tenants"][0]["quotas"][0]["flavor"] = "h200"                         # unknown flavor
    inv["gpuaas_tenants"][1]["namespaces"] = ["nlp-train"]                            # claimed twice
    inv["gpuaas_tenants"][2]["quotas"][0]["borrowing_limit"] = {"nvidia.com/gpu": 1}
    del inv["gpuaas_tenants"][2]["cohort"]                                            # limit w/o cohort
    inv["gpuaas_tenants"][1]["quotas"][0]["lending_limit"] = {"nvidia.com/gpu": 7}   # above nominal 6
    inv["gpuaas_tenants"][1]["quotas"][1]["resources"]["memory"] = "lots"            # bad quantity
    inv["gpuaas_tenants"].append({"name": "Bad_Name", "namespaces": ["x"]})          # bad name
    inv["gpuaas_tenants"].append({"name": "vision", "namespaces": ["vision-2"]})      # duplicate tenant
    inv["gpuaas_tenants"].append({"name": "sneaky", "namespaces": ["kube-system"], "quota": []})
    found = problems(inv)
    text = "\n".join(found)
    expected = [
        "gpuaas_flavors[3].name: duplicate flavor 'h100'",
        "cohort cycle",
        "gpuaas_cohorts[4].parent: unknown parent cohort 'nowhere'",
        "gpuaas_tenants[0].quotas[0].flavor: unknown flavor 'h200'",
        "gpuaas_tenants[1].namespaces[0]: namespace 'nlp-train' is already claimed by gpuaas_tenants[0] (nlp)",
        "gpuaas_tenants[2].quotas[0].borrowing_limit: borrowing_limit needs the tenant to be in a cohort",
        "gpuaas_tenants[1].quotas[0].lending_limit.nvidia.com/gpu: lending limit 7 is above the nominal quota 6",
        "gpuaas_tenants[1].quotas[1].resources.memory: 'lots' is not a Kubernetes quantity",
        "gpuaas_tenants[3].name: 'Bad_Name' is not a DNS-1123 label",
        "gpuaas_tenants[4].name: duplicate tenant 'vision'",
        "gpuaas_tenants[5].namespaces[0]: 'kube-system' is a system namespace",
        "gpuaas_tenants[5].quota: unknown key (did you mean 'quotas'?)",
    ]
    for item in expected:
        assert item in text, "missing %r in:\n%s" % (item, text)
    assert len(found) >= len(expected)


def test_error_message_counts_and_hints():
    inv = example()
    inv["gpuaas_tenants"][0]["cohort"] = "reserch"
    with pytest.raises(InventoryError) as info:
        TenantModel.from_inventory(inv)
    assert "1 problem;" in info.value.message
    assert "did you mean 'research'" in info.value.problems[0]
    assert info.value.hint


def test_capacity_exceeded_is_error_or_warning():
    inv = example()
    inv["gpuaas_tenants"][2]["quotas"][0]["resources"]["nvidia.com/gpu"] = 4     # 8 + 6 + 4 = 18 > 16
    found = problems(inv, LAB_NODES)
    assert len(found) == 1
    assert found[0].startswith("gpuaas_flavors[0]: quotas ask for 18 nvidia.com/gpu on flavor 'h100'")
    assert "offer 16" in found[0] and "analytics=4" in found[0]
    inv["gpuaas_allow_overcommit"] = True
    model = TenantModel.from_inventory(inv, LAB_NODES)
    overcommit = [w for w in model.warnings if w.startswith("gpuaas_flavors")]
    assert len(overcommit) == 1 and "gpuaas_allow_overcommit" in overcommit[0]


def time_sliced(nodes: list, product: str, replicas: int) -> list:
    """The nodes as GPU feature discovery relabels them once time-slicing is on: product + "-SHARED", GPUs x replicas."""
    out = copy.deepcopy(nodes)
    for node in out:
        if node["labels"].get("nvidia.com/gpu.product") == product:
            node["labels"]["nvidia.com/gpu.product"] = product + "-SHARED"
            node["allocatable"]["nvidia.com/gpu"] = str(int(node["allocatable"]["nvidia.com/gpu"]) * replicas)
    return out


def test_time_sliced_nodes_no_longer_match_the_plain_product_and_the_error_says_so():
    """Issue 24: GFD renames nvidia.com/gpu.product to NVIDIA-H100-80GB-HBM3-SHARED under time-slicing. The flavor
    naming the plain product matches none of them (as in Kueue: exact match), and the error names the nodes and the
    value to use; with that value the 32 time-sliced GPUs count."""
    shared_nodes = time_sliced(LAB_NODES, "NVIDIA-H100-80GB-HBM3", 2)
    found = problems(example(), shared_nodes)
    assert len(found) == 1, found
    assert "on flavor 'h100'" in found[0] and "offer 0" in found[0]
    assert "nodes gpu-h100-0, gpu-h100-1 carry nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-SHARED" in found[0]
    assert "GPU time-slicing" in found[0]

    inv = example()
    inv["gpuaas_flavors"][0]["node_labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3-SHARED"
    model = TenantModel.from_inventory(inv, shared_nodes)
    assert model.capacity["h100"]["nvidia.com/gpu"] == "32"
    # the other way round: the flavor already says -SHARED, time-slicing is not (yet) on for those nodes
    found = problems(inv, LAB_NODES)
    assert len(found) == 1 and "carry nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 " in found[0], found
    assert "does not append -SHARED" in found[0]


def test_no_shared_hint_when_the_flavor_matches_or_nothing_matches_either_way():
    inv = example()
    inv["gpuaas_tenants"][2]["quotas"][0]["resources"]["nvidia.com/gpu"] = 4  # over capacity, nodes do match
    assert "-SHARED" not in problems(inv, LAB_NODES)[0]
    other = [dict(n, labels={"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}) if n["name"].startswith("gpu-h100") else n
             for n in LAB_NODES]
    found = problems(example(), other)
    assert "offer 0" in found[0] and "carry" not in found[0], found


def test_capacity_ignores_absent_tenants_and_cpu():
    inv = example()
    inv["gpuaas_tenants"][2]["quotas"][0]["resources"]["nvidia.com/gpu"] = 4
    inv["gpuaas_tenants"][2]["state"] = "absent"
    inv["gpuaas_tenants"][0]["quotas"][1]["resources"]["cpu"] = 100000
    model = TenantModel.from_inventory(inv, LAB_NODES)
    assert model.absent_tenants[0].name == "analytics"
    assert [t.name for t in model.present_tenants] == ["nlp", "vision"]


def test_flavor_without_labels_matches_all_nodes():
    model = TenantModel.from_inventory(example())
    cpu = [f for f in model.flavors if f.name == "cpu"][0]
    assert flavor_capacity(cpu, LAB_NODES)["nvidia.com/gpu"] == Decimal(16)


def test_empty_inventory_is_valid():
    model = TenantModel.from_inventory({})
    assert model.tenants == [] and model.flavors == []


def test_wrong_types_are_reported_not_crashing():
    found = problems({"gpuaas_tenants": {"nlp": {}}, "gpuaas_flavors": ["h100"], "gpuaas_priorities": [{"name": "p", "value": "high"}]})
    text = "\n".join(found)
    assert "gpuaas_tenants: must be a list" in text
    assert "gpuaas_flavors[0]: must be a mapping" in text
    assert "gpuaas_priorities[0].value: must be an integer" in text


def test_preemption_and_autoscaling_checks():
    inv = example()
    nlp = inv["gpuaas_tenants"][0]
    nlp["preemption"] = {"reclaim_within_cohort": "Sometimes", "borrow_within_cohort": {"policy": "LowerPriority"}}
    nlp["autoscaling"][0]["namespace"] = "vision-dev"
    nlp["autoscaling"].append({"name": "idle", "namespace": "nlp-serve", "target": {"name": "x"}})
    del inv["gpuaas_prometheus"]
    text = "\n".join(problems(inv))
    assert "gpuaas_tenants[0].preemption.reclaim_within_cohort: 'Sometimes' is not one of Never, LowerPriority, Any" in text
    assert "gpuaas_tenants[0].autoscaling[0].namespace: unknown tenant namespace 'vision-dev'" in text
    assert "gpuaas_tenants[0].autoscaling[1]: needs idle_scale_to_zero, load or triggers" in text


def test_idle_scale_to_zero_needs_prometheus():
    inv = example()
    del inv["gpuaas_prometheus"]
    text = "\n".join(problems(inv))
    assert "gpuaas_tenants[0].autoscaling[0].idle_scale_to_zero: reads GPU utilization from Prometheus" in text


def test_access_subjects_users_and_groups():
    inv = example()
    inv["gpuaas_tenants"][0]["access"] = {"admins": ["user:bob", "group:leads"], "users": ["team", ""]}
    text = "\n".join(problems(inv))
    assert "gpuaas_tenants[0].access.users[1]: must be a group name" in text
    inv["gpuaas_tenants"][0]["access"]["users"] = ["team"]
    access = TenantModel.from_inventory(inv).tenant("nlp").access
    assert access.admin_users == ["bob"] and access.admin_groups == ["leads"] and access.user_groups == ["team"]


def test_input_is_not_mutated():
    inv = example()
    before = copy.deepcopy(inv)
    TenantModel.from_inventory(inv, LAB_NODES)
    assert inv == before


def test_prometheus_token_secret_and_timeout():
    inv = example()
    inv["gpuaas_prometheus"] = {"url": "https://thanos:9091", "token_secret": {"name": "prom-reader", "namespace": "keda"},
                                "timeout": 20}
    prom = TenantModel.from_inventory(inv).prometheus
    assert prom.token_secret == {"name": "prom-reader", "namespace": "keda", "key": "token"}
    assert prom.timeout == 20
    inv["gpuaas_prometheus"]["token"] = "x"
    inv["gpuaas_prometheus"]["timeout"] = 0
    text = "\n".join(problems(inv))
    assert "gpuaas_prometheus: set only one of token, token_file, token_secret (got token, token_secret)" in text
    assert "gpuaas_prometheus.timeout: must be at least 1" in text


def test_default_queue_false_needs_a_queue_per_namespace():
    inv = example()
    inv["gpuaas_tenants"][1]["default_queue"] = False
    inv["gpuaas_tenants"][1]["queues"] = [{"name": "training", "namespaces": ["vision-dev"]}]
    text = "\n".join(problems(inv))
    assert "gpuaas_tenants[1].queues: namespace 'vision-prod' has no LocalQueue" in text
    inv["gpuaas_tenants"][1]["queues"][0]["namespaces"] = ["vision-dev", "vision-prod"]
    vision = TenantModel.from_inventory(inv).tenant("vision")
    assert vision.suggested_queue("vision-prod") == "training"
    inv["gpuaas_tenants"][1]["default_queue"] = "no"
    assert "gpuaas_tenants[1].default_queue: must be true or false" in "\n".join(problems(inv))


def test_a_platform_namespace_cannot_be_a_tenants():
    """Issue 22 item 6: the namespaces the admission policy exempts are refused as tenant namespaces."""
    inv = example()
    inv["gpuaas_tenants"][0]["namespaces"] = ["node-feature-discovery", "openshift-nfd"]
    text = "\n".join(problems(inv))
    assert "gpuaas_tenants[0].namespaces[0]: 'node-feature-discovery' is a platform namespace" in text
    # openshift-* is a system prefix: refused as such
    assert "gpuaas_tenants[0].namespaces[1]: 'openshift-nfd' is a system namespace" in text


def _many_flavor_inventory(flavor_count: int, shared_resource: bool) -> dict:
    """One tenant with ``flavor_count`` flavors, all quoting nvidia.com/gpu (one resource group) or each its own
    extended resource (one group per flavor)."""
    flavors = [{"name": "f%d" % i} for i in range(flavor_count)]
    quotas = [{"flavor": "f%d" % i, "resources": {("nvidia.com/gpu" if shared_resource else "example.com/r%d" % i): 1}}
              for i in range(flavor_count)]
    return {"gpuaas_flavors": flavors, "gpuaas_tenants": [{"name": "big", "namespaces": ["big"], "quotas": quotas}]}


def test_kueue_resource_group_limits_are_inventory_problems():
    """Kueue's ClusterQueue CRD: at most 16 resourceGroups and 64 flavors per group (its schema's maxItems) — an
    inventory beyond them must be refused by the parser, before any write, not by the API server mid-run."""
    assert TenantModel.from_inventory(_many_flavor_inventory(16, shared_resource=False))
    assert TenantModel.from_inventory(_many_flavor_inventory(64, shared_resource=True))
    too_many_groups = problems(_many_flavor_inventory(17, shared_resource=False))
    assert any("gpuaas_tenants[0].quotas" in p and "17 resource groups" in p for p in too_many_groups), too_many_groups
    too_many_flavors = problems(_many_flavor_inventory(65, shared_resource=True))
    assert any("65 flavors share the resources nvidia.com/gpu" in p for p in too_many_flavors), too_many_flavors
