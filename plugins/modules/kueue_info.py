#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kueue_info
short_description: Kueue queues with their live status, and the cohort tree
version_added: 0.1.0
description:
  - Reads ClusterQueues, LocalQueues, Cohorts, ResourceFlavors and WorkloadPriorityClasses with one LIST per kind.
  - For every ClusterQueue, per flavor and resource, the quota (nominal, borrowing and lending limits) side by side
    with the live usage and the amount borrowed from the cohort, the numbers of pending, reserving and admitted
    workloads, the C(Active) state and the conditions.
  - Builds the cohort tree from Cohort objects and the cohorts ClusterQueues name (a cohort needs no object).
  - Works with Kueue C(v1beta2) and C(v1beta1); the output always uses the v1beta2 field names.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description:
      - Only this ClusterQueue (and the LocalQueues that submit to it).
    type: str
  cohort:
    description:
      - Only the ClusterQueues of this cohort and of the cohorts below it.
    type: str
  namespace:
    description:
      - Only the LocalQueues of this namespace.
    type: str
  label_selector:
    description:
      - Only ClusterQueues with these labels (a Kubernetes label selector, for example C(gpuaas.io/tenant=nlp-team)).
    type: str
  include:
    description:
      - What to return.
    type: list
    elements: str
    choices: [cluster_queues, local_queues, cohorts, resource_flavors, workload_priority_classes]
    default: [cluster_queues, local_queues, cohorts, resource_flavors, workload_priority_classes]
seealso:
  - module: gpuaas.platform.cluster_queue
    description: Creates and changes the ClusterQueues this module reports.
  - module: gpuaas.platform.gpu_utilization_info
    description: GPU utilization and quota usage over time, from Prometheus.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
"""

EXAMPLES = r"""
- name: Status of every queue
  gpuaas.platform.kueue_info:
  register: kueue

- name: GPUs borrowed by the nlp-team queue
  ansible.builtin.debug:
    msg: >-
      {{ (kueue.cluster_queues | selectattr('name', 'equalto', 'nlp-team') | first).flavors
         | map(attribute='resources') | flatten | selectattr('name', 'equalto', 'nvidia.com/gpu')
         | map(attribute='borrowed') | list }}

- name: Queues of one cohort
  gpuaas.platform.kueue_info:
    cohort: research
    include: [cluster_queues, cohorts]
"""

RETURN = r"""
api_version:
  description: Kueue API version read (C(v1beta2) or C(v1beta1)).
  returned: always
  type: str
  sample: v1beta2
cluster_queues:
  description: ClusterQueues with quota and live usage.
  returned: when cluster_queues is included
  type: list
  elements: dict
  contains:
    name:
      description: Name of the ClusterQueue.
      type: str
    cohort:
      description: Cohort name (empty when none).
      type: str
    active:
      description: Whether the C(Active) condition is C(True).
      type: bool
    stop_policy:
      description: Stop policy (C(None) when running).
      type: str
    queueing_strategy:
      description: Queueing strategy.
      type: str
    pending_workloads:
      description: Workloads waiting for admission.
      type: int
    reserving_workloads:
      description: Workloads holding a quota reservation.
      type: int
    admitted_workloads:
      description: Admitted workloads.
      type: int
    flavors:
      description: Per flavor, per resource, C(nominal_quota), C(borrowing_limit), C(lending_limit) (as given) and
        C(usage), C(borrowed), C(reserved) (quantities as reported by Kueue, C("0") when nothing is used).
      type: list
      elements: dict
    local_queues:
      description: C(namespace/name) of the LocalQueues submitting to it.
      type: list
      elements: str
    namespace_selector:
      description: Namespace selector (null means no namespace may submit).
      type: dict
    conditions:
      description: Status conditions.
      type: list
      elements: dict
    labels:
      description: Labels.
      type: dict
  sample: [{"name": "nlp-team", "cohort": "research", "active": true, "pending_workloads": 2,
            "admitted_workloads": 1, "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu",
            "nominal_quota": "8", "usage": "12", "borrowed": "4", "reserved": "12"}]}]}]
local_queues:
  description: LocalQueues with their live status.
  returned: when local_queues is included
  type: list
  elements: dict
  contains:
    name:
      description: Name of the LocalQueue.
      type: str
    namespace:
      description: Namespace of the LocalQueue.
      type: str
    cluster_queue:
      description: ClusterQueue it submits to.
      type: str
    active:
      description: Whether the C(Active) condition is C(True).
      type: bool
    pending_workloads:
      description: Pending workloads.
      type: int
    admitted_workloads:
      description: Admitted workloads.
      type: int
    flavors_usage:
      description: Usage per flavor and resource.
      type: list
      elements: dict
cohorts:
  description: Every cohort (objects and cohorts only named by ClusterQueues) with parent, children and member queues.
  returned: when cohorts is included
  type: list
  elements: dict
  sample: [{"name": "research", "parent": null, "exists": true, "children": ["research-nlp"],
            "cluster_queues": ["nlp-team"]}]
cohort_tree:
  description: The cohort forest as nested dicts (C(name), C(cluster_queues), C(children)).
  returned: when cohorts is included
  type: list
  elements: dict
resource_flavors:
  description: ResourceFlavors (name, node_labels, node_taints, tolerations).
  returned: when resource_flavors is included
  type: list
  elements: dict
workload_priority_classes:
  description: WorkloadPriorityClasses (name, value, description), highest first.
  returned: when workload_priority_classes is included
  type: list
  elements: dict
"""

from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, get_client, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import (
    cohort_api_version,
    convert_from_version,
    kueue_api_version,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec

INCLUDE = ["cluster_queues", "local_queues", "cohorts", "resource_flavors", "workload_priority_classes"]
MODULE_SPEC = {
    "name": {"type": "str"},
    "cohort": {"type": "str"},
    "namespace": {"type": "str"},
    "label_selector": {"type": "str"},
    "include": {"type": "list", "elements": "str", "choices": INCLUDE, "default": INCLUDE},
}


def _active(obj):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Active":
            return cond.get("status") == "True"
    return False


def _usage_map(entries):
    out = {}
    for flavor in entries or []:
        for res in flavor.get("resources") or []:
            out[(flavor.get("name"), res.get("name"))] = res
    return out


def summarize_cluster_queue(cq, local_queues):
    spec = cq.get("spec") or {}
    status = cq.get("status") or {}
    usage = _usage_map(status.get("flavorsUsage"))
    reserved = _usage_map(status.get("flavorsReservation"))
    flavors = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            resources = []
            for res in flavor.get("resources") or []:
                key = (flavor.get("name"), res.get("name"))
                used = usage.get(key) or {}
                item = {
                    "name": res.get("name"),
                    "nominal_quota": res.get("nominalQuota"),
                    "borrowing_limit": res.get("borrowingLimit"),
                    "lending_limit": res.get("lendingLimit"),
                    "usage": used.get("total", "0"),
                    "borrowed": used.get("borrowed", "0"),
                    "reserved": (reserved.get(key) or {}).get("total", "0"),
                }
                resources.append(item)
            flavors.append({"name": flavor.get("name"), "resources": resources})
    name = cq["metadata"]["name"]
    return {
        "name": name,
        "cohort": spec.get("cohortName") or "",
        "active": _active(cq),
        "stop_policy": spec.get("stopPolicy", "None"),
        "queueing_strategy": spec.get("queueingStrategy"),
        "namespace_selector": spec.get("namespaceSelector"),
        "fair_sharing": spec.get("fairSharing"),
        "pending_workloads": status.get("pendingWorkloads", 0),
        "reserving_workloads": status.get("reservingWorkloads", 0),
        "admitted_workloads": status.get("admittedWorkloads", 0),
        "flavors": flavors,
        "local_queues": sorted("%s/%s" % (lq["metadata"]["namespace"], lq["metadata"]["name"])
                               for lq in local_queues if (lq.get("spec") or {}).get("clusterQueue") == name),
        "conditions": status.get("conditions") or [],
        "labels": (cq.get("metadata") or {}).get("labels") or {},
    }


def summarize_local_queue(lq):
    spec = lq.get("spec") or {}
    status = lq.get("status") or {}
    return {
        "name": lq["metadata"]["name"],
        "namespace": lq["metadata"].get("namespace"),
        "cluster_queue": spec.get("clusterQueue"),
        "stop_policy": spec.get("stopPolicy", "None"),
        "active": _active(lq),
        "pending_workloads": status.get("pendingWorkloads", 0),
        "reserving_workloads": status.get("reservingWorkloads", 0),
        "admitted_workloads": status.get("admittedWorkloads", 0),
        "flavors_usage": status.get("flavorsUsage") or [],
        "conditions": status.get("conditions") or [],
    }


def cohort_forest(cohort_objs, cluster_queues):
    """Cohorts (objects + names used by queues) with parents/children, and the nested tree."""
    nodes = {}

    def node(name):
        if name not in nodes:
            nodes[name] = {"name": name, "parent": None, "exists": False, "children": [], "cluster_queues": [],
                           "fair_sharing": None, "resource_groups": []}
        return nodes[name]

    for obj in cohort_objs:
        spec = obj.get("spec") or {}
        n = node(obj["metadata"]["name"])
        n["exists"] = True
        n["parent"] = spec.get("parentName") or None
        n["fair_sharing"] = spec.get("fairSharing")
        n["resource_groups"] = spec.get("resourceGroups") or []
    for cq in cluster_queues:
        cohort = (cq.get("spec") or {}).get("cohortName")
        if cohort:
            node(cohort)["cluster_queues"].append(cq["metadata"]["name"])
    for name in list(nodes):
        parent = nodes[name]["parent"]
        if parent:
            node(parent)["children"].append(name)
    for n in nodes.values():
        n["children"].sort()
        n["cluster_queues"].sort()

    def tree(name, seen):
        if name in seen:  # cycle: Kueue deactivates it; show it once
            return {"name": name, "cycle": True, "cluster_queues": [], "children": []}
        n = nodes[name]
        return {"name": name, "cluster_queues": n["cluster_queues"],
                "children": [tree(c, seen | {name}) for c in n["children"]]}

    roots = [n for n in sorted(nodes) if not nodes[n]["parent"]]
    in_cycle = [n for n in sorted(nodes) if nodes[n]["parent"] and not _reaches_root(nodes, n)]
    forest = [tree(r, frozenset()) for r in roots] + [tree(n, frozenset()) for n in in_cycle[:1]]
    return [nodes[n] for n in sorted(nodes)], forest


def _reaches_root(nodes, name):
    seen = set()
    while name and name not in seen:
        seen.add(name)
        parent = nodes.get(name, {}).get("parent")
        if not parent:
            return True
        name = parent
    return False


def subtree(nodes, root):
    by_name = {n["name"]: n for n in nodes}
    out, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in out or name not in by_name:
            continue
        out.add(name)
        todo.extend(by_name[name]["children"])
    return out


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC, with_apply=False), supports_check_mode=True)
    p = module.params
    include = set(p["include"])
    try:
        client = get_client(module)
        version = kueue_api_version(client)
        gv = "kueue.x-k8s.io/%s" % version

        def list_kind(kind, api_version=gv, **kwargs):
            try:
                return [convert_from_version(o) for o in client.resource(api_version, kind).list(**kwargs)]
            except ApiException as exc:
                raise translate_api_exception(exc, "list", "%s %s" % (api_version, kind))

        result = {"changed": False, "api_version": version}
        need_cq = include & {"cluster_queues", "cohorts", "local_queues"}
        cqs = list_kind("ClusterQueue", label_selector=p["label_selector"]) if need_cq else []
        lqs = list_kind("LocalQueue", namespace=p["namespace"]) if include & {"cluster_queues", "local_queues"} else []
        cohorts = []
        if "cohorts" in include or p["cohort"]:
            try:
                cohorts = list_kind("Cohort", "kueue.x-k8s.io/%s" % cohort_api_version(client, version))
            except GpuaasError as err:
                if err.details.get("reason") != "NotServed":  # Kueue releases before Cohort objects
                    raise
        nodes, forest = cohort_forest(cohorts, cqs)
        if p["cohort"]:
            members = subtree(nodes, p["cohort"])
            cqs = [cq for cq in cqs if (cq.get("spec") or {}).get("cohortName") in members]
            nodes = [n for n in nodes if n["name"] in members]
            forest = [tree for tree in forest if tree["name"] in members] or _find_tree(forest, p["cohort"])
        if p["name"]:
            cqs = [cq for cq in cqs if cq["metadata"]["name"] == p["name"]]
            lqs = [lq for lq in lqs if (lq.get("spec") or {}).get("clusterQueue") == p["name"]]
        if "cluster_queues" in include:
            result["cluster_queues"] = sorted((summarize_cluster_queue(cq, lqs) for cq in cqs), key=lambda c: c["name"])
        if "local_queues" in include:
            if p["cohort"]:
                names = {cq["metadata"]["name"] for cq in cqs}
                lqs = [lq for lq in lqs if (lq.get("spec") or {}).get("clusterQueue") in names]
            result["local_queues"] = sorted((summarize_local_queue(lq) for lq in lqs),
                                            key=lambda q: (q["namespace"], q["name"]))
        if "cohorts" in include:
            result["cohorts"] = nodes
            result["cohort_tree"] = forest
        if "resource_flavors" in include:
            result["resource_flavors"] = sorted(({
                "name": rf["metadata"]["name"],
                "node_labels": (rf.get("spec") or {}).get("nodeLabels") or {},
                "node_taints": (rf.get("spec") or {}).get("nodeTaints") or [],
                "tolerations": (rf.get("spec") or {}).get("tolerations") or [],
                "labels": rf["metadata"].get("labels") or {},
            } for rf in list_kind("ResourceFlavor")), key=lambda f: f["name"])
        if "workload_priority_classes" in include:
            result["workload_priority_classes"] = sorted(({
                "name": w["metadata"]["name"], "value": w.get("value"), "description": w.get("description"),
            } for w in list_kind("WorkloadPriorityClass")), key=lambda w: (-(w["value"] or 0), w["name"]))
        module.exit_json(**result)
    except GpuaasError as err:
        fail_module(module, err)


def _find_tree(forest, name):
    for tree in forest:
        if tree["name"] == name:
            return [tree]
        found = _find_tree(tree["children"], name)
        if found:
            return found
    return []


if __name__ == "__main__":
    main()
