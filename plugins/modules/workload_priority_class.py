#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: workload_priority_class
short_description: Manage Kueue WorkloadPriorityClasses
version_added: 0.1.0
description:
  - Creates, updates or deletes a Kueue C(WorkloadPriorityClass) with server-side apply.
  - Jobs pick a class with the label C(kueue.x-k8s.io/priority-class); the value orders queueing and preemption
    without changing the pods' own priority.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description:
      - Name of the class.
    type: str
    required: true
  value:
    description:
      - Priority value (32-bit integer); higher wins. Required with O(state=present).
    type: int
  description:
    description:
      - Human-readable description.
    type: str
seealso:
  - module: gpuaas.platform.kueue_info
    description: The classes of the cluster, highest first.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
"""

EXAMPLES = r"""
- name: Production training jobs
  gpuaas.platform.workload_priority_class:
    name: production
    value: 1000
    description: Production training; may preempt research jobs in the same queue

- name: Remove a class
  gpuaas.platform.workload_priority_class:
    name: scavenger
    state: absent
"""

RETURN = r"""
result:
  description: The WorkloadPriorityClass as stored (after the dry run in check mode); empty when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
           "metadata": {"name": "production"}, "value": 1000}
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
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue import API_VERSION
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kueue_options import workload_priority_class

MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "value": {"type": "int"},
    "description": {"type": "str"},
}


def build(params):
    return workload_priority_class(params["name"], params["value"], description=params.get("description"),
                                   labels=params.get("labels"), annotations=params.get("annotations"))


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True,
                          required_if=[("state", "present", ["value"])])
    run_object_module(module, build, lambda p: ObjectRef(API_VERSION, "WorkloadPriorityClass", p["name"]))


if __name__ == "__main__":
    main()
