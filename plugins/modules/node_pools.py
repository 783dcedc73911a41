#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_pools
short_description: Grow GPU node pools (MachineSet / MachineDeployment) from the GPU quota Kueue has reserved
version_added: "0.2.0"
description:
  - Validates the whole tenancy inventory together with O(node_pools) (every problem at once, with paths such as
    C(gpuaas_node_pools[0].node_labels)) and reconciles, per pool, one KEDA C(ScaledObject) on the pool's C(/scale)
    (an OpenShift C(MachineSet) or a Cluster API C(MachineDeployment)), then prunes pool objects the inventory no
    longer asks for. Objects it does not own are never touched.
  - "The signal is the GPU quota Kueue has reserved on the pool's flavor
    (C(kueue_cluster_queue_resource_reservation{flavor,resource})), divided by C(gpus_per_node) through
    C(metricType: AverageValue): desired nodes = ceil(reserved GPUs / GPUs per node), capped at C(max_nodes)."
  - "Kueue quota does not depend on nodes: a flavor fed by a pool needs quota for the pool's maximum. The capacity
    check counts C(max_nodes x gpus_per_node) for such a flavor, so quota sized for the maximum validates while the
    pool is at 0 nodes."
  - "The HPA never shrinks a pool (C(behavior.scaleDown.selectPolicy: Disabled)): the machine controller would pick
    the machine to delete by its delete policy, and it may run GPU work. Idle nodes go through
    M(gpuaas.platform.node_pool_scaledown); KEDA takes a pool to C(min_nodes) only when nothing has been reserved on
    the flavor for C(idle_seconds)."
  - A pool whose live template does not give its nodes the flavor's node labels is an error (O(check_templates)).
  - "A run that writes holds the run lock of M(gpuaas.platform.tenants) (O(lock)): the pools' ScaledObjects and
    Prometheus credential live beside the tenants', so two automation runs never interleave their writes. Validation
    and the template check run before the lock, so a refused run writes nothing."
  - "The same node pools step runs inside M(gpuaas.platform.tenants) when its O(node_pools) option is set (the
    C(gpuaas.platform.tenants) role does): one parse, one read and one lock for the tenancy and its pools. This module
    runs the step on its own."
author:
  - gpuaas.platform contributors (@gpuaas)
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.inventory
  - gpuaas.platform.inventory_run
  - gpuaas.platform.run_lock
  - gpuaas.platform.node_pools
options:
  node_pools:
    # the description is the node_pools doc fragment's; here the run is the pools alone, so [] is the default
    default: []
  flavors:
    description: Kueue ResourceFlavors (inventory C(gpuaas_flavors)); a pool's C(flavor) must be one of them.
  tenants:
    description: The tenants (inventory C(gpuaas_tenants)), for the capacity check and C(include_pending).
  cohorts:
    description: Kueue Cohorts (inventory C(gpuaas_cohorts)), only validated here.
  priorities:
    description: WorkloadPriorityClasses (inventory C(gpuaas_priorities)), only validated here.
  prometheus:
    description:
      - The shared Prometheus setting (inventory C(gpuaas_prometheus)); C(url) is required when there are pools.
      - A token or CA goes to a Secret in O(keda_namespace) with a C(ClusterTriggerAuthentication) named
        C(gpuaas-prometheus-node-pools).
  openshift_ai:
    description:
      - OpenShift AI settings (inventory C(gpuaas_openshift_ai), module M(gpuaas.platform.tenants)), only validated
        here, so that the whole inventory is checked the same way by both modules.
  allow_overcommit:
    description: Accept quotas above the capacity (nodes, or pools' maximum) of a flavor, with a warning.
  check_capacity:
    description: Read the nodes (one LIST) and compare the GPU quotas per flavor with the nodes and pools.
  keda_namespace:
    description:
      - Namespace of the KEDA operator (where the Prometheus credentials Secret goes).
      - Default C(openshift-keda) on OpenShift (detected by API discovery), else C(keda), as the keda role installs it.
  prune:
    description:
      - Delete the pool objects (ScaledObjects, credentials) of pools no longer in O(node_pools).
      - Off by default, like the tenants module's safe mode (C(gpuaas_tenants_prune)) - a forgotten inventory or a
        misspelled C(gpuaas_node_pools) must not switch off the autoscaling of every GPU pool. Without prune such
        objects are kept, listed in RV(drift) and warned about.
attributes:
  check_mode:
    description: Server-side dry run; nothing is written.
    support: full
  diff_mode:
    description: Per-object diffs of the fields this collection manages (Secret data is redacted).
    support: full
notes:
  - Requires the C(kubernetes) Python library, KEDA (it scales anything with a C(/scale) subresource) and Kueue with
    C(metrics.enableClusterQueueResources=true) scraped by the Prometheus at C(prometheus.url).
  - The HPA needs the target's scale selector to go past one replica (MachineSet C(status.labelSelector), in
    openshift/api since 2026-04; MachineDeployment C(status.selector)).
"""

EXAMPLES = r"""
- name: Grow the H100 pool from the GPUs Kueue reserved on its flavor
  gpuaas.platform.node_pools:
    flavors: "{{ gpuaas_flavors }}"
    tenants: "{{ gpuaas_tenants }}"
    prometheus: "{{ gpuaas_prometheus }}"
    node_pools:
      - name: h100
        flavor: h100-elastic
        target: {kind: MachineSet, name: gpu-h100-us-east-1a, namespace: openshift-machine-api}
        max_nodes: 4
        gpus_per_node: 8
        node_labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, gpuaas.io/pool: h100}
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
  sample: {"created": 1, "updated": 0, "unchanged": 0, "deleted": 0}
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
  description: References of deleted (pruned) objects.
  returned: always
  type: list
  elements: dict
drift:
  description:
    - Pool objects on the cluster that the inventory no longer lists and that were kept because O(prune=false).
      With O(prune=true) they are deleted instead (RV(deleted)) and this list is empty.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "ScaledObject", "namespace": "openshift-machine-api", "name": "gpuaas-pool-old"}]
pools:
  description: Per pool its target, scale bounds and the PromQL that drives it.
  returned: always
  type: dict
  sample: {"h100": {"target": "MachineSet openshift-machine-api/gpu-h100", "min_nodes": 0, "max_nodes": 4,
           "gpus_per_node": 8, "query": "sum(kueue_cluster_queue_resource_reservation{...}) or vector(0)"}}
capacity:
  description: GPU capacity per flavor (nodes, or the pools' maximum for a pool-fed flavor).
  returned: when O(check_capacity=true)
  type: dict
lock:
  description: The run lock this run held (Lease, holder identity, seconds waited, the expired holder taken over).
  returned: when a lock was taken
  type: dict
  sample: {"lease": "Lease kube-system/gpuaas-tenants", "holder": "runner-7/4121/awx-job-41", "waited": 0.0,
           "took_over": null}
diff:
  description: Per-object before/after (with C(--diff)).
  returned: with --diff
  type: list
  elements: dict
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import run_module
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inventory_run import INVENTORY_RUN_ARGUMENT_SPEC
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_runner import NodePoolsRunner
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_step import node_pools_argument_spec


# The module's options (besides the connection options of k8s_auth); documented above (DOCUMENTATION).
NODE_POOLS_ARGUMENT_SPEC: t.Dict[str, t.Any] = dict(
    **node_pools_argument_spec(default=[]),
    **INVENTORY_RUN_ARGUMENT_SPEC,
)


def main() -> None:
    run_module(NODE_POOLS_ARGUMENT_SPEC, lambda module, client: NodePoolsRunner(client, module.params, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
