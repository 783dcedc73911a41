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
    type: list
    elements: dict
    default: []
    suboptions:
      covered_resources:
        description:
          - Resources covered by the group, for example C(nvidia.com/gpu), C(cpu), C(memory).
          - Defaults to the resources of the first flavor, in that order.
        type: list
        elements: str
      flavors:
        description:
          - Flavors providing the resources, in order of preference.
        type: list
        elements: dict
        required: true
        suboptions:
          name:
            description:
              - Name of a ResourceFlavor.
            type: str
            required: true
          resources:
            description:
              - Quota per covered resource.
            type: list
            elements: dict
            required: true
            suboptions:
              name:
                description:
                  - Resource name.
                type: str
                required: true
              nominal_quota:
                description:
                  - Quantity shared by the cohort (for example V(8), V(64), V(256Gi)).
                type: raw
                required: true
              borrowing_limit:
                description:
                  - How much this cohort's subtree may borrow from its parent. Needs O(parent).
                type: raw
              lending_limit:
                description:
                  - How much of this cohort's quota the parent's subtree may borrow; at most the nominal quota.
                    Needs O(parent).
                type: raw
  fair_sharing_weight:
    description:
      - Weight of the cohort in fair sharing among its siblings (a quantity, for example V(1)).
    type: raw
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
seealso:
  - module: gpuaas.platform.cluster_queue
  - module: gpuaas.platform.kueue_info
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
  description: Objects created (apiVersion, kind, name).
  returned: always
  type: list
  elements: dict
updated:
  description: Objects updated.
  returned: always
  type: list
  elements: dict
deleted:
  description: Objects deleted.
  returned: always
  type: list
  elements: dict
summary:
  description: Number of objects created, updated, unchanged and deleted.
  returned: always
  type: dict
  sample: {"created": 1, "updated": 0, "unchanged": 0, "deleted": 0}
api_versions:
  description: API version used per group.
  returned: when a Kueue object was handled
  type: dict
  sample: {"kueue.x-k8s.io": "v1beta2"}
"""

from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue import API_VERSION, cohort
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module

RESOURCE_SPEC = {
    "name": {"type": "str", "required": True},
    "nominal_quota": {"type": "raw", "required": True},
    "borrowing_limit": {"type": "raw"},
    "lending_limit": {"type": "raw"},
}
MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "parent": {"type": "str", "aliases": ["parent_name"]},
    "resource_groups": {
        "type": "list", "elements": "dict", "default": [],
        "options": {
            "covered_resources": {"type": "list", "elements": "str"},
            "flavors": {
                "type": "list", "elements": "dict", "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "resources": {"type": "list", "elements": "dict", "required": True, "options": RESOURCE_SPEC},
                },
            },
        },
    },
    "fair_sharing_weight": {"type": "raw"},
}


def _drop_none(value):
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def build(params):
    return cohort(params["name"], parent=params.get("parent"),
                  resource_groups=_drop_none(params.get("resource_groups") or []),
                  fair_sharing_weight=params.get("fair_sharing_weight"),
                  labels=params.get("labels"), annotations=params.get("annotations"))


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True)
    run_object_module(module, build, lambda p: ObjectRef(API_VERSION, "Cohort", p["name"]))


if __name__ == "__main__":
    main()
