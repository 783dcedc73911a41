# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One name rule and one label rule (inventory/names.py): the inventory parsers and the Kueue builders accept and
refuse exactly the same names, label keys and label values, with the API server's lengths."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import is_label_key, is_label_value, is_name
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator
from ansible_collections.gpuaas.platform.plugins.module_utils import kueue_options as kueue

LABEL_KEYS = {
    "nvidia.com/gpu.product": True,
    "a" * 63: True,
    "example.com/" + "A" * 63: True,
    "%s/x" % ".".join(["a" * 63] * 3 + ["a" * 61]): True,  # a 253-character prefix
    "a" * 64: False,  # the name part is at most 63 characters
    "example.com/" + "a" * 64: False,
    "%s/x" % ".".join(["a" * 63] * 4): False,  # a 255-character prefix
    "/gpu": False,
    "Example.com/gpu": False,
    "example.com/": False,
    "-gpu": False,
}
LABEL_VALUES = {"NVIDIA-H100-80GB-HBM3": True, "": True, "a" * 63: True, "a" * 64: False, "-x": False, "a b": False}
NAMES = {"h100": True, "h100.mig-1g": True, "a" * 253: True, "a" * 254: False, "H100": False, "h100-": False}


def builder_accepts_node_labels(labels: dict) -> bool:
    try:
        kueue.resource_flavor("h100", node_labels=labels)
    except ValidationError:
        return False
    return True


def inventory_accepts_node_labels(labels: dict) -> bool:
    check = Validator()
    check.string_map("gpuaas_flavors[0].node_labels", labels, "node label")
    return not check.errors


@pytest.mark.parametrize("key,valid", sorted(LABEL_KEYS.items()))
def test_a_label_key_is_accepted_by_the_inventory_exactly_when_the_builder_accepts_it(key, valid):
    assert is_label_key(key) is valid
    assert inventory_accepts_node_labels({key: "x"}) is valid
    assert builder_accepts_node_labels({key: "x"}) is valid


@pytest.mark.parametrize("value,valid", sorted(LABEL_VALUES.items()))
def test_a_label_value_is_accepted_by_the_inventory_exactly_when_the_builder_accepts_it(value, valid):
    assert is_label_value(value) is valid
    assert inventory_accepts_node_labels({"gpu": value}) is valid
    assert builder_accepts_node_labels({"gpu": value}) is valid


@pytest.mark.parametrize("name,valid", sorted(NAMES.items()))
def test_an_object_name_is_accepted_by_the_inventory_exactly_when_the_builder_accepts_it(name, valid):
    assert is_name(name) is valid
    check = Validator()
    check.name("gpuaas_cohorts[0].parent", name)
    assert (not check.errors) is valid
    try:
        kueue.cohort(name)
        built = True
    except ValidationError:
        built = False
    assert built is valid


def test_a_namespace_is_a_dns_label():
    assert is_name("a" * 63, label=True) and not is_name("a" * 64, label=True)
    assert not is_name("nlp.team", label=True) and is_name("nlp.team")
    check = Validator()
    check.label_name("gpuaas_tenants[0].namespaces[0]", "nlp.team")
    assert check.errors == ["gpuaas_tenants[0].namespaces[0]: 'nlp.team' is not a DNS-1123 label (lower-case letters, "
                            "digits and '-', starting and ending alphanumeric) of at most 63 characters"]
