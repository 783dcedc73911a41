# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An in-memory stand-in for module_utils.client.KubeClient (unit tests only)."""

from __future__ import annotations

import copy
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

NAMESPACED = {"Subscription", "InstallPlan", "ClusterServiceVersion", "OperatorGroup"}


class FakeResource:
    def __init__(self, client: "FakeKube", api_version: str, kind: str) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind

    def path(self, name=None, namespace=None):
        return "%s|%s|%s|%s" % (self.api_version, self.kind, namespace or "", name or "")

    def _key(self, name, namespace):
        return (self.kind, namespace if self.kind in NAMESPACED else None, name)

    def get(self, name, namespace=None):
        obj = self.client.objects.get(self._key(name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, namespace=None, label_selector=None, field_selector=None):
        out = []
        for (kind, ns, _name), obj in sorted(self.client.objects.items(), key=lambda kv: str(kv[0])):
            if kind != self.kind or (namespace and ns != namespace):
                continue
            if label_selector:
                key = label_selector.split("=")[0]
                if key not in ((obj.get("metadata") or {}).get("labels") or {}):
                    continue
            out.append(copy.deepcopy(obj))
        return out

    def apply(self, body, field_manager, force=False, dry_run=False):
        self.client.calls.append(("apply", self.kind, body["metadata"]["name"], dry_run))
        key = self._key(body["metadata"]["name"], body["metadata"].get("namespace"))
        merged = copy.deepcopy(self.client.objects.get(key) or {})
        for k, v in body.items():
            if isinstance(v, dict):
                merged.setdefault(k, {}).update(copy.deepcopy(v))
            else:
                merged[k] = v
        if not dry_run:
            self.client.objects[key] = merged
            self.client.on_write(self.kind, merged)
        return merged

    def delete(self, name, namespace=None, propagation_policy="Background", dry_run=False):
        self.client.calls.append(("delete", self.kind, name, dry_run))
        if not dry_run:
            return self.client.objects.pop(self._key(name, namespace), None)
        return self.get(name, namespace)


class FakeKube:
    def __init__(self, served: t.Iterable[t.Tuple[str, str]] = (), version: str = "v1.35.4") -> None:
        self.served_kinds = set(served) | {("v1", "Namespace")}
        self.objects: t.Dict[t.Tuple[str, t.Optional[str], str], t.Dict[str, t.Any]] = {}
        self.calls: t.List[t.Tuple[t.Any, ...]] = []
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
        if (api_version, kind) not in self.served_kinds:
            raise GpuaasError("%s %s is not served" % (api_version, kind), hint="install it")
        return FakeResource(self, api_version, kind)

    def request(self, method, path, query=None, body=None, content_type=None, timeout=None):
        self.calls.append(("request", method, path))
        if path == "/version":
            return {"gitVersion": self.version}
        if method == "PATCH" and content_type == "application/merge-patch+json":
            api_version, kind, ns, name = path.split("|")
            key = (kind, ns or None, name)
            assert isinstance(body, dict), "a merge patch body is a dict (the client encodes it)"
            patch = body
            self.objects[key].setdefault("spec", {}).update(patch["spec"])
            self.on_write(kind, self.objects[key])
            return copy.deepcopy(self.objects[key])
        raise AssertionError("unexpected request %s %s" % (method, path))
