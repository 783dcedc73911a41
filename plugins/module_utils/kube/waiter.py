"""Waiting for objects: readiness (per kind) and deletion (finalizers).

Readiness is strict, as kubernetes.core's ``k8s/waiter.py``: a Deployment, StatefulSet or DaemonSet is ready
only when its controller has observed the current spec (``status.observedGeneration`` >= ``metadata.generation``)
and the rollout is complete (every replica updated and available, no old replica left), never on a condition
alone, which can still describe the previous spec. Other kinds wait for their condition (kube/kinds.py
``READY_CONDITIONS``), trusted only when written for the current generation.
"""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kinds import READY_CONDITIONS
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult, ReconcileResult

# Why an object is not ready yet, or None when it is.
ReadinessCheck = t.Callable[[t.Mapping[str, t.Any]], t.Optional[str]]

AVAILABLE = {"type": "Available", "status": "True"}


def _status_count(status: t.Mapping[str, t.Any], name: str) -> int:
    """A replica counter of ``status``; the API server leaves zero counters out."""
    return int(status.get(name) or 0)


def _spec_replicas(obj: t.Mapping[str, t.Any]) -> int:
    """``spec.replicas``, defaulted to 1 as the API server does."""
    replicas = (obj.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _generation_not_observed(obj: t.Mapping[str, t.Any]) -> t.Optional[str]:
    """Why the controller's status may not describe the current spec: no status, ``observedGeneration`` missing
    or behind.

    Stricter than ``Waiter.observed_current``: the workload controllers always write ``observedGeneration``, so
    a status without it has not been written for this object yet.
    """
    if not obj.get("status"):
        return "no status yet: the controller has not processed the object"
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is None:
        return None
    observed = obj["status"].get("observedGeneration")
    if observed is None or int(observed) < int(generation):
        return ("status is for an older spec (observedGeneration %s, generation %s): the controller has not "
                "processed the change yet" % (observed, generation))
    return None


def _rolling_update(obj: t.Mapping[str, t.Any]) -> bool:
    """Whether the controller replaces old pods itself (``RollingUpdate``, the default) rather than ``OnDelete``."""
    strategy = (obj.get("spec") or {}).get("updateStrategy") or {}
    return strategy.get("type", "RollingUpdate") == "RollingUpdate"


def deployment_not_ready(obj: t.Mapping[str, t.Any]) -> t.Optional[str]:
    """Why a Deployment is not ready: the current generation observed, ``spec.replicas`` replicas in total, all
    updated and available (no old replica left, none unavailable) and ``Available=True``; None when ready."""
    stale = _generation_not_observed(obj)
    if stale:
        return stale
    status = obj.get("status") or {}
    wanted = _spec_replicas(obj)
    total, updated, available = (_status_count(status, n) for n in ("replicas", "updatedReplicas", "availableReplicas"))
    if not total == updated == available == wanted:
        return ("rollout in progress: %d of %d replicas updated, %d available, %d in total"
                % (updated, wanted, available, total))
    if _status_count(status, "unavailableReplicas"):
        return "%d replicas unavailable" % _status_count(status, "unavailableReplicas")
    if not Waiter.condition_met(obj, AVAILABLE):
        return _condition_problem(obj, AVAILABLE)
    return None


def statefulset_not_ready(obj: t.Mapping[str, t.Any]) -> t.Optional[str]:
    """Why a StatefulSet is not ready: the current generation observed, ``spec.replicas`` replicas in total and
    ready, and with ``RollingUpdate`` every replica above the partition updated (the whole set on the update
    revision when the partition is 0); None when ready. ``OnDelete`` sets are ready with every replica ready."""
    stale = _generation_not_observed(obj)
    if stale:
        return stale
    status = obj.get("status") or {}
    wanted = _spec_replicas(obj)
    total, ready = _status_count(status, "replicas"), _status_count(status, "readyReplicas")
    if not total == ready == wanted:
        return "%d of %d replicas ready, %d in total" % (ready, wanted, total)
    if not _rolling_update(obj):
        return None
    strategy = (obj.get("spec") or {}).get("updateStrategy") or {}
    partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
    want_updated = max(wanted - partition, 0)
    updated = _status_count(status, "updatedReplicas")
    if updated < want_updated:
        return "rollout in progress: %d of %d replicas updated" % (updated, want_updated)
    if partition == 0 and status.get("updateRevision") != status.get("currentRevision"):
        return ("rollout in progress: current revision %s, update revision %s"
                % (status.get("currentRevision"), status.get("updateRevision")))
    return None


def daemonset_not_ready(obj: t.Mapping[str, t.Any]) -> t.Optional[str]:
    """Why a DaemonSet is not ready: the current generation observed and, on every node it should run on, a pod
    that is ready, available and (with ``RollingUpdate``) updated; None when ready."""
    stale = _generation_not_observed(obj)
    if stale:
        return stale
    status = obj.get("status") or {}
    if status.get("desiredNumberScheduled") is None:
        return "not scheduled yet (no status.desiredNumberScheduled)"
    wanted = _status_count(status, "desiredNumberScheduled")
    ready, available = _status_count(status, "numberReady"), _status_count(status, "numberAvailable")
    updated = _status_count(status, "updatedNumberScheduled") if _rolling_update(obj) else wanted
    if not updated == ready == available == wanted:
        return ("rollout in progress: %d of %d pods updated, %d ready, %d available"
                % (updated, wanted, ready, available))
    if _status_count(status, "numberUnavailable"):
        return "%d pods unavailable" % _status_count(status, "numberUnavailable")
    return None


# Kinds whose readiness is a complete rollout rather than one condition.
ROLLOUT_CHECKS: t.Dict[str, ReadinessCheck] = {
    "Deployment": deployment_not_ready,
    "StatefulSet": statefulset_not_ready,
    "DaemonSet": daemonset_not_ready,
}


def _condition_problem(obj: t.Mapping[str, t.Any], condition: t.Mapping[str, t.Any]) -> str:
    """Why ``obj`` does not meet ``condition``: stale, another status, or no such condition yet."""
    conds = [c for c in ((obj.get("status") or {}).get("conditions") or []) if c.get("type") == condition.get("type")]
    if conds and not Waiter.observed_current(obj, conds[0]):
        return ("%s=%s is for an older spec (observedGeneration %s, generation %s): the controller "
                "has not processed the change yet" % (
                    conds[0].get("type"), conds[0].get("status"),
                    conds[0].get("observedGeneration", (obj.get("status") or {}).get("observedGeneration")),
                    (obj.get("metadata") or {}).get("generation")))
    if conds:
        return "%s=%s (%s: %s)" % (conds[0].get("type"), conds[0].get("status"),
                                   conds[0].get("reason"), conds[0].get("message"))
    return "no %s condition yet" % condition.get("type")


def readiness_check(kind: str, condition: t.Optional[t.Mapping[str, t.Any]] = None) -> t.Optional[ReadinessCheck]:
    """How to tell that an object of ``kind`` is ready: ``condition`` when given, else the kind's rollout check or
    readiness condition; None for kinds that are ready once they exist."""
    if condition is None:
        if kind in ROLLOUT_CHECKS:
            return ROLLOUT_CHECKS[kind]
        condition = READY_CONDITIONS.get(kind)
        if not condition:
            return None
    wanted = condition

    def check(obj: t.Mapping[str, t.Any]) -> t.Optional[str]:
        return None if Waiter.condition_met(obj, wanted) else _condition_problem(obj, wanted)
    return check


class Waiter:
    """Polls objects until they meet a condition or are gone; errors list every object still pending."""

    def __init__(self, client: t.Any) -> None:
        self.client = client

    @staticmethod
    def observed_current(obj: t.Mapping[str, t.Any], cond: t.Optional[t.Mapping[str, t.Any]] = None) -> bool:
        """Whether the controller has seen the object's current spec.

        ``status.observedGeneration`` (top level) and the condition's own ``observedGeneration`` must, when
        present, equal ``metadata.generation``: a condition written for an older spec says nothing about the
        new one (a Deployment still ``Available`` from before the update, a ClusterQueue ``Active`` with the
        old quotas).
        """
        generation = (obj.get("metadata") or {}).get("generation")
        if generation is None:
            return True
        status = obj.get("status") or {}
        for observed in (status.get("observedGeneration"), (cond or {}).get("observedGeneration")):
            if observed is not None and int(observed) < int(generation):
                return False
        return True

    @staticmethod
    def condition_met(obj: t.Mapping[str, t.Any], condition: t.Mapping[str, t.Any]) -> bool:
        status = obj.get("status") or {}
        want_status = str(condition.get("status", "True"))
        for cond in status.get("conditions") or []:
            if cond.get("type") != condition.get("type"):
                continue
            if not Waiter.observed_current(obj, cond):
                return False
            if str(cond.get("status")) != want_status:
                return False
            if condition.get("reason") and cond.get("reason") != condition["reason"]:
                return False
            return True
        return False

    def wait_ready(self, results: t.Sequence[ObjectResult], condition: t.Optional[t.Mapping[str, t.Any]] = None,
                   timeout: float = 120, sleep: float = 2.0, result: t.Optional[ReconcileResult] = None) -> None:
        """Wait until every object is ready: ``condition`` when given, else its kind's readiness (``readiness_check``)."""
        pending = []
        for r in results:
            check = readiness_check(r.ref.kind, condition)
            if check:
                pending.append((r, check))
        deadline = time.monotonic() + timeout
        why: t.Dict[ObjectRef, str] = {}
        while pending:
            still = []
            for r, check in pending:
                res = self.client.resource(r.ref.api_version, r.ref.kind)
                if result is not None:
                    result.requests["get"] += 1
                try:
                    obj = res.get(r.ref.name, r.ref.namespace)
                except ApiException as exc:
                    raise translate_api_exception(exc, "read", str(r.ref))
                problem = check(obj or {})
                if obj is not None and problem is None:
                    r.object = obj
                    continue
                why[r.ref] = problem or "not found"
                still.append((r, check))
            pending = still
            if not pending:
                return
            if time.monotonic() >= deadline:
                problems = ["%s: %s" % (r.ref, why[r.ref]) for r, _check in pending]
                hint = "check the objects' status and the controller's logs"
                if any(r.ref.kind in ("ClusterQueue", "LocalQueue") for r, _c in pending):
                    hint = ("a ClusterQueue is Active only when its ResourceFlavors (and AdmissionChecks) exist and "
                            "kueue-controller-manager runs; a LocalQueue needs an Active ClusterQueue")
                raise GpuaasError("timed out after %ss waiting for %d objects to become ready" % (timeout, len(pending)),
                                  hint=hint, problems=problems)
            time.sleep(sleep)

    def wait_gone(self, results: t.Sequence[ObjectResult], timeout: float = 120, sleep: float = 2.0) -> None:
        """Wait until deleted objects are really gone (finalizers done)."""
        pending = list(results)
        deadline = time.monotonic() + timeout
        while pending:
            still = []
            for r in pending:
                res = self.client.resource(r.ref.api_version, r.ref.kind)
                try:
                    obj = res.get(r.ref.name, r.ref.namespace)
                except ApiException as exc:
                    raise translate_api_exception(exc, "read", str(r.ref))
                if obj is not None:
                    r.object = obj
                    still.append(r)
            pending = still
            if not pending:
                return
            if time.monotonic() >= deadline:
                problems = ["%s: finalizers %s" % (r.ref, ((r.object or {}).get("metadata") or {}).get("finalizers"))
                            for r in pending]
                raise GpuaasError(
                    "timed out after %ss waiting for %d objects to be deleted" % (timeout, len(pending)),
                    hint="Kueue keeps ClusterQueues/ResourceFlavors with the kueue.x-k8s.io/resource-in-use finalizer "
                         "while workloads use them: drain them (stop_policy: HoldAndDrain) or delete the workloads",
                    problems=problems)
            time.sleep(sleep)
