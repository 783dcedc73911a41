# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module tests' view of the one unit fake of the API server (tests/unit/module_utils/fake_kube.py).

``FakeKube(served)`` serves exactly the kinds given (plus Namespace), keeps server-side-apply semantics
(managedFields, owned-field removal) from the shared fake, and adds what module tests need: ``add`` to seed
objects, ``hooks`` called after every write (a tiny controller, e.g. OLM's), ``objects`` keyed
``(kind, namespace or None, name)``, ``/version`` and merge patches through ``request``.
"""

from __future__ import annotations

import copy
import os
import sys
import typing as t

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from module_utils.fake_kube import FakeClient, FakeResource  # noqa: E402  pylint: disable=wrong-import-position

NAMESPACED = {"Subscription", "InstallPlan", "ClusterServiceVersion", "OperatorGroup", "LocalQueue", "Secret",
              "ConfigMap", "ServiceMonitor", "PodMonitor", "PrometheusRule", "GrafanaDashboard", "ScaledObject",
              "RoleBinding", "ServiceAccount", "Deployment", "StatefulSet", "Pod", "Service", "Job", "Workload", "Lease",
              "HardwareProfile"}


class _ObjectsView(t.MutableMapping):
    """``store`` keyed with None (not "") for cluster-scoped objects."""

    def __init__(self, store: t.Dict[t.Tuple[str, str, str], t.Dict[str, t.Any]]) -> None:
        self.store = store

    @staticmethod
    def _key(key: t.Tuple[str, t.Optional[str], str]) -> t.Tuple[str, str, str]:
        return (key[0], key[1] or "", key[2])

    def __getitem__(self, key: t.Any) -> t.Dict[str, t.Any]:
        return self.store[self._key(key)]

    def __setitem__(self, key: t.Any, value: t.Dict[str, t.Any]) -> None:
        self.store[self._key(key)] = value

    def __delitem__(self, key: t.Any) -> None:
        del self.store[self._key(key)]

    def __iter__(self) -> t.Iterator[t.Tuple[str, t.Optional[str], str]]:
        return iter([(k, ns or None, n) for (k, ns, n) in list(self.store)])

    def __len__(self) -> int:
        return len(self.store)


class _HookedResource(FakeResource):
    def apply(self, body: t.Dict[str, t.Any], field_manager: str, force: bool = False,
              dry_run: bool = False) -> t.Dict[str, t.Any]:
        obj = super().apply(body, field_manager, force, dry_run)
        if not dry_run:
            self.client.on_write(self.kind, self.client.store[self._key(obj["metadata"]["name"], obj["metadata"].get("namespace"))])
        return obj


class FakeKube(FakeClient):
    def __init__(self, served: t.Iterable[t.Tuple[str, str]] = (), version: str = "v1.35.4") -> None:
        super().__init__()
        self.kinds = {}
        # Namespace and Lease (coordination.k8s.io, the run lock) are served by every cluster
        for api_version, kind in set(served) | {("v1", "Namespace"), ("coordination.k8s.io/v1", "Lease")}:
            self.kinds.setdefault(api_version, {})[kind] = (kind.lower() + "s", kind in NAMESPACED)
        self.objects = _ObjectsView(self.store)
        self.version = version
        self.hooks: t.List[t.Callable[[str, t.Dict[str, t.Any]], None]] = []

    def add(self, obj: t.Dict[str, t.Any]) -> None:
        kind = obj["kind"]
        ns = obj["metadata"].get("namespace") if kind in NAMESPACED else None
        self.objects[(kind, ns, obj["metadata"]["name"])] = copy.deepcopy(obj)

    def on_write(self, kind: str, obj: t.Dict[str, t.Any]) -> None:
        for hook in self.hooks:
            hook(kind, obj)

    def resource(self, api_version: str, kind: str) -> FakeResource:
        res = super().resource(api_version, kind)
        res.__class__ = _HookedResource
        return res

    def request(self, method, path, query=None, body=None, content_type=None, timeout=None):
        self.calls.append(("request", method, path))
        self.check_reachable()
        if path == "/version":
            return {"gitVersion": self.version}
        if method == "PATCH" and content_type == "application/merge-patch+json":
            _api_version, kind, ns, name = path.split("|")
            key = (kind, ns or None, name)
            assert isinstance(body, dict), "a merge patch body is a dict (the client encodes it)"
            self.objects[key].setdefault("spec", {}).update(body["spec"])
            self.on_write(kind, self.objects[key])
            return copy.deepcopy(self.objects[key])
        raise AssertionError("unexpected request %s %s" % (method, path))
