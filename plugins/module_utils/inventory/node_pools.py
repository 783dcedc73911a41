# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_node_pools`` (issue 13): GPU node pools grown and shrunk from Kueue's reserved quota (``scale_by: keda``)
or provisioned by the cluster autoscaler before Kueue admits (``scale_by: provisioning_request``, issue 23)."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import is_label_key
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Flavor, NodePool, Provisioning
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

NODE_POOL_KEYS = ("name", "flavor", "target", "min_nodes", "max_nodes", "gpus_per_node", "gpu_resource",
                  "node_labels", "provisioning_seconds", "idle_seconds", "polling_interval", "include_pending",
                  "scale_by", "provisioning")
NODE_POOL_TARGET_KEYS = ("kind", "name", "namespace", "api_version")
# The scalable kinds a pool can target and their API versions (both have a /scale subresource with a selector).
NODE_POOL_TARGET_KINDS = {
    "MachineSet": "machine.openshift.io/v1beta1",
    "MachineDeployment": "cluster.x-k8s.io/v1beta2",
}
# Where OpenShift keeps its MachineSets; a MachineDeployment (Cluster API) has no such default.
MACHINE_SET_NAMESPACE = "openshift-machine-api"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

# How a pool grows: KEDA sizes the target from the quota Kueue reserved (admission first, nodes after), or Kueue's
# ProvisioningRequest admission check asks the cluster autoscaler for the nodes and admits once they are provisioned
# (nodes first, admission after; openshift/enhancements#1752).
SCALE_BY_KEDA = "keda"
SCALE_BY_PROVISIONING_REQUEST = "provisioning_request"
SCALE_BY = (SCALE_BY_KEDA, SCALE_BY_PROVISIONING_REQUEST)
PROVISIONING_KEYS = ("class", "managed_resources", "parameters", "retry")
PROVISIONING_RETRY_KEYS = ("backoff_limit_count", "backoff_base_seconds", "backoff_max_seconds")
# The cluster autoscaler's classes (k8s.io/autoscaler/cluster-autoscaler/apis provisioningrequest
# autoscaling.x-k8s.io/v1 types.go): create capacity all-or-nothing, or only check the existing capacity.
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
PROVISIONING_CLASSES = (BEST_EFFORT_ATOMIC, CHECK_CAPACITY)
# Keys only the KEDA path reads (the ScaledObject and node_pool_scaledown); the autoscaler sizes a
# ProvisioningRequest pool and removes its unneeded nodes itself.
KEDA_ONLY_KEYS = ("provisioning_seconds", "idle_seconds", "polling_interval", "include_pending")
# Kueue v0.19.2 apis/kueue/v1beta2/provisioningrequestconfig_types.go: retryStrategy defaults, at most 100
# parameters of at most 255 characters and 100 managed resources.
DEFAULT_RETRY = {"backoff_limit_count": 3, "backoff_base_seconds": 60, "backoff_max_seconds": 1800}
MAX_PARAMETERS = 100
MAX_PARAMETER_LENGTH = 255
MAX_MANAGED_RESOURCES = 100


def parse_node_pools(check: Validator, value: t.Any, flavors: t.Sequence[Flavor]) -> t.List[NodePool]:
    """Each pool feeds one of ``flavors``; its nodes must carry the flavor's node labels."""
    out: t.List[NodePool] = []
    indexes: t.List[int] = []  # each pool's position in the inventory, for the paths of later checks
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
        scale_by = check.enum(path + ".scale_by", data.get("scale_by", SCALE_BY_KEDA), SCALE_BY) or SCALE_BY_KEDA
        request_settings = None  # not "provisioning": that name holds provisioning_seconds above
        if scale_by == SCALE_BY_PROVISIONING_REQUEST:
            request_settings = parse_provisioning(check, path, data, resource)
        elif data.get("provisioning") is not None:
            check.err(path + ".provisioning", "is only read with scale_by: %s (this pool has scale_by: %s)"
                      % (SCALE_BY_PROVISIONING_REQUEST, scale_by))
        if flavor in by_name:
            _check_flavor_labels(check, path, str(flavor), by_name[flavor].node_labels, labels)
        if target_name and namespace:
            key = (kind, namespace, target_name)
            if key in targets:
                check.err(path + ".target", "%s %s/%s is already the target of gpuaas_node_pools[%d]"
                          % (kind, namespace, target_name, targets[key]))
            targets[key] = i
        if name and flavor and target_name and namespace and max_n is not None and gpus is not None:
            indexes.append(i)
            out.append(NodePool(name=name, flavor=str(flavor), target_kind=kind, target_name=target_name,
                                target_namespace=namespace, target_api_version=api_version or "",
                                min_nodes=min_n or 0, max_nodes=max_n, gpus_per_node=gpus, gpu_resource=resource,
                                node_labels=labels, provisioning_seconds=provisioning if provisioning is not None else 600,
                                idle_seconds=idle if idle is not None else 600, polling_interval=polling or 15,
                                include_pending=pending, scale_by=scale_by, provisioning=request_settings))
    _check_one_mechanism_per_flavor(check, indexes, out)
    return out


def _check_one_mechanism_per_flavor(check: Validator, indexes: t.Sequence[int], pools: t.Sequence[NodePool]) -> None:
    """The admission check is per flavor (Kueue asks the autoscaler for the flavor's nodes, the autoscaler picks the
    node group): every pool of a flavor with a ProvisioningRequest pool must use it, with the same settings. A KEDA
    pool beside it would also grow from the same reserved quota."""
    first: t.Dict[str, t.Tuple[int, NodePool]] = {}
    for i, pool in zip(indexes, pools):
        if pool.flavor not in first:
            first[pool.flavor] = (i, pool)
            continue
        j, other = first[pool.flavor]
        if SCALE_BY_PROVISIONING_REQUEST not in (pool.scale_by, other.scale_by):
            continue
        if pool.scale_by != other.scale_by:
            check.err("gpuaas_node_pools[%d].scale_by" % i,
                      "%s, but gpuaas_node_pools[%d] (%s) on the same flavor %r has scale_by: %s; the pools of one "
                      "flavor grow one way" % (pool.scale_by, j, other.name, pool.flavor, other.scale_by))
        elif pool.provisioning != other.provisioning:
            check.err("gpuaas_node_pools[%d].provisioning" % i, "differs from gpuaas_node_pools[%d] (%s) on the same "
                      "flavor %r: Kueue checks a flavor with one ProvisioningRequestConfig; give both pools the same "
                      "provisioning settings" % (j, other.name, pool.flavor))


def parse_provisioning(check: Validator, path: str, data: t.Mapping[str, t.Any], gpu_resource: str) -> Provisioning:
    """The ``provisioning`` settings of a ``scale_by: provisioning_request`` pool (defaults when unset)."""
    for key in KEDA_ONLY_KEYS:
        if key in data:
            check.err("%s.%s" % (path, key), "is only read with scale_by: %s: the cluster autoscaler sizes this pool "
                      "and removes its unneeded nodes itself (its --scale-down-unneeded-time); remove the key"
                      % SCALE_BY_KEDA)
    settings = check.mapping(path + ".provisioning", data.get("provisioning"), PROVISIONING_KEYS) or {}
    out = Provisioning()
    cls = settings.get("class", BEST_EFFORT_ATOMIC)
    if cls not in PROVISIONING_CLASSES:
        check.err(path + ".provisioning.class", "%r is not one of the cluster autoscaler's classes %s"
                  % (cls, ", ".join(PROVISIONING_CLASSES)))
    else:
        out.provisioning_class = cls
    resources = check.sequence(path + ".provisioning.managed_resources", settings.get("managed_resources"))
    for i, name in enumerate(resources):
        if not isinstance(name, str) or not is_label_key(name):
            check.err("%s.provisioning.managed_resources[%d]" % (path, i), "%r is not a resource name (e.g. %s)"
                      % (name, gpu_resource))
        elif name in out.managed_resources:
            check.err("%s.provisioning.managed_resources[%d]" % (path, i), "%r is listed twice" % name)
        else:
            out.managed_resources.append(name)
    if len(resources) > MAX_MANAGED_RESOURCES:
        check.err(path + ".provisioning.managed_resources", "lists %d resources, Kueue accepts at most %d"
                  % (len(resources), MAX_MANAGED_RESOURCES))
    if not out.managed_resources:
        # only pod sets asking for the pool's GPUs need nodes of the pool: a CPU-only pod set is not sent to the
        # autoscaler (an empty list would mean "every resource" to Kueue)
        out.managed_resources = [gpu_resource]
    params = check.mapping(path + ".provisioning.parameters", settings.get("parameters")) or {}
    if len(params) > MAX_PARAMETERS:
        check.err(path + ".provisioning.parameters", "has %d entries, Kueue accepts at most %d"
                  % (len(params), MAX_PARAMETERS))
    for key, value in params.items():
        text = value if isinstance(value, str) else None
        if text is None or len(text) > MAX_PARAMETER_LENGTH:
            check.err("%s.provisioning.parameters.%s" % (path, key), "must be a string of at most %d characters "
                      "(quote numbers), got %r" % (MAX_PARAMETER_LENGTH, value))
        elif not isinstance(key, str) or not key:
            check.err("%s.provisioning.parameters.%s" % (path, key), "the key must be a non-empty string")
        else:
            out.parameters[key] = text
    retry = check.mapping(path + ".provisioning.retry", settings.get("retry"), PROVISIONING_RETRY_KEYS) or {}
    values: t.Dict[str, t.Optional[int]] = {}
    for key, default in DEFAULT_RETRY.items():
        minimum = 0 if key == "backoff_limit_count" else 1
        values[key] = check.integer("%s.provisioning.retry.%s" % (path, key), retry.get(key, default), minimum, 2 ** 31 - 1)
    if values["backoff_base_seconds"] and values["backoff_max_seconds"] \
            and values["backoff_max_seconds"] < values["backoff_base_seconds"]:
        check.err(path + ".provisioning.retry.backoff_max_seconds", "must be at least backoff_base_seconds (%d)"
                  % values["backoff_base_seconds"])
    out.backoff_limit_count = DEFAULT_RETRY["backoff_limit_count"] if values["backoff_limit_count"] is None \
        else values["backoff_limit_count"]
    out.backoff_base_seconds = values["backoff_base_seconds"] or DEFAULT_RETRY["backoff_base_seconds"]
    out.backoff_max_seconds = values["backoff_max_seconds"] or DEFAULT_RETRY["backoff_max_seconds"]
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


def provisioning_by_flavor(pools: t.Sequence[NodePool]) -> t.Dict[str, Provisioning]:
    """``{flavor: settings}`` of the flavors fed by ``scale_by: provisioning_request`` pools (one setting per flavor,
    checked by the parser)."""
    return {p.flavor: p.provisioning for p in pools
            if p.scale_by == SCALE_BY_PROVISIONING_REQUEST and p.provisioning is not None}
