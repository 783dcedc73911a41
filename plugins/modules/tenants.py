#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tenants
short_description: Make the cluster's GPU tenancy equal to the inventory (Kueue queues, namespaces, RBAC, KEDA)
version_added: "0.1.0"
description:
  - One call validates the whole tenancy inventory, reads the GPU capacity the nodes offer per flavor, builds
    every desired object and reconciles them with the shared apply engine (server-side apply, bounded
    concurrency, one LIST per kind, no request for unchanged objects), then prunes objects this module owns
    that are no longer desired. Prune and delete only ever touch objects it owns (label
    C(app.kubernetes.io/managed-by=gpuaas.platform)).
  - "Ownership guard: when an object the inventory describes already exists without that label (a hand-made
    ClusterQueue, ResourceFlavor or Namespace with the same name), the run fails before its first write (also in
    check mode), listing every such object with its field managers (C(metadata.managedFields)), unless O(adopt)
    names it. A Namespace an admin labelled C(gpuaas.io/tenant=<tenant>) for the tenant that lists it counts as
    handed over. Adopted objects are labelled and from then on managed and pruned like the collection's own; they
    are reported in RV(adopted), and the existing GPU workloads of an adopted namespace that the admission policy
    would refuse on their next update in RV(adopted_namespace_workloads)."
  - "Per tenant: namespaces (label C(gpuaas.io/tenant), plus C(kueue.openshift.io/managed=true) on OpenShift),
    one ClusterQueue named like the tenant, a LocalQueue C(default) in every namespace (plus C(tenants[].queues)),
    RoleBindings (admins to C(admin), users to C(edit)), read access to the tenant's own ClusterQueue, and the
    KEDA ScaledObjects of C(tenants[].autoscaling)."
  - "Shared: ResourceFlavors, Cohorts, WorkloadPriorityClasses, a ClusterRole aggregated into C(admin)/C(edit)/C(view)
    that lets tenants read LocalQueues and Workloads (never ClusterQueues), and a ValidatingAdmissionPolicy that
    refuses GPU Pods, Jobs, Deployments and StatefulSets without the C(kueue.x-k8s.io/queue-name) label in tenant
    namespaces."
  - Every inventory problem is reported at once, with its path (for example C(gpuaas_tenants[3].quotas[0].flavor)),
    before anything is written.
  - "Offboarding (C(tenants[].state=absent), or, only with O(prune=true), a tenant whose objects exist but that the
    inventory no longer lists): the ClusterQueue gets C(stopPolicy: HoldAndDrain), the module waits (at most
    O(drain_timeout) seconds) until it holds no admitted or reserving workloads, then deletes the tenant's queues,
    bindings and ScaledObjects. Namespaces are deleted only with O(delete_namespaces=true)."
  - "Safe mode (the default, O(prune=false)): nothing is removed because it is missing from the inventory. Tenants
    on the cluster that the inventory does not list (for example onboarded from an AWX survey), and shared objects
    (flavors, cohorts, priorities) no longer listed, are left untouched and reported as drift (a warning and
    RV(drift)). An empty tenant list against a cluster that has tenants writes nothing at all (a forgotten C(-i));
    with O(prune=true) it is refused unless O(allow_empty=true)."
  - "Node pools (O(node_pools) set): a step of the same run - validated with the inventory (a pool-fed flavor counts
    its pools' maximum toward capacity), templates checked before the first write, ScaledObjects applied and pruned
    under the same lock with one Prometheus credential read; RV(node_pools) reports them."
  - "Two runs never reconcile at once: a run that writes holds the run lock (O(lock), shared with
    M(gpuaas.platform.node_pools))."
  - "Transient API errors (connection refused/reset, timeouts, 429, 5xx) are retried with a bounded exponential
    backoff. When the API server stays unreachable the run stops scheduling requests and fails with one message:
    what was applied, what was not, and that a re-run converges."
  - A LocalQueue whose ClusterQueue changed (a namespace moved to another tenant) is deleted and created again,
    because C(spec.clusterQueue) is immutable.
  - "Fleet (O(clusters), docs/multicluster.md): the same run on every cluster of a MultiKueue fleet, each reached with
    its own connection options (the module's own connection options and C(K8S_AUTH_*) are not used). Every cluster
    is probed and prepared (read, ownership guard, safe mode) before the first write on any; an unreachable cluster or
    a refusal anywhere stops the run with nothing written, naming the cluster. Then the run lock is taken on every
    cluster (manager first, then the workers in order), each worker is written (the tenancy with each tenant's share
    of its quota, MultiKueue's least-privilege ServiceAccount), its token is read, and the manager is written (the
    tenancy with the whole quota and the MultiKueue admission check, C(AdmissionCheck), C(MultiKueueConfig),
    C(MultiKueueCluster) and a kubeconfig Secret per worker). Offboarding drains and removes the tenant on every
    worker, then on the manager."
author:
  - gpuaas.platform contributors (@gpuaas)
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.inventory
  - gpuaas.platform.inventory_run
  - gpuaas.platform.run_lock
  - gpuaas.platform.fleet
  - gpuaas.platform.node_pools
options:
  delete_namespaces:
    description: Delete the namespaces of offboarded tenants (and namespaces removed from a tenant).
    type: bool
    default: false
  drain_timeout:
    description: Seconds to wait for an offboarded tenant's ClusterQueue to hold no admitted workloads.
    type: int
    default: 600
  limit_tenants:
    description:
      - Reconcile (and prune) only these tenants' objects; shared objects (flavors, cohorts, priorities, policy)
        are neither applied nor pruned. Used by the onboard and offboard playbooks.
      - The whole O(tenants) list is still validated, with the checks across tenants (namespace claims, GPU
        capacity of each flavor), but the cluster is read only for these tenants (LISTs with the label selector
        C(gpuaas.io/tenant in (...))), so the run costs what these tenants have, not what the cluster has.
    type: list
    elements: str
  platform:
    description: C(auto) detects OpenShift by API discovery; C(openshift) adds the C(kueue.openshift.io/managed) label.
    type: str
    choices: [auto, kubernetes, openshift]
    default: auto
  admission:
    description:
      - What the admission policy C(gpuaas-require-kueue-queue) trusts (docs/security.md). Each key replaces its
        default list when given.
    type: dict
    default: {}
    suboptions:
      platform_namespaces:
        description: Namespaces the policy does not apply to (GPU Operator, monitoring, Kueue, KEDA, C(kube-system) ...).
        type: list
        elements: str
      workload_controllers:
        description:
          - Usernames (C(request.userInfo.username)) whose Pods and child workloads are admitted on the strength of
            their parent (the Job controller, the operators of Kueue's CRD frameworks). Never ownerReferences.
        type: list
        elements: str
      kueue_users:
        description: Kueue's own usernames, the only ones that may lift its admission gate or change a Pod's queue label.
        type: list
        elements: str
      automation_users:
        description: Usernames that may write ScaledObject triggers using the platform's Prometheus credential.
        type: list
        elements: str
      automation_groups:
        description: Groups that may do the same (default C(system:masters)).
        type: list
        elements: str
  kueue_frameworks:
    description:
      - The Kueue frameworks the cluster's Kueue manages (upstream names, as C(gpuaas_kueue_integrations) of the
        C(gpuaas.platform.kueue) role resolves them with M(gpuaas.platform.kueue_integrations_info)); the admission
        policy is generated from them (issue 22 item 3, docs/security.md).
      - Only the O(admission.workload_controllers) that run one of these frameworks are trusted (e.g. the KubeRay
        operator only when a C(ray.io) framework is listed); only the CRD kinds listed must carry a queue label; a
        known kind not listed is refused in tenant namespaces when its pod templates request GPUs.
      - C([auto]) resolves them as the C(kueue) role does - every known framework whose kind the cluster serves
        (on OpenShift without those the Red Hat Kueue operand cannot carry, such as C(ray.io/rayservice)).
      - Default (not set) every framework the collection knows, the policy of earlier releases. The C(tenants) role
        passes C(gpuaas_kueue_integrations) (default C(auto)).
    type: list
    elements: str
  allow_empty:
    description: With O(prune=true), accept an empty O(tenants) list (which removes every tenant). Refused otherwise.
    type: bool
    default: false
  concurrency:
    description: How many objects are applied in parallel.
    type: int
    default: 8
  adopt:
    description:
      - Existing objects not managed by this collection that the run may take over (see the ownership guard in the
        description), each as C(Kind/name) (cluster-scoped, for example C(ClusterQueue/nlp)) or
        C(Kind/namespace/name) (for example C(LocalQueue/nlp-train/default)); the kind is case-insensitive.
      - C(*) adopts every such object. Names that match nothing are ignored.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Server-side dry run (C(dryRun=All)); nothing is written, no drain wait happens.
    support: full
  diff_mode:
    description: Per-object diffs of the fields this collection manages (Secret data is redacted).
    support: full
notes:
  - Requires the C(kubernetes) Python library and Kueue (C(v1beta2), or C(v1beta1) on older clusters).
  - KEDA is needed only when a tenant has C(tenants[].autoscaling).
"""

EXAMPLES = r"""
- name: Converge the whole GPU tenancy from group_vars
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    priorities: "{{ gpuaas_priorities }}"
    tenants: "{{ gpuaas_tenants }}"
    prometheus: "{{ gpuaas_prometheus }}"
    node_pools: "{{ gpuaas_node_pools }}"  # the GPU node pools, a step of the same run

- name: Remove every tenant the inventory no longer lists (opt-in; safe mode only reports them)
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    tenants: "{{ gpuaas_tenants }}"
    prune: true

- name: Take over a hand-made ClusterQueue and namespace of the same names as the inventory's (brownfield)
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    tenants: "{{ gpuaas_tenants }}"
    adopt: [ClusterQueue/nlp, Namespace/nlp-train]

- name: Converge a MultiKueue fleet (manager and workers) from one inventory
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    tenants: "{{ gpuaas_tenants }}"
    clusters: "{{ gpuaas_clusters }}"

- name: Offboard one tenant and delete its namespaces
  gpuaas.platform.tenants:
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts }}"
    tenants: [{name: vision, state: absent}]
    limit_tenants: [vision]
    delete_namespaces: true
"""

RETURN = r"""
changed:
  description: Whether any object was created, updated or deleted (or would be, in check mode).
  returned: always
  type: bool
summary:
  description: Object counts per action.
  returned: always
  type: dict
  sample: {"created": 0, "updated": 1, "unchanged": 41, "deleted": 0}
created:
  description: References of created objects.
  returned: always
  type: list
  elements: dict
updated:
  description: References of updated objects.
  returned: always
  type: list
  elements: dict
deleted:
  description: References of deleted (pruned or offboarded) objects.
  returned: always
  type: list
  elements: dict
tenants:
  description: Present tenants with their namespaces.
  returned: always
  type: dict
  sample: {"nlp": ["nlp-train", "nlp-serve"]}
offboarded:
  description: Tenants drained and removed in this run.
  returned: always
  type: list
  elements: str
recreated_local_queues:
  description: LocalQueues deleted and created again because their ClusterQueue changed (C(namespace/name)).
  returned: always
  type: list
  elements: str
kept_namespaces:
  description: Namespaces this module created that no tenant claims any more, kept because O(delete_namespaces=false).
  returned: always
  type: list
  elements: str
capacity:
  description: GPU capacity per flavor and resource read from the nodes.
  returned: when O(check_capacity=true)
  type: dict
  sample: {"h100": {"nvidia.com/gpu": "16"}}
objects:
  description: Number of desired objects.
  returned: always
  type: int
requests:
  description: API requests made by the engine per verb (list, get, apply, delete).
  returned: always
  type: dict
api_versions:
  description: API versions used (for example the Kueue version served).
  returned: always
  type: dict
drift:
  description:
    - What exists on the cluster (owned by this module) but is not in the inventory, and was left untouched because
      O(prune=false). With O(prune=true) both lists are empty (those objects are in RV(deleted) instead).
    - C(unmanaged_tenants) are tenant names, C(unmanaged_objects) references of the objects prune would delete,
      C(skipped_writes) is true when an empty tenant list made the run write nothing at all.
  returned: always
  type: dict
  sample: {"prune": false, "unmanaged_tenants": ["survey-team"], "skipped_writes": false,
           "unmanaged_objects": [{"kind": "ClusterQueue", "name": "survey-team", "apiVersion": "kueue.x-k8s.io/v1beta2"}]}
adopted:
  description:
    - Existing objects this collection did not manage that the run took over (in check mode, would take over), with
      their field managers and why (C(adopt list) or the tenant label an admin set).
  returned: always
  type: list
  elements: dict
  sample: [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "nlp",
            "managers": ["kubectl-client-side-apply (Update)"], "reason": "adopt list"}]
adopted_namespace_workloads:
  description:
    - GPU Pods, Deployments, StatefulSets and Jobs in adopted namespaces without the C(kueue.x-k8s.io/queue-name)
      label, which the admission policy refuses on their next update (also a warning).
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "Deployment", "namespace": "nlp-serve", "name": "vllm", "resources": ["nvidia.com/gpu"]}]
lock:
  description: The lock this run held (Lease, holder identity, seconds waited, the expired holder taken over).
  returned: when a lock was taken
  type: dict
node_pools:
  description:
    - With O(node_pools), the pools' part of the run, as M(gpuaas.platform.node_pools) returns it - C(changed),
      C(summary), C(created), C(updated), C(deleted) (also in the run's lists), C(drift) (pool objects kept with
      O(prune=false)) and C(pools) (per pool its target, bounds and PromQL).
  returned: when O(node_pools) is set
  type: dict
  sample: {"changed": false, "summary": {"created": 0, "updated": 0, "unchanged": 1, "deleted": 0}, "drift": [],
           "pools": {"h100": {"target": "MachineSet openshift-machine-api/gpu-h100", "max_nodes": 4}}}
workers:
  description:
    - With O(clusters), the workers no longer present in the inventory that this run C(removed) (O(prune_workers))
      or C(kept), and the unreachable workers C(skipped) (O(reachable_only)) with why.
  returned: when O(clusters) is set
  type: dict
  sample: {"removed": ["gpu-old"], "kept": [], "skipped": {"gpu-west": "worker 'gpu-west': cannot reach ..."}}
clusters:
  description:
    - With O(clusters), the result of each cluster (the keys above, without C(diff)), by cluster name; the top-level
      lists then cover every cluster, each reference with a C(cluster) key, and C(summary) is summed.
  returned: when O(clusters) is set
  type: dict
  sample: {"hub": {"changed": false, "summary": {"created": 0, "updated": 0, "unchanged": 31, "deleted": 0}}}
diff:
  description: Per-object before/after of the managed fields (with C(--diff)); with O(clusters) the headers start with
    the cluster name.
  returned: when diff mode is on
  type: list
  elements: dict
problems:
  description:
    - Every inventory problem, with its path, when validation failed.
    - Every existing object not managed by this collection, with its field managers, when the ownership guard
      refused the run (C(error_details.not_owned) has them as references).
  returned: on failure
  type: list
  elements: str
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import run_module
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.fleet_runner import FleetRunner
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inventory_run import INVENTORY_RUN_ARGUMENT_SPEC
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_step import node_pools_argument_spec
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import TenancyRunner


# The module's options (besides the connection options of k8s_auth); documented above (DOCUMENTATION).
TENANTS_ARGUMENT_SPEC: t.Dict[str, t.Any] = dict(
    delete_namespaces=dict(type="bool", default=False),
    drain_timeout=dict(type="int", default=600),
    limit_tenants=dict(type="list", elements="str"),
    platform=dict(type="str", choices=["auto", "kubernetes", "openshift"], default="auto"),
    admission=dict(type="dict", default={}, options=dict(
        platform_namespaces=dict(type="list", elements="str"),
        workload_controllers=dict(type="list", elements="str"),
        kueue_users=dict(type="list", elements="str"),
        automation_users=dict(type="list", elements="str"),
        automation_groups=dict(type="list", elements="str"),
    )),
    kueue_frameworks=dict(type="list", elements="str"),
    concurrency=dict(type="int", default=8),
    allow_empty=dict(type="bool", default=False),
    adopt=dict(type="list", elements="str", default=[]),
    **INVENTORY_RUN_ARGUMENT_SPEC,
    # gpuaas_node_pools: the node pools step of the run (None: pool objects are not touched)
    **node_pools_argument_spec(default=None),
    # gpuaas_clusters: a MultiKueue fleet (reconcile/fleet_runner.py); its credentials are registered by entry.py
    clusters=dict(type="dict", no_log=False),
    prune_workers=dict(type="bool", default=False),
    reachable_only=dict(type="bool", default=False),
    rotate_workers=dict(type="list", elements="str", default=[]),
)


def main() -> None:
    def make_runner(module, client):
        runner = FleetRunner if module.params.get("clusters") else TenancyRunner
        return runner(client, module.params, module.check_mode, module._diff)

    run_module(TENANTS_ARGUMENT_SPEC, make_runner)


if __name__ == "__main__":
    main()
