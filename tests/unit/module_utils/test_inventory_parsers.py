# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory package (issue 21): the shared primitives, the Kueue rules written once, one parser per section
used on its own, and ``inventory.model`` still exporting every name the collection imports from it."""

from __future__ import annotations

import glob
import os
import re
from decimal import Decimal

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import (
    autoscaling,
    capacity,
    clusters,
    cohorts,
    flavors,
    kueue_rules,
    model,
    node_pools,
    openshift_ai,
    priorities,
    prometheus,
    quotas,
    records,
    tenants,
    validator,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


# -- primitives --------------------------------------------------------------------------------------------

def test_named_items_yields_each_mapping_and_reports_every_problem_with_its_path():
    check = Validator()
    seen = [(i, path, name) for i, path, _data, name in check.named_items(
        "things", [{"name": "a"}, "oops", {"name": "Bad_Name"}, {"name": "a", "extra": 1}], ("name",), "thing")]
    assert seen == [(0, "things[0]", "a"), (2, "things[2]", None), (3, "things[3]", "a")]
    assert check.errors == [
        "things[1]: must be a mapping, got str",
        "things[2].name: 'Bad_Name' is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.') "
        "of at most 253 characters",
        "things[3].extra: unknown key (allowed: name)",
        # duplicates are reported once the whole list is read
        "things[3].name: duplicate thing 'a' (also at things[0])",
    ]


def test_named_items_checks_labels_when_asked():
    check = Validator()
    names = [entry[3] for entry in check.named_items("t", [{"name": "a.b"}], ("name",), "tenant", label=True)]
    assert names == [None]
    assert "is not a DNS-1123 label" in check.errors[0]


def test_a_list_that_is_no_list_is_one_problem():
    check = Validator()
    assert list(check.items("things", "a string")) == []
    assert check.errors == ["things: must be a list, got str"]


def test_optional_integer_and_boolean():
    check = Validator()
    assert check.optional_integer("n", None, 1) is None
    assert check.optional_integer("n", " 7 ", 1) == 7
    assert check.optional_integer("n", 0, 1) is None
    assert check.boolean("b", "yes", True) is True
    assert check.errors == ["n: must be at least 1, got 0", "b: must be true or false, got 'yes'"]


def test_problem_count():
    assert (validator.problem_count(1), validator.problem_count(2)) == ("1 problem", "2 problems")


# -- Kueue rules written once ------------------------------------------------------------------------------

def test_node_label_limit():
    assert not kueue_rules.too_many_node_labels({"l%d" % i: "v" for i in range(kueue_rules.MAX_NODE_LABELS)})
    assert kueue_rules.too_many_node_labels({"l%d" % i: "v" for i in range(kueue_rules.MAX_NODE_LABELS + 1)})


@pytest.mark.parametrize("toleration, problems", [
    ({"key": "k"}, []),  # operator defaults to Equal, no effect means every effect
    ({"key": "k", "operator": "Exists", "effect": ""}, []),
    ({"key": "k", "operator": "Exists", "value": "v"}, [("value", "must be empty when operator is Exists")]),
    ({"key": "k", "operator": "In"}, [("operator", "'In' is not one of Equal, Exists")]),
    ({"key": "k", "effect": "NoRun"}, [("effect", "'NoRun' is not one of NoSchedule, PreferNoSchedule, NoExecute")]),
    # the two rules the cluster_queue builder alone held before the module options had their parser (issue 21)
    ({"operator": "Equal"}, [("operator", "must be Exists when key is empty")]),
    ({"operator": "Exists"}, []),
    ({"key": "k", "tolerationSeconds": 30, "effect": "NoSchedule"}, [("tolerationSeconds", "needs effect NoExecute")]),
    ({"key": "k", "toleration_seconds": 30, "effect": "NoExecute"}, []),
])
def test_toleration_rules(toleration, problems):
    assert kueue_rules.toleration_problems(toleration) == problems


@pytest.mark.parametrize("lending, nominal, above", [
    ("8", "8", False), (9, "8", True), ("1Ti", "1024Gi", False), ("1025Gi", "1Ti", True),
    ("not a quantity", "8", False), ("9", None, False),
])
def test_lending_above_nominal(lending, nominal, above):
    assert kueue_rules.lends_above_nominal(lending, nominal) is above


def test_the_model_reports_the_shared_rules_with_inventory_paths():
    inv = {"gpuaas_flavors": [{"name": "h100", "node_labels": {"l%d" % i: "v" for i in range(9)},
                               "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}]}
    with pytest.raises(model.InventoryError) as info:
        model.TenantModel.from_inventory(inv)
    assert info.value.problems == [
        "gpuaas_flavors[0].node_labels: Kueue allows at most 8 node labels per flavor, got 9",
        "gpuaas_flavors[0].tolerations[0].value: must be empty when operator is Exists",
    ]


# -- one parser per section, usable on its own -------------------------------------------------------------

def test_a_section_parser_reads_its_section_alone():
    check = Validator()
    found = flavors.parse_flavors(check, [{"name": "h100", "node_labels": {"nvidia.com/gpu.product": "H100"}}])
    assert found == [records.Flavor("h100", {"nvidia.com/gpu.product": "H100"})]
    assert check.errors == []
    check = Validator()
    assert cohorts.parse_cohorts(check, [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}], flavors=set())
    assert check.errors == ["gpuaas_cohorts[0].parent: cohort cycle a -> b -> a; a cohort tree must end at a root "
                            "without parent"]


def test_the_cohort_parser_takes_the_flavor_names_its_quotas_may_refer_to():
    check = Validator()
    parsed = cohorts.parse_cohorts(check, [{"name": "dept", "quotas": [{"flavor": "h100", "resources": {"cpu": 4}}]}],
                                   flavors={"h100"})
    assert check.errors == []
    assert parsed == [records.Cohort("dept", None, None, [records.Quota("h100", {"cpu": "4"})])]
    check = Validator()
    cohorts.parse_cohorts(check, [{"name": "dept", "quotas": [{"flavor": "h100", "resources": {"cpu": 4}}]}], flavors=set())
    assert check.errors == ["gpuaas_cohorts[0].quotas[0].flavor: unknown flavor 'h100'; defined: none defined"]


def test_the_tenant_parser_takes_the_names_it_may_refer_to():
    check = Validator()
    parsed = tenants.parse_tenants(check, [{"name": "nlp", "namespaces": ["nlp"], "cohort": "org",
                                            "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 8}}]}],
                                   flavors={"h100"}, cohorts={"org"}, priorities=set(), prometheus_url=None)
    assert check.errors == []
    assert parsed[0].quotas == [records.Quota("h100", {"nvidia.com/gpu": "8"})]


def test_capacity_counts_the_pools_maximum():
    flavor = records.Flavor("h100", {"pool": "h100"})
    tenant = records.Tenant("nlp", ["nlp"], quotas=[records.Quota("h100", {"nvidia.com/gpu": "16"})])
    pool = records.NodePool("p", "h100", "MachineSet", "ms", "openshift-machine-api", "v1", max_nodes=2, gpus_per_node=8)
    check = Validator()
    found = capacity.check_capacity(check, [flavor], [tenant], [pool], [], allow_overcommit=False)
    assert (found, check.errors) == ({"h100": {"nvidia.com/gpu": "16"}}, [])
    assert capacity.flavor_capacity(flavor, [{"labels": {"pool": "h100"}, "allocatable": {"nvidia.com/gpu": "8"}}]) == {
        "nvidia.com/gpu": Decimal(8)}


# -- inventory.model stays the import point ----------------------------------------------------------------

SECTION_MODULES = (autoscaling, capacity, clusters, cohorts, flavors, node_pools, openshift_ai, priorities, prometheus,
                   quotas, records, tenants, validator)


def test_model_re_exports_each_name_from_the_one_file_that_defines_it():
    for name in model.__all__:
        if name in ("TenantModel", "tenant_index", "parse_quantity"):
            continue  # defined in model.py itself; parse_quantity comes from quantity.py
        homes = [m.__name__ for m in SECTION_MODULES if getattr(m, name, None) is getattr(model, name)]
        assert homes, "model.%s is a copy, not the name of a section module" % name


def test_every_name_the_collection_imports_from_inventory_model_is_there():
    pattern = re.compile(r"from ansible_collections\.gpuaas\.platform\.plugins\.module_utils\.inventory\.model import "
                         r"(\([^)]*\)|[^\n]+)")
    attribute = re.compile(r"\b(?:model|M)\.([A-Z_][A-Za-z_]*|[a-z_]+)\b")
    wanted = set()
    files = [path for folder in ("plugins", "tests", "bench", "roles")
             for path in glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True)]
    for path in files:
        with open(path) as handle:
            text = handle.read()
        for match in pattern.finditer(text):
            names = match.group(1).split("#")[0].strip("()")
            wanted.update(n.strip() for n in names.replace("\n", ",").split(",") if n.strip())
        if "inventory import model" in text:
            wanted.update(n for n in attribute.findall(text) if n.isupper())
    wanted.discard("")
    assert wanted, "no import of inventory.model found"
    assert sorted(n for n in wanted if not hasattr(model, n)) == []


# -- what the Kueue builders no longer check: the parsers hold it, before any write (issue 21) ----------------

def test_rules_the_builders_held_are_inventory_problems_now():
    """The tenancy builders take the typed model and validate nothing: a flavor toleration without key, a taint
    key that is no qualified name and a borrow threshold beyond int32 are reported by the parsers, with a path."""
    inventory = {
        "gpuaas_flavors": [{"name": "h100", "node_taints": [{"key": "not a key", "effect": "NoSchedule"}],
                            "tolerations": [{"operator": "Equal", "tolerationSeconds": 5, "effect": "NoSchedule"}]}],
        "gpuaas_cohorts": [{"name": "org"}],
        "gpuaas_tenants": [{"name": "nlp", "namespaces": ["nlp"], "cohort": "org",
                            "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 8}}],
                            "preemption": {"reclaim_within_cohort": "Any", "borrow_within_cohort": {
                                "policy": "LowerPriority", "max_priority_threshold": 2 ** 31}}}],
    }
    with pytest.raises(validator.InventoryError) as info:
        model.TenantModel.from_inventory(inventory)
    problems = info.value.problems
    assert "gpuaas_flavors[0].node_taints[0].key: 'not a key' is not a valid taint key (a qualified name, e.g. " \
           "nvidia.com/gpu)" in problems
    assert "gpuaas_flavors[0].tolerations[0].operator: must be Exists when key is empty" in problems
    assert "gpuaas_flavors[0].tolerations[0].tolerationSeconds: needs effect NoExecute" in problems
    assert "gpuaas_tenants[0].preemption.borrow_within_cohort.max_priority_threshold: must be at most 2147483647, " \
           "got 2147483648" in problems
