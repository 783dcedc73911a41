# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The node pool options of the modules that run the node pools step (module_utils/reconcile/node_pools_step.py):
    tenants (a step of the tenancy run) and node_pools (the step on its own); ``node_pools_argument_spec``."""

    DOCUMENTATION = r"""
options:
  node_pools:
    description:
      - "The GPU node pools (inventory C(gpuaas_node_pools)): C(name), C(flavor), C(target: {kind: MachineSet|MachineDeployment,
        name, namespace, api_version}), C(min_nodes) (default 0), C(max_nodes), C(gpus_per_node), C(gpu_resource)
        (default C(nvidia.com/gpu)), C(node_labels) (the labels the pool's template gives its nodes; must include the
        flavor's node labels), C(provisioning_seconds) (default 600), C(idle_seconds) (default 600, the KEDA
        cooldown before a pool with nothing reserved goes to C(min_nodes)), C(polling_interval) (default 15),
        C(include_pending) (default false; also count GPUs pending in the ClusterQueues with quota on the flavor)."
      - "Per pool one KEDA C(ScaledObject) on the pool's C(/scale), driven by the GPU quota Kueue has reserved on the
        pool's flavor, and, with a Prometheus token or CA, a Secret in O(keda_namespace) with a
        C(ClusterTriggerAuthentication) named C(gpuaas-prometheus-node-pools). Pool objects of pools no longer listed
        are deleted with O(prune=true), else kept and reported as drift. See C(docs/node-pools.md)."
      - "The capacity check counts C(max_nodes x gpus_per_node) for a flavor fed by a pool, so quota sized for the
        pool's maximum validates while the pool is at 0 nodes; C(prometheus.url) is required when there are C(scale_by=keda) pools."
      - "In M(gpuaas.platform.tenants): not set (the default), the run does not read, write or prune pool objects at
        all. Set (also to C([]), an inventory without pools), the pools are a step of the tenancy run: parsed and
        validated with the rest of the inventory, checked (O(check_templates)) before the first write, applied and
        pruned under the same run lock, reported in RV(gpuaas.platform.tenants#module:node_pools). With
        O(gpuaas.platform.tenants#module:limit_tenants) the pools are parsed (the capacity check, the ClusterQueues'
        ProvisioningRequest checks) but no pool object is read or written. Not taken with
        O(gpuaas.platform.tenants#module:clusters)."
      - "C(scale_by): C(keda) (the default: the ScaledObject above) or C(provisioning_request): per flavor a Kueue
        C(ProvisioningRequestConfig) and C(AdmissionCheck) C(gpuaas-provisioning-<flavor>) instead of a ScaledObject
        (no Prometheus needed), the check on every ClusterQueue with quota on the flavor, and the cluster
        autoscaler's node-group size annotations on the target checked against C(min_nodes)/C(max_nodes).
        C(provisioning): C(class) (default C(best-effort-atomic-scale-up.autoscaling.x-k8s.io), or
        C(check-capacity.autoscaling.x-k8s.io)), C(managed_resources) (default the pool's C(gpu_resource)),
        C(parameters), C(retry: {backoff_limit_count, backoff_base_seconds, backoff_max_seconds}). The KEDA-only keys
        (C(idle_seconds), C(provisioning_seconds), C(polling_interval), C(include_pending)) are refused there."
    type: list
    elements: dict
  check_templates:
    description: Read each pool's target and fail when it is missing or its template lacks the flavor's node labels.
    type: bool
    default: true
"""
