# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_node_pools`` (issue 13): GPU node pools grown and shrunk from Kueue's reserved quota."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Flavor, NodePool
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

NODE_POOL_KEYS = ("name", "flavor", "target", "min_nodes", "max_nodes", "gpus_per_node", "gpu_resource",
                  "node_labels", "provisioning_seconds", "idle_seconds", "polling_interval", "include_pending")
NODE_POOL_TARGET_KEYS = ("kind", "name", "namespace", "api_version")
# The scalable kinds a pool can target and their API versions (both have a /scale subresource with a selector).
NODE_POOL_TARGET_KINDS = {
    "MachineSet": "machine.openshift.io/v1beta1",
    "MachineDeployment": "cluster.x-k8s.io/v1beta2",
}
# Where OpenShift keeps its MachineSets; a MachineDeployment (Cluster API) has no such default.
MACHINE_SET_NAMESPACE = "openshift-machine-api"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


def parse_node_pools(check: Validator, value: t.Any, flavors: t.Sequence[Flavor]) -> t.List[NodePool]:
    """Each pool feeds one of ``flavors``; its nodes must carry the flavor's node labels."""
    out: t.List[NodePool] = []
    targets: t.Dict[t.Tuple[str, str, str], int] = {}
    by_name = {f.name: f for f in flavors}
    for i, path, data, name in check.named_items("gpuaas_node_pools", value, NODE_POOL_KEYS, "node pool", label=True):
        flavor = data.get("flavor")
        if not flavor:
            check.err(path + ".flavor", "is required (the Kueue ResourceFlavor this pool's nodes belong to)")
        elif flavor not in by_name:
            check.unknown_ref(path + ".flavor", str(flavor), by_name, "flavor")
        target = check.mapping(path + ".target", data.get("target"), NODE_POOL_TARGET_KEYS) or {}
        kind = target.get("kind", "MachineSet")
        api_version = target.get("api_version") or NODE_POOL_TARGET_KINDS.get(kind)
        if kind not in NODE_POOL_TARGET_KINDS and not target.get("api_version"):
            check.err(path + ".target.kind", "%r is not one of %s (or set target.api_version)"
                      % (kind, ", ".join(NODE_POOL_TARGET_KINDS)))
        target_name = check.name(path + ".target.name", target.get("name"))
        default_ns = MACHINE_SET_NAMESPACE if kind == "MachineSet" else None
        namespace = check.label_name(path + ".target.namespace", target.get("namespace") or default_ns)
        min_n = check.integer(path + ".min_nodes", data.get("min_nodes", 0), 0)
        max_n = check.optional_integer(path + ".max_nodes", data.get("max_nodes"), 1)
        if data.get("max_nodes") is None:
            check.err(path + ".max_nodes", "is required (the most nodes this pool may grow to)")
        if min_n is not None and max_n is not None and min_n > max_n:
            check.err(path + ".max_nodes", "must be at least min_nodes (%d)" % min_n)
        gpus = check.optional_integer(path + ".gpus_per_node", data.get("gpus_per_node"), 1)
        if data.get("gpus_per_node") is None:
            check.err(path + ".gpus_per_node", "is required (the GPUs one node of the pool offers, e.g. 8)")
        resource = data.get("gpu_resource", DEFAULT_GPU_RESOURCE)
        if not isinstance(resource, str) or not is_accelerator(resource):
            check.err(path + ".gpu_resource", "%r is not an accelerator resource (e.g. nvidia.com/gpu)" % (resource,))
            resource = DEFAULT_GPU_RESOURCE
        labels = check.string_map(path + ".node_labels", data.get("node_labels"), "node label")
        provisioning = check.integer(path + ".provisioning_seconds", data.get("provisioning_seconds", 600), 0)
        idle = check.integer(path + ".idle_seconds", data.get("idle_seconds", 600), 0)
        polling = check.integer(path + ".polling_interval", data.get("polling_interval", 15), 1)
        pending = check.boolean(path + ".include_pending", data.get("include_pending", False), False)
        if flavor in by_name:
            _check_flavor_labels(check, path, str(flavor), by_name[flavor].node_labels, labels)
        if target_name and namespace:
            key = (kind, namespace, target_name)
            if key in targets:
                check.err(path + ".target", "%s %s/%s is already the target of gpuaas_node_pools[%d]"
                          % (kind, namespace, target_name, targets[key]))
            targets[key] = i
        if name and flavor and target_name and namespace and max_n is not None and gpus is not None:
            out.append(NodePool(name=name, flavor=str(flavor), target_kind=kind, target_name=target_name,
                                target_namespace=namespace, target_api_version=api_version or "",
                                min_nodes=min_n or 0, max_nodes=max_n, gpus_per_node=gpus, gpu_resource=resource,
                                node_labels=labels, provisioning_seconds=provisioning if provisioning is not None else 600,
                                idle_seconds=idle if idle is not None else 600, polling_interval=polling or 15,
                                include_pending=pending))
    return out


def _check_flavor_labels(check: Validator, path: str, flavor: str, wanted: t.Mapping[str, str],
                         labels: t.Mapping[str, str]) -> None:
    """Kueue places a flavor's workloads by its node labels: the pool's nodes must carry every one of them."""
    missing = {k: v for k, v in wanted.items() if labels.get(k) != v}
    if missing:
        check.err(path + ".node_labels",
                  "the pool's node template does not give its nodes the node labels of flavor %r (%s): "
                  "Kueue would place the pool's workloads on nodes the pool never creates; set them in "
                  "the MachineSet/MachineDeployment template and in node_labels"
                  % (flavor, ", ".join("%s=%s (has %s)" % (k, v, labels.get(k, "nothing"))
                                       for k, v in sorted(missing.items()))))
