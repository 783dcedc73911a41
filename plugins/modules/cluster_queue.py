#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_queue
short_description: Manage Kueue ClusterQueues (quotas per flavor and resource)
version_added: 0.1.0
description:
  - Creates, updates or deletes a Kueue C(ClusterQueue) with server-side apply.
  - Quotas are given per resource group, flavor and resource, with nominal quota, borrowing limit and lending limit.
  - The options are validated before anything is sent, and every mistake is listed (borrowing or lending limits
    without a cohort, a flavor without quota for a covered resource, a lending limit above the nominal quota,
    a flavor or resource used in two groups...).
  - Uses C(kueue.x-k8s.io/v1beta2) when the cluster serves it and converts to C(v1beta1) otherwise
    (C(cohortName) becomes C(cohort), admission checks become a plain list, C(MayStopSearch) becomes C(Borrow)/C(Preempt)).
  - Idempotence is judged on the fields this collection owns, so values defaulted by the CRD never show as changes.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description:
      - Name of the ClusterQueue.
    type: str
    required: true
  cohort:
    description:
      - Cohort the queue belongs to. Queues of a cohort borrow unused quota from each other.
      - Needed for O(resource_groups[].flavors[].resources[].borrowing_limit) and
        O(resource_groups[].flavors[].resources[].lending_limit).
    type: str
  namespace_selector:
    description:
      - Namespaces whose LocalQueues may submit to this queue.
      - Unset means B(no namespace) may submit (Kueue's default); V({}) means every namespace.
    type: dict
    suboptions:
      match_labels:
        description:
          - Labels the namespace must have.
        type: dict
      match_expressions:
        description:
          - Label selector requirements.
        type: list
        elements: dict
        suboptions:
          key:
            description: Label key.
            type: str
            required: true
          operator:
            description: Operator.
            type: str
            required: true
            choices: [In, NotIn, Exists, DoesNotExist]
          values:
            description: Values for V(In) and V(NotIn).
            type: list
            elements: str
  queueing_strategy:
    description:
      - V(BestEffortFIFO) lets newer workloads that fit pass older ones that do not; V(StrictFIFO) does not.
      - Unset leaves the API default (V(BestEffortFIFO)).
    type: str
    choices: [BestEffortFIFO, StrictFIFO]
  preemption:
    description:
      - Preemption policies. Unset keys keep the API defaults.
    type: dict
    suboptions:
      reclaim_within_cohort:
        description:
          - Whether a workload may preempt workloads of other queues of the cohort that use this queue's lent quota.
        type: str
        choices: [Never, LowerPriority, Any]
      within_cluster_queue:
        description:
          - Whether a workload that does not fit may preempt workloads of the same queue.
        type: str
        choices: [Never, LowerPriority, LowerOrNewerEqualPriority]
      borrow_within_cohort:
        description:
          - Preemption of other queues' workloads while borrowing. Needs O(preemption.reclaim_within_cohort) other
            than V(Never).
        type: dict
        suboptions:
          policy:
            description: Policy.
            type: str
            choices: [Never, LowerPriority]
          max_priority_threshold:
            description: Only workloads with a priority up to this value may be preempted.
            type: int
  fair_sharing_weight:
    description:
      - Weight of the queue in fair sharing (a quantity, for example V(1) or V(0.5)); used when fair sharing is
        enabled in the Kueue configuration.
    type: raw
  stop_policy:
    description:
      - V(Hold) stops admitting new workloads; V(HoldAndDrain) also evicts admitted workloads; V(None) runs normally.
    type: str
    choices: ["None", Hold, HoldAndDrain]
  flavor_fungibility:
    description:
      - Whether a workload tries the next flavor before borrowing or preempting in the current one.
    type: dict
    suboptions:
      when_can_borrow:
        description:
          - V(MayStopSearch) (API default) or V(TryNextFlavor). The old name V(Borrow) is accepted.
        type: str
        choices: [MayStopSearch, TryNextFlavor, Borrow]
      when_can_preempt:
        description:
          - V(TryNextFlavor) (API default) or V(MayStopSearch). The old name V(Preempt) is accepted.
        type: str
        choices: [MayStopSearch, TryNextFlavor, Preempt]
      preference:
        description:
          - Whether borrowing or preemption is preferred; only when both policies are V(TryNextFlavor).
        type: str
        choices: [BorrowingOverPreemption, PreemptionOverBorrowing]
  admission_checks:
    description:
      - AdmissionChecks a workload must pass before admission.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the AdmissionCheck.
        type: str
        required: true
      on_flavors:
        description: Only for these flavors (default all).
        type: list
        elements: str
notes:
  - Deleting a queue that still has admitted workloads leaves it terminating until they finish
    (finalizer C(kueue.x-k8s.io/resource-in-use)); use O(stop_policy=HoldAndDrain) first to evict them.
seealso:
  - module: gpuaas.platform.resource_flavor
    description: The flavors a quota is given in.
  - module: gpuaas.platform.cohort
    description: A cohort's own quota, parent and fair-sharing weight.
  - module: gpuaas.platform.local_queue
    description: The namespaced queue that workloads name to submit to a ClusterQueue.
  - module: gpuaas.platform.kueue_info
    description: Quota, usage and pending workloads of the ClusterQueues.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
  - gpuaas.platform.kueue_quota
"""

EXAMPLES = r"""
- name: Queue of the NLP team with H100 GPUs, borrowing from the research cohort
  gpuaas.platform.cluster_queue:
    name: nlp-team
    cohort: research
    namespace_selector:
      match_labels:
        gpuaas.io/tenant: nlp-team
    resource_groups:
      - covered_resources: [nvidia.com/gpu, cpu, memory]
        flavors:
          - name: h100
            resources:
              - {name: nvidia.com/gpu, nominal_quota: 8, borrowing_limit: 8, lending_limit: 4}
              - {name: cpu, nominal_quota: 96}
              - {name: memory, nominal_quota: 768Gi}
    preemption:
      reclaim_within_cohort: Any
      within_cluster_queue: LowerPriority
    fair_sharing_weight: 1

- name: Drain a queue before removing it
  gpuaas.platform.cluster_queue:
    name: nlp-team
    cohort: research
    stop_policy: HoldAndDrain
    resource_groups:
      - flavors:
          - name: h100
            resources:
              - {name: nvidia.com/gpu, nominal_quota: 8}

- name: Remove it
  gpuaas.platform.cluster_queue:
    name: nlp-team
    state: absent
    wait: true
"""

RETURN = r"""
result:
  description: The ClusterQueue as stored (after the dry run in check mode), in v1beta2 field names; empty when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "nlp-team"},
           "spec": {"cohortName": "research"}}
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
from ansible_collections.gpuaas.platform.plugins.module_utils.kueue_options import RESOURCE_GROUPS_OPTION, cluster_queue, drop_none

SELECTOR_SPEC = {
    "match_labels": {"type": "dict"},
    "match_expressions": {
        "type": "list", "elements": "dict",
        "options": {
            "key": {"type": "str", "required": True, "no_log": False},
            "operator": {"type": "str", "required": True, "choices": ["In", "NotIn", "Exists", "DoesNotExist"]},
            "values": {"type": "list", "elements": "str"},
        },
    },
}
MODULE_SPEC = {
    "name": {"type": "str", "required": True},
    "cohort": {"type": "str"},
    "resource_groups": RESOURCE_GROUPS_OPTION,
    "namespace_selector": {"type": "dict", "options": SELECTOR_SPEC},
    "queueing_strategy": {"type": "str", "choices": ["BestEffortFIFO", "StrictFIFO"]},
    "preemption": {
        "type": "dict",
        "options": {
            "reclaim_within_cohort": {"type": "str", "choices": ["Never", "LowerPriority", "Any"]},
            "within_cluster_queue": {"type": "str", "choices": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]},
            "borrow_within_cohort": {
                "type": "dict",
                "options": {
                    "policy": {"type": "str", "choices": ["Never", "LowerPriority"]},
                    "max_priority_threshold": {"type": "int"},
                },
            },
        },
    },
    "fair_sharing_weight": {"type": "raw"},
    "stop_policy": {"type": "str", "choices": ["None", "Hold", "HoldAndDrain"]},
    "flavor_fungibility": {
        "type": "dict",
        "options": {
            "when_can_borrow": {"type": "str", "choices": ["MayStopSearch", "TryNextFlavor", "Borrow"]},
            "when_can_preempt": {"type": "str", "choices": ["MayStopSearch", "TryNextFlavor", "Preempt"]},
            "preference": {"type": "str", "choices": ["BorrowingOverPreemption", "PreemptionOverBorrowing"]},
        },
    },
    "admission_checks": {
        "type": "list", "elements": "dict",
        "options": {"name": {"type": "str", "required": True}, "on_flavors": {"type": "list", "elements": "str"}},
    },
}


def build(params):
    return cluster_queue(
        params["name"],
        resource_groups=drop_none(params.get("resource_groups") or []),
        cohort=params.get("cohort"),
        namespace_selector=drop_none(params.get("namespace_selector")),
        queueing_strategy=params.get("queueing_strategy"),
        preemption=drop_none(params.get("preemption")),
        fair_sharing_weight=params.get("fair_sharing_weight"),
        stop_policy=params.get("stop_policy"),
        flavor_fungibility=drop_none(params.get("flavor_fungibility")),
        admission_checks=drop_none(params.get("admission_checks")),
        labels=params.get("labels"),
        annotations=params.get("annotations"),
    )


def main():
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True)
    if module.params["state"] == "present" and module.params.get("namespace_selector") is None:
        module.warn("namespace_selector is not set: Kueue lets no namespace submit to ClusterQueue %s; "
                    "set namespace_selector: {} to allow every namespace" % module.params["name"])
    run_object_module(module, build, lambda p: ObjectRef(API_VERSION, "ClusterQueue", p["name"]))


if __name__ == "__main__":
    main()
