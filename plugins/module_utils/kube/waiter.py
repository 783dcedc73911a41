# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Waiting for objects: readiness conditions (per kind, kube/kinds.py) and deletion (finalizers)."""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kinds import READY_CONDITIONS
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef, ObjectResult, ReconcileResult


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
        """Wait until every object meets ``condition`` (default: its kind's readiness condition)."""
        pending = []
        for r in results:
            cond = condition or READY_CONDITIONS.get(r.ref.kind)
            if cond:
                pending.append((r, cond))
        deadline = time.monotonic() + timeout
        last: t.Dict[ObjectRef, t.Any] = {}
        while pending:
            still = []
            for r, cond in pending:
                res = self.client.resource(r.ref.api_version, r.ref.kind)
                if result is not None:
                    result.requests["get"] += 1
                try:
                    obj = res.get(r.ref.name, r.ref.namespace)
                except ApiException as exc:
                    raise translate_api_exception(exc, "read", str(r.ref))
                if obj is not None and self.condition_met(obj, cond):
                    r.object = obj
                    continue
                last[r.ref] = obj
                still.append((r, cond))
            pending = still
            if not pending:
                return
            if time.monotonic() >= deadline:
                problems = []
                for r, cond in pending:
                    obj = last.get(r.ref) or {}
                    conds = [c for c in ((obj.get("status") or {}).get("conditions") or [])
                             if c.get("type") == cond.get("type")]
                    if conds and not self.observed_current(obj, conds[0]):
                        detail = ("%s=%s is for an older spec (observedGeneration %s, generation %s): the controller "
                                  "has not processed the change yet" % (
                                      conds[0].get("type"), conds[0].get("status"),
                                      conds[0].get("observedGeneration",
                                                   (obj.get("status") or {}).get("observedGeneration")),
                                      (obj.get("metadata") or {}).get("generation")))
                    elif conds:
                        detail = "%s=%s (%s: %s)" % (conds[0].get("type"), conds[0].get("status"),
                                                     conds[0].get("reason"), conds[0].get("message"))
                    else:
                        detail = "no %s condition yet" % cond.get("type")
                    problems.append("%s: %s" % (r.ref, detail))
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
