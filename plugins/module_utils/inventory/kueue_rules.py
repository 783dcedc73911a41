# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Rules the Kueue API enforces, written once for the inventory parsers and the Kueue builders (``manifests/kueue.py``).

Each rule is a plain function on plain values, so that both callers word the problem in their own way (the parsers
with an inventory path, the builders with the object's field) and neither copies the rule.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import (
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import quantity_value

# ResourceFlavor.spec.nodeLabels: Kueue's CRD allows at most 8 entries.
MAX_NODE_LABELS = 8
# ClusterQueue/Cohort spec.resourceGroups: Kueue's CRD allows at most 16 groups, 64 flavors and 64 covered resources
# per group, and 256 flavors in all the groups together.
MAX_RESOURCE_GROUPS = 16
MAX_PER_GROUP = 64
MAX_FLAVORS_TOTAL = 256


def too_many_node_labels(node_labels: t.Sized) -> bool:
    """A ResourceFlavor selects its nodes with at most ``MAX_NODE_LABELS`` labels."""
    return len(node_labels) > MAX_NODE_LABELS


def toleration_problems(toleration: t.Mapping[str, t.Any]) -> t.List[t.Tuple[str, str]]:
    """``(field, reason)`` for each rule a ResourceFlavor toleration breaks, e.g.
    ``("value", "must be empty when operator is Exists")``.

    A missing operator means ``Equal`` and a missing or empty effect means every effect, as in the Pod API.
    ``tolerationSeconds`` (the API's word; ``toleration_seconds`` in the modules' options) needs effect NoExecute.
    """
    problems: t.List[t.Tuple[str, str]] = []
    operator = toleration.get("operator")
    if operator is None:
        operator = "Equal"
    if operator not in TOLERATION_OPERATORS:
        problems.append(("operator", "%r is not one of %s" % (operator, ", ".join(TOLERATION_OPERATORS))))
    if not toleration.get("key") and operator != "Exists":
        problems.append(("operator", "must be Exists when key is empty"))
    if operator == "Exists" and toleration.get("value") not in (None, ""):
        problems.append(("value", "must be empty when operator is Exists"))
    effect = toleration.get("effect")
    if effect not in (None, "") and effect not in TAINT_EFFECTS:
        problems.append(("effect", "%r is not one of %s" % (effect, ", ".join(TAINT_EFFECTS))))
    seconds = [toleration.get(key) for key in ("tolerationSeconds", "toleration_seconds")]
    if seconds != [None, None] and effect != "NoExecute":
        problems.append(("tolerationSeconds", "needs effect NoExecute"))
    return problems


def lends_above_nominal(lending_limit: t.Any, nominal_quota: t.Any) -> bool:
    """A ClusterQueue cannot lend more of a resource than its nominal quota (quantities as given; an invalid one
    is reported by its own check, not here)."""
    lending = quantity_value(lending_limit)
    nominal = quantity_value(nominal_quota)
    return lending is not None and nominal is not None and lending > nominal
