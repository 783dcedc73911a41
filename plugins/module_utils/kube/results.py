# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""References to objects, the prune scope, and what a reconcile did to each object."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TENANT_LABEL


class ObjectRef:
    """apiVersion/kind/namespace/name of one object."""

    __slots__ = ("api_version", "kind", "name", "namespace")

    def __init__(self, api_version: str, kind: str, name: str, namespace: t.Optional[str] = None) -> None:
        self.api_version = api_version
        self.kind = kind
        self.name = name
        self.namespace = namespace or None

    @classmethod
    def from_object(cls, obj: t.Mapping[str, t.Any]) -> "ObjectRef":
        meta = obj.get("metadata") or {}
        return cls(obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("name", ""), meta.get("namespace"))

    @property
    def key(self) -> t.Tuple[str, str, str]:
        return (self.kind, self.namespace or "", self.name)

    def __str__(self) -> str:
        if self.namespace:
            return "%s %s/%s" % (self.kind, self.namespace, self.name)
        return "%s %s" % (self.kind, self.name)

    def __repr__(self) -> str:
        return "ObjectRef(%s)" % self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectRef) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def to_dict(self) -> t.Dict[str, t.Any]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        return out


class PruneScope:
    """Which owned objects prune may delete.

    ``kinds``: (api_version, kind) pairs to consider. Only objects carrying
    ``app.kubernetes.io/managed-by=gpuaas.platform`` *and* ``gpuaas.io/tenant`` (equal to ``tenant``
    when given) and every ``labels`` pair are candidates; ``namespaces`` restricts namespaced kinds.

    ``kind_namespaces``: for some namespaced kinds, the only namespaces where the caller keeps objects of that kind
    (``{"Secret": ["keda"]}``). Such a kind is read with one LIST per namespace named here and never with a
    cluster-wide LIST, so a run needs no cluster-wide read of it (Secrets: a least-privilege account is refused
    that, and even an administrator should not pull every Secret of the cluster to prune one). Owned objects of
    that kind elsewhere are neither seen nor pruned.
    """

    def __init__(self, kinds: t.Sequence[t.Tuple[str, str]], tenant: t.Optional[str] = None,
                 namespaces: t.Optional[t.Sequence[str]] = None,
                 labels: t.Optional[t.Mapping[str, str]] = None,
                 require_tenant_label: bool = True,
                 kind_namespaces: t.Optional[t.Mapping[str, t.Sequence[str]]] = None) -> None:
        self.kinds = [tuple(k) for k in kinds]
        self.tenant = tenant
        self.namespaces = list(namespaces) if namespaces is not None else None
        self.labels = dict(labels or {})
        self.require_tenant_label = require_tenant_label
        self.kind_namespaces: t.Dict[str, t.List[str]] = {
            kind: sorted(set(nss)) for kind, nss in (kind_namespaces or {}).items()}

    def namespaces_of(self, kind: str) -> t.Optional[t.List[str]]:
        """The namespaces where prune looks for ``kind`` (a namespaced kind); None: every namespace."""
        if kind in self.kind_namespaces:
            return self.kind_namespaces[kind]
        return self.namespaces

    def pinned(self, kind: str) -> bool:
        """Whether ``kind`` is read only in its own namespaces (one LIST each, never cluster-wide)."""
        return kind in self.kind_namespaces

    def label_selector(self) -> str:
        parts = ["%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE)]
        if self.tenant:
            parts.append("%s=%s" % (TENANT_LABEL, self.tenant))
        elif self.require_tenant_label:
            parts.append(TENANT_LABEL)
        parts.extend("%s=%s" % kv for kv in sorted(self.labels.items()))
        return ",".join(parts)

    def matches(self, obj: t.Mapping[str, t.Any]) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            return False
        if self.tenant and labels.get(TENANT_LABEL) != self.tenant:
            return False
        if not self.tenant and self.require_tenant_label and TENANT_LABEL not in labels:
            return False
        if any(labels.get(k) != v for k, v in self.labels.items()):
            return False
        namespaces = self.namespaces_of(obj.get("kind", ""))
        if namespaces is not None and meta.get("namespace") and meta["namespace"] not in namespaces:
            return False
        return True


class CombinedScope(PruneScope):
    """The prune scopes of the steps of one run (the tenancy and its node pools) as the one scope its engine reads
    and prunes with: every kind of each, a kind read where any step looks for it (pinned only when every step that
    prunes it pins it), an object in scope when a step whose kinds include it matches it."""

    def __init__(self, scopes: t.Sequence[PruneScope]) -> None:
        kinds: t.List[t.Tuple[str, str]] = []
        for scope in scopes:
            kinds.extend(k for k in scope.kinds if k not in kinds)
        super().__init__(kinds, require_tenant_label=False)
        self.scopes = list(scopes)

    def _of(self, kind: str) -> t.List[PruneScope]:
        return [s for s in self.scopes if any(k == kind for _av, k in s.kinds)]

    def namespaces_of(self, kind: str) -> t.Optional[t.List[str]]:
        found = [s.namespaces_of(kind) for s in self._of(kind)]
        if not found or any(nss is None for nss in found):
            return None
        return sorted({ns for nss in found for ns in nss or ()})

    def pinned(self, kind: str) -> bool:
        steps = self._of(kind)
        return bool(steps) and all(s.pinned(kind) for s in steps)

    def matches(self, obj: t.Mapping[str, t.Any]) -> bool:
        # every step sees the object, not only up to the first match: a step may note what it keeps (TenantsScope.kept)
        matched = [s.matches(obj) for s in self._of(obj.get("kind", ""))]
        return any(matched)


class ObjectResult:
    """What happened to one object: created, updated, unchanged or deleted."""

    __slots__ = ("ref", "action", "before", "after", "object", "simulated")

    def __init__(self, ref: ObjectRef, action: str, before: t.Any = None, after: t.Any = None,
                 obj: t.Optional[t.Dict[str, t.Any]] = None, simulated: bool = False) -> None:
        self.ref = ref
        self.action = action
        self.before = before
        self.after = after
        self.object = obj
        self.simulated = simulated

    @property
    def changed(self) -> bool:
        return self.action in ("created", "updated", "deleted")

    def diff(self) -> t.Dict[str, t.Any]:
        return {
            "before": self.before if self.before is not None else {},
            "after": self.after if self.after is not None else {},
            "before_header": "%s (live)" % self.ref,
            "after_header": "%s (%s)" % (self.ref, self.action),
        }


class ReconcileResult:
    """Outcome of ``ApplyEngine.reconcile`` / ``ApplyEngine.delete``."""

    def __init__(self, check_mode: bool = False) -> None:
        self.check_mode = check_mode
        self.results: t.List[ObjectResult] = []
        self.api_versions: t.Dict[str, str] = {}
        self.requests: t.Dict[str, int] = {"list": 0, "get": 0, "apply": 0, "delete": 0}
        # Objects the ownership guard let the run take over (None: the guard was off).
        self.adopted: t.Optional[t.List[t.Dict[str, t.Any]]] = None

    def add(self, result: ObjectResult) -> None:
        self.results.append(result)

    def by_action(self, action: str) -> t.List[ObjectResult]:
        return [r for r in self.results if r.action == action]

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.results)

    def find(self, kind: str, name: str, namespace: t.Optional[str] = None) -> t.Optional[ObjectResult]:
        for r in self.results:
            if r.ref.kind == kind and r.ref.name == name and (r.ref.namespace or None) == (namespace or None):
                return r
        return None

    def only(self, keep: t.Callable[[ObjectResult], bool]) -> "ReconcileResult":
        """The results ``keep`` selects (one step's part of a run): same mode, no requests or adoption of their own."""
        part = ReconcileResult(self.check_mode)
        part.results = [r for r in self.results if keep(r)]
        return part

    def to_module_result(self, diff: bool = False) -> t.Dict[str, t.Any]:
        out: t.Dict[str, t.Any] = {
            "changed": self.changed,
            "created": [r.ref.to_dict() for r in self.by_action("created")],
            "updated": [r.ref.to_dict() for r in self.by_action("updated")],
            "deleted": [r.ref.to_dict() for r in self.by_action("deleted")],
            "summary": {a: len(self.by_action(a)) for a in ("created", "updated", "unchanged", "deleted")},
        }
        if self.api_versions:
            out["api_versions"] = dict(self.api_versions)
        if self.adopted is not None:
            out["adopted"] = list(self.adopted)
        if diff:
            out["diff"] = [r.diff() for r in self.results if r.changed]
        return out
