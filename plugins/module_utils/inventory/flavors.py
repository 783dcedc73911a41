# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_flavors``: the Kueue ResourceFlavors, i.e. which nodes a quota is for."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_rules import (
    MAX_NODE_LABELS,
    toleration_problems,
    too_many_node_labels,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import TAINT_EFFECTS
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import is_label_key
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Flavor
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

FLAVOR_KEYS = ("name", "node_labels", "node_taints", "tolerations", "topology_name")
TAINT_KEYS = ("key", "value", "effect")
TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")


def parse_flavors(check: Validator, value: t.Any) -> t.List[Flavor]:
    out: t.List[Flavor] = []
    for _index, path, data, name in check.named_items("gpuaas_flavors", value, FLAVOR_KEYS, "flavor"):
        labels = check.string_map(path + ".node_labels", data.get("node_labels"), "node label")
        if too_many_node_labels(labels):
            check.err(path + ".node_labels", "Kueue allows at most %d node labels per flavor, got %d"
                      % (MAX_NODE_LABELS, len(labels)))
        taints = _taints(check, path + ".node_taints", data.get("node_taints"))
        tolerations = _tolerations(check, path + ".tolerations", data.get("tolerations"))
        topology = data.get("topology_name")
        if topology is not None:
            topology = check.name(path + ".topology_name", topology)
            if not labels:
                check.err(path + ".node_labels", "at least one node label is required when topology_name is set")
        if name:
            out.append(Flavor(name, labels, taints, tolerations, topology))
    return out


def _taints(check: Validator, path: str, value: t.Any) -> t.List[t.Dict[str, t.Any]]:
    out = []
    for _index, taint_path, taint in check.items(path, value, TAINT_KEYS):
        if not taint.get("key"):
            check.err(taint_path + ".key", "is required")
        elif not is_label_key(taint["key"]):
            check.err(taint_path + ".key", "%r is not a valid taint key (a qualified name, e.g. nvidia.com/gpu)"
                      % (taint["key"],))
        if taint.get("effect") not in TAINT_EFFECTS:
            check.err(taint_path + ".effect", "%r is not one of %s" % (taint.get("effect"), ", ".join(TAINT_EFFECTS)))
        out.append(dict(taint))
    return out


def _tolerations(check: Validator, path: str, value: t.Any) -> t.List[t.Dict[str, t.Any]]:
    out = []
    for _index, toleration_path, toleration in check.items(path, value, TOLERATION_KEYS):
        for field, reason in toleration_problems(toleration):
            check.err("%s.%s" % (toleration_path, field), reason)
        out.append(dict(toleration))
    return out
