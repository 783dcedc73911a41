# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The run of ``gpuaas.platform.ray_idle_reclaim``: inventory → opted-in RayClusters and Notebooks → idle/wake
decisions → the apply engine (server-side apply of the few fields each kind's adapter names, nothing else).

Order: parse the inventory (every error at once), read every opted-in object, check them all against the live
objects (every problem of every kind at once; nothing written when there is one), then per object read its GPU pods
and their utilization and apply what its kind's decision says.

One runner, one small adapter per kind (``ADAPTERS``): which pods hold the GPUs, the live checks, the decision and
the partial object to apply. RayCluster (``manifests/ray_reclaim.py``): the GPU worker groups' replicas go to 0 and
back. Notebook (``manifests/notebook_reclaim.py``): the notebook controller's stop annotation is set and removed
(its controller owns the StatefulSet's replicas, so nothing else can stop it).
"""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.autoscaling import NOTEBOOK_KIND, RAY_CLUSTER_KIND
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Autoscaling
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import notebook_reclaim, ray_reclaim
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import vector_samples
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.promql import gpu_util_by_pod_query

Obj = t.Mapping[str, t.Any]
Entries = t.Sequence[t.Tuple[str, Autoscaling]]
Live = t.Mapping[t.Tuple[str, str], t.Optional[Obj]]
Patch = t.Tuple[t.Dict[str, t.Any], t.Sequence[t.Sequence[str]]]


class RayClusterAdapter:
    """RayCluster: the chosen GPU worker groups' pods; reclaim/wake move their replicas (manifests/ray_reclaim.py)."""
    kind = RAY_CLUSTER_KIND

    @staticmethod
    def resolve(entries: Entries, live: Live, scrape_interval: int
                ) -> t.Tuple[t.List[ray_reclaim.Target], t.List[str], t.List[str]]:
        return ray_reclaim.resolve_targets(entries, live, scrape_interval)

    @staticmethod
    def pod_selector(name: str) -> str:
        return "%s=%s,%s=worker" % (ray_reclaim.CLUSTER_LABEL, name, ray_reclaim.NODE_TYPE_LABEL)

    @staticmethod
    def gpu_pods(target: ray_reclaim.Target, pods: t.Sequence[Obj]) -> t.List[Obj]:
        return [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(ray_reclaim.GROUP_LABEL)
                in target.groups]

    @staticmethod
    def decide(target: ray_reclaim.Target, obj: Obj, pods: t.Sequence[Obj], util: t.Mapping[str, float],
               now: float) -> ray_reclaim.Decision:
        return ray_reclaim.decide(target, obj, pods, util, now)

    @staticmethod
    def patch(decision: ray_reclaim.Decision, obj: Obj, now: float) -> Patch:
        build = ray_reclaim.reclaim_patch if decision.action == "reclaim" else ray_reclaim.wake_patch
        return build(obj, decision, now), ()


class NotebookAdapter:
    """Notebook: the workbench's pods (label notebook-name); reclaim/wake set and remove the controller's stop
    annotation (manifests/notebook_reclaim.py)."""
    kind = NOTEBOOK_KIND

    @staticmethod
    def resolve(entries: Entries, live: Live, scrape_interval: int
                ) -> t.Tuple[t.List[ray_reclaim.Target], t.List[str], t.List[str]]:
        return notebook_reclaim.resolve_targets(entries, live, scrape_interval)

    @staticmethod
    def pod_selector(name: str) -> str:
        return "%s=%s" % (notebook_reclaim.NOTEBOOK_NAME_LABEL, name)

    @staticmethod
    def gpu_pods(target: ray_reclaim.Target, pods: t.Sequence[Obj]) -> t.List[Obj]:  # pylint: disable=unused-argument
        return list(pods)

    @staticmethod
    def decide(target: ray_reclaim.Target, obj: Obj, pods: t.Sequence[Obj], util: t.Mapping[str, float],
               now: float) -> ray_reclaim.Decision:
        return notebook_reclaim.decide(target, obj, pods, util, now)

    @staticmethod
    def patch(decision: ray_reclaim.Decision, obj: Obj, now: float) -> Patch:
        if decision.action == "reclaim":
            return notebook_reclaim.stop_patch(obj, now), ()
        return notebook_reclaim.start_patch(obj, now)


ADAPTERS: t.Dict[str, t.Any] = {a.kind: a for a in (RayClusterAdapter, NotebookAdapter)}


def opted_in(model: TenantModel, tenants: t.Optional[t.Sequence[str]] = None) -> t.List[t.Tuple[str, Autoscaling]]:
    """``(tenant, entry)`` of every RayCluster and Notebook entry of the present tenants (only ``tenants`` when given)."""
    return [(tenant.name, entry) for tenant in model.present_tenants
            if not tenants or tenant.name in tenants for entry in tenant.ray_reclaim]


class RayReclaimRun:
    """One pass over the opted-in RayClusters and Notebooks. ``prometheus``: an object with ``query(promql)``
    (observe.prometheus)."""

    def __init__(self, client: t.Any, prometheus: t.Any, engine: ApplyEngine, scrape_interval: int,
                 clock: t.Callable[[], float] = time.time) -> None:
        self.client = client
        self.prometheus = prometheus
        self.engine = engine
        self.scrape_interval = scrape_interval
        self.clock = clock

    def _get(self, api_version: str, kind: str, what: str, **kwargs: t.Any) -> t.Any:
        res = self.client.resource(api_version, kind)
        try:
            return res.get(**kwargs) if "name" in kwargs else res.list(**kwargs)
        except ApiException as exc:
            raise translate_api_exception(exc, "read", what)

    def read_targets(self, entries: Entries) -> t.Dict[str, t.Dict[t.Tuple[str, str], t.Optional[t.Dict[str, t.Any]]]]:
        """Every opted-in object, per kind, by (namespace, name)."""
        out: t.Dict[str, t.Dict[t.Tuple[str, str], t.Optional[t.Dict[str, t.Any]]]] = {}
        for _tenant, entry in entries:
            out.setdefault(entry.target_kind, {})[(entry.namespace, entry.target_name)] = self._get(
                entry.target_api_version, entry.target_kind,
                "%s %s/%s" % (entry.target_kind, entry.namespace, entry.target_name),
                name=entry.target_name, namespace=entry.namespace)
        return out

    def utilization(self, namespace: str, pods: t.Sequence[str], window: int) -> t.Dict[str, float]:
        if not pods:
            return {}
        answer = self.prometheus.query(gpu_util_by_pod_query(namespace, pods, window))
        wanted = set(pods)
        return {labels["pod"]: value for labels, _ts, value in vector_samples(answer["result"])
                if labels.get("pod") in wanted}

    def resolve(self, entries: Entries, live: t.Mapping[str, Live]) -> t.Tuple[t.List[ray_reclaim.Target], t.List[str]]:
        """Every entry checked against its live object, per kind; every problem of every kind raised at once."""
        targets: t.List[ray_reclaim.Target] = []
        problems: t.List[str] = []
        warnings: t.List[str] = []
        for kind, adapter in ADAPTERS.items():
            mine = [(tenant, e) for tenant, e in entries if e.target_kind == kind]
            if mine:
                found, wrong, warned = adapter.resolve(mine, live.get(kind, {}), self.scrape_interval)
                targets.extend(found)
                problems.extend(wrong)
                warnings.extend(warned)
        if problems:
            raise ValidationError(
                "%d idle-reclaim entr%s cannot be used; nothing was changed"
                % (len(problems), "y" if len(problems) == 1 else "ies"),
                hint="fix each listed entry in gpuaas_tenants[].autoscaling or its object (docs/autoscaling.md, "
                     "RayCluster and Notebooks)",
                problems=problems)
        order = {id(entry): i for i, (_tenant, entry) in enumerate(entries)}
        return sorted(targets, key=lambda tg: order.get(id(tg.entry), 0)), warnings

    def run(self, entries: Entries, diff: bool = False) -> t.Dict[str, t.Any]:
        live = self.read_targets(entries)
        targets, warnings = self.resolve(entries, live)
        results: t.List[t.Dict[str, t.Any]] = []
        diffs: t.List[t.Dict[str, t.Any]] = []
        for target in targets:
            kind = target.entry.target_kind
            adapter = ADAPTERS[kind]
            namespace, name = target.key
            obj = live[kind][target.key] or {}
            pods = self._get("v1", "Pod", "pods of %s %s/%s" % (kind, namespace, name), namespace=namespace,
                             label_selector=adapter.pod_selector(name))
            gpu_pods = adapter.gpu_pods(target, pods)
            now = self.clock()
            util = self.utilization(namespace, [p["metadata"]["name"] for p in gpu_pods],
                                    target.entry.idle_window_seconds or 0)
            decision = adapter.decide(target, obj, gpu_pods, util, now)
            row = {"tenant": target.tenant, "kind": kind, "namespace": namespace, "name": name,
                   "groups": target.groups, "action": decision.action, "reason": decision.reason,
                   "replicas": decision.groups, "changed": False}
            if decision.action in ("reclaim", "wake"):
                partial, absent = adapter.patch(decision, obj, now)
                outcome = self.engine.apply_fields(partial, obj, absent=absent)
                row["changed"] = outcome.changed
                if diff and outcome.changed:
                    diffs.append(outcome.diff())
            results.append(row)
        out: t.Dict[str, t.Any] = {"changed": any(r["changed"] for r in results), "clusters": results,
                                   "warnings": warnings}
        if diff:
            out["diff"] = diffs
        return out

    def watch(self, entries: t.Sequence[t.Tuple[str, Autoscaling]], seconds: float, interval: float,
              diff: bool = False, sleep: t.Callable[[float], None] = time.sleep,
              monotonic: t.Callable[[], float] = time.monotonic) -> t.Dict[str, t.Any]:
        """A first pass, then one more every ``interval`` seconds until ``seconds`` have passed since the start.

        Why: a scheduled run acts on a wake only when it starts, so a tenant's wake waits up to the schedule period
        (AWX: one minute at least). A run that keeps watching for most of its period acts on a wake within
        ``interval``. Each pass is a whole pass (idle reclaim included, cooldowns respected). A problem in the first
        pass fails the run as ``run`` does; one in a later pass (a cluster deleted meanwhile) ends the watch with a
        warning, what was done stays done. ``clusters`` keeps each cluster's last change (else its last row), ``changes``
        every change in order (a wake, then a reclaim once the cooldown is over, are both there)."""
        start = monotonic()
        out = self.run(entries, diff=diff)
        rows = {(r["kind"], r["namespace"], r["name"]): r for r in out["clusters"]}
        changes = [dict(r, **{"pass": 1}) for r in out["clusters"] if r["changed"]]
        passes = 1
        while monotonic() - start + interval < seconds:  # the last pass starts before `seconds`
            sleep(interval)
            try:
                more = self.run(entries, diff=diff)
            except ValidationError as exc:
                out["warnings"].append("the watch ended after %d pass(es): %s" % (passes, exc))
                break
            passes += 1
            changes.extend(dict(r, **{"pass": passes}) for r in more["clusters"] if r["changed"])
            for row in more["clusters"]:
                key = (row["kind"], row["namespace"], row["name"])
                if row["changed"] or not rows.get(key, {}).get("changed"):
                    rows[key] = row
            out["changed"] = out["changed"] or more["changed"]
            out["warnings"].extend(w for w in more["warnings"] if w not in out["warnings"])
            if diff:
                out["diff"].extend(more["diff"])
        out["clusters"] = list(rows.values())
        out["passes"], out["changes"] = passes, changes
        return out


def run_ray_reclaim(client: t.Any, prometheus: t.Any, params: t.Mapping[str, t.Any], inventory: t.Mapping[str, t.Any],
                    check_mode: bool) -> t.Dict[str, t.Any]:
    """The module's whole run (the inventory variables from ``reconcile/inputs.inventory_from_params``)."""
    model = TenantModel.from_inventory(inventory)
    wanted = params.get("limit_tenants") or []
    known = {x.name for x in model.tenants}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise GpuaasError("limit_tenants names %s, which the inventory does not define" % ", ".join(unknown),
                          hint="defined tenants: %s" % (", ".join(sorted(known)) or "none"))
    watch_seconds = int(params.get("watch_seconds") or 0)
    watch_interval = 5 if params.get("watch_interval") is None else int(params["watch_interval"])
    if watch_seconds < 0 or watch_interval < 1:
        raise GpuaasError("watch_seconds must be 0 or more and watch_interval 1 or more (got %d and %d)"
                          % (watch_seconds, watch_interval),
                          hint="e.g. watch_seconds: 45 and watch_interval: 5 for a run scheduled every minute")
    engine = ApplyEngine(client, check_mode=check_mode)
    # watch_seconds 0 (or a preview: watching would only repeat it) is one pass of the same loop
    return RayReclaimRun(client, prometheus, engine, int(params.get("scrape_interval") or 30)).watch(
        opted_in(model, wanted), 0 if check_mode else watch_seconds, watch_interval, diff=bool(params.get("_diff")))
