# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Reading the live state for a reconcile: the LIST of one kind in some namespaces, and what one read found."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, ApiResource, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import PruneScope, ReconcileResult

Key = t.Tuple[str, str, str]
GroupKind = t.Tuple[str, str]


class LiveState:
    """One read of the cluster for a reconcile (``ApplyEngine.read``), shared by whoever needs the live state.

    ``prepared``/``groups``: the desired objects, prepared once; ``objects``: the live object of every listed or
    read key; ``listed``: each LISTed kind's items (desired kinds, prune kinds and the ``also`` kinds);
    ``prune_kinds``: the prune scope's kinds as the cluster serves them; ``requests``: what the read cost.
    """

    def __init__(self, prepared: t.List[t.Any], groups: t.Dict[GroupKind, t.List[t.Any]],
                 objects: t.Dict[Key, t.Dict[str, t.Any]], listed: t.Dict[GroupKind, t.List[t.Dict[str, t.Any]]],
                 prune_kinds: t.Sequence[GroupKind], requests: t.Mapping[str, int]) -> None:
        self.prepared = prepared
        self.groups = groups
        self.objects = objects
        self.listed = listed
        self.prune_kinds = list(prune_kinds)
        self.requests = dict(requests)

    def of_kind(self, kind: str) -> t.List[t.Dict[str, t.Any]]:
        """The LISTed items of ``kind`` (any apiVersion read), empty when the kind was not listed."""
        return [item for (_av, k), items in sorted(self.listed.items()) if k == kind for item in items]

    def forget(self, keys: t.Iterable[Key]) -> None:
        """Objects deleted since the read (a recreate): absent from now on."""
        for key in keys:
            self.objects.pop(key, None)

    def candidates(self, prune: PruneScope) -> t.Dict[GroupKind, t.List[t.Dict[str, t.Any]]]:
        """The listed objects ``prune`` may delete, per kind (``prune`` is the scope given to ``read``)."""
        return {gk: [i for i in items if prune.matches(i)] for gk, items in self.listed.items() if gk in self.prune_kinds}


def list_objects(res: ApiResource, namespaces: t.Optional[t.Set[str]], selector: t.Optional[str],
                 result: ReconcileResult, pinned: bool = False) -> t.List[t.Dict[str, t.Any]]:
    """LIST ``res`` in ``namespaces`` (None: every namespace).

    Few namespaces: one LIST each; many: one cluster-wide LIST filtered here (one request instead of hundreds),
    one LIST each when that is forbidden. ``pinned`` (PruneScope.kind_namespaces): one LIST each, never
    cluster-wide, whatever the number.
    """
    def one(ns: t.Optional[str]) -> t.List[t.Dict[str, t.Any]]:
        result.requests["list"] += 1
        try:
            items = res.list(namespace=ns, label_selector=selector)
        except ApiException as exc:
            raise translate_api_exception(exc, "list", "%s %s%s" % (
                res.api_version, res.kind, (" in namespace %s" % ns) if ns else ""))
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items

    if not res.namespaced or (namespaces is None and not pinned):
        return one(None)
    if pinned or len(namespaces or ()) <= 3:
        items: t.List[t.Dict[str, t.Any]] = []
        for ns in sorted(namespaces or ()):
            items.extend(one(ns))
        return items
    namespaces = namespaces or set()
    try:
        return [i for i in one(None) if (i.get("metadata") or {}).get("namespace") in namespaces]
    except GpuaasError as err:
        if err.details.get("status") != 403:
            raise
        items = []
        for ns in sorted(namespaces):
            items.extend(one(ns))
        return items
