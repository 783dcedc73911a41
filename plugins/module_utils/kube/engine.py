# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The apply engine: desired objects in, a reconciled cluster out.

* one server-side-apply field manager (``gpuaas.platform``), conflicts forced by default;
* live state read with one LIST per kind (label selector on the ownership label), never one GET
  per unchanged object; objects are compared on the fields this field manager owns
  (``metadata.managedFields``), so CRD defaulting and other controllers' fields never show as drift,
  and a field dropped from the desired state is detected (SSA would remove it);
* only differing objects are applied, in dependency order (Namespaces before queues before
  LocalQueues ...), with bounded concurrency inside each tier;
* check mode is a server-side dry run (``dryRun=All``): admission and validation run, nothing is written;
* ``barriers`` (kube/barrier.py) wait after a tier, e.g. until an admission policy is enforced before what it governs;
* per-object diffs of the owned fields (before = live, after = dry-run/apply result);
* with ``guard_ownership``, an existing object of a desired name that the collection does not own (no managed-by
  label, not written by its field manager) is never taken over silently: the run fails before its first write
  (also in check mode) listing each such object and its field managers, unless ``adopt`` names it (see
  kube/ownership.py); adopted objects are reported in ``ReconcileResult.adopted``;
* ownership labels on everything written; prune deletes only no-longer-desired objects carrying the managed-by
  label *and* the tenant label (or a PruneScope selector); optional waits for readiness; errors say how to fix them.
"""

from __future__ import annotations

import copy
import json
import time
import typing as t
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    ApiResource,
    ApiUnreachable,
    is_connection_error,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.barrier import Barrier, pass_barriers
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.compare import (
    is_subset,
    owned_fields,
    project_like,
    strip_none,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kinds import tier_of
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.owned_view import after_view, before_view, classify, with_identity
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.live import Key, GroupKind, LiveState, list_objects
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    FIELD_MANAGER,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    OWNED_SELECTOR,
    add_ownership,
    refuse_or_adopt,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.run_failures import raise_many, unreachable_error
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult, PruneScope, ReconcileResult
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.waiter import Waiter
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.drain import Drainer
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import (
    cohort_api_version,
    cohort_parent_field,
    convert_for_version,
    is_kueue,
    kueue_api_version,
)


# Above this many desired objects of one kind missing from the owned LIST: one unfiltered LIST, not a GET each.
GET_THRESHOLD = 16


class DesiredObject:
    __slots__ = ("obj", "ref", "res")

    def __init__(self, obj: t.Dict[str, t.Any], ref: ObjectRef, res: ApiResource) -> None:
        self.obj = obj
        self.ref = ref
        self.res = res


class ApplyEngine:
    """Reconcile desired objects with the cluster (see the module docstring)."""

    def __init__(self, client: t.Any, check_mode: bool = False, field_manager: str = FIELD_MANAGER,
                 concurrency: int = 8, force_conflicts: bool = True, guard_ownership: bool = False,
                 adopt: t.Sequence[str] = (), list_selector: t.Optional[str] = None) -> None:
        self.client = client
        # The label selector of the live-state LISTs (default: everything the collection owns). A caller whose
        # desired objects and prune scope are all of some tenants narrows it (tenants with limit_tenants), so a
        # run's LISTs cost what those tenants have, not what the cluster has; desired objects outside it are read
        # with GET as any object missing from the owned LIST is.
        self.list_selector = list_selector or OWNED_SELECTOR
        # Off by default: the single-object modules take over the one object the user names (as kubernetes.core
        # does); inventory-wide reconciles (tenants) turn it on, because there a name can collide by accident.
        self.guard_ownership = guard_ownership
        self.adopt = list(adopt)
        self.check_mode = check_mode
        self.field_manager = field_manager
        self.concurrency = max(1, int(concurrency))
        self.force_conflicts = force_conflicts
        self._kueue_version: t.Optional[str] = None
        self._cohort_parent: str = "parentName"
        self._cohort_version: str = "v1beta2"
        # Keys (kind, namespace, name) deleted earlier in this run in check mode: treated as absent, and their
        # re-creation is reported without a dry run (the server would still see the old object).
        self.assume_deleted: t.Set[t.Tuple[str, str, str]] = set()
        # The first connection-class failure (API server unreachable after the client's retries): no further
        # request is scheduled once it is set, and the run ends with one message (see unreachable_error).
        self.unreachable: t.Optional[GpuaasError] = None
        # Called before each apply tier and before prune; raises when the run may no longer write (the tenants
        # runner: does it still hold its Lease, kube/lease.py?), so a lock lost midway stops the next write.
        self.confirm_lock: t.Optional[t.Callable[[str], None]] = None
        self.barriers: t.List[Barrier] = []  # waits between apply tiers (kube/barrier.py)

    # -- preparation ----------------------------------------------------------------------------------
    def kueue_version(self) -> str:
        if self._kueue_version is None:
            self._kueue_version = kueue_api_version(self.client)
            self._cohort_version = cohort_api_version(self.client, self._kueue_version)
            self._cohort_parent = cohort_parent_field(self.client, self._kueue_version)
        return self._kueue_version

    def convert_kueue(self, obj: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
        """``obj`` (v1beta2 shape) converted for the Kueue API the cluster serves."""
        version = self.kueue_version()
        if obj.get("kind") == "Cohort":
            version = self._cohort_version
        return convert_for_version(obj, version, self._cohort_parent)

    def prepare(self, obj: t.Mapping[str, t.Any], tenant: t.Optional[str] = None) -> DesiredObject:
        """Validate, convert (Kueue version) and label one desired object."""
        if not isinstance(obj, dict):
            raise GpuaasError("desired object %r is not a mapping" % (obj,),
                              hint="pass Kubernetes objects as dicts with apiVersion, kind and metadata.name")
        obj = strip_none(obj)  # builds new dicts and lists: the caller's object is not modified
        meta = obj.get("metadata") or {}
        if not obj.get("apiVersion") or not obj.get("kind") or not meta.get("name"):
            raise GpuaasError("desired object is missing apiVersion, kind or metadata.name: %s"
                              % json.dumps(obj, default=str)[:300],
                              hint="every object needs apiVersion, kind and metadata.name")
        if is_kueue(obj):
            obj = self.convert_kueue(obj)
        res = self.client.resource(obj["apiVersion"], obj["kind"])
        meta = obj.setdefault("metadata", {})
        if res.namespaced and not meta.get("namespace"):
            raise GpuaasError("%s %s is namespaced but has no metadata.namespace" % (obj["kind"], meta["name"]),
                              hint="set the namespace of the object")
        if not res.namespaced:
            meta.pop("namespace", None)
        add_ownership(meta.setdefault("labels", {}), tenant)
        for drop in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            meta.pop(drop, None)
        obj.pop("status", None)
        return DesiredObject(obj, ObjectRef.from_object(obj), res)

    # -- helpers --------------------------------------------------------------------------------------
    def _pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=self.concurrency)

    def _live_index(self, groups: t.Dict[GroupKind, t.List[DesiredObject]], prune: t.Optional[PruneScope],
                    result: ReconcileResult, also: t.Sequence[GroupKind] = ()
                    ) -> t.Tuple[t.Dict[Key, t.Dict[str, t.Any]], t.Dict[GroupKind, t.List[t.Dict[str, t.Any]]],
                                 t.List[GroupKind]]:
        """LIST the live state: {ref.key: live} for desired objects, the items of every LISTed kind, the prune kinds."""
        # (apiVersion, kind) -> (resource, namespaces to LIST or None for all, pinned to those namespaces)
        tasks: t.Dict[t.Tuple[str, str], t.Tuple[ApiResource, t.Optional[t.Set[str]], bool]] = {}
        for gk, items in groups.items():
            res = items[0].res
            nss: t.Optional[t.Set[str]] = {d.ref.namespace or "" for d in items} if res.namespaced else None
            tasks[gk] = (res, nss, False)
        prune_kinds: t.Set[t.Tuple[str, str]] = set()
        if prune is not None:
            for av, kind in prune.kinds:
                if av.startswith("kueue.x-k8s.io/"):
                    av = self.convert_kueue({"apiVersion": av, "kind": kind, "metadata": {}})["apiVersion"]
                res = self.client.resource(av, kind)
                gk = (res.api_version, res.kind)
                prune_kinds.add(gk)
                scope_nss = prune.namespaces_of(res.kind)
                pinned = res.namespaced and prune.pinned(res.kind)
                nss = set(scope_nss) if (res.namespaced and scope_nss is not None) else None
                if gk in tasks:
                    old = tasks[gk][1]
                    nss = None if (old is None or nss is None) else (old | nss)
                tasks[gk] = (res, nss, pinned)
        for av, kind in also:
            res = self.client.resource(av, kind)
            gk = (res.api_version, res.kind)
            if gk not in tasks:
                tasks[gk] = (res, None, False)
            elif res.namespaced and not tasks[gk][2]:
                tasks[gk] = (res, None, False)
        selector = self.list_selector
        live: t.Dict[Key, t.Dict[str, t.Any]] = {}
        with self._pool() as pool:
            futures = {gk: pool.submit(list_objects, res, nss, selector, result, pinned)
                       for gk, (res, nss, pinned) in tasks.items()}
            listed = {gk: f.result() for gk, f in futures.items()}
        for gk, items in listed.items():
            for item in items:
                live[ObjectRef.from_object(item).key] = item
        # Desired objects not in the owned LIST: new, or existing without our label.
        missing: t.List[DesiredObject] = []
        for gk, items in groups.items():
            miss = [d for d in items if d.ref.key not in live]
            if len(miss) > GET_THRESHOLD:
                res = items[0].res
                nss = {d.ref.namespace or "" for d in miss} if res.namespaced else None
                pinned = prune is not None and prune.pinned(res.kind)
                for item in list_objects(res, nss, None, result, pinned):
                    live.setdefault(ObjectRef.from_object(item).key, item)
            else:
                missing.extend(miss)

        def get(d: DesiredObject) -> t.Tuple[DesiredObject, t.Optional[t.Dict[str, t.Any]]]:
            result.requests["get"] += 1
            try:
                return d, d.res.get(d.ref.name, d.ref.namespace)
            except ApiException as exc:
                raise translate_api_exception(exc, "read", str(d.ref))

        if missing:
            with self._pool() as pool:
                for d, obj in pool.map(get, missing):
                    if obj is not None:
                        obj.setdefault("apiVersion", d.res.api_version)
                        obj.setdefault("kind", d.res.kind)
                        live[d.ref.key] = obj
        return live, listed, sorted(prune_kinds)

    def compare(self, desired: t.Mapping[str, t.Any], live: t.Optional[t.Mapping[str, t.Any]]) -> str:
        """'created', 'updated' or 'unchanged' for ``desired`` against ``live`` (owned fields only)."""
        return classify(desired, live, self.field_manager)

    def before_view(self, live: t.Optional[t.Mapping[str, t.Any]]) -> t.Dict[str, t.Any]:
        return before_view(live, self.field_manager)

    def after_view(self, obj: t.Mapping[str, t.Any], fallback: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
        return after_view(obj, fallback, self.field_manager)

    def _prepare_all(self, desired: t.Iterable[t.Mapping[str, t.Any]], tenant: t.Optional[str]
                     ) -> t.Tuple[t.List[DesiredObject], t.Dict[t.Tuple[str, str], t.List[DesiredObject]]]:
        """Prepare every desired object (refusing duplicates) and group them per (apiVersion, kind)."""
        prepared: t.List[DesiredObject] = []
        seen: t.Set[t.Tuple[str, str, str]] = set()
        for obj in desired:
            d = self.prepare(obj, tenant)
            if d.ref.key in seen:
                raise GpuaasError("%s is desired twice" % d.ref,
                                  hint="object names must be unique per kind and namespace; check the inventory "
                                       "for duplicate names")
            seen.add(d.ref.key)
            prepared.append(d)
        groups: t.Dict[t.Tuple[str, str], t.List[DesiredObject]] = {}
        for d in prepared:
            groups.setdefault((d.res.api_version, d.res.kind), []).append(d)
        return prepared, groups

    # -- ownership guard ------------------------------------------------------------------------------
    def check_ownership(self, desired: t.Iterable[t.Mapping[str, t.Any]], tenant: t.Optional[str] = None
                        ) -> t.List[t.Dict[str, t.Any]]:
        """Read-only preflight of the ownership guard: the objects ``reconcile`` would adopt, or the refusal.

        For callers that write something of their own before ``reconcile`` (a lock, a drain): calling this first
        makes a refused run write nothing at all. ``reconcile`` checks again on its own live index.
        """
        return self.guard(self.read(desired, tenant=tenant))

    def read(self, desired: t.Iterable[t.Mapping[str, t.Any]], prune: t.Optional[PruneScope] = None,
             tenant: t.Optional[str] = None, also: t.Sequence[GroupKind] = ()) -> LiveState:
        """Prepare ``desired`` and read the live state once: what ``guard`` and ``reconcile(state=...)`` work on.

        ``also``: kinds the caller needs listed (cluster-wide, with the engine's selector) besides the desired and
        prune kinds, for its own decisions on the same read (the tenants runner: ClusterQueues, Namespaces).
        """
        prepared, groups = self._prepare_all(desired, tenant)
        counter = ReconcileResult(self.check_mode)
        live, listed, prune_kinds = self._live_index(groups, prune, counter, also)
        return LiveState(prepared, groups, live, listed, prune_kinds, counter.requests)

    def guard(self, state: LiveState) -> t.List[t.Dict[str, t.Any]]:
        """The ownership guard on a read state: the objects a reconcile would adopt, or the refusal (a GpuaasError)."""
        return self._guard(state.prepared, state.objects)

    def _guard(self, prepared: t.Sequence[DesiredObject], live: t.Mapping[Key, t.Dict[str, t.Any]]
               ) -> t.List[t.Dict[str, t.Any]]:
        """Adopted objects (reported), or a GpuaasError naming every object the collection does not own."""
        return refuse_or_adopt([(d.ref, d.obj) for d in prepared], live, self.adopt, self.assume_deleted,
                               self.field_manager)

    # -- reconcile ------------------------------------------------------------------------------------
    def reconcile(self, desired: t.Iterable[t.Mapping[str, t.Any]], prune: t.Optional[PruneScope] = None,
                  tenant: t.Optional[str] = None, wait: bool = False, wait_timeout: int = 120,
                  wait_sleep: float = 2.0, wait_condition: t.Optional[t.Mapping[str, t.Any]] = None,
                  state: t.Optional[LiveState] = None) -> ReconcileResult:
        """Make the cluster match ``desired`` (and delete owned, undesired objects in ``prune`` scope). ``state``: the
        ``read`` of these desired objects and prune scope when the caller has it (its requests are counted here)."""
        result = ReconcileResult(self.check_mode)
        if state is None:
            state = self.read(desired, prune, tenant)
        for verb, count in state.requests.items():
            result.requests[verb] = result.requests.get(verb, 0) + count
        prepared, live = state.prepared, state.objects
        candidates = state.candidates(prune) if prune is not None else {}
        seen = {d.ref.key: d.ref for d in prepared}
        if self._kueue_version:
            result.api_versions["kueue.x-k8s.io"] = self._kueue_version
        if self.guard_ownership:
            result.adopted = self._guard(prepared, live)

        # Check mode reports without a dry run the content of new namespaces and what barriers name (judged_late).
        new_namespaces = {d.ref.name for d in prepared if d.ref.kind == "Namespace" and d.ref.key not in live}
        simulated: t.Set[Key] = {d.ref.key for d in prepared if d.ref.namespace and d.ref.namespace in new_namespaces}

        todo: t.Dict[int, t.List[t.Tuple[DesiredObject, str, t.Optional[t.Dict[str, t.Any]]]]] = {}
        for d in prepared:
            current = None if d.ref.key in self.assume_deleted else live.get(d.ref.key)
            action = self.compare(d.obj, current)
            if action == "unchanged":
                result.add(ObjectResult(d.ref, "unchanged", obj=current))
            else:
                todo.setdefault(tier_of(d.ref.kind), []).append((d, action, current))

        errors: t.List[GpuaasError] = []
        skipped: t.List[ObjectRef] = []
        for tier in sorted(todo):
            self._confirm_lock(result, "before applying %s" % self._changes(todo[tier]))
            with self._pool() as pool:
                outcomes = list(pool.map(lambda item: self._apply_one(item, simulated, result), todo[tier]))
            for item, outcome in zip(todo[tier], outcomes):
                if outcome is None:
                    skipped.append(item[0].ref)
                elif isinstance(outcome, GpuaasError):
                    errors.append(outcome)
                else:
                    result.add(outcome)
            if errors or self.unreachable is not None:
                for later in sorted(todo):
                    if later > tier:
                        skipped.extend(d.ref for d, _a, _c in todo[later])
                break
            simulated.update(pass_barriers(self.barriers, tier, todo, result, self.check_mode))
        if self.unreachable is not None:
            raise self.unreachable_error(result, pending=skipped + [e.details.get("ref") for e in errors
                                                                    if e.details.get("ref")])
        if errors:
            raise_many(errors, "apply", result)

        if prune is not None:
            doomed = []
            for gk, items in candidates.items():
                for item in items:
                    ref = ObjectRef.from_object(item)
                    if ref.key not in seen:
                        doomed.append((item, self.client.resource(*gk)))
            if doomed:
                self._confirm_lock(result, "before pruning %d object%s" % (len(doomed), "" if len(doomed) == 1 else "s"))
            self._delete_objects(doomed, result, propagation_policy="Background")

        if wait and not self.check_mode:
            self.wait_ready([r for r in result.results if r.action != "deleted"], wait_condition, wait_timeout, wait_sleep, result)
        return result

    def _confirm_lock(self, result: ReconcileResult, before: str) -> None:
        """The ``confirm_lock`` hook (when set); its refusal carries what this reconcile wrote up to here."""
        if self.confirm_lock is None or self.check_mode:
            return
        try:
            self.confirm_lock(before)
        except GpuaasError as err:
            err.details.setdefault("partial_result", result.to_module_result())
            raise

    @staticmethod
    def _changes(items: t.Sequence[t.Tuple[DesiredObject, str, t.Any]]) -> str:
        """'2 changes (Namespace, RoleBinding)': what one apply tier is about to write, for a message."""
        return "%d change%s (%s)" % (len(items), "" if len(items) == 1 else "s",
                                     ", ".join(sorted({d.ref.kind for d, _action, _current in items})))

    def _apply_one(self, item: t.Tuple[DesiredObject, str, t.Optional[t.Dict[str, t.Any]]], simulated: t.Set[Key],
                   result: ReconcileResult) -> t.Any:
        d, action, current = item
        if self.unreachable is not None:
            return None  # the API server is gone: do not schedule more requests
        if self.check_mode and (d.ref.key in simulated or d.ref.key in self.assume_deleted):
            return ObjectResult(d.ref, action, self.before_view(current), with_identity(
                copy.deepcopy(d.obj), d.obj), obj=d.obj, simulated=True)
        result.requests["apply"] += 1
        try:
            applied = d.res.apply(d.obj, self.field_manager, force=self.force_conflicts, dry_run=self.check_mode)
        except ApiException as exc:
            return translate_api_exception(exc, "dry-run apply" if self.check_mode else "apply", str(d.ref))
        except ApiUnreachable as exc:
            self.unreachable = self.unreachable or exc
            exc.details["ref"] = str(d.ref)
            return exc
        except GpuaasError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - connection problems: name the object
            if is_connection_error(exc):
                self.unreachable = self.unreachable or ApiUnreachable(
                    "the Kubernetes API server is unreachable: %s" % exc,
                    hint="check that the API server is up, then re-run")
                return GpuaasError(str(exc), details={"ref": str(d.ref)})
            return GpuaasError("apply %s failed: %s" % (d.ref, exc),
                               hint="check the connection to the API server and re-run")
        applied.setdefault("apiVersion", d.res.api_version)
        applied.setdefault("kind", d.res.kind)
        before = self.before_view(current)
        after = self.after_view(applied, d.obj)
        if action == "updated" and current is not None and before == after:
            # Only ownership/managedFields bookkeeping changed (e.g. first apply over an identical object).
            action = "updated" if owned_fields(current, self.field_manager) is None else "unchanged"
        return ObjectResult(d.ref, action, before, after, obj=applied)

    def unreachable_error(self, result: ReconcileResult, pending: t.Sequence[t.Any] = (),
                          stage: str = "apply") -> ApiUnreachable:
        """One message for a run cut short by an unreachable API server (kube/run_failures.py)."""
        return unreachable_error(self.unreachable, result, self.check_mode, pending, stage)

    # -- delete ---------------------------------------------------------------------------------------
    def delete(self, refs: t.Iterable[t.Any], propagation_policy: str = "Background", wait: bool = False,
               wait_timeout: int = 120, wait_sleep: float = 2.0, only_owned: bool = False) -> ReconcileResult:
        """Delete objects (ObjectRef or object dicts), dependents first; absent objects are not changes."""
        result = ReconcileResult(self.check_mode)
        resolved: t.List[t.Tuple[ObjectRef, ApiResource]] = []
        for ref in refs:
            if isinstance(ref, dict):
                obj = ref
                if is_kueue(obj):
                    obj = self.convert_kueue(obj)
                ref = ObjectRef.from_object(obj)
            elif isinstance(ref, ObjectRef) and ref.api_version.startswith("kueue.x-k8s.io/"):
                ref = ObjectRef.from_object(self.convert_kueue(
                    {"apiVersion": ref.api_version, "kind": ref.kind,
                     "metadata": {"name": ref.name, "namespace": ref.namespace}}))
            resolved.append((ref, self.client.resource(ref.api_version, ref.kind)))

        def read(item: t.Tuple[ObjectRef, ApiResource]) -> t.Any:
            ref, res = item
            result.requests["get"] += 1
            try:
                return res.get(ref.name, ref.namespace if res.namespaced else None)
            except ApiException as exc:
                return translate_api_exception(exc, "read", str(ref))

        with self._pool() as pool:
            lives = list(pool.map(read, resolved))
        targets: t.List[t.Tuple[t.Dict[str, t.Any], ApiResource]] = []
        for (ref, res), live in zip(resolved, lives):
            if isinstance(live, GpuaasError):
                raise live
            if live is None:
                continue
            live.setdefault("apiVersion", res.api_version)
            live.setdefault("kind", res.kind)
            labels = (live.get("metadata") or {}).get("labels") or {}
            if only_owned and labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
                raise GpuaasError("%s is not managed by gpuaas.platform (label %s=%s missing); refusing to delete it"
                                  % (ref, MANAGED_BY_LABEL, MANAGED_BY_VALUE),
                                  hint="delete it with kubectl if it really should go")
            targets.append((live, res))
        if self._kueue_version:
            result.api_versions["kueue.x-k8s.io"] = self._kueue_version
        self._delete_objects(targets, result, propagation_policy)
        if wait and not self.check_mode:
            self.wait_gone([r for r in result.results if r.action == "deleted"], wait_timeout, wait_sleep)
        return result

    def _delete_objects(self, targets: t.List[t.Tuple[t.Dict[str, t.Any], ApiResource]], result: ReconcileResult,
                        propagation_policy: str) -> None:
        by_tier: t.Dict[int, t.List[t.Tuple[t.Dict[str, t.Any], ApiResource]]] = {}
        for live, res in targets:
            by_tier.setdefault(tier_of(res.kind), []).append((live, res))

        def one(item: t.Tuple[t.Dict[str, t.Any], ApiResource]) -> t.Any:
            live, res = item
            ref = ObjectRef.from_object(live)
            if self.unreachable is not None:
                return None
            result.requests["delete"] += 1
            try:
                res.delete(ref.name, ref.namespace if res.namespaced else None, propagation_policy=propagation_policy,
                           dry_run=self.check_mode)
            except ApiException as exc:
                return translate_api_exception(exc, "dry-run delete" if self.check_mode else "delete", str(ref))
            except ApiUnreachable as exc:
                self.unreachable = self.unreachable or exc
                exc.details["ref"] = str(ref)
                return exc
            return ObjectResult(ref, "deleted", self.before_view(live), None, obj=live)

        errors: t.List[GpuaasError] = []
        skipped: t.List[ObjectRef] = []
        for tier in sorted(by_tier, reverse=True):
            with self._pool() as pool:
                for item, outcome in zip(by_tier[tier], pool.map(one, by_tier[tier])):
                    if outcome is None:
                        skipped.append(ObjectRef.from_object(item[0]))
                    elif isinstance(outcome, GpuaasError):
                        errors.append(outcome)
                    else:
                        result.add(outcome)
            if self.unreachable is not None:
                rest = [ObjectRef.from_object(lv) for tr in sorted(by_tier, reverse=True) if tr < tier
                        for lv, _r in by_tier[tr]]
                raise self.unreachable_error(result, skipped + rest + [e.details.get("ref") for e in errors],
                                             stage="delete")
            if errors:
                raise_many(errors, "delete", result)

    # -- fields of objects the collection does not own ----------------------------------------------------
    def apply_fields(self, partial: t.Mapping[str, t.Any], live: t.Mapping[str, t.Any],
                     absent: t.Sequence[t.Sequence[str]] = ()) -> ObjectResult:
        """Server-side apply some fields of a live object that someone else owns (a tenant's RayCluster scaled by
        ray_idle_reclaim): no ownership labels are added (prune never sees it), nothing is applied when ``live``
        already has those values (idempotent), a dry run in check mode; the diff shows the applied fields only.

        ``absent``: paths (e.g. ``("metadata", "annotations", "kubeflow-resource-stopped")``) this field manager
        applied before and now leaves out of ``partial``, so that server-side apply removes them. Their presence in
        ``live`` counts as a change; one still there after the apply is co-owned by another manager (apply removes
        only fields no one else owns) and fails the call with a hint, instead of reporting a change that did not
        happen."""
        body = strip_none(dict(partial))
        ref = ObjectRef.from_object(body)
        before = with_identity(project_like(live, body), live)
        present = [tuple(p) for p in absent if _path_value(live, p) is not _MISSING]
        for path in present:
            _set_path(before, path, _path_value(live, path))
        if is_subset(body, live, None) and not present:
            return ObjectResult(ref, "unchanged", before, before, obj=dict(live))
        res = self.client.resource(body["apiVersion"], body["kind"])
        try:
            applied = res.apply(body, self.field_manager, force=self.force_conflicts, dry_run=self.check_mode)
        except ApiException as exc:
            raise translate_api_exception(exc, "dry-run apply" if self.check_mode else "apply", str(ref))
        kept = [p for p in present if _path_value(applied, p) is not _MISSING]
        if kept:
            raise GpuaasError("%s: %s stayed after the apply: another field manager owns it too, so server-side apply "
                              "by %s cannot remove it" % (ref, ", ".join(".".join(p) for p in kept), self.field_manager),
                              hint="remove it by hand (kubectl annotate/patch), or have the other manager give it up")
        return ObjectResult(ref, "updated", before, with_identity(project_like(applied, body), applied), obj=applied)

    # -- waits (kube/waiter.py) -------------------------------------------------------------------------
    def wait_ready(self, results: t.Sequence[ObjectResult], condition: t.Optional[t.Mapping[str, t.Any]] = None,
                   timeout: float = 120, sleep: float = 2.0, result: t.Optional[ReconcileResult] = None) -> None:
        """Wait until every object meets ``condition`` (default: its kind's readiness condition)."""
        Waiter(self.client).wait_ready(results, condition, timeout, sleep, result)

    def wait_gone(self, results: t.Sequence[ObjectResult], timeout: float = 120, sleep: float = 2.0) -> None:
        """Wait until deleted objects are really gone (finalizers done)."""
        Waiter(self.client).wait_gone(results, timeout, sleep)

    # -- drain and recreate (kube/drain.py) -------------------------------------------------------------
    def drain(self, api_version: str, kind: str, live: t.Sequence[t.Mapping[str, t.Any]], timeout: float,
              sleep: t.Callable[[float], None] = time.sleep, clock: t.Callable[[], float] = time.monotonic) -> None:
        """Drain listed objects before removal (kinds.DRAIN_SPECS) and wait until they hold no work."""
        Drainer(self.client, self.check_mode, sleep, clock).drain(api_version, kind, live, timeout)

    def undrain(self, api_version: str, kind: str, live: t.Sequence[t.Mapping[str, t.Any]]) -> None:
        """Release a drain left by an unfinished removal."""
        Drainer(self.client, self.check_mode).undrain(api_version, kind, live)

    def recreate(self, refs: t.Sequence[ObjectRef], wait_timeout: int = 60) -> ReconcileResult:
        """Delete objects whose immutable fields must change, so the next reconcile creates them anew.

        In check mode the delete is a dry run and the next reconcile reports the create without sending it
        (a dry-run create over an object that still exists would fail).
        """
        result = self.delete(refs, wait=not self.check_mode, wait_timeout=wait_timeout)
        if self.check_mode:
            self.assume_deleted.update(r.key for r in refs)
        return result


_MISSING = object()


def _path_value(obj: t.Any, path: t.Sequence[str]) -> t.Any:
    """The value at ``path`` in nested mappings, ``_MISSING`` when a step is absent."""
    for step in path:
        if not isinstance(obj, t.Mapping) or step not in obj:
            return _MISSING
        obj = obj[step]
    return obj


def _set_path(obj: t.Dict[str, t.Any], path: t.Sequence[str], value: t.Any) -> None:
    for step in path[:-1]:
        obj = obj.setdefault(step, {})
    obj[path[-1]] = value
