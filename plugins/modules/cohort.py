#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cohort
short_description: Manage Kueue Cohorts (borrowing trees with shared quota)
version_added: 0.1.0
description:
  - Creates, updates or deletes a Kueue C(Cohort) with server-side apply.
  - ClusterQueues join a cohort with their O(gpuaas.platform.cluster_queue#module:cohort) option and borrow each
    other's unused quota; a Cohort object adds a parent (hierarchical cohorts), shared quota and a fair-sharing weight.
  - Borrowing and lending limits of a Cohort apply towards its parent, so they need O(parent).
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description:
      - Name of the Cohort.
    type: str
    required: true
  parent:
    description:
      - Parent cohort. Unset makes this cohort a root.
    type: str
    aliases: [parent_name]
  resource_groups:
    description:
      - Shared quota of the cohort, on top of its member queues' quotas, in the same shape as a ClusterQueue's
        resource groups. Each flavor of a group lists a quota for every covered resource.
  fair_sharing_weight:
    description:
      - Weight of the cohort in fair sharing among its siblings (a quantity, for example V(1)).
    type: raw
seealso:
  - module: gpuaas.platform.cluster_queue
    description: The queues that join a cohort and borrow from it.
  - module: gpuaas.platform.kueue_info
    description: The cohort tree with its queues and their usage.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
  - gpuaas.platform.kueue_quota
"""

EXAMPLES = r"""
- name: Root cohort of the research organisation
  gpuaas.platform.cohort:
    name: research

- name: Department cohort with 4 shared H100 GPUs, lending at most 2 to the rest of research
  gpuaas.platform.cohort:
    name: research-nlp
    parent: research
    fair_sharing_weight: 2
    resource_groups:
      - covered_resources: [nvidia.com/gpu]
        flavors:
          - name: h100
            resources:
              - {name: nvidia.com/gpu, nominal_quota: 4, lending_limit: 2}

- name: Remove it
  gpuaas.platform.cohort:
    name: research-nlp
    state: absent
"""

RETURN = r"""
result:
  description: The Cohort as stored (after the dry run in check mode), in v1beta2 field names; empty when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "research-nlp"},
           "spec": {"parentName": "research"}}
created:
  description: Objects created, each as C(apiVersion), C(kind), C(name) and, when namespaced, C(namespace).
  returned: always
  type: list
  elements: dict
updated:
  description: Objects updated, like RV(created).
  returned: always
  type: list
  elements: dict
deleted:
  description: Objects deleted, like RV(created).
  returned: always
  type: list
  elements: dict
summary:
  description: Number of objects created, updated, unchanged and deleted.
  returned: always
  type: dict
  sample: {"created": 1, "updated": 0, "unchanged": 0, "deleted": 0}
api_versions:
  description: API version used per group; C(kueue.x-k8s.io) shows C(v1beta1) on clusters with an older Kueue.
  returned: when a Kueue object was handled
  type: dict
  sample: {"kueue.x-k8s.io": "v1beta2"}
diff:
  description: Per changed object, the fields this collection manages before and after.
  returned: in diff mode
  type: list
  elements: dict
"""

from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue import API_VERSION, cohort
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kueue_options import RESOURCE_GROUPS_OPTION, drop_none

MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "parent": {"type": "str", "aliases": ["parent_name"]},
    "resource_groups": RESOURCE_GROUPS_OPTION,
    "fair_sharing_weight": {"type": "raw"},
}


def build(params):
    return cohort(params["name"], parent=params.get("parent"),
                  resource_groups=drop_none(params.get("resource_groups") or []),
                  fair_sharing_weight=params.get("fair_sharing_weight"),
                  labels=params.get("labels"), annotations=params.get("annotations"))


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True)
    run_object_module(module, build, lambda p: ObjectRef(API_VERSION, "Cohort", p["name"]))


if __name__ == "__main__":
    main()
