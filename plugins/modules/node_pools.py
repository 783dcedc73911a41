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
author:
  - gpuaas.platform contributors (@gpuaas)
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
options:
  node_pools:
    description:
      - "The pools (inventory C(gpuaas_node_pools)): C(name), C(flavor), C(target: {kind: MachineSet|MachineDeployment,
        name, namespace, api_version}), C(min_nodes) (default 0), C(max_nodes), C(gpus_per_node), C(gpu_resource)
        (default C(nvidia.com/gpu)), C(node_labels) (the labels the pool's template gives its nodes; must include the
        flavor's node labels), C(provisioning_seconds) (default 600), C(idle_seconds) (default 600, the KEDA
        cooldown before a pool with nothing reserved goes to C(min_nodes)), C(polling_interval) (default 15),
        C(include_pending) (default false; also count GPUs pending in the ClusterQueues with quota on the flavor)."
      - See C(docs/node-pools.md).
    type: list
    elements: dict
    default: []
  flavors:
    description: Kueue ResourceFlavors (inventory C(gpuaas_flavors)); a pool's C(flavor) must be one of them.
    type: list
    elements: dict
    default: []
  tenants:
    description: The tenants (inventory C(gpuaas_tenants)), for the capacity check and C(include_pending).
    type: list
    elements: dict
    default: []
  cohorts:
    description: Kueue Cohorts (inventory C(gpuaas_cohorts)), only validated here.
    type: list
    elements: dict
    default: []
  priorities:
    description: WorkloadPriorityClasses (inventory C(gpuaas_priorities)), only validated here.
    type: list
    elements: dict
    default: []
  prometheus:
    description:
      - The shared Prometheus setting (inventory C(gpuaas_prometheus)); C(url) is required when there are pools.
      - A token or CA goes to a Secret in O(keda_namespace) with a C(ClusterTriggerAuthentication) named
        C(gpuaas-prometheus-node-pools).
    type: dict
  allow_overcommit:
    description: Accept quotas above the capacity (nodes, or pools' maximum) of a flavor, with a warning.
    type: bool
    default: false
  check_capacity:
    description: Read the nodes (one LIST) and compare the GPU quotas per flavor with the nodes and pools.
    type: bool
    default: true
  check_templates:
    description: Read each pool's target and fail when it is missing or its template lacks the flavor's node labels.
    type: bool
    default: true
  keda_namespace:
    description:
      - Namespace of the KEDA operator (where the Prometheus credentials Secret goes).
      - Default C(openshift-keda) on OpenShift (detected by API discovery), else C(keda), as the keda role installs it.
    type: str
  prune:
    description:
      - Delete the pool objects (ScaledObjects, credentials) of pools no longer in O(node_pools).
      - Off by default, like the tenants module's safe mode (C(gpuaas_tenants_prune)) - a forgotten inventory or a
        misspelled C(gpuaas_node_pools) must not switch off the autoscaling of every GPU pool. Without prune such
        objects are kept, listed in RV(drift) and warned about.
    type: bool
    default: false
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
diff:
  description: Per-object before/after (with C(--diff)).
  returned: with --diff
  type: list
  elements: dict
"""

import base64
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    K8S_AUTH_ARG_SPEC,
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import COMPONENT_LABEL, add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, PruneScope
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as builders

MANAGED_KINDS = (("v1", "Secret"), (keda.KEDA_V, "ClusterTriggerAuthentication"), (keda.KEDA_V, "ScaledObject"))


def _read_file(path: t.Optional[str], what: str) -> t.Optional[str]:
    if not path:
        return None
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        raise GpuaasError("cannot read %s %s: %s" % (what, path, exc),
                          hint="gpuaas_prometheus.%s must be a readable file on the Ansible controller" % what)


class NodePoolsReconciler:
    """The module's work, separate from AnsibleModule so unit tests can drive it with a fake client."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False, diff: bool = False) -> None:
        self.client = client
        self.params = params
        self.check_mode = check_mode
        self.diff = diff
        self.warnings: t.List[str] = []

    def inventory(self) -> t.Dict[str, t.Any]:
        p = self.params
        return {"gpuaas_flavors": p.get("flavors") or [], "gpuaas_cohorts": p.get("cohorts") or [],
                "gpuaas_priorities": p.get("priorities") or [], "gpuaas_tenants": p.get("tenants") or [],
                "gpuaas_prometheus": p.get("prometheus") or {}, "gpuaas_node_pools": p.get("node_pools") or [],
                "gpuaas_allow_overcommit": bool(p.get("allow_overcommit"))}

    def read_nodes(self) -> t.List[t.Dict[str, t.Any]]:
        try:
            items = self.client.resource("v1", "Node").list()
        except ApiException as exc:
            raise translate_api_exception(exc, "list", "nodes")
        return [{"name": (n.get("metadata") or {}).get("name"), "labels": (n.get("metadata") or {}).get("labels") or {},
                 "allocatable": (n.get("status") or {}).get("allocatable") or {}} for n in items]

    def check_templates(self, model: TenantModel) -> None:
        problems = []
        flavors = {f.name: f for f in model.flavors}
        for i, pool in enumerate(model.node_pools):
            path = "gpuaas_node_pools[%d]" % i
            what = "%s %s/%s" % (pool.target_kind, pool.target_namespace, pool.target_name)
            if not self.client.served(pool.target_api_version):
                problems.append("%s.target: %s is not served by this cluster (%s)" % (path, pool.target_api_version, what))
                continue
            try:
                live = self.client.resource(pool.target_api_version, pool.target_kind).get(pool.target_name, pool.target_namespace)
            except ApiException as exc:
                raise translate_api_exception(exc, "read", what)
            if live is None:
                problems.append("%s.target: %s does not exist" % (path, what))
                continue
            missing = builders.template_mismatch(pool, live, flavors[pool.flavor].node_labels)
            if missing:
                problems.append("%s: the template of %s does not give its nodes the node labels of flavor %r: %s "
                                "(Kueue would place the flavor's workloads on nodes this pool never creates)"
                                % (path, what, pool.flavor, ", ".join(missing)))
        if problems:
            raise GpuaasError("%d node pool%s cannot be scaled from Kueue's quota; nothing was changed."
                              % (len(problems), "" if len(problems) == 1 else "s"),
                              hint="create the MachineSet/MachineDeployment first and give its template the flavor's "
                                   "node labels (MachineSet spec.template.spec.metadata.labels)", problems=problems)

    def run(self) -> t.Dict[str, t.Any]:
        p = self.params
        nodes = self.read_nodes() if p.get("check_capacity", True) else None
        model = TenantModel.from_inventory(self.inventory(), nodes)
        if model.node_pools:  # without pools the tenants module reports the same warnings
            self.warnings.extend(model.warnings)
        if model.node_pools and not model.prometheus.url:
            raise GpuaasError("gpuaas_node_pools need gpuaas_prometheus.url",
                              hint="the pools are driven by Kueue's quota metrics in Prometheus; set gpuaas_prometheus.url")
        if p.get("check_templates", True):
            self.check_templates(model)
        # the credentials only serve the pools' triggers: without pools they are not read (a token file may be slow
        # to read, and the tenants module reads it again under its run lock)
        prom = model.prometheus
        token = ca_data = None
        if model.node_pools:
            token = prom.token or _read_file(prom.token_file, "token_file") or self.secret_token(prom.token_secret)
            ca_data = _read_file(prom.ca_file, "ca_file")
        labels = add_ownership({}, component=builders.COMPONENT_VALUE)
        platform = "openshift" if self.client.served("config.openshift.io/v1") else "kubernetes"
        keda_namespace = p.get("keda_namespace") or keda.default_namespace(platform)
        desired = builders.desired_objects(model, labels, token, ca_data, keda_namespace)
        engine = ApplyEngine(self.client, check_mode=self.check_mode)
        kinds = [(av, kind) for av, kind in MANAGED_KINDS if av == "v1" or self.client.served(av)]
        # The pools' Prometheus Secret lives in the KEDA namespace only: read there, never cluster-wide (see
        # TenantsScope in the tenants module); ScaledObjects are found wherever the pools' targets were.
        scope = PruneScope(kinds, labels={COMPONENT_LABEL: builders.COMPONENT_VALUE}, require_tenant_label=False,
                           kind_namespaces={"Secret": [keda_namespace]})
        result = engine.reconcile(desired, prune=scope if p.get("prune") else None)
        out = result.to_module_result(diff=self.diff)
        out["drift"] = [] if p.get("prune") else self.kept_objects(scope, desired)
        for entry in out.get("diff") or []:
            for side in ("before", "after"):
                obj = entry.get(side)
                if isinstance(obj, dict) and obj.get("kind") == "Secret" and isinstance(obj.get("data"), dict):
                    obj["data"] = {k: "<redacted>" for k in obj["data"]}
        out["pools"] = {
            pool.name: {"target": "%s %s/%s" % (pool.target_kind, pool.target_namespace, pool.target_name),
                        "flavor": pool.flavor, "min_nodes": pool.min_nodes, "max_nodes": pool.max_nodes,
                        "gpus_per_node": pool.gpus_per_node,
                        "query": builders.reserved_query(pool, builders.queues_using_flavor(model, pool.flavor, pool.gpu_resource))}
            for pool in model.node_pools}
        if nodes is not None:
            out["capacity"] = model.capacity
        return out

    def kept_objects(self, scope: PruneScope, desired: t.Sequence[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
        """Owned pool objects that prune would delete, listed (and warned about) instead of deleted."""
        wanted = {ObjectRef.from_object(o).key for o in desired}
        kept = [ObjectRef.from_object(item) for av, kind in scope.kinds
                for ns in (scope.namespaces_of(kind) if scope.pinned(kind) else [None]) or []
                for item in self.client.resource(av, kind).list(namespace=ns, label_selector=scope.label_selector())
                if ObjectRef.from_object(item).key not in wanted]
        kept.sort(key=lambda r: r.key)
        if kept:
            self.warnings.append(
                "%d node pool object%s no longer in gpuaas_node_pools kept (prune is off): %s. Add the pool back, or "
                "set gpuaas_tenants_prune: true to remove the objects of pools missing from the inventory."
                % (len(kept), "" if len(kept) == 1 else "s", ", ".join(str(r) for r in kept)))
        return [r.to_dict() for r in kept]

    def secret_token(self, ref: t.Optional[t.Mapping[str, str]]) -> t.Optional[str]:
        if not ref:
            return None
        try:
            secret = self.client.resource("v1", "Secret").get(ref["name"], ref["namespace"])
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "Secret %s/%s" % (ref["namespace"], ref["name"]))
        value = ((secret or {}).get("data") or {}).get(ref["key"])
        if not value:
            raise GpuaasError("gpuaas_prometheus.token_secret: Secret %s/%s has no key %r" % (ref["namespace"], ref["name"], ref["key"]),
                              hint="point token_secret at a Secret holding the Prometheus bearer token (key: token)")
        return base64.b64decode(value).decode()


def main() -> None:
    argument_spec: t.Dict[str, t.Any] = dict(
        node_pools=dict(type="list", elements="dict", default=[]),
        flavors=dict(type="list", elements="dict", default=[]),
        tenants=dict(type="list", elements="dict", default=[]),
        cohorts=dict(type="list", elements="dict", default=[]),
        priorities=dict(type="list", elements="dict", default=[]),
        prometheus=dict(type="dict", no_log=False),
        allow_overcommit=dict(type="bool", default=False),
        check_capacity=dict(type="bool", default=True),
        check_templates=dict(type="bool", default=True),
        keda_namespace=dict(type="str"),
        prune=dict(type="bool", default=False),
    )
    argument_spec.update(K8S_AUTH_ARG_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    token = (module.params.get("prometheus") or {}).get("token")
    if token:
        module.no_log_values.add(str(token))
    reconciler = NodePoolsReconciler(None, module.params, module.check_mode, module._diff)
    try:
        reconciler.client = get_client(module)
        result = reconciler.run()
    except GpuaasError as err:
        for warning in reconciler.warnings:
            module.warn(warning)
        fail_module(module, err, changed=False)
        return
    for warning in reconciler.warnings:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
