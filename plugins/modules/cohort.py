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
  quotas:
    description:
      - Shared quota of the cohort in the inventory's words (C(gpuaas_cohorts[].quotas), the same as a tenant's
        C(quotas)), validated and grouped exactly as the tenants role does. Mutually exclusive with
        O(resource_groups).
    type: list
    elements: dict
    suboptions:
      flavor:
        description: ResourceFlavor name.
        type: str
        required: true
      resources:
        description: "Nominal quota per resource, for example C({nvidia.com/gpu: 16})."
        type: dict
        required: true
      borrowing_limit:
        description: How much the cohort's subtree may borrow from the parent, per resource (needs O(parent)).
        type: dict
      lending_limit:
        description: How much the cohort's subtree lends to the parent, per resource (needs O(parent)).
        type: dict
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

- name: The same department budget, written as in the inventory (gpuaas_cohorts[].quotas)
  gpuaas.platform.cohort:
    name: research-nlp
    parent: research
    quotas:
      - flavor: h100
        resources: {nvidia.com/gpu: 4}
        lending_limit: {nvidia.com/gpu: 2}

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

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quotas import COHORT_LIMITS_NEED, parse_quotas
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_objects import parse_cohort
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue import API_VERSION, cohort
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.tenancy import quota_resource_groups
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kueue_options import RESOURCE_GROUPS_OPTION, drop_none

MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "parent": {"type": "str", "aliases": ["parent_name"]},
    "resource_groups": RESOURCE_GROUPS_OPTION,
    "quotas": {"type": "list", "elements": "dict", "options": {
        "flavor": {"type": "str", "required": True},
        "resources": {"type": "dict", "required": True},
        "borrowing_limit": {"type": "dict"},
        "lending_limit": {"type": "dict"},
    }},
    "fair_sharing_weight": {"type": "raw"},
}


def inventory_groups(params):
    """``quotas`` (the inventory's words) -> resource groups, by the tenants role's parser and grouping."""
    check = Validator()
    quotas = [drop_none(q) for q in params["quotas"]]
    parsed = parse_quotas(check, "", quotas, {q.get("flavor") for q in quotas}, params.get("parent"),
                          COHORT_LIMITS_NEED.replace("gpuaas_cohorts[].parent", "parent"), cap_lending=False)
    if check.errors:
        raise ValidationError("Cohort %s: %d problem(s) in quotas" % (params["name"], len(check.errors)),
                              hint="fix every listed quota and run again",
                              problems=[p.lstrip(".") for p in check.errors])  # paths of the option: quotas[0]...
    return quota_resource_groups(parsed)


def build(params):
    groups = inventory_groups(params) if params.get("quotas") else None  # checked by the tenants role's parser
    spec = parse_cohort(params["name"], parent=params.get("parent"),
                        resource_groups=None if groups else drop_none(params.get("resource_groups") or []),
                        fair_sharing_weight=params.get("fair_sharing_weight"),
                        labels=params.get("labels"), annotations=params.get("annotations"))
    if groups:
        spec.resource_groups = groups
    return cohort(spec)


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True,
                          mutually_exclusive=[("quotas", "resource_groups")])
    run_object_module(module, build, lambda p: ObjectRef(API_VERSION, "Cohort", p["name"]))


if __name__ == "__main__":
    main()
