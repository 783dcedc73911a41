# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node pools step of an inventory run (issue 21): what a run does for ``gpuaas_node_pools`` on the model it
parsed once — check the pools (a Prometheus URL, each pool's MachineSet/MachineDeployment template) before anything
is written, build one KEDA ScaledObject per pool and the pools' Prometheus credential, say which owned pool objects
prune may delete (its own PruneScope: Secrets only in the KEDA namespace), and report the pools' part of the result.

The tenancy run (``tenancy_runner.py``, module tenants with option node_pools) runs it inside its own read, apply and
prune under its Lease; the node_pools module's run (``node_pools_runner.py``) runs it alone.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.live import LiveState
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import COMPONENT_LABEL, add_ownership
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult, PruneScope, ReconcileResult
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import provisioning
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import redact_secret_data

Obj = t.Dict[str, t.Any]

MANAGED_KINDS = (("v1", "Secret"), (keda.KEDA_V, "ClusterTriggerAuthentication"), (keda.KEDA_V, "ScaledObject"),
                 (provisioning.KUEUE_V, "ProvisioningRequestConfig"), (provisioning.KUEUE_V, "AdmissionCheck"))


def node_pools_argument_spec(default: t.Optional[t.List[t.Any]]) -> t.Dict[str, t.Any]:
    """The pool options (doc fragment node_pools): module node_pools defaults node_pools to [] (its run is the
    pools), module tenants to None (a run that does not touch pool objects at all)."""
    return dict(node_pools=dict(type="list", elements="dict", default=default),
                check_templates=dict(type="bool", default=True))


def refuse_node_pools_with(params: t.Mapping[str, t.Any], option: str, why: str) -> None:
    """Option node_pools is not taken together with ``option`` (limit_tenants, clusters): stop before any read."""
    if params.get("node_pools") is not None and params.get(option):
        raise GpuaasError("node_pools cannot be combined with %s: %s; nothing was changed" % (option, why),
                          hint="leave node_pools unset for this run (the tenants role does) and reconcile the pools "
                               "in a run without %s" % option)


class PoolsScope(PruneScope):
    """The pool objects a run owns (component node-pools; Secrets only in the KEDA namespace, never cluster-wide:
    see TenantsScope). With prune off (safe mode) it matches nothing: what it owns that the inventory no longer asks
    for is reported as drift instead (``NodePoolsStep.drift``)."""

    def __init__(self, kinds: t.Sequence[t.Tuple[str, str]], keda_namespace: str, prune: bool) -> None:
        super().__init__(kinds, labels={COMPONENT_LABEL: builders.COMPONENT_VALUE}, require_tenant_label=False,
                         kind_namespaces={"Secret": [keda_namespace]})
        self.prune = prune

    def owns(self, obj: t.Mapping[str, t.Any]) -> bool:
        return super().matches(obj)

    def matches(self, obj: t.Mapping[str, t.Any]) -> bool:
        return self.prune and self.owns(obj)


class NodePoolsStep:
    """The pools of one run: ``check`` before any write, ``build`` the desired objects, ``scope`` to read and prune
    with, ``report`` the pools' part of the run's result."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], model: TenantModel, keda_namespace: str,
                 warnings: t.List[str]) -> None:
        self.client = client
        self.params = params
        self.model = model
        self.keda_namespace = keda_namespace
        self.warnings = warnings
        self.labels = add_ownership({}, component=builders.COMPONENT_VALUE)
        kinds = [(av, kind) for av, kind in MANAGED_KINDS if av == "v1" or client.served(av)]
        self.scope = PoolsScope(kinds, keda_namespace, bool(params.get("prune")))
        self.desired: t.List[Obj] = []
        self.desired_keys: t.Set[t.Tuple[str, str, str]] = set()

    def check(self) -> None:
        """Everything that refuses the pools, before anything is written (reads only)."""
        if builders.keda_scaled_pools(self.model) and not self.model.prometheus.url:
            raise GpuaasError("gpuaas_node_pools need gpuaas_prometheus.url",
                              hint="the pools are driven by Kueue's quota metrics in Prometheus; set gpuaas_prometheus.url")
        if self.params.get("check_templates", True):
            self.check_templates()

    def check_templates(self) -> None:
        """Each pool's target exists and its template gives its nodes the flavor's node labels (every pool at once)."""
        problems = []
        flavors = {f.name: f for f in self.model.flavors}
        for i, pool in enumerate(self.model.node_pools):
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

    def build(self, token: t.Optional[str], ca_data: t.Optional[str]) -> t.List[Obj]:
        """The pools' desired objects (empty without pools), with the Prometheus credential given."""
        self.desired = builders.desired_objects(self.model, self.labels, token, ca_data, self.keda_namespace)
        self.desired_keys = {ObjectRef.from_object(o).key for o in self.desired}
        return self.desired

    def is_mine(self, result: ObjectResult) -> bool:
        """Whether a result of the run is about a pool object (desired, or a deleted one the pools owned)."""
        if result.ref.key in self.desired_keys:
            return True
        return result.action == "deleted" and self.scope.owns(result.object or {})

    def drift(self, state: t.Optional[LiveState]) -> t.List[t.Dict[str, t.Any]]:
        """Owned pool objects that prune would delete, listed (and warned about) instead, from the run's one read."""
        if self.scope.prune or state is None:
            return []
        kept = {ObjectRef.from_object(o) for gk in state.prune_kinds for o in state.listed.get(gk, [])
                if self.scope.owns(o) and ObjectRef.from_object(o).key not in self.desired_keys}
        refs = sorted(kept, key=lambda r: r.key)
        if refs:
            self.warnings.append(
                "%d node pool object%s no longer in gpuaas_node_pools kept (prune is off): %s. Add the pool back, or "
                "set gpuaas_tenants_prune: true to remove the objects of pools missing from the inventory."
                % (len(refs), "" if len(refs) == 1 else "s", ", ".join(str(r) for r in refs)))
        return [r.to_dict() for r in refs]

    def report(self, result: ReconcileResult, state: t.Optional[LiveState], diff: bool = False) -> t.Dict[str, t.Any]:
        """The pools' part of the run's result: changed, summary, created/updated/deleted, drift and the pools."""
        out = result.only(self.is_mine).to_module_result(diff=diff)
        redact_secret_data(out.get("diff"))
        out["drift"] = self.drift(state)
        out["pools"] = {
            pool.name: {"target": "%s %s/%s" % (pool.target_kind, pool.target_namespace, pool.target_name),
                        "flavor": pool.flavor, "min_nodes": pool.min_nodes, "max_nodes": pool.max_nodes,
                        "gpus_per_node": pool.gpus_per_node,
                        "query": builders.reserved_query(pool, builders.queues_using_flavor(self.model, pool.flavor,
                                                                                            pool.gpu_resource))}
            for pool in self.model.node_pools}
        return out
