# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node pool run of module gpuaas.platform.node_pools on its own: validate the inventory with its pools, then the
node pools step (node_pools_step.py, which the tenancy run runs too under its Lease): check the pools'
MachineSet/MachineDeployment templates, reconcile one KEDA ScaledObject per pool, prune or report the rest."""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inputs import (
    inventory_from_params,
    prometheus_credential,
    read_nodes,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inventory_run import InventoryRun
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_step import NodePoolsStep


class NodePoolsRunner(InventoryRun):
    """One node_pools run on its own (client, options and the tenants run's Lease: ``InventoryRun``); the step
    itself (check, objects, prune scope, report) is ``NodePoolsStep``, which the tenancy run runs as well."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False, diff: bool = False,
                 sleep: t.Callable[[float], None] = time.sleep, clock: t.Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, params, check_mode=check_mode, diff=diff, sleep=sleep, clock=clock)
        self.lock_tried = False

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
        platform = "openshift" if self.client.served("config.openshift.io/v1") else "kubernetes"
        step = NodePoolsStep(self.client, p, model, p.get("keda_namespace") or keda.default_namespace(platform),
                             self.warnings)
        step.check()
        # Validation and the template check only read: a refused run writes nothing, not even the lock. The
        # credential is read under the lock, as in the tenants run, so both see the same token. A run without pools
        # usually writes nothing (it reports drift): it takes no lock unless it writes, so a tenants run after it
        # can still refuse with nothing written, or report the lock holder itself.
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
        token = ca_data = None
        if builders.keda_scaled_pools(model):  # a ProvisioningRequest pool reads no metric
            credential = prometheus_credential(self.client, self.secret_sink)
            token, ca_data = credential.token(model.prometheus), credential.ca(model.prometheus)
        desired = step.build(token, ca_data)
        state = engine.read(desired, prune=step.scope)
        result = engine.reconcile(desired, prune=step.scope, state=state)
        return self.finish(step.report(result, state, diff=self.diff), model.capacity, nodes is not None)

    def lock_before_first_write(self, before: str) -> None:
        """The engine's confirm_lock hook of a run without pools: take the lock at the first write, then confirm."""
        if self.run_lock.lease is None and not self.lock_tried:
            self.lock_tried = True
            self.run_lock.take()
        self.run_lock.confirm(before)
