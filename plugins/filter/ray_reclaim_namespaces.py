# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: ray_reclaim_namespaces
short_description: Namespaces whose RayClusters or Notebooks tenants opted in to idle reclaim
version_added: 0.1.0
description:
  - Reads the inventory's C(gpuaas_tenants) and returns the namespaces of the RayClusters and Notebooks that present tenants opted
    in to idle reclaim (an C(autoscaling) entry whose C(target.kind) is C(RayCluster) or C(Notebook)), sorted and unique.
  - An entry's namespace is its own C(namespace), else the tenant's only namespace; an entry naming a namespace that
    is not one of the tenant's is left out (the inventory validation refuses it).
  - The roles C(automation_rbac) (RoleBindings of the reclaim account) and C(aap_config) (the C(ray_idle_reclaim) job
    template and schedule) read this one rule, so they cannot disagree about which clusters are opted in.
options:
  _input:
    description: The C(gpuaas_tenants) list of the inventory.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Bind the reclaim account where tenants opted a RayCluster in
  ansible.builtin.debug:
    msg: "{{ gpuaas_tenants | gpuaas.platform.ray_reclaim_namespaces }}"
"""

RETURN = r"""
_value:
  description: The namespaces, sorted, each once; empty when no present tenant opts a RayCluster or Notebook in.
  type: list
  elements: str
"""

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import ray_reclaim_namespaces


class FilterModule:
    """gpuaas.platform.ray_reclaim_namespaces"""

    def filters(self):
        return {"ray_reclaim_namespaces": ray_reclaim_namespaces}
