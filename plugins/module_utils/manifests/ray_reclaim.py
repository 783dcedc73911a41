# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Idle reclaim of a RayCluster's GPU worker groups (issue 25): pure decisions and the partial objects to apply.

A tenant's ``autoscaling`` entry with ``target.kind: RayCluster`` opts the cluster in (inventory/autoscaling.py).
Each run of ``gpuaas.platform.ray_idle_reclaim`` (reconcile/ray_reclaim_runner.py) reads the cluster, its worker
pods and their GPU utilization, and asks ``decide`` what to do:

- **reclaim**: every GPU worker pod of the chosen groups has run for the whole idle window and no GPU of it went
  above the threshold in it. The groups' ``replicas`` and ``minReplicas`` are recorded in the annotation
  ``gpuaas.io/idle-reclaim`` and set to 0. The head group is not in the patch; nothing is deleted. Under Kueue's
  elastic jobs the admitted Workload shrinks in place and its GPU quota is freed.
- **wake**: the cluster is reclaimed and the tenant set ``gpuaas.io/wake`` to a value the last reclaim did not see.
  The recorded replicas come back (never above the group's ``maxReplicas``); Kueue creates a new Workload slice
  that must be admitted like any other workload (by reclaim if other tenants borrowed the GPUs meanwhile).
- **keep**: anything else, with the reason (busy, too young, no metrics, in cooldown after a wake, waiting for a wake).

Nothing here does I/O; the clock and the metrics are arguments.
"""

from __future__ import annotations

import datetime
import json
import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Autoscaling

Obj = t.Mapping[str, t.Any]

# Kueue's annotation of elastic jobs (ElasticJobsViaWorkloadSlices): without it a change of worker count suspends
# and re-queues the whole RayCluster (head included), so reclaim refuses such a cluster.
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"
# What the last reclaim recorded (JSON, written by the collection only) and the tenant's wake signal.
STATE_ANNOTATION = "gpuaas.io/idle-reclaim"
WAKE_ANNOTATION = "gpuaas.io/wake"
# KubeRay's pod labels
CLUSTER_LABEL = "ray.io/cluster"
GROUP_LABEL = "ray.io/group"
NODE_TYPE_LABEL = "ray.io/node-type"


@dataclass
class Target:
    """One opted-in RayCluster: the tenant's inventory entry and the groups it reclaims (resolved on the live cluster)."""
    tenant: str
    entry: Autoscaling
    groups: t.List[str] = field(default_factory=list)

    @property
    def key(self) -> t.Tuple[str, str]:
        return (self.entry.namespace, self.entry.target_name)

    @property
    def cooldown_seconds(self) -> int:
        """Seconds after a wake before the next reclaim; default: the idle window."""
        if self.entry.cooldown_period is not None:
            return self.entry.cooldown_period
        return self.entry.idle_window_seconds or 0


@dataclass
class Decision:
    action: str  # reclaim | wake | keep
    reason: str
    groups: t.Dict[str, int] = field(default_factory=dict)  # reclaim: replicas recorded; wake: replicas restored


def _groups(cluster: Obj) -> t.List[t.Dict[str, t.Any]]:
    return list(((cluster.get("spec") or {}).get("workerGroupSpecs")) or [])


def asks_for_accelerators(template: Obj) -> bool:
    """A pod template asks for an accelerator (nvidia.com/gpu, MIG slices, amd.com/gpu ...) in a container."""
    spec = (template or {}).get("spec") or {}
    for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for part in ("limits", "requests"):
            for name, value in (res.get(part) or {}).items():
                try:
                    if is_accelerator(name) and parse_quantity(value) > 0:
                        return True
                except ValueError:
                    continue
    return False


def gpu_groups(cluster: Obj) -> t.List[str]:
    """The worker groups whose pods ask for an accelerator (nvidia.com/gpu, MIG slices, amd.com/gpu …)."""
    return [g.get("groupName") for g in _groups(cluster) if asks_for_accelerators(g.get("template") or {})]


def window_problems(where: str, entry: Autoscaling, scrape_interval: int) -> t.List[str]:
    """The idle window of an opted-in entry (RayCluster or Notebook) must hold a GPU sample: at least one scrape."""
    window = entry.idle_window_seconds or 0
    if window >= scrape_interval:
        return []
    return ["%s: idle window %ds is shorter than the Prometheus scrape interval %ds, so it would hold no GPU sample; "
            "set idle_scale_to_zero.after_seconds to at least %d" % (where, window, scrape_interval, scrape_interval)]


def resolve_targets(entries: t.Sequence[t.Tuple[str, Autoscaling]], clusters: t.Mapping[t.Tuple[str, str], t.Optional[Obj]],
                    scrape_interval: int) -> t.Tuple[t.List[Target], t.List[str], t.List[str]]:
    """``(targets, problems, warnings)``: every entry checked against its live cluster before anything is written.

    Problems (each refuses the whole run): a window shorter than the scrape interval (it would hold no sample), a
    cluster with no GPU worker group, a group name the cluster does not have or whose pods ask for no GPU, a cluster
    without Kueue's elastic-job annotation (its head would be restarted). A cluster that does not exist (yet) is a
    warning: it is skipped.
    """
    targets: t.List[Target] = []
    problems: t.List[str] = []
    warnings: t.List[str] = []
    for tenant, entry in entries:
        where = "tenant %s, autoscaling %s (RayCluster %s/%s)" % (tenant, entry.name, entry.namespace, entry.target_name)
        problems.extend(window_problems(where, entry, scrape_interval))
        cluster = clusters.get((entry.namespace, entry.target_name))
        if cluster is None:
            warnings.append("%s: no such RayCluster; skipped (it is reclaimed once it exists)" % where)
            continue
        live_groups = [g.get("groupName") for g in _groups(cluster)]
        gpus = gpu_groups(cluster)
        if entry.worker_groups is None:
            chosen = gpus
            if not gpus:
                problems.append("%s: has no GPU worker group (groups: %s); nothing to reclaim: remove the entry or "
                                "give a worker group's containers a GPU limit"
                                % (where, ", ".join(str(g) for g in live_groups) or "none"))
        else:
            chosen = list(entry.worker_groups)
            for name in chosen:
                if name not in live_groups:
                    problems.append("%s: worker_groups names %r, which the cluster does not have (groups: %s)"
                                    % (where, name, ", ".join(str(g) for g in live_groups) or "none"))
                elif name not in gpus:
                    problems.append("%s: worker group %r asks for no GPU; list only GPU groups in worker_groups "
                                    "(GPU groups: %s)" % (where, name, ", ".join(gpus) or "none"))
        annotations = (cluster.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ELASTIC_ANNOTATION) != "true":
            problems.append("%s: lacks the annotation %s: \"true\"; without Kueue's elastic jobs a change of worker "
                            "count suspends and re-queues the whole cluster (the head restarts): add the annotation "
                            "when the cluster is created" % (where, ELASTIC_ANNOTATION))
        targets.append(Target(tenant, entry, chosen))
    return targets, problems, warnings


def read_state(cluster: Obj) -> t.Dict[str, t.Any]:
    """The recorded reclaim state, ``{}`` when there is none or it is not the collection's JSON."""
    raw = ((cluster.get("metadata") or {}).get("annotations") or {}).get(STATE_ANNOTATION)
    if not raw:
        return {}
    try:
        state = json.loads(raw)
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def _replicas(group: Obj) -> int:
    return int(group.get("replicas") if group.get("replicas") is not None else group.get("minReplicas") or 0)


def parse_timestamp(value: t.Any) -> t.Optional[float]:
    """Seconds since the epoch of a number or an RFC 3339 UTC time (``...Z``); None for anything else."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            return None
    return None


def iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(target: Target, cluster: Obj, pods: t.Sequence[Obj], utilization: t.Mapping[str, float],
           now: float) -> Decision:
    """What to do with one opted-in cluster now. ``pods``: the cluster's worker pods; ``utilization``: the highest
    GPU utilization (%) of each pod over the idle window (a pod without a series is absent)."""
    state = read_state(cluster)
    wake = ((cluster.get("metadata") or {}).get("annotations") or {}).get(WAKE_ANNOTATION)
    live = {g.get("groupName"): g for g in _groups(cluster)}
    groups = [g for g in target.groups if g in live]
    # a reclaimed cluster whose GPU groups someone scaled up since is awake again, judged like any awake cluster
    if state.get("reclaimed") and not any(_replicas(live[g]) > 0 for g in groups):
        recorded = state["reclaimed"] if isinstance(state["reclaimed"], dict) else {}
        if wake is not None and wake != state.get("wake"):
            restore = {}
            for name in groups:
                want = recorded.get(name) or {}
                replicas = int(want.get("replicas") or 0) if isinstance(want, dict) else 0
                cap = live[name].get("maxReplicas")
                # the annotation is the tenant's to edit: never restore above the group's own maximum
                restore[name] = min(replicas, int(cap)) if cap is not None else replicas
            return Decision("wake", "%s set to %r" % (WAKE_ANNOTATION, wake), restore)
        return Decision("keep", "reclaimed at %s; set the annotation %s to a new value to wake it"
                        % (state.get("at", "?"), WAKE_ANNOTATION))
    woken = parse_timestamp(state.get("woken"))
    if woken is not None and now - woken < target.cooldown_seconds:
        return Decision("keep", "woken %ds ago, cooldown %ds" % (now - woken, target.cooldown_seconds))
    if not groups or all(_replicas(live[g]) == 0 for g in groups):
        return Decision("keep", "no GPU worker to reclaim (groups at 0 replicas)")
    window = target.entry.idle_window_seconds or 0
    threshold = float(parse_quantity(target.entry.idle_utilization_threshold))
    workers = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL) in groups
               and not (p.get("metadata") or {}).get("deletionTimestamp")]
    if not workers:
        return Decision("keep", "no GPU worker pod is running yet")
    for pod in workers:
        name = pod["metadata"]["name"]
        started = parse_timestamp((pod.get("status") or {}).get("startTime"))
        if (pod.get("status") or {}).get("phase") != "Running" or started is None:
            return Decision("keep", "worker %s is not running" % name)
        if now - started < window:
            return Decision("keep", "worker %s started %ds ago, less than the idle window %ds" % (name, now - started, window))
        if name not in utilization:
            return Decision("keep", "no GPU utilization series for worker %s (DCGM exporter with pod mapping?)" % name)
        if utilization[name] > threshold:
            return Decision("keep", "busy: worker %s reached %g%% GPU utilization within the window" % (name, utilization[name]))
    recorded = {g: _replicas(live[g]) for g in groups}
    return Decision("reclaim", "every GPU worker (%d) at or below %s%% for %ds"
                    % (len(workers), target.entry.idle_utilization_threshold, window), recorded)


def _partial(cluster: Obj, annotations: t.Dict[str, str], groups: t.List[t.Dict[str, t.Any]]) -> t.Dict[str, t.Any]:
    meta = cluster.get("metadata") or {}
    return {"apiVersion": cluster.get("apiVersion") or "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "annotations": annotations},
            # workerGroupSpecs is an atomic list in KubeRay's CRD: applied whole, every group as it is but the changed
            "spec": {"workerGroupSpecs": groups}}


def reclaim_patch(cluster: Obj, decision: Decision, now: float) -> t.Dict[str, t.Any]:
    """The partial RayCluster bringing the decision's groups to 0 replicas (and minReplicas), recording them."""
    wake = ((cluster.get("metadata") or {}).get("annotations") or {}).get(WAKE_ANNOTATION)
    groups = []
    recorded: t.Dict[str, t.Dict[str, int]] = {}
    for g in _groups(cluster):
        g = dict(g)
        if g.get("groupName") in decision.groups:
            recorded[g["groupName"]] = {"replicas": decision.groups[g["groupName"]], "minReplicas": int(g.get("minReplicas") or 0)}
            g["replicas"], g["minReplicas"] = 0, 0
        groups.append(g)
    state = {"reclaimed": recorded, "at": iso(now)}
    if wake is not None:
        state["wake"] = wake  # a wake value seen before the reclaim does not wake it again
    return _partial(cluster, {STATE_ANNOTATION: json.dumps(state, sort_keys=True)}, groups)


def wake_patch(cluster: Obj, decision: Decision, now: float) -> t.Dict[str, t.Any]:
    """The partial RayCluster restoring the recorded replicas (minReplicas too, never above replicas)."""
    state = read_state(cluster)
    recorded = state.get("reclaimed") if isinstance(state.get("reclaimed"), dict) else {}
    wake = ((cluster.get("metadata") or {}).get("annotations") or {}).get(WAKE_ANNOTATION)
    groups = []
    for g in _groups(cluster):
        g = dict(g)
        name = g.get("groupName")
        if name in decision.groups:
            want = recorded.get(name) if isinstance(recorded.get(name), dict) else {}
            g["replicas"] = decision.groups[name]
            g["minReplicas"] = min(int(want.get("minReplicas") or 0), decision.groups[name])
        groups.append(g)
    new_state = {"woken": iso(now), "wake": wake}
    return _partial(cluster, {STATE_ANNOTATION: json.dumps(new_state, sort_keys=True)}, groups)
