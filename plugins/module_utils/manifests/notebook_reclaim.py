# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Idle stop of a Kubeflow / OpenShift AI Notebook (workbench; issue 23): pure decisions and the partial objects.

A tenant's ``autoscaling`` entry with ``target.kind: Notebook`` opts the workbench in (inventory/autoscaling.py).
The notebook controller (kubeflow/kubeflow and opendatahub-io/kubeflow, ``components/notebook-controller/controllers/
notebook_controller.go``) runs a Notebook as a StatefulSet of the same name whose ``spec.replicas`` it writes on every
reconcile: 1, or 0 while the Notebook carries the annotation ``kubeflow-resource-stopped`` (``generateStatefulSet``,
then ``reconcilehelper.CopyStatefulSetFields``). So the StatefulSet cannot be scaled by anyone else (KEDA's 0 is
reverted); the stop annotation is the one switch, the one the Kubeflow culler and the OpenShift AI dashboard's
*Stop* set (value: the time, RFC 3339, ``pkg/culler/culler.go``). ``decide`` says, per run of
``gpuaas.platform.ray_idle_reclaim`` (reconcile/ray_reclaim_runner.py, the Notebook adapter):

- **reclaim** (stop): running, every pod of the workbench (label ``notebook-name``) has run for the whole idle
  window and no GPU of it went above the threshold in it. The stop annotation is set to the time and the same time
  is recorded in ``gpuaas.io/idle-reclaim`` (``{"stopped": <time>}``), so the collection knows the stop is its own.
- **wake** (start): stopped by the collection (the stop annotation's value is the recorded one) and the tenant set
  ``gpuaas.io/wake`` to a value the stop did not see: the stop annotation is removed (server-side apply leaves it out;
  the collection's field manager owns it), the wake recorded.
- **keep**: anything else. A workbench its user stopped herself (no record, or a stop annotation of another value)
  is never started by the collection, whatever ``gpuaas.io/wake`` says.

Nothing here does I/O; the clock and the metrics are arguments.
"""

from __future__ import annotations

import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Autoscaling
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.ray_reclaim import (
    STATE_ANNOTATION,
    WAKE_ANNOTATION,
    Decision,
    Target,
    asks_for_accelerators,
    iso,
    parse_timestamp,
    read_state,
    window_problems,
)

Obj = t.Mapping[str, t.Any]

# The notebook controller's stop switch (culler.go STOP_ANNOTATION); its presence, not its value, stops the Notebook.
STOP_ANNOTATION = "kubeflow-resource-stopped"
# The label the controller puts on the pod template (the pod is <name>-0 of the StatefulSet <name>).
NOTEBOOK_NAME_LABEL = "notebook-name"
# The path server-side apply removes on wake (engine.apply_fields ``absent``).
STOP_PATH = ("metadata", "annotations", STOP_ANNOTATION)


def _annotations(notebook: Obj) -> t.Mapping[str, str]:
    return (notebook.get("metadata") or {}).get("annotations") or {}


def resolve_targets(entries: t.Sequence[t.Tuple[str, Autoscaling]], notebooks: t.Mapping[t.Tuple[str, str], t.Optional[Obj]],
                    scrape_interval: int) -> t.Tuple[t.List[Target], t.List[str], t.List[str]]:
    """``(targets, problems, warnings)``: every entry checked against its live Notebook before anything is written.

    Problems (each refuses the whole run): a window shorter than the scrape interval (it would hold no sample), a
    Notebook whose pod asks for no GPU (nothing to give back; idle CPU workbenches are the culler's business). A
    Notebook that does not exist (yet) is a warning: it is skipped."""
    targets: t.List[Target] = []
    problems: t.List[str] = []
    warnings: t.List[str] = []
    for tenant, entry in entries:
        where = "tenant %s, autoscaling %s (Notebook %s/%s)" % (tenant, entry.name, entry.namespace, entry.target_name)
        problems.extend(window_problems(where, entry, scrape_interval))
        notebook = notebooks.get((entry.namespace, entry.target_name))
        if notebook is None:
            warnings.append("%s: no such Notebook; skipped (it is stopped when idle once it exists)" % where)
            continue
        template = ((notebook.get("spec") or {}).get("template")) or {}
        if not asks_for_accelerators(template):
            problems.append("%s: its pod asks for no GPU, so idling it gives no GPU back: remove the entry or give "
                            "the workbench's container a GPU limit" % where)
        targets.append(Target(tenant, entry, []))
    return targets, problems, warnings


def stopped_by_collection(notebook: Obj) -> bool:
    """The stop annotation is there and carries the time the collection recorded when it set it."""
    value = _annotations(notebook).get(STOP_ANNOTATION)
    return value is not None and value == read_state(notebook).get("stopped")


def decide(target: Target, notebook: Obj, pods: t.Sequence[Obj], utilization: t.Mapping[str, float],
           now: float) -> Decision:
    """What to do with one opted-in Notebook now. ``pods``: the workbench's pods (label ``notebook-name``);
    ``utilization``: the highest GPU utilization (%) of each pod over the idle window (absent: no series)."""
    annotations = _annotations(notebook)
    state = read_state(notebook)
    wake = annotations.get(WAKE_ANNOTATION)
    if STOP_ANNOTATION in annotations:
        if not stopped_by_collection(notebook):
            return Decision("keep", "stopped by its user (%s=%r, not set by the collection); only she starts it"
                            % (STOP_ANNOTATION, annotations[STOP_ANNOTATION]))
        if wake is not None and wake != state.get("wake"):
            return Decision("wake", "%s set to %r" % (WAKE_ANNOTATION, wake))
        return Decision("keep", "stopped at %s; set the annotation %s to a new value to start it"
                        % (state.get("stopped", "?"), WAKE_ANNOTATION))
    woken = parse_timestamp(state.get("woken"))
    if woken is not None and now - woken < target.cooldown_seconds:
        return Decision("keep", "started %ds ago, cooldown %ds" % (now - woken, target.cooldown_seconds))
    window = target.entry.idle_window_seconds or 0
    threshold = float(parse_quantity(target.entry.idle_utilization_threshold))
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    if not live:
        return Decision("keep", "no pod of the workbench is running yet")
    for pod in live:
        name = pod["metadata"]["name"]
        started = parse_timestamp((pod.get("status") or {}).get("startTime"))
        if (pod.get("status") or {}).get("phase") != "Running" or started is None:
            return Decision("keep", "pod %s is not running" % name)
        if now - started < window:
            return Decision("keep", "pod %s started %ds ago, less than the idle window %ds" % (name, now - started, window))
        if name not in utilization:
            return Decision("keep", "no GPU utilization series for pod %s (DCGM exporter with pod mapping?)" % name)
        if utilization[name] > threshold:
            return Decision("keep", "busy: pod %s reached %g%% GPU utilization within the window" % (name, utilization[name]))
    return Decision("reclaim", "every GPU of the workbench at or below %s%% for %ds"
                    % (target.entry.idle_utilization_threshold, window))


def _partial(notebook: Obj, annotations: t.Dict[str, str]) -> t.Dict[str, t.Any]:
    meta = notebook.get("metadata") or {}
    return {"apiVersion": notebook.get("apiVersion") or "kubeflow.org/v1", "kind": "Notebook",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "annotations": annotations}}


def stop_patch(notebook: Obj, now: float) -> t.Dict[str, t.Any]:
    """The partial Notebook that stops it: the stop annotation (the time, as the culler writes it) and the record of
    the same time (a wake value seen before the stop does not start it again)."""
    at = iso(now)
    state: t.Dict[str, t.Any] = {"stopped": at}
    wake = _annotations(notebook).get(WAKE_ANNOTATION)
    if wake is not None:
        state["wake"] = wake
    return _partial(notebook, {STOP_ANNOTATION: at, STATE_ANNOTATION: json.dumps(state, sort_keys=True)})


def start_patch(notebook: Obj, now: float) -> t.Tuple[t.Dict[str, t.Any], t.List[t.Tuple[str, ...]]]:
    """``(partial, absent)``: the record of the wake, and the stop annotation left out so that server-side apply
    removes it (the collection's field manager set it)."""
    state = {"woken": iso(now), "wake": _annotations(notebook).get(WAKE_ANNOTATION)}
    return _partial(notebook, {STATE_ANNOTATION: json.dumps(state, sort_keys=True)}), [STOP_PATH]
