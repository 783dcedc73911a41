#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: resource_flavor
short_description: Manage Kueue ResourceFlavors (which nodes a quota stands for)
version_added: 0.1.0
description:
  - Creates, updates or deletes a Kueue C(ResourceFlavor) with server-side apply.
  - A flavor names a pool of nodes by their labels (for example C(nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3));
    Kueue adds the labels as node selectors and the tolerations to the pods it admits with the flavor.
  - Validated before sending; at most 8 node labels, 8 node taints and 8 tolerations.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description:
      - Name of the ResourceFlavor.
    type: str
    required: true
  node_labels:
    description:
      - Node labels that identify the nodes of this flavor (at most 8).
    type: dict
  node_taints:
    description:
      - Taints of those nodes; workloads that do not tolerate them are not admitted to the flavor (at most 8).
    type: list
    elements: dict
    suboptions:
      key:
        description: Taint key.
        type: str
        required: true
      value:
        description: Taint value.
        type: str
      effect:
        description: Taint effect.
        type: str
        required: true
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
  tolerations:
    description:
      - Tolerations Kueue adds to the pods it admits with this flavor (at most 8), typically for the GPU taint.
    type: list
    elements: dict
    suboptions:
      key:
        description: Taint key to tolerate; empty with O(tolerations[].operator=Exists) tolerates everything.
        type: str
      operator:
        description: Operator.
        type: str
        choices: [Equal, Exists]
      value:
        description: Value for V(Equal).
        type: str
      effect:
        description: Effect to tolerate (default all).
        type: str
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
      toleration_seconds:
        description: For V(NoExecute) only, how long the pod stays bound after the taint appears.
        type: int
  topology_name:
    description:
      - Name of a Kueue C(Topology) for topology-aware scheduling (needs O(node_labels)).
    type: str
seealso:
  - module: gpuaas.platform.cluster_queue
    description: Gives quota in the flavor.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
"""

EXAMPLES = r"""
- name: H100 nodes, tainted for GPU workloads only
  gpuaas.platform.resource_flavor:
    name: h100
    node_labels:
      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
    tolerations:
      - key: nvidia.com/gpu
        operator: Exists
        effect: NoSchedule

- name: Remove a flavor
  gpuaas.platform.resource_flavor:
    name: a100-mig
    state: absent
"""

RETURN = r"""
result:
  description: The ResourceFlavor as stored (after the dry run in check mode); empty when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
           "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
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
from ansible_collections.gpuaas.platform.plugins.module_utils.kueue_options import resource_flavor

MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "node_labels": {"type": "dict"},
    "node_taints": {
        "type": "list", "elements": "dict",
        "options": {
            "key": {"type": "str", "required": True, "no_log": False},
            "value": {"type": "str"},
            "effect": {"type": "str", "required": True, "choices": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
        },
    },
    "tolerations": {
        "type": "list", "elements": "dict",
        "options": {
            "key": {"type": "str", "no_log": False},
            "operator": {"type": "str", "choices": ["Equal", "Exists"]},
            "value": {"type": "str"},
            "effect": {"type": "str", "choices": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
            "toleration_seconds": {"type": "int"},
        },
    },
    "topology_name": {"type": "str"},
}


def build(params):
    return resource_flavor(
        params["name"],
        node_labels=params.get("node_labels"),
        node_taints=params.get("node_taints"),
        tolerations=params.get("tolerations"),
        topology_name=params.get("topology_name"),
        labels=params.get("labels"),
        annotations=params.get("annotations"),
    )


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True)
    run_object_module(module, build, lambda p: ObjectRef(API_VERSION, "ResourceFlavor", p["name"]))


if __name__ == "__main__":
    main()
