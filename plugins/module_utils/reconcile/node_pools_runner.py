# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node pool run (module gpuaas.platform.node_pools): validate the inventory with its pools, check the pools'
MachineSet/MachineDeployment templates, reconcile one KEDA ScaledObject per pool, prune or report the rest."""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import COMPONENT_LABEL, add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, PruneScope
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import provisioning
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import redact_secret_data
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inputs import (
    inventory_from_params,
    prometheus_credential,
    read_nodes,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inventory_run import InventoryRun

MANAGED_KINDS = (("v1", "Secret"), (keda.KEDA_V, "ClusterTriggerAuthentication"), (keda.KEDA_V, "ScaledObject"),
                 (provisioning.KUEUE_V, "ProvisioningRequestConfig"), (provisioning.KUEUE_V, "AdmissionCheck"))


class NodePoolsRunner(InventoryRun):
    """One node_pools run (client, options and the tenants run's Lease: ``InventoryRun``); the pools' ScaledObjects
    and credential live beside the tenants' (run_lock.py)."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False, diff: bool = False,
                 sleep: t.Callable[[float], None] = time.sleep, clock: t.Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, params, check_mode=check_mode, diff=diff, sleep=sleep, clock=clock)
        self.lock_tried = False

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
            problems.extend("%s.target: %s" % (path, text) for text in builders.autoscaler_bounds_problems(pool, live))
        if problems:
            raise GpuaasError("%d node pool%s cannot be scaled from Kueue's quota; nothing was changed."
                              % (len(problems), "" if len(problems) == 1 else "s"),
                              hint="create the MachineSet/MachineDeployment first and give its template the flavor's "
                                   "node labels (MachineSet spec.template.spec.metadata.labels)", problems=problems)

    def run(self) -> t.Dict[str, t.Any]:
        try:
            return self._run()
        finally:
            self.run_lock.release()

    def _run(self) -> t.Dict[str, t.Any]:
        p = self.params
        nodes = read_nodes(self.client) if p.get("check_capacity", True) else None
        model = TenantModel.from_inventory(inventory_from_params(p, node_pools=True), nodes)
        if model.node_pools:  # without pools the tenants module reports the same warnings
            self.warnings.extend(model.warnings)
        if builders.keda_scaled_pools(model) and not model.prometheus.url:
            raise GpuaasError("gpuaas_node_pools need gpuaas_prometheus.url",
                              hint="the pools are driven by Kueue's quota metrics in Prometheus; set gpuaas_prometheus.url")
        if p.get("check_templates", True):
            self.check_templates(model)
        # Validation and the template check only read: a refused run writes nothing, not even the lock. The
        # credential is read under the lock, as in the tenants run, so both see the same token. A run without pools
        # usually writes nothing (it reports drift): it takes no lock unless it writes, so the tenants run after it in
        # the role can still refuse with nothing written, or report the lock holder itself.
        engine = ApplyEngine(self.client, check_mode=self.check_mode)
        if model.node_pools:
            if self.run_lock.take():
                engine.confirm_lock = self.run_lock.confirm  # before each apply tier and before prune
        else:
            # no pools: the credential is not read, and the lock is taken only before a first write (pruning a
            # removed pool's objects); a run with nothing to do writes nothing, not even the lock
            engine.confirm_lock = self.lock_before_first_write
        # the credentials only serve the pools' triggers: without pools they are not read (a token file may be slow
        # to read, and the tenants module reads it again under its run lock)
        prom = model.prometheus
        token = ca_data = None
        if builders.keda_scaled_pools(model):  # a ProvisioningRequest pool reads no metric
            credential = prometheus_credential(self.client, self.secret_sink)
            token, ca_data = credential.token(prom), credential.ca(prom)
        labels = add_ownership({}, component=builders.COMPONENT_VALUE)
        platform = "openshift" if self.client.served("config.openshift.io/v1") else "kubernetes"
        keda_namespace = p.get("keda_namespace") or keda.default_namespace(platform)
        desired = builders.desired_objects(model, labels, token, ca_data, keda_namespace)
        kinds = [(av, kind) for av, kind in MANAGED_KINDS if av == "v1" or self.client.served(av)]
        # The pools' Prometheus Secret lives in the KEDA namespace only: read there, never cluster-wide (see
        # TenantsScope in the tenants module); ScaledObjects are found wherever the pools' targets were.
        scope = PruneScope(kinds, labels={COMPONENT_LABEL: builders.COMPONENT_VALUE}, require_tenant_label=False,
                           kind_namespaces={"Secret": [keda_namespace]})
        result = engine.reconcile(desired, prune=scope if p.get("prune") else None)
        out = result.to_module_result(diff=self.diff)
        out["drift"] = [] if p.get("prune") else self.kept_objects(scope, desired)
        redact_secret_data(out.get("diff"))
        out["pools"] = {
            pool.name: {"target": "%s %s/%s" % (pool.target_kind, pool.target_namespace, pool.target_name),
                        "flavor": pool.flavor, "min_nodes": pool.min_nodes, "max_nodes": pool.max_nodes,
                        "gpus_per_node": pool.gpus_per_node,
                        "query": builders.reserved_query(pool, builders.queues_using_flavor(model, pool.flavor, pool.gpu_resource))}
            for pool in model.node_pools}
        return self.finish(out, model.capacity, nodes is not None)

    def lock_before_first_write(self, before: str) -> None:
        """The engine's confirm_lock hook of a run without pools: take the lock at the first write, then confirm."""
        if self.run_lock.lease is None and not self.lock_tried:
            self.lock_tried = True
            self.run_lock.take()
        self.run_lock.confirm(before)

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
