# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 22 item 7: the top priority class is not open by default.

A tenant without ``allowed_priorities`` may use the classes marked ``open_to_tenants``, or, when none is marked, only
the lowest class(es); a class above them only when its entry names it. The validation warns about every tenant
allowed the top class. The rule lands on the tenant namespaces (the annotation the admission policy enforces) and in
the brownfield import.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_import, tenancy

from .test_kueue_import import CANONICAL, converge, hand_made, live_objects

ANNOTATION = "gpuaas.io/allowed-priorities"
LOW, MID, TOP = {"name": "low", "value": 10}, {"name": "mid", "value": 500}, {"name": "top", "value": 1000}


def inventory(priorities, *tenants):
    return {"gpuaas_flavors": [{"name": "h100"}], "gpuaas_cohorts": [],
            "gpuaas_priorities": [dict(p) for p in priorities],
            "gpuaas_tenants": [dict({"name": "t%d" % i, "namespaces": ["t%d-ns" % i]}, **extra)
                               for i, extra in enumerate(tenants)]}


def annotations(inv):
    """{namespace: allowed classes} as the tenancy builders write them for the admission policy."""
    objs = tenancy.desired_objects(TenantModel.from_inventory(inv))
    return {o["metadata"]["name"]: o["metadata"]["annotations"][ANNOTATION]
            for o in objs if o["kind"] == "Namespace"}


def top_warnings(inv):
    return [w for w in TenantModel.from_inventory(inv).warnings if "highest priority class" in w]


# -- the default ------------------------------------------------------------------------------------------------

def test_without_a_marked_class_a_tenant_gets_only_the_lowest():
    assert annotations(inventory([TOP, MID, LOW], {})) == {"t0-ns": "low"}


def test_classes_sharing_the_lowest_value_are_all_the_default():
    twin = {"name": "also-low", "value": 10}
    assert annotations(inventory([TOP, LOW, twin], {})) == {"t0-ns": "low,also-low"}


def test_the_marked_classes_are_the_default_and_the_lowest_is_then_not_implied():
    mid = dict(MID, open_to_tenants=True)
    assert annotations(inventory([TOP, mid, LOW], {})) == {"t0-ns": "mid"}


def test_a_class_above_the_default_only_when_the_tenant_names_it():
    inv = inventory([TOP, MID, dict(LOW, open_to_tenants=True)],
                    {"allowed_priorities": ["top", "low"]}, {}, {"allowed_priorities": []})
    assert annotations(inv) == {"t0-ns": "top,low", "t1-ns": "low", "t2-ns": ""}


def test_no_priority_classes_no_priority_allowed():
    assert annotations(inventory([], {})) == {"t0-ns": ""}


def test_open_to_tenants_must_be_a_boolean():
    with pytest.raises(InventoryError) as err:
        TenantModel.from_inventory(inventory([dict(LOW, open_to_tenants="yes")], {}))
    assert err.value.problems == ["gpuaas_priorities[0].open_to_tenants: must be true or false, got 'yes'"]


def test_the_marking_is_the_inventory_s_not_the_cluster_s():
    """open_to_tenants changes no WorkloadPriorityClass: Kueue has no such field."""
    def classes(inv):
        return [o for o in tenancy.desired_objects(TenantModel.from_inventory(inv)) if o["kind"] == "WorkloadPriorityClass"]
    assert classes(inventory([TOP, dict(LOW, open_to_tenants=True)], {})) == classes(inventory([TOP, LOW], {}))


# -- the warning ------------------------------------------------------------------------------------------------

def test_a_tenant_naming_the_top_class_is_warned_about_by_path():
    (warning,) = top_warnings(inventory([TOP, LOW], {}, {"allowed_priorities": ["low", "top"]}))
    assert warning.startswith("gpuaas_tenants[1].allowed_priorities: tenant t1 may use top, the highest priority class")


def test_a_top_class_open_to_tenants_is_one_warning_naming_the_tenants_it_reaches():
    inv = inventory([dict(TOP, open_to_tenants=True), LOW], {}, {"allowed_priorities": ["low"]}, {"state": "absent"})
    (warning,) = top_warnings(inv)
    assert warning.startswith("gpuaas_priorities[0].open_to_tenants: top is the highest priority class")
    assert "(t0)" in warning  # t1 names its own list, t2 is absent


def test_no_warning_when_no_tenant_may_use_the_top_class():
    assert top_warnings(inventory([TOP, MID, LOW], {}, {"allowed_priorities": ["mid"]}, {"state": "absent",
                                                                                         "allowed_priorities": ["top"]})) == []
    # marked open, but every tenant has its own list
    assert top_warnings(inventory([dict(TOP, open_to_tenants=True), LOW], {"allowed_priorities": ["low"]})) == []


def test_no_top_class_when_no_class_is_above_another():
    assert top_warnings(inventory([LOW], {"allowed_priorities": ["low"]})) == []
    same = {"name": "same", "value": 10}
    assert top_warnings(inventory([LOW, same], {"allowed_priorities": ["low", "same"]})) == []


# -- the brownfield import --------------------------------------------------------------------------------------

def test_import_keeps_every_class_of_a_namespace_built_with_the_old_default():
    """A tenant the collection built before item 7 carries every class on its namespaces: the import names them,
    so the first run with the imported inventory does not take any class away."""
    inv = copy.deepcopy(CANONICAL)
    inv["gpuaas_tenants"][1]["allowed_priorities"] = ["high", "low"]  # the annotation the old default wrote
    result = kueue_import.import_inventory(live_objects(converge(inv)))
    assert result.inventory["gpuaas_tenants"][1]["allowed_priorities"] == ["high", "low"]
    assert result.warnings == []


def test_import_of_an_unrestricted_tenant_warns_that_the_default_narrows_it():
    objects = {
        "WorkloadPriorityClass": [hand_made("WorkloadPriorityClass", "urgent", value=500),
                                  hand_made("WorkloadPriorityClass", "bulk", value=5)],
        "ClusterQueue": [hand_made("ClusterQueue", "team", spec={
            "namespaceSelector": {"matchLabels": {"gpuaas.io/tenant": "team"}}})],
        "LocalQueue": [hand_made("LocalQueue", "default", "team-ns", {"clusterQueue": "team"})],
        "Namespace": [hand_made("Namespace", "team-ns", api_version="v1", labels={"gpuaas.io/tenant": "team"})],
    }
    result = kueue_import.import_inventory(objects)
    assert "allowed_priorities" not in result.inventory["gpuaas_tenants"][0]
    (warning,) = [w for w in result.warnings if "priority classes" in w]
    assert warning.startswith("tenant team: nothing limits the priority classes of its namespaces today")
    assert "only bulk" in warning
    # one class only: the default is every class, nothing narrows
    objects["WorkloadPriorityClass"] = objects["WorkloadPriorityClass"][:1]
    assert not [w for w in kueue_import.import_inventory(objects).warnings if "priority classes" in w]
