# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Draining objects before they are removed (kube/kinds.py DRAIN_SPECS says how, per kind).

The drain fields are applied by their own field manager (``gpuaas.platform-drain``): the inventory's apply
never owns them, so a reconcile does not undo a drain, and ``undrain`` releases exactly what drain set.
"""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kinds import DRAIN_SPECS

DRAIN_FIELD_MANAGER = "gpuaas.platform-drain"

Obj = t.Mapping[str, t.Any]


def _spec(kind: str) -> t.Dict[str, t.Any]:
    if kind not in DRAIN_SPECS:
        raise GpuaasError("%s objects cannot be drained" % kind, hint="drainable kinds: %s" % ", ".join(sorted(DRAIN_SPECS)))
    return DRAIN_SPECS[kind]


def _is_subset(patch: t.Any, live: t.Any) -> bool:
    if isinstance(patch, dict):
        return isinstance(live, dict) and all(_is_subset(v, live.get(k)) for k, v in patch.items())
    return patch == live


class Drainer:
    """Applies a kind's drain fields to live objects and waits until their busy counters are zero."""

    def __init__(self, client: t.Any, check_mode: bool = False, sleep: t.Callable[[float], None] = time.sleep,
                 clock: t.Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.check_mode = check_mode
        self.sleep = sleep
        self.clock = clock

    def drain(self, api_version: str, kind: str, live: t.Sequence[Obj], timeout: float) -> None:
        """Drain every object of ``live`` (listed objects of ``kind``), then wait until none is busy.

        Raises a GpuaasError listing the busy objects when ``timeout`` passes (nothing else is touched).
        """
        if not live:
            return
        spec = _spec(kind)
        res = self.client.resource(api_version, kind)
        names = []
        for obj in live:
            meta = obj.get("metadata") or {}
            names.append((meta["name"], meta.get("namespace")))
            if _is_subset(spec["patch"], obj):
                continue
            body = dict(spec["patch"], apiVersion=api_version, kind=kind,
                        metadata={k: v for k, v in (("name", meta["name"]), ("namespace", meta.get("namespace"))) if v})
            try:
                res.apply(body, DRAIN_FIELD_MANAGER, force=True, dry_run=self.check_mode)
            except ApiException as exc:
                raise translate_api_exception(exc, spec["what"], "%s %s" % (kind, meta["name"]))
        if self.check_mode:
            return
        deadline = self.clock() + timeout
        while True:
            busy: t.Dict[str, t.List[int]] = {}
            for name, namespace in names:
                try:
                    obj = res.get(name, namespace)
                except ApiException as exc:
                    raise translate_api_exception(exc, "read", "%s %s" % (kind, name))
                status = (obj or {}).get("status") or {}
                counts = [int(status.get(f) or 0) for f in spec["busy_status"]]
                if any(counts):
                    busy[name] = counts
            if not busy:
                return
            if self.clock() >= deadline:
                many = len(busy) != 1
                raise GpuaasError(
                    "offboarding: %d %s%s still hold%s workloads after %ss of draining; nothing was deleted"
                    % (len(busy), kind, "s" if many else "", "" if many else "s", int(timeout)),
                    hint=spec["hint"],
                    problems=["%s %s: %s" % (kind, n, ", ".join("%d %s" % (c, f) for c, f in zip(counts, spec["busy_labels"])))
                              for n, counts in sorted(busy.items())])
            self.sleep(2.0)

    def undrain(self, api_version: str, kind: str, live: t.Sequence[Obj]) -> None:
        """Release the drain of objects that carry it (an object back in the inventory after an unfinished removal)."""
        for obj in live:
            meta = obj.get("metadata") or {}
            if not any(m.get("manager") == DRAIN_FIELD_MANAGER for m in meta.get("managedFields") or []):
                continue
            res = self.client.resource(api_version, kind)
            body = {"apiVersion": api_version, "kind": kind,
                    "metadata": {k: v for k, v in (("name", meta["name"]), ("namespace", meta.get("namespace"))) if v}}
            try:
                res.apply(body, DRAIN_FIELD_MANAGER, force=True, dry_run=self.check_mode)
            except ApiException as exc:
                raise translate_api_exception(exc, "undrain", "%s %s" % (kind, meta["name"]))
