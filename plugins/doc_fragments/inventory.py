# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The inventory sections every inventory module validates (tenants, node_pools, ray_idle_reclaim), as the
    roles pass them from group_vars. A module that only validates a section overrides its description."""

    DOCUMENTATION = r"""
options:
  flavors:
    description: Kueue ResourceFlavors (inventory C(gpuaas_flavors)).
    type: list
    elements: dict
    default: []
  cohorts:
    description: Kueue Cohorts, may nest with C(parent) (inventory C(gpuaas_cohorts)).
    type: list
    elements: dict
    default: []
  priorities:
    description:
      - WorkloadPriorityClasses C({name, value, description, open_to_tenants}) (inventory C(gpuaas_priorities)).
      - A tenant without C(allowed_priorities) may use the classes with C(open_to_tenants=true), or only the
        lowest class(es) when none is marked.
    type: list
    elements: dict
    default: []
  tenants:
    description:
      - The tenants (inventory C(gpuaas_tenants)). See C(docs/tenants.md) and the C(gpuaas.platform.tenants)
        role's argument spec for every key (name, namespaces, cohort, fair_sharing_weight, quotas, preemption,
        access, queues, autoscaling, queueing_strategy, labels, state).
    type: list
    elements: dict
    default: []
"""
