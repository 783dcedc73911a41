#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: local_queue
short_description: Manage Kueue LocalQueues (a namespace's entry to a ClusterQueue)
version_added: 0.1.0
description:
  - Creates, updates or deletes a Kueue C(LocalQueue) with server-side apply.
  - Jobs choose the queue with the label C(kueue.x-k8s.io/queue-name); a LocalQueue named C(default) takes the
    namespace's jobs without that label.
  - The ClusterQueue of a LocalQueue cannot be changed in place; O(recreate) deletes and recreates the LocalQueue
    to move it.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description:
      - Name of the LocalQueue.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the LocalQueue.
    type: str
    required: true
  cluster_queue:
    description:
      - ClusterQueue the LocalQueue submits to. Required with O(state=present).
      - The ClusterQueue's O(gpuaas.platform.cluster_queue#module:namespace_selector) must select the namespace.
    type: str
  stop_policy:
    description:
      - V(Hold) stops admitting this queue's workloads; V(HoldAndDrain) also evicts admitted ones.
    type: str
    choices: ["None", Hold, HoldAndDrain]
  fair_sharing_weight:
    description:
      - Weight of the LocalQueue in admission fair sharing (a quantity).
    type: raw
  recreate:
    description:
      - When the LocalQueue exists with another ClusterQueue, delete it and create it again pointing at
        O(cluster_queue). Without it the module fails and says so.
      - Pending workloads of the queue wait until it exists again; admitted ones keep running.
    type: bool
    default: false
seealso:
  - module: gpuaas.platform.cluster_queue
    description: The ClusterQueue a LocalQueue submits to; its namespace_selector must select the namespace.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
"""

EXAMPLES = r"""
- name: Default queue of the nlp-team namespace
  gpuaas.platform.local_queue:
    name: default
    namespace: nlp-team
    cluster_queue: nlp-team

- name: Move it to another ClusterQueue
  gpuaas.platform.local_queue:
    name: default
    namespace: nlp-team
    cluster_queue: nlp-team-large
    recreate: true
"""

RETURN = r"""
result:
  description: The LocalQueue as stored (after the dry run in check mode); empty when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "default", "namespace": "nlp-team"}, "spec": {"clusterQueue": "nlp-team"}}
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
  description: Objects deleted, including the old LocalQueue replaced by O(recreate).
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
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue import API_VERSION
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kueue_options import local_queue

MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "cluster_queue": {"type": "str"},
    "stop_policy": {"type": "str", "choices": ["None", "Hold", "HoldAndDrain"]},
    "fair_sharing_weight": {"type": "raw"},
    "recreate": {"type": "bool", "default": False},
}


def build(params):
    return local_queue(params["name"], params["namespace"], cluster_queue=params.get("cluster_queue"),
                       stop_policy=params.get("stop_policy"), fair_sharing_weight=params.get("fair_sharing_weight"),
                       labels=params.get("labels"), annotations=params.get("annotations"))


def make_before_apply(module):
    def before_apply(engine, desired):
        version = engine.kueue_version()
        res = engine.client.resource("kueue.x-k8s.io/%s" % version, "LocalQueue")
        live = res.get(desired["metadata"]["name"], desired["metadata"]["namespace"])
        if live is None:
            return {}
        current = (live.get("spec") or {}).get("clusterQueue")
        wanted = desired["spec"].get("clusterQueue")
        if not current or current == wanted:
            return {}
        ref = ObjectRef(res.api_version, "LocalQueue", desired["metadata"]["name"], desired["metadata"]["namespace"])
        if not module.params["recreate"]:
            raise GpuaasError(
                "%s submits to ClusterQueue %s; its clusterQueue cannot be changed to %s in place" % (ref, current, wanted),
                hint="set recreate: true to delete and recreate the LocalQueue (pending workloads wait until it is back)")
        deleted = engine.recreate([ref], wait_timeout=module.params["wait_timeout"])
        out = deleted.to_module_result(diff=True)
        return {"deleted": out["deleted"], "diff": out.get("diff", [])}
    return before_apply


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True,
                          required_if=[("state", "present", ["cluster_queue"])])
    run_object_module(module, build,
                      lambda p: ObjectRef(API_VERSION, "LocalQueue", p["name"], p["namespace"]),
                      before_apply=make_before_apply(module))


if __name__ == "__main__":
    main()
