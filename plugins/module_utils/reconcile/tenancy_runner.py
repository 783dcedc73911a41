# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tenancy run (module gpuaas.platform.tenants), in the manner of kubernetes.core's k8s/runner.py: the module
parses its options and hands them over; the runner owns the run.

One run, one pass over each input:

  options --parse once--> TenantModel --build once--> desired objects --read once--> LiveState
        (nodes: one LIST)    (credential: a stand-in, filled in       (one LIST per kind, ApplyEngine.read)
                              when read under the lock)

  LiveState --> safe mode (empty inventory: report, write nothing) --> ownership guard (before the first write)
            --> Lease lock --> re-check under the lock (ClusterQueue generations; read again only if they moved)
            --> Prometheus credential read, filled into its Secret --> drain / undrain --> recreate moved LocalQueues
            --> reconcile(state=...) (apply; after the admission policy tiers, a barrier: wait until the API
                server enforces the policies it updated before applying what they govern; prune)
            (the lock confirmed before the drain, each apply tier and the prune: a lost lock stops the run there)
            --> drift, kept namespaces, adoption report (from the same state) --> result (Secret data redacted)

With option node_pools the node pools are a step of the same run (node_pools_step.py): parsed with the inventory,
checked (templates) before the first write, built, read, applied and pruned with the tenancy's objects, reported.
"""

from __future__ import annotations

import dataclasses
import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import InventoryError, problem_count
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, ApiUnreachable, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.barrier import Barrier, dry_run_refusal
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import cohort_quota_unsupported
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.live import LiveState
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import TENANT_LABEL, tenant_of
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import CombinedScope, ObjectRef, PruneScope, ReconcileResult
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as pool_builders
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import openshift_ai
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.adoption_report import AdoptionReport
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import redact_secret_data
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inputs import (
    inventory_from_params,
    prometheus_credential,
    read_nodes,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inventory_run import InventoryRun
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_step import NodePoolsStep
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_scope import (
    TenantsScope,
    owned_by_tenants,
    served_kinds,
    tenants_selector,
)

Obj = t.Dict[str, t.Any]

# What stands in for the Prometheus credential until it is read under the lock; never sent to the cluster.
CREDENTIAL_STAND_IN = "credential-read-under-the-lock"
# How long a run waits for the API server to enforce an admission policy it updated (issue 22 item 8): the informer
# behind the policy cache usually takes well under a second; the probe is retried with a doubling pause up to 2 s.
POLICY_ENFORCEMENT_TIMEOUT = 30.0


@dataclasses.dataclass
class Prepared:
    """What a tenants run read and built before its first write (``TenancyRunner.prepare``)."""
    nodes: t.Optional[t.List[Obj]]
    model: TenantModel
    platform: str
    engine: ApplyEngine
    kueue_version: str
    desired: t.List[Obj]
    scope: TenantsScope
    also: t.List[t.Tuple[str, str]]
    state: LiveState
    # set when the run ends without writing (an empty inventory in safe mode)
    result: t.Optional[t.Dict[str, t.Any]] = None


class TenancyRunner(InventoryRun, AdoptionReport):
    """One tenants run (client, options, lock: ``InventoryRun``; the adoption report: ``AdoptionReport``)."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False,
                 diff: bool = False, sleep: t.Callable[[float], None] = time.sleep,
                 clock: t.Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, params, check_mode=check_mode, diff=diff, sleep=sleep, clock=clock)
        self._admission_options: t.Optional[builders.AdmissionSettings] = None
        # the node pools step (option node_pools given; None: this run does not touch pool objects at all)
        self.pools: t.Optional[NodePoolsStep] = None

    # -- inputs ---------------------------------------------------------------------------------------
    def keda_namespace(self, platform: str) -> str:
        """The KEDA namespace: the option, else the platform's default (as the keda role's)."""
        return t.cast(str, self.params.get("keda_namespace") or keda.default_namespace(platform))

    def platform(self) -> str:
        wanted = self.params.get("platform") or "auto"
        if wanted != "auto":
            return t.cast(str, wanted)
        return "openshift" if self.client.served("config.openshift.io/v1") else "kubernetes"

    def nodes(self) -> t.Optional[t.List[Obj]]:
        """The nodes for the capacity check (one LIST), None when the check is off or the account may not list them."""
        if not self.params.get("check_capacity", True):
            return None
        try:
            return read_nodes(self.client)
        except GpuaasError as err:
            if err.details.get("status") != 403:
                raise
            self.warnings.append("cannot list nodes (forbidden): the GPU capacity check was skipped")
            return None

    def model(self, nodes: t.Optional[t.List[Obj]]) -> TenantModel:
        """The inventory, parsed and validated once (every problem at once, before anything is read or written)."""
        model = TenantModel.from_inventory(inventory_from_params(self.params, node_pools=self.params.get("node_pools")
                                                                 is not None), nodes)
        self.warnings.extend(model.warnings)
        self.check_platform_namespaces(model)
        self.kueue_framework_names()
        limit = self.params.get("limit_tenants")
        if limit is not None:
            unknown = [n for n in limit if model.tenant(n) is None]
            if unknown:
                raise GpuaasError("limit_tenants names %s, which the tenants list does not define" % ", ".join(unknown),
                                  hint="pass the tenant (with state present or absent) in tenants as well")
        return model

    def kueue_framework_names(self) -> t.Optional[t.List[str]]:
        """Option kueue_frameworks checked (no I/O): None (every known framework), ['auto'] or known names; an
        unknown name stops the run before anything is read or written."""
        frameworks = self.params.get("kueue_frameworks")
        if frameworks is None:
            return None
        names = [str(f) for f in frameworks]
        if names == ["auto"]:
            return names
        bad = kueue_integrations.unknown(names)
        if bad:
            raise GpuaasError("kueue_frameworks: unknown Kueue framework(s) %s; nothing was changed" % ", ".join(bad),
                              hint="use auto or the upstream names gpuaas_kueue_integrations takes: %s"
                                   % ", ".join(kueue_integrations.known_frameworks()))
        return names

    def serves(self, integration: kueue_integrations.Integration) -> bool:
        """Whether the cluster serves a framework's kind (builtin kinds always), as kueue_integrations_info decides."""
        if integration.builtin:
            return True
        try:
            self.client.resource(integration.api_version, integration.kind)
            return True
        except GpuaasError:
            return False

    def admission_options(self) -> builders.AdmissionSettings:
        """Option admission, parsed once per run (the cross-check and every build read the same settings)."""
        if self._admission_options is None:
            self._admission_options = builders.AdmissionSettings.from_options(self.params.get("admission"))
        return self._admission_options

    def admission_settings(self, platform: str = "kubernetes",
                           model: t.Optional[TenantModel] = None) -> builders.AdmissionSettings:
        """What the admission policy trusts (option admission) and the frameworks Kueue manages (option
        kueue_frameworks; auto resolves by the kinds the cluster serves, as the kueue role does, without those the
        Red Hat Kueue operand cannot carry on OpenShift; not set: every known framework). On OpenShift, or with
        gpuaas_openshift_ai, OpenShift AI's controllers are trusted as well, each only for the frameworks of those
        that Kueue manages (gpuaas_openshift_ai.trusted_controllers: false turns it off)."""
        settings = dataclasses.replace(self.admission_options())
        names = self.kueue_framework_names()
        if names == ["auto"]:
            names = [i.framework for i in kueue_integrations.INTEGRATIONS if self.serves(i)]
            if platform == "openshift":
                dropped = set(kueue_integrations.openshift_operand(names, True)["not_expressible"])
                names = [n for n in names if n not in dropped]
        settings.kueue_frameworks = names
        ai = model.openshift_ai if model is not None else None
        if ai is not None and ai.trusted_controllers and (platform == "openshift" or ai.configured):
            managed = names if names is not None else kueue_integrations.known_frameworks()
            settings.workload_controllers = settings.workload_controllers + [
                user for user in openshift_ai.trusted_controllers(ai.applications_namespace, managed)
                if user not in settings.workload_controllers]
        return settings

    def check_hardware_profiles_served(self, model: TenantModel) -> None:
        """HardwareProfiles asked for on a cluster that does not serve their API stop the run before any write."""
        if model.hardware_profiles and not self.client.served(openshift_ai.HWP_V):
            raise GpuaasError(
                "gpuaas_openshift_ai asks for %d HardwareProfile%s but the cluster does not serve %s; nothing was "
                "changed" % (len(model.hardware_profiles), "" if len(model.hardware_profiles) == 1 else "s",
                             openshift_ai.HWP_V),
                hint="install OpenShift AI (a release serving HardwareProfile %s), or set "
                     "gpuaas_openshift_ai.hardware_profiles: false (and hardware_profiles: false on tenants that "
                     "set it)" % openshift_ai.HWP_V)

    def check_cohort_quotas_served(self, model: TenantModel, kueue_version: str, limit: t.Optional[t.Any]) -> None:
        """Cohort quotas on a cluster whose Kueue cannot hold them stop the run before any write (with
        ``limit_tenants`` no Cohort is applied, so nothing is asked of the cluster)."""
        holders = ["gpuaas_cohorts[%d].quotas (%s)" % (i, c.name) for i, c in enumerate(model.cohorts) if c.quotas]
        if not holders or limit is not None:
            return
        reason = cohort_quota_unsupported(self.client, kueue_version)
        if reason:
            raise GpuaasError(
                "%s; the inventory gives cohorts quota (%s), so nothing was changed" % (reason, ", ".join(holders)),
                hint="upgrade Kueue to a release serving Cohort resourceGroups (v0.9 or later; v0.11 or later for fair "
                     "sharing in a cohort tree), or move the cohort quotas to tenants (a tenant with the budget and "
                     "no workloads, whose quota the cohort's other members borrow)",
                details={"reason": "CohortQuotaUnsupported"})

    def check_platform_namespaces(self, model: TenantModel) -> None:
        """A tenant namespace the admission policy exempts would be unguarded (issue 22 item 6): the inventory's
        platform namespaces (gpuaas_admission.platform_namespaces, else the default the parser already checks)
        and the tenants' namespaces are one cross-checked list, before anything is read or written."""
        platform = set(self.admission_options().platform_namespaces)
        problems = ["gpuaas_tenants: namespace %r of tenant %r is also a platform namespace in "
                    "gpuaas_admission.platform_namespaces, where the admission policy does not apply; remove it "
                    "from one of the two lists" % (ns, tenant.name)
                    for tenant in model.tenants for ns in tenant.namespaces if ns in platform]
        if problems:
            raise InventoryError("The GPU tenancy inventory has %s; nothing was changed." % problem_count(len(problems)),
                                 hint="a namespace is either a tenant's or the platform's, never both",
                                 problems=problems)

    def desired_objects(self, model: TenantModel, platform: str, token: t.Optional[str], ca_data: t.Optional[str],
                        limit: t.Optional[t.Sequence[str]] = None) -> t.List[Obj]:
        """The desired objects of this run (only the limited tenants' with limit_tenants), built once."""
        desired = builders.desired_objects(model, platform, token, ca_data, self.keda_namespace(platform),
                                           self.admission_settings(platform, model))
        if limit is not None:
            desired = [o for o in desired if (o["metadata"].get("labels") or {}).get(TENANT_LABEL) in limit]
        if self.pools is not None:
            desired += self.pools.build(token, ca_data)
        return desired

    def prune_scope(self, scope: TenantsScope) -> PruneScope:
        """What the run reads and prunes: the tenancy's scope, with the pools' when it has the node pools step."""
        return CombinedScope([scope, self.pools.scope]) if self.pools is not None else scope

    @staticmethod
    def credential_stand_in(prom: t.Any) -> t.Tuple[t.Optional[str], t.Optional[str]]:
        """(token, CA) stand-ins of the credential gpuaas_prometheus names, None where it names none."""
        has_token = bool(prom.token or prom.token_file or prom.token_secret)
        return (CREDENTIAL_STAND_IN if has_token else None, CREDENTIAL_STAND_IN if prom.ca_file else None)

    def with_credential(self, engine: ApplyEngine, model: TenantModel, platform: str,
                        limit: t.Optional[t.Sequence[str]], desired: t.List[Obj], state: LiveState,
                        scope: TenantsScope, also: t.Sequence[t.Tuple[str, str]]) -> t.Tuple[t.List[Obj], LiveState]:
        """Read the Prometheus credential (registered as a secret) and fill it into the one object that carries it.

        When the credential turns out absent after all (an empty token file), the desired set differs in shape (no
        Secret, unauthenticated triggers): it is built and read again, the one case with a second build.
        """
        credential = prometheus_credential(self.client, self.secret_sink)
        prom = model.prometheus
        token, ca_data = credential.token(prom), credential.ca(prom)
        if (bool(token), bool(ca_data)) != tuple(bool(v) for v in self.credential_stand_in(prom)):
            desired = self.desired_objects(model, platform, token, ca_data, limit)
            state = engine.read(desired, prune=scope, also=also)
            engine.guard(state)
            return desired, state
        if token or ca_data:
            data = keda.prometheus_auth(prom, token, ca_data, self.keda_namespace(platform), {})[0]["data"]
            for obj in desired + [d.obj for d in state.prepared]:  # the tenants' Secret, and the pools' (one read)
                if obj["kind"] == "Secret" and obj["metadata"]["name"] in (keda.PROMETHEUS_AUTH_NAME,
                                                                           pool_builders.PROMETHEUS_AUTH_NAME):
                    obj["data"] = dict(data)
        return desired, state

    # -- the run --------------------------------------------------------------------------------------
    def run(self) -> t.Dict[str, t.Any]:
        try:
            return self._run()
        except ApiUnreachable as err:
            if "stage" not in err.details:
                err = ApiUnreachable(
                    "%s. The run stopped there; objects already written stay as they are (each is applied whole), "
                    "and re-running the same playbook once the API server is back converges."
                    % err.message.rstrip("."), hint=err.hint, details=err.details)
            err.details.pop("partial_result", None)
            raise err
        finally:
            self.run_lock.release()

    def _run(self) -> t.Dict[str, t.Any]:
        prepared = self.prepare()
        if prepared.result is not None:
            return prepared.result
        self.take_lock(prepared)
        return self.write(prepared)

    def prepare(self) -> "Prepared":
        """Everything before the first write: parse, build, read, safe mode, ownership guard. A fleet run
        (reconcile/fleet_runner.py) prepares every cluster this way before it writes on any of them."""
        p = self.params
        nodes = self.nodes()
        model = self.model(nodes)
        limit = p.get("limit_tenants")
        prune = bool(p.get("prune"))
        declared = {x.name for x in model.tenants}
        empty = limit is None and not declared
        platform = self.platform()
        self.check_hardware_profiles_served(model)
        # A limited run (limit_tenants, e.g. onboarding) parses the pools too: the capacity check counts them and a
        # tenant's ClusterQueue gets the ProvisioningRequest checks of its flavors, as in a full run; it does not
        # touch the pool objects themselves (they are shared by every tenant: a full run reconciles them).
        if p.get("node_pools") is not None and limit is None:  # the pools' URL and templates: read before any write
            self.pools = NodePoolsStep(self.client, p, model, self.keda_namespace(platform), self.warnings)
            self.pools.check()
        engine = ApplyEngine(self.client, check_mode=self.check_mode, concurrency=p.get("concurrency") or 8,
                             guard_ownership=True, adopt=p.get("adopt") or [],
                             list_selector=tenants_selector(limit) if limit is not None else None)
        kueue_version = engine.kueue_version()
        kueue_av = "kueue.x-k8s.io/%s" % kueue_version
        self.check_cohort_quotas_served(model, kueue_version, limit)

        # Built once, with a stand-in for the Prometheus credential: which objects are desired does not depend on
        # its value, which is read (a token file, a Secret) under the lock and filled in then (with_credential).
        desired = self.desired_objects(model, platform, *self.credential_stand_in(model.prometheus), limit=limit)
        scope = TenantsScope(served_kinds(self.client, kueue_av, limit, bool(p.get("delete_namespaces"))), limit,
                             declared=None if (prune or limit is not None) else declared,
                             keda_namespace=self.keda_namespace(platform))
        also = [("v1", "Namespace"), (kueue_av, "ClusterQueue")]
        state = engine.read(desired, prune=self.prune_scope(scope), also=also)
        prepared = Prepared(nodes, model, platform, engine, kueue_version, desired, scope, also, state)

        # Safe mode decisions need reads only, so a refused or empty run writes nothing (not even the lock).
        if empty:
            live = self.live_tenants(state)
            if prune and not p.get("allow_empty"):
                raise GpuaasError(
                    "refusing to prune with an empty tenant list: it would drain and remove every tenant on the "
                    "cluster (%d: %s)" % (len(live), ", ".join(sorted(live)) or "none yet"),
                    hint="is the inventory missing (-i) or gpuaas_tenants misspelled? To really remove every tenant set "
                         "gpuaas_tenants_allow_empty: true as well (or offboard them one by one with state: absent)",
                    details={"reason": "EmptyInventory", "tenants": sorted(live)})
            if not prune and live:
                prepared.result = self.empty_inventory_result(model, kueue_version, live, nodes, scope, state)
                return prepared

        # Before the first write (the lock, a drain): an object of a desired name that the collection does not own
        # fails the run now, on the state just read, so a refused run writes nothing at all.
        engine.guard(state)
        return prepared

    def take_lock(self, prepared: "Prepared") -> None:
        """Hold the run lock (kube/lease.py) and re-check the state under it."""
        if self.run_lock.take():
            prepared.engine.confirm_lock = self.run_lock.confirm  # before each apply tier and before prune
            prepared.state = self.recheck(prepared.engine, prepared.state, prepared.desired,
                                          self.prune_scope(prepared.scope), prepared.also)

    def write(self, prepared: "Prepared") -> t.Dict[str, t.Any]:
        """The writes of a prepared run (under the lock when it holds one) and its result."""
        p = self.params
        nodes, model, platform, engine = prepared.nodes, prepared.model, prepared.platform, prepared.engine
        kueue_version, scope, also = prepared.kueue_version, prepared.scope, prepared.also
        kueue_av = "kueue.x-k8s.io/%s" % kueue_version
        limit = p.get("limit_tenants")
        prune = bool(p.get("prune"))
        declared = {x.name for x in model.tenants}
        present = {x.name for x in model.present_tenants}
        desired, state = self.with_credential(engine, model, platform, limit, prepared.desired, prepared.state,
                                              self.prune_scope(scope), also)
        live_cqs = [cq for cq in state.of_kind("ClusterQueue") if owned_by_tenants(cq)]

        live_tenant_names = {tenant_of(cq) for cq in live_cqs} - {None}
        removable = declared - present
        if prune:
            removable |= live_tenant_names - declared
        offboard = sorted(live_tenant_names & removable)
        if limit is not None:
            offboard = [x for x in offboard if x in limit]
        draining = [cq for cq in live_cqs if tenant_of(cq) in offboard]
        self.run_lock.confirm("before draining, releasing drains and recreating LocalQueues")
        engine.drain(kueue_av, "ClusterQueue", draining, float(p.get("drain_timeout", 600)), self.sleep, self.clock)
        if draining:
            # A drain waits for the tenants' workloads (up to drain_timeout): long enough to lose the lock.
            self.run_lock.confirm("after draining, before releasing drains and recreating LocalQueues")
        engine.undrain(kueue_av, "ClusterQueue",
                       [cq for cq in live_cqs if tenant_of(cq) in present and (limit is None or tenant_of(cq) in limit)])
        recreated = self.recreate_moved_local_queues(desired, kueue_av, engine, state)

        engine.barriers.append(Barrier(("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"),
                                       lambda written, pending: self.wait_for_policies(engine, written, pending),
                                       judged_late=self.governed_by))
        result = engine.reconcile(desired, prune=self.prune_scope(scope), state=state)
        out = result.to_module_result(diff=self.diff)
        redact_secret_data(out.get("diff"))
        if self.pools is not None:
            out["node_pools"] = self.pools.report(result, state)
        if recreated:
            out["changed"] = True
        desired_keys = {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in desired}
        drift_objects = [o for o in scope.kept if ObjectRef.from_object(o).key not in desired_keys]
        unmanaged = sorted({tenant_of(o) for o in drift_objects} - {None})
        if limit is None and not prune:
            unmanaged = sorted(set(unmanaged) | (live_tenant_names - declared))
        adopted = out.get("adopted") or []
        out.update({
            "adopted": adopted,
            "adopted_namespace_workloads": self.report_adoption(adopted),
            "tenants": {x.name: list(x.namespaces) for x in model.present_tenants
                        if limit is None or x.name in limit},
            "offboarded": offboard,
            "recreated_local_queues": recreated,
            "kept_namespaces": self.kept_namespaces(state, desired, unmanaged, limit),
            "objects": len(desired),
            "requests": dict(result.requests),
            "drift": self.drift(unmanaged, drift_objects, prune, skipped=False),
        })
        out.setdefault("api_versions", {})["kueue.x-k8s.io"] = kueue_version
        return self.finish(out, model.capacity, nodes is not None)

    def recheck(self, engine: ApplyEngine, state: LiveState, desired: t.List[Obj], scope: TenantsScope,
                also: t.Sequence[t.Tuple[str, str]]) -> LiveState:
        """The state as of holding the lock: the ClusterQueues listed again and compared with the state's.

        Every run that writes holds the lock and changes a ClusterQueue when it changes a tenant (onboard, quota,
        namespaces, drain, offboard), so unchanged ClusterQueues mean the state read before the lock still holds;
        otherwise (another run finished in between) everything is read again and the ownership guard runs again.
        Compared by uid, generation, labels and deletion, not by resourceVersion: Kueue writes the status of a busy
        ClusterQueue every few seconds, which moves its resourceVersion (never its generation) and would make
        every run read twice.
        """
        cq_av = next(av for av, kind in also if kind == "ClusterQueue")
        try:
            fresh = self.client.resource(cq_av, "ClusterQueue").list(label_selector=engine.list_selector)
        except ApiException as exc:
            raise translate_api_exception(exc, "list", "ClusterQueue")

        def versions(items: t.Iterable[t.Mapping[str, t.Any]]) -> t.Dict[str, t.Any]:
            return {i["metadata"]["name"]: (i["metadata"].get("uid"), i["metadata"].get("generation"),
                                            sorted((i["metadata"].get("labels") or {}).items()),
                                            i["metadata"].get("deletionTimestamp"))
                    for i in items if owned_by_tenants(i)}

        if versions(fresh) == versions(state.of_kind("ClusterQueue")):
            return state
        state = engine.read(desired, prune=scope, also=also)
        engine.guard(state)
        return state

    # -- policy enforcement (issue 22 item 8) -------------------------------------------------------------
    def wait_for_policies(self, engine: ApplyEngine, written: t.Sequence[t.Any], pending: t.Sequence[Obj]) -> None:
        """The engine's barrier after the admission policy tiers: for each policy this run wrote, wait until the API
        server admits one of the objects still to be applied whose admission depends on the policy's version
        (``admission.enforcement_probes``: a server-side dry run), so that they are never judged by the previous one."""
        for name in sorted({r.ref.name for r in written}):
            probes = admission.enforcement_probes(name, pending)
            if probes:
                self.wait_enforced(engine, name, probes[0])

    @staticmethod
    def governed_by(written: t.Sequence[t.Any], pending: t.Sequence[Obj]) -> t.List[Obj]:
        """Check mode: the pending objects whose admission depends on the version of a policy this run would update
        (a dry run against the live, previous version would refuse what the run would apply)."""
        return [o for name in sorted({r.ref.name for r in written}) for o in admission.enforcement_probes(name, pending)]

    def wait_enforced(self, engine: ApplyEngine, policy: str, probe: Obj) -> None:
        """Dry-run ``probe`` until policy ``policy`` no longer refuses it (pauses 0.1 s doubling to 2 s, at most
        POLICY_ENFORCEMENT_TIMEOUT). A refusal by anything else ends the wait: the real apply reports it."""
        deadline = self.clock() + POLICY_ENFORCEMENT_TIMEOUT
        pause = 0.1
        while True:
            refusal = dry_run_refusal(engine, probe)
            if refusal is None or not admission.refused_by(str(refusal.message), policy):
                return
            if self.clock() >= deadline:
                meta = probe.get("metadata") or {}
                raise GpuaasError(
                    "the API server still refuses %s %s/%s with the previous version of the admission policy %s, "
                    "%d s after this run updated the policy; nothing after the policy was applied: %s"
                    % (probe.get("kind"), meta.get("namespace"), meta.get("name"), policy,
                       POLICY_ENFORCEMENT_TIMEOUT, refusal.message),
                    hint="re-run the playbook; if the refusal stays, the new version refuses the object as well (its "
                         "message says why) or the policy does not compile: kubectl get validatingadmissionpolicy %s "
                         "-o jsonpath='{.status}'" % policy,
                    details={"reason": "PolicyNotEnforced", "policy": policy})
            self.sleep(pause)
            pause = min(pause * 2, 2.0)

    # -- reports from the state -----------------------------------------------------------------------
    @staticmethod
    def live_tenants(state: LiveState) -> t.Set[str]:
        """Tenants with objects on the cluster: owned ClusterQueues and owned (labelled) namespaces."""
        names = {tenant_of(cq) for cq in state.of_kind("ClusterQueue") if owned_by_tenants(cq)}
        for ns in state.of_kind("Namespace"):
            if owned_by_tenants(ns) and not (ns.get("metadata") or {}).get("deletionTimestamp"):
                names.add(tenant_of(ns))
        return {n for n in names if n}

    def kept_namespaces(self, state: LiveState, desired: t.Sequence[Obj], unmanaged: t.Sequence[str],
                        limit: t.Optional[t.Sequence[str]]) -> t.List[str]:
        """Namespaces this module created that no tenant claims any more (kept: delete_namespaces is false)."""
        if self.params.get("delete_namespaces"):
            return []
        desired_ns = {o["metadata"]["name"] for o in desired if o["kind"] == "Namespace"}
        kept = []
        for ns in state.of_kind("Namespace"):
            if not owned_by_tenants(ns):
                continue
            name = ns["metadata"]["name"]
            owner = (ns["metadata"].get("labels") or {}).get(TENANT_LABEL)
            if ns["metadata"].get("deletionTimestamp"):
                continue  # already being deleted (e.g. an earlier offboarding with delete_namespaces): not kept
            if owner in unmanaged:
                continue  # an unmanaged tenant's namespace: drift, not a kept namespace
            if name not in desired_ns and (limit is None or owner in limit):
                kept.append(name)
        return sorted(kept)

    def drift(self, unmanaged: t.Sequence[str], objects: t.Sequence[t.Mapping[str, t.Any]], prune: bool,
              skipped: bool) -> t.Dict[str, t.Any]:
        refs = sorted((ObjectRef.from_object(o) for o in objects), key=lambda r: r.key)
        shared = sorted((ObjectRef.from_object(o) for o in objects if not tenant_of(o)), key=lambda r: r.key)
        if unmanaged:
            self.warnings.append(
                "%d tenant%s on the cluster %s not in the inventory and %s left untouched (gpuaas_tenants_prune is "
                "false): %s. Add %s to gpuaas_tenants, offboard with state: absent, or set gpuaas_tenants_prune: true "
                "to remove every tenant missing from the inventory."
                % (len(unmanaged), "" if len(unmanaged) == 1 else "s", "is" if len(unmanaged) == 1 else "are",
                   "was" if len(unmanaged) == 1 else "were", ", ".join(unmanaged),
                   "it" if len(unmanaged) == 1 else "them"))
        if shared:
            self.warnings.append(
                "%d shared object%s no longer in the inventory kept (gpuaas_tenants_prune is false): %s"
                % (len(shared), "" if len(shared) == 1 else "s", ", ".join(str(r) for r in shared[:10])
                   + (" …" if len(shared) > 10 else "")))
        return {"prune": prune, "unmanaged_tenants": list(unmanaged), "skipped_writes": skipped,
                "unmanaged_objects": [r.to_dict() for r in refs]}

    def empty_inventory_result(self, model: TenantModel, kueue_version: str, live: t.Set[str],
                               nodes: t.Any, scope: TenantsScope, state: LiveState) -> t.Dict[str, t.Any]:
        """An empty tenant list against a cluster with tenants, prune off: read only, report, write nothing."""
        objects: t.List[t.Mapping[str, t.Any]] = [o for items in state.candidates(scope).values() for o in items]
        objects += scope.kept
        self.warnings.append(
            "the tenant list is empty but the cluster has %d tenant%s: nothing was written (a forgotten -i or a "
            "misspelled gpuaas_tenants?)" % (len(live), "" if len(live) == 1 else "s"))
        out: t.Dict[str, t.Any] = {
            "changed": False, "summary": {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0},
            "created": [], "updated": [], "deleted": [], "tenants": {}, "offboarded": [],
            "recreated_local_queues": [], "kept_namespaces": [], "objects": 0, "requests": {},
            "adopted": [], "adopted_namespace_workloads": [],
            "api_versions": {"kueue.x-k8s.io": kueue_version},
            "drift": self.drift(sorted(live), objects, False, skipped=True),
        }
        if self.diff:
            out["diff"] = []
        if self.pools is not None:  # nothing written for the pools either
            out["node_pools"] = self.pools.report(ReconcileResult(self.check_mode), state)
        return self.finish(out, model.capacity, nodes is not None)  # before the lock: none to report

    def recreate_moved_local_queues(self, desired: t.Sequence[t.Mapping[str, t.Any]], kueue_av: str,
                                    engine: ApplyEngine, state: LiveState) -> t.List[str]:
        """Delete owned LocalQueues whose (immutable) clusterQueue differs from the desired one.

        The live LocalQueue of each desired key is in the state whoever's tenant label it carries (a namespace
        moved from another tenant): LISTed, or read with GET when a limited run's selector left it out.
        """
        wanted = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
                  for o in desired if o["kind"] == "LocalQueue"}
        stale = []
        for (namespace, name), cluster_queue in sorted(wanted.items()):
            lq = state.objects.get(("LocalQueue", namespace, name))
            if lq is not None and owned_by_tenants(lq) and (lq.get("spec") or {}).get("clusterQueue") != cluster_queue:
                stale.append(ObjectRef(kueue_av, "LocalQueue", name, namespace))
        if stale:
            engine.recreate(stale, wait_timeout=60)
            if not self.check_mode:
                state.forget(r.key for r in stale)  # gone now: the reconcile creates them
        return ["%s/%s" % (r.namespace, r.name) for r in stale]
