# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet run (module gpuaas.platform.tenants with option ``clusters``, docs/multicluster.md): the tenants run of
every cluster of a MultiKueue fleet, validated everywhere before it writes anywhere.

  options --parse once--> TenantModel with its Fleet (inventory/clusters.py: every problem at once)
      --> reach every cluster (a short probe; every unreachable cluster named at once, nothing written)
      --> prepare each cluster (TenancyRunner.prepare: build its objects — manifests/multikueue.py —, read them,
          safe mode, ownership guard; every cluster's problems at once, nothing written)
      --> the run lock on every cluster, manager first then the workers in inventory order (one order for every
          run, so two fleet runs cannot deadlock; a single-cluster tenants run holds the same Lease there)
      --> write each worker (tenancy at the worker's share, MultiKueue's least-privilege identity; drain and
          offboarding as for one cluster), read its ServiceAccount token
      --> write the manager (tenancy with the MultiKueue check, AdmissionCheck, MultiKueueConfig, MultiKueueCluster,
          each worker's kubeconfig Secret built from its token) --> release every lock

The worker credentials (long-lived or bound tokens, their kubeconfigs on the manager, rotation) are
reconcile/fleet_credentials.py.

Check mode: every cluster gets server-side dry runs; the kubeconfig Secrets are built from the tokens already on the
workers (a stand-in when a worker has none yet: its ServiceAccount is created by this run).
"""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import Cluster, TenantModel, Worker
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.auth import build_configuration
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    KubeClient,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    COMPONENT_LABEL,
    OWNED_SELECTOR,
    TENANT_LABEL,
    is_owned,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.retries import RetryPolicy
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile import fleet_workers
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.entry import redact_secret_data
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.fleet_credentials import (
    WorkerCredentials,
    record_deleted,
    stand_in_kubeconfig,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inputs import inventory_from_params
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_step import refuse_node_pools_with
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import Prepared, TenancyRunner

Obj = t.Dict[str, t.Any]

# The reachability probe before anything else: two attempts within 5 s, so an unreachable worker costs seconds, not
# the 30 s retry budget of every request (kube/retries.py), before the run names it.
PROBE_RETRY = RetryPolicy(attempts=2, base=0.5, budget=5.0)
PROBE_TIMEOUT = 5.0


def cluster_client(cluster: Cluster) -> KubeClient:
    """A client for exactly the cluster's ``auth`` (validated by inventory/clusters.py): no K8S_AUTH_* environment
    fallback, which would point every cluster of the fleet at the one cluster of the automation's credential."""
    auth = dict(cluster.auth)
    return KubeClient(build_configuration(dict(auth)), auth)


class ClusterRun(TenancyRunner):
    """The tenants run of one cluster of the fleet: the fleet's model, this cluster's objects."""

    def __init__(self, cluster: Cluster, fleet_model: TenantModel, client: t.Any, params: t.Mapping[str, t.Any],
                 check_mode: bool = False, diff: bool = False, sleep: t.Callable[[float], None] = time.sleep,
                 clock: t.Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, params, check_mode, diff, sleep=sleep, clock=clock)
        self.cluster = cluster
        self.fleet_model = fleet_model
        self.is_worker = isinstance(cluster, Worker)
        # the frameworks the MANAGER's Kueue integrates: MultiKueue watches each on every worker (set by FleetRunner)
        self.frameworks: t.Sequence[str] = multikueue.MULTIKUEUE_FRAMEWORKS
        self.kubeconfigs: t.Dict[str, t.Dict[str, t.Any]] = {}
        # on the manager (set by FleetRunner): removed workers kept in the MultiKueueConfig, and the workers this run
        # skips (unreachable, reachable_only) — their kubeconfig Secret is neither built nor touched
        self.kept_workers: t.List[str] = []
        self.skipped_workers: t.Set[str] = set()

    def nodes(self) -> None:
        """No node LIST: a fleet's capacity is declared per worker in gpuaas_clusters (checked by the parser)."""
        return None

    def model(self, nodes: t.Optional[t.List[Obj]]) -> TenantModel:
        """The fleet's model, parsed once by FleetRunner; on a worker each tenant's quotas are its share there."""
        if self.is_worker:
            return multikueue.worker_model(self.fleet_model, t.cast(Worker, self.cluster))
        return self.fleet_model

    def desired_objects(self, model: TenantModel, platform: str, token: t.Optional[str], ca_data: t.Optional[str],
                        limit: t.Optional[t.Sequence[str]] = None) -> t.List[Obj]:
        """The cluster's objects (manifests/multikueue.py); with limit_tenants only the limited tenants' (shared
        objects — the MultiKueue configuration, the workers' identity — are neither applied nor pruned then)."""
        options = dict(prometheus_token=token, prometheus_ca=ca_data, keda_namespace=self.keda_namespace(platform),
                       admission=self.admission_settings(platform, model))
        if self.is_worker:
            desired = multikueue.worker_objects(self.fleet_model, t.cast(Worker, self.cluster), self.frameworks,
                                                platform, **options)
        else:
            stand_ins = {w.name: self.kubeconfigs.get(w.name) or stand_in_kubeconfig(w)
                         for w in self.fleet_model.fleet.workers
                         if w.name not in self.skipped_workers} if self.fleet_model.fleet else {}
            desired = multikueue.manager_objects(model, stand_ins, platform, **options)
            for obj in desired:
                if obj["kind"] == "MultiKueueConfig" and self.kept_workers:
                    # a removed worker stays in the config until it is drained and prune_workers removes it
                    obj["spec"]["clusters"] = obj["spec"]["clusters"] + sorted(self.kept_workers)
        if limit is not None:
            desired = [o for o in desired if (o["metadata"].get("labels") or {}).get(TENANT_LABEL) in limit]
        return desired

    def fill_kubeconfigs(self, prepared: Prepared, kubeconfigs: t.Mapping[str, t.Mapping[str, t.Any]]) -> None:
        """The manager's kubeconfig Secrets, built before the workers were written, get the workers' tokens (in the
        desired objects and in the state's prepared copies, as with_credential fills the Prometheus credential)."""
        fleet = self.fleet_model.fleet
        if fleet is None:  # a ClusterRun is only made from a model with gpuaas_clusters
            raise AssertionError("a fleet cluster run without gpuaas_clusters")
        namespace = fleet.manager.kueue_namespace
        for worker in fleet.workers:
            if worker.name not in kubeconfigs:
                continue
            data = multikueue.kubeconfig_secret(worker, namespace, kubeconfigs[worker.name])["data"]
            name = multikueue.kubeconfig_secret_name(worker)
            for obj in prepared.desired + [d.obj for d in prepared.state.prepared]:
                if obj["kind"] == "Secret" and obj["metadata"]["name"] == name \
                        and obj["metadata"].get("namespace") == namespace:
                    obj["data"] = dict(data)


class FleetRunner(WorkerCredentials):
    """One fleet run (see the module docstring); ``clients`` maps cluster names to clients (tests pass fakes)."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False, diff: bool = False,
                 sleep: t.Callable[[float], None] = time.sleep, clock: t.Callable[[], float] = time.monotonic,
                 clients: t.Optional[t.Mapping[str, t.Any]] = None) -> None:
        self.client = client  # None: every cluster has its own connection options (entry.run_module makes no client)
        self.params = params
        self.check_mode = check_mode
        self.diff = diff
        self.sleep = sleep
        self.clock = clock
        self.clients = dict(clients or {})
        self.warnings: t.List[str] = []
        self.secret_sink: t.Callable[[str], None] = lambda _value: None
        self.runs: t.List[ClusterRun] = []
        # a bound token's expiry is wall-clock time (its exp claim), unlike the run's deadlines
        self.wall_clock: t.Callable[[], float] = time.time
        self.skipped: t.List[str] = []
        self.skipped_reasons: t.Dict[str, str] = {}
        self.rotated: t.List[str] = []
        self.plan = fleet_workers.WorkerPlan()

    # -- inputs -----------------------------------------------------------------------------------------
    def model(self) -> TenantModel:
        """The inventory with gpuaas_clusters, parsed once (every problem at once, before any cluster is read)."""
        refuse_node_pools_with(self.params, "clusters", "a fleet's capacity is declared per worker in gpuaas_clusters")
        inventory = inventory_from_params(self.params)
        inventory["gpuaas_clusters"] = self.params.get("clusters")
        model = TenantModel.from_inventory(inventory)
        self.warnings.extend(model.warnings)
        limit = self.params.get("limit_tenants")
        unknown = [n for n in limit or [] if model.tenant(n) is None]
        if unknown:
            raise GpuaasError("limit_tenants names %s, which the tenants list does not define" % ", ".join(unknown),
                              hint="pass the tenant (with state present or absent) in tenants as well")
        return model

    def client_of(self, cluster: Cluster) -> t.Any:
        if cluster.name not in self.clients:
            self.clients[cluster.name] = cluster_client(cluster)
        return self.clients[cluster.name]

    def unreachable(self, clusters: t.Sequence[Cluster]) -> t.List[str]:
        """A short probe of every cluster (GET /version): the clusters it could not reach, each with why."""
        problems = []
        for cluster in clusters:
            role = "worker" if isinstance(cluster, Worker) else "manager"
            try:
                client = self.client_of(cluster)
                retry = getattr(client, "retry", None)
                if retry is not None:
                    client.retry = PROBE_RETRY
                try:
                    client.request("GET", "/version", timeout=PROBE_TIMEOUT)
                finally:
                    if retry is not None:
                        client.retry = retry
                        client.unreachable = None
            except ApiException as exc:
                err = translate_api_exception(exc, "reach", "the API server")
                problems.append("%s %r: %s" % (role, cluster.name, err.message))
            except GpuaasError as err:
                problems.append("%s %r: %s" % (role, cluster.name, err.message))
            except Exception as exc:  # pylint: disable=broad-except  # a kubeconfig that cannot be loaded, TLS …
                problems.append("%s %r: %s: %s" % (role, cluster.name, type(exc).__name__, exc))
        return problems

    # -- the run ----------------------------------------------------------------------------------------
    def run(self) -> t.Dict[str, t.Any]:
        try:
            return self._run()
        finally:
            for run in reversed(self.runs):
                run.run_lock.release()
                self.warnings.extend(w for w in run.warnings if w not in self.warnings)

    def _run(self) -> t.Dict[str, t.Any]:
        model = self.model()
        fleet = model.fleet
        if fleet is None:
            raise GpuaasError("clusters is empty: a fleet run needs gpuaas_clusters (a manager and its workers)",
                              hint="declare gpuaas_clusters (docs/multicluster.md), or leave clusters unset for a "
                                   "single-cluster run")
        skipped = self.reach(fleet)
        rotate = self.workers_to_rotate(fleet, skipped)
        present = [w for w in fleet.workers if w.name not in skipped]
        retired = [w for w in fleet.retired if w.name not in skipped]

        manager = ClusterRun(fleet.manager, model, self.client_of(fleet.manager), self.params, self.check_mode,
                             self.diff, self.sleep, self.clock)
        manager.skipped_workers = set(skipped)
        plan = self.removed_workers(fleet, manager, retired, skipped)
        manager.kept_workers = list(plan.keep)
        self.skipped = skipped
        self.plan = plan
        workers = [ClusterRun(w, model, self.client_of(w), self.params, self.check_mode, self.diff, self.sleep,
                              self.clock) for w in present]
        teardowns = [ClusterRun(w, model, self.client_of(w), self.params, self.check_mode, self.diff, self.sleep,
                                self.clock) for w in retired if w.name in plan.remove]
        for run in [manager] + workers:
            run.secret_sink = self.secret_sink
        self.runs = [manager] + workers + teardowns

        # Before the first write on any cluster: every cluster prepared (read, guarded), every problem at once.
        prepared: t.Dict[str, Prepared] = {}
        failures: t.List[str] = []
        try:
            frameworks = manager.admission_settings(manager.platform(), model).kueue_frameworks
        except GpuaasError as err:
            raise GpuaasError("manager %r: %s; nothing was written on any cluster" % (fleet.manager.name, err.message),
                              hint=err.hint, problems=err.problems, details=err.details)
        for run in workers:
            run.frameworks = [f for f in multikueue.MULTIKUEUE_FRAMEWORKS if frameworks is None or f in frameworks]
        manager.kubeconfigs = self.existing_kubeconfigs(manager, workers)
        for run in [manager] + workers:
            try:
                prepared[run.cluster.name] = run.prepare()
            except GpuaasError as err:
                failures.append("%s %r: %s%s" % ("worker" if run.is_worker else "manager", run.cluster.name,
                                                 err.message, (" (%s)" % err.hint) if err.hint else ""))
                failures.extend("  %s" % p for p in err.problems or [])
        if failures:
            raise GpuaasError("the fleet run stopped before writing on any cluster: %s" % failures[0].split(":")[0]
                              + (" and others" if len(failures) > 1 else "") + " refused it",
                              hint="fix what each line says (the cluster is named first) and run again",
                              problems=failures, details={"reason": "FleetNotReady"})
        early = [name for name, prep in prepared.items() if prep.result is not None]
        if early:
            # an empty tenant list in safe mode writes nothing, on every cluster alike
            return self.result(model, {name: prepared[name].result or {} for name in prepared})

        for run in [manager] + workers + teardowns:
            try:
                if run in teardowns:
                    run.run_lock.take()
                else:
                    run.take_lock(prepared[run.cluster.name])
            except GpuaasError as err:
                # the locks taken so far are released (run()); no object was written on any cluster
                raise GpuaasError("%s %r: %s; nothing was written on any cluster"
                                  % ("worker" if run.is_worker else "manager", run.cluster.name,
                                     err.message.rstrip(".")),
                                  hint=err.hint, problems=err.problems, details=err.details)
        results: t.Dict[str, t.Dict[str, t.Any]] = {}
        revoked = {run.cluster.name: self.revoke_credential(run, prepared[run.cluster.name])
                   for run in workers if run.cluster.name in rotate}
        self.rotated = sorted(revoked)
        # a rotated worker's token is read (or requested) again after its write: the one read before is revoked
        kubeconfigs = {name: kc for name, kc in manager.kubeconfigs.items() if name not in revoked}
        whole_fleet = not self.check_mode and self.params.get("limit_tenants") is None
        for run in workers:
            results[run.cluster.name] = run.write(prepared[run.cluster.name])
            for ref in revoked.get(run.cluster.name, {}).get("deleted", []):
                record_deleted(results[run.cluster.name], ref)
            if whole_fleet:
                kubeconfigs[run.cluster.name] = self.written_kubeconfig(run, kubeconfigs.get(run.cluster.name))
        manager.fill_kubeconfigs(prepared[fleet.manager.name], kubeconfigs)
        results[fleet.manager.name] = manager.write(prepared[fleet.manager.name])
        if self.params.get("limit_tenants") is None:
            for run in workers:
                self.retire_long_lived_token(run, results[run.cluster.name])
        if plan.remove:
            # after the manager's MultiKueueConfig no longer lists them: MultiKueue lets go first, then they go
            self.remove_from_manager(manager, plan.remove, results[fleet.manager.name])
        for run in teardowns:
            results[run.cluster.name] = self.teardown(run)
        return self.result(model, results)

    # -- workers leaving the fleet (reconcile/fleet_workers.py decides) ---------------------------------
    def reach(self, fleet: t.Any) -> t.List[str]:
        """Probe every cluster; the workers this run skips (only with reachable_only, and never the manager)."""
        clusters: t.List[Cluster] = [fleet.manager] + list(fleet.workers) + list(fleet.retired)
        problems = self.unreachable(clusters)
        if not problems:
            return []
        names = {c.name: c for c in clusters}
        down = [p.split("'")[1] for p in problems]
        hint = ("check the cluster's gpuaas_clusters auth (kubeconfig, context, host, credentials) and that its API "
                "server is up, then run again; to converge the reachable clusters and skip the others, set "
                "gpuaas_fleet_reachable_only: true")
        if not self.params.get("reachable_only") or fleet.manager.name in down:
            if self.params.get("reachable_only"):
                hint = ("the manager must be reachable (every tenant's quota and the dispatch are there): check its "
                        "gpuaas_clusters auth and that its API server is up, then run again")
            raise GpuaasError(
                "%d cluster%s of the fleet cannot be reached; nothing was written on any cluster"
                % (len(problems), "" if len(problems) == 1 else "s"),
                hint=hint, problems=problems, details={"reason": "ClusterUnreachable"})
        self.warnings.append(
            "reachable_only: %d worker%s skipped, not written (left as they are, also their MultiKueueCluster and "
            "kubeconfig Secret on the manager): %s" % (len(down), "" if len(down) == 1 else "s", "; ".join(problems)))
        self.skipped_reasons = {n: p for n, p in zip(down, problems) if n in names}
        return down

    def removed_workers(self, fleet: t.Any, manager: "ClusterRun", retired: t.Sequence[Worker],
                        skipped: t.Sequence[str]) -> fleet_workers.WorkerPlan:
        """Read what decides the fate of the workers no longer present (their MultiKueueClusters and the workloads
        they hold) and decide (fleet_workers.plan_removed_workers); a worker holding workloads refuses the run."""
        selector = "%s,%s=%s" % (OWNED_SELECTOR, COMPONENT_LABEL, multikueue.COMPONENT_VALUE)
        try:
            live = [c["metadata"]["name"] for c in manager.client.resource(multikueue.KUEUE_V, "MultiKueueCluster")
                    .list(label_selector=selector)]
        except ApiException as exc:
            raise translate_api_exception(exc, "list", "the MultiKueueClusters on manager %r" % fleet.manager.name)
        present = [w.name for w in fleet.workers]
        removed = sorted((set(live) | {w.name for w in fleet.retired}) - set(present))
        holders: t.Dict[str, t.List[str]] = {}
        if removed and self.params.get("prune_workers"):
            try:
                on_manager = manager.client.resource(multikueue.KUEUE_V, "Workload").list()
            except ApiException as exc:
                raise translate_api_exception(exc, "list", "the Workloads on manager %r" % fleet.manager.name)
            for name in removed:
                holders[name] = fleet_workers.dispatched_to(on_manager, name)
            for worker in retired:
                holders[worker.name] = sorted(set(holders.get(worker.name, [])) | set(self.held_on(worker)))
        # an unreachable retired worker (reachable_only) is not removed: what it holds is unknown
        plan = fleet_workers.plan_removed_workers(
            [n for n in live if n not in skipped], present, [w.name for w in retired], holders,
            bool(self.params.get("prune_workers")))
        plan.keep.extend(n for n in live if n in skipped and n not in present)
        self.warnings.extend(plan.warnings)
        if plan.problems:
            raise GpuaasError("the fleet run stopped before writing on any cluster: %d worker%s to remove still "
                              "hold%s workloads" % (len(plan.problems), "" if len(plan.problems) == 1 else "s",
                                                    "s" if len(plan.problems) == 1 else ""),
                              hint=fleet_workers.REMOVAL_HINT, problems=plan.problems,
                              details={"reason": "WorkerNotDrained"})
        return plan

    def held_on(self, worker: Worker) -> t.List[str]:
        """The unfinished workloads on a retired worker (MultiKueue's copies, and any in the collection's queues)."""
        client = self.client_of(worker)
        try:
            queues = client.resource(multikueue.KUEUE_V, "LocalQueue").list(label_selector=OWNED_SELECTOR)
            workloads = client.resource(multikueue.KUEUE_V, "Workload").list()
        except ApiException as exc:
            raise translate_api_exception(exc, "list", "the queues and Workloads on worker %r" % worker.name)
        return fleet_workers.unfinished_on_worker(workloads, {q["metadata"]["namespace"] for q in queues})

    def remove_from_manager(self, manager: "ClusterRun", names: t.Sequence[str], out: t.Dict[str, t.Any]) -> None:
        """Delete the removed workers' MultiKueueCluster and kubeconfig Secret on the manager — only the collection's
        (its ownership label), never an object of the same name someone else made."""
        namespace = manager.cluster.kueue_namespace
        for name in names:
            for av, kind, obj_name, ns in ((multikueue.KUEUE_V, "MultiKueueCluster", name, None),
                                           ("v1", "Secret", multikueue.KUBECONFIG_SECRET_PREFIX + name, namespace)):
                self.delete_owned(manager.client, av, kind, obj_name, ns, out)

    def delete_owned(self, client: t.Any, av: str, kind: str, name: str, namespace: t.Optional[str],
                     out: t.Dict[str, t.Any], live: t.Optional[Obj] = None) -> None:
        resource = client.resource(av, kind)
        try:
            obj = live if live is not None else resource.get(name, namespace)
            if obj is None or not is_owned(obj):
                return
            resource.delete(name, namespace, dry_run=self.check_mode)
        except ApiException as exc:
            raise translate_api_exception(exc, "delete", "%s %s" % (kind, name))
        ref = {"kind": kind, "name": name}
        if namespace:
            ref["namespace"] = namespace
        record_deleted(out, ref)

    def teardown(self, run: "ClusterRun") -> t.Dict[str, t.Any]:
        """Delete the collection's objects on a drained retired worker (their ownership label; namespaces stay)."""
        out: t.Dict[str, t.Any] = {"changed": False, "summary": {"deleted": 0}, "deleted": [], "removed": True}
        worker = t.cast(Worker, run.cluster)
        for av, kind, namespace in fleet_workers.teardown_kinds(worker.kueue_namespace):
            if not run.client.served(av):
                continue
            try:
                items = run.client.resource(av, kind).list(namespace=namespace,
                                                           label_selector=fleet_workers.TEARDOWN_SELECTOR)
            except ApiException as exc:
                if exc.status == 404:  # the kind is not served there (a CRD of an optional component)
                    continue
                raise translate_api_exception(exc, "list", "the %ss on worker %r" % (kind, worker.name))
            run.run_lock.confirm("before deleting the %ss of retired worker %r" % (kind, worker.name))
            for obj in items:
                meta = obj["metadata"]
                self.delete_owned(run.client, av, kind, meta["name"], meta.get("namespace"), out, live=obj)
        return out

    # -- the result -------------------------------------------------------------------------------------
    def result(self, model: TenantModel, results: t.Mapping[str, t.Mapping[str, t.Any]]) -> t.Dict[str, t.Any]:
        """Per cluster (``clusters``) and summed: object references carry the cluster they are on."""
        out: t.Dict[str, t.Any] = {
            "changed": any(r.get("changed") for r in results.values()),
            "summary": {k: sum((r.get("summary") or {}).get(k, 0) for r in results.values())
                        for k in ("created", "updated", "unchanged", "deleted")},
            "clusters": {}, "created": [], "updated": [], "deleted": [], "adopted": [],
            "adopted_namespace_workloads": [], "recreated_local_queues": [], "kept_namespaces": [],
            "offboarded": sorted({x for r in results.values() for x in r.get("offboarded") or []}),
            "tenants": {x.name: list(x.namespaces) for x in model.present_tenants
                        if self.params.get("limit_tenants") is None or x.name in self.params["limit_tenants"]},
            "objects": sum(int(r.get("objects") or 0) for r in results.values()),
            "requests": {},
            "workers": {"removed": list(self.plan.remove), "kept": list(self.plan.keep),
                        "skipped": dict(self.skipped_reasons), "rotated": list(self.rotated)},
        }
        diffs: t.List[t.Dict[str, t.Any]] = []
        for name, res in results.items():
            for key in ("created", "updated", "deleted", "adopted", "adopted_namespace_workloads"):
                out[key].extend(dict(ref, cluster=name) for ref in res.get(key) or [])
            for key in ("recreated_local_queues", "kept_namespaces"):
                out[key].extend("%s:%s" % (name, x) for x in res.get(key) or [])
            for verb, count in (res.get("requests") or {}).items():
                out["requests"][verb] = out["requests"].get(verb, 0) + count
            for entry in res.get("diff") or []:
                entry = dict(entry)
                for header in ("before_header", "after_header"):
                    if header in entry:
                        entry[header] = "%s: %s" % (name, entry[header])
                diffs.append(entry)
            out["clusters"][name] = {k: v for k, v in res.items() if k != "diff"}
        manager = results.get(model.fleet.manager.name, {}) if model.fleet else {}
        out["api_versions"] = dict(manager.get("api_versions") or {})
        no_drift = {"prune": bool(self.params.get("prune")), "unmanaged_tenants": [], "skipped_writes": True,
                    "unmanaged_objects": []}
        out["drift"] = manager.get("drift") or no_drift
        if self.diff:
            redact_secret_data(diffs)
            out["diff"] = diffs
        return out
