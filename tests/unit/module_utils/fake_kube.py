# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An in-memory stand-in for KubeClient: discovery, LIST/GET/SSA/DELETE with managedFields and CRD defaulting.

Enough of server-side apply to test the engine: the applier's managedFields entry records the fields of the
applied configuration; fields it owned before and no longer applies are removed; other managers' fields stay.
What stands between a request and the store is simulated too, for the tests that prove a guard: an unreachable
server (``reachable``), RBAC (``forbid``), validating admission (``admission``), immutable fields (422), the
resourceVersion compare-and-swap of create/replace/delete preconditions (409). This is the one unit fake of the API
server (issue 21): extend it here, generally, rather than writing another one in a test.
"""

from __future__ import annotations

import copy
import json
import re
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.retries import ApiUnreachable
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

KINDS = {
    "v1": {"Namespace": ("namespaces", False), "ConfigMap": ("configmaps", True)},
    "rbac.authorization.k8s.io/v1": {"RoleBinding": ("rolebindings", True)},
    "kueue.x-k8s.io/v1beta2": {
        "ResourceFlavor": ("resourceflavors", False), "Cohort": ("cohorts", False),
        "ClusterQueue": ("clusterqueues", False), "LocalQueue": ("localqueues", True),
        "WorkloadPriorityClass": ("workloadpriorityclasses", False),
    },
}


# Fields the API server refuses to change once set (422 Invalid), as the CRDs' CEL rules say: a LocalQueue cannot be
# moved to another ClusterQueue (Kueue: "field is immutable"), so the engine must delete and recreate it.
IMMUTABLE_FIELDS: t.Dict[str, t.Tuple[t.Tuple[str, ...], ...]] = {"LocalQueue": (("spec", "clusterQueue"),)}


def _field(obj: t.Optional[t.Mapping[str, t.Any]], path: t.Sequence[str]) -> t.Any:
    for part in path:
        if not isinstance(obj, t.Mapping):
            return None
        obj = obj.get(part)
    return obj


def fieldset(value: t.Any) -> t.Dict[str, t.Any]:
    """fieldsV1 of an applied configuration (lists of named maps are associative, other lists atomic)."""
    out: t.Dict[str, t.Any] = {}
    if isinstance(value, dict):
        for key, sub in value.items():
            if key in ("apiVersion", "kind"):
                continue
            if isinstance(sub, dict):
                out["f:%s" % key] = fieldset(sub)
            elif isinstance(sub, list) and sub and all(isinstance(e, dict) and "name" in e for e in sub):
                out["f:%s" % key] = {
                    "k:%s" % json.dumps({"name": e["name"]}, separators=(",", ":")): dict(fieldset(e), **{".": {}})
                    for e in sub
                }
            else:
                out["f:%s" % key] = {}
    return out


def cluster_queue_defaults(obj: t.Dict[str, t.Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("queueingStrategy", "BestEffortFIFO")
    spec.setdefault("stopPolicy", "None")
    fung = spec.setdefault("flavorFungibility", {})
    fung.setdefault("whenCanBorrow", "MayStopSearch")
    fung.setdefault("whenCanPreempt", "TryNextFlavor")
    pre = spec.setdefault("preemption", {})
    pre.setdefault("reclaimWithinCohort", "Never")
    pre.setdefault("withinClusterQueue", "Never")
    pre.setdefault("borrowWithinCohort", {"policy": "Never"})


def _prune_owned(live: t.Any, old: t.Mapping[str, t.Any], new: t.Mapping[str, t.Any]) -> t.Any:
    """Remove from ``live`` the leaf fields in ``old`` fieldset that are not in ``new``."""
    if not isinstance(live, dict):
        return live
    for key, sub in old.items():
        if not key.startswith("f:"):
            continue
        name = key[2:]
        if key not in new:
            live.pop(name, None)
        elif sub and name in live and isinstance(live[name], dict):
            _prune_owned(live[name], sub, new[key])
    return live


def _merge(live: t.Any, applied: t.Any) -> t.Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for k, v in applied.items():
            out[k] = _merge(live.get(k), v) if k in live else copy.deepcopy(v)
        return out
    return copy.deepcopy(applied)


class FakeResource:
    def __init__(self, client: "FakeClient", api_version: str, kind: str, plural: str, namespaced: bool) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.plural = plural
        self.name = plural
        self.namespaced = namespaced
        self.group = api_version.split("/")[0] if "/" in api_version else ""

    def path(self, name: t.Optional[str] = None, namespace: t.Optional[str] = None) -> str:
        return "%s|%s|%s|%s" % (self.api_version, self.kind, namespace or "", name or "")

    def _key(self, name: str, namespace: t.Optional[str]) -> t.Tuple[str, str, str]:
        return (self.kind, namespace or "" if self.namespaced else "", name)

    def get(self, name: str, namespace: t.Optional[str] = None) -> t.Optional[t.Dict[str, t.Any]]:
        self.client.calls.append(("get", self.kind, namespace, name))
        self.client.check_request("get", self.kind, namespace)
        obj = self.client.store.get(self._key(name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, namespace: t.Optional[str] = None, label_selector: t.Optional[str] = None,
             field_selector: t.Optional[str] = None) -> t.List[t.Dict[str, t.Any]]:
        self.client.calls.append(("list", self.kind, namespace, label_selector))
        self.client.check_request("list", self.kind, namespace)
        out = []
        for (kind, ns, _name), obj in sorted(self.client.store.items()):
            if kind != self.kind or (namespace and ns != namespace):
                continue
            if not selector_matches(label_selector, (obj.get("metadata") or {}).get("labels") or {}):
                continue
            out.append(copy.deepcopy(obj))
        return out

    def apply(self, body: t.Dict[str, t.Any], field_manager: str, force: bool = False,
              dry_run: bool = False) -> t.Dict[str, t.Any]:
        meta = body["metadata"]
        call = (self.kind, meta.get("namespace"), meta["name"], dry_run)
        try:
            self.client.check_request("patch", self.kind, meta.get("namespace"))
            if self.client.fail_apply.get(meta["name"]):
                raise self.client.fail_apply[meta["name"]]
        except Exception:
            self.client.calls.append(("apply",) + call)
            raise
        try:
            for admit in self.client.admission:
                admit(self, body, dry_run)
        except Exception:
            # recorded as "refused", not "apply": tests tell a request admission denied from an admitted one
            self.client.calls.append(("refused",) + call)
            raise
        self.client.calls.append(("apply",) + call)
        if self.namespaced and self.client.strict_namespaces:
            if ("Namespace", "", meta.get("namespace")) not in self.client.store:
                raise api_exception(404, "NotFound", 'namespaces "%s" not found' % meta.get("namespace"))
        key = self._key(meta["name"], meta.get("namespace"))
        live = copy.deepcopy(self.client.store.get(key))
        for path in IMMUTABLE_FIELDS.get(self.kind, ()) if live is not None else ():
            if _field(live, path) is not None and _field(live, path) != _field(body, path):
                raise api_exception(422, "Invalid", '%s.%s "%s" is invalid: %s: Invalid value: %s: field is immutable' % (
                    self.plural, self.group, meta["name"], ".".join(path), json.dumps(_field(body, path))))
        applied = copy.deepcopy(body)
        new_fields = fieldset({k: v for k, v in applied.items() if k not in ("apiVersion", "kind")})
        new_fields.get("f:metadata", {}).pop("f:name", None)
        new_fields.get("f:metadata", {}).pop("f:namespace", None)
        if live is None:
            obj = applied
            obj["metadata"]["uid"] = self.client.next_uid()
            entries = []
        else:
            entries = live["metadata"].get("managedFields") or []
            old = next((e["fieldsV1"] for e in entries if e["manager"] == field_manager), {})
            live = _prune_owned(live, old, new_fields)
            obj = _merge(live, applied)
            entries = [e for e in entries if e["manager"] != field_manager]
        if self.kind == "ClusterQueue":
            cluster_queue_defaults(obj)
        entries.append({"manager": field_manager, "operation": "Apply", "apiVersion": self.api_version,
                        "fieldsType": "FieldsV1", "fieldsV1": new_fields})
        obj["metadata"]["managedFields"] = entries
        obj["metadata"]["resourceVersion"] = self.client.next_resource_version()
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        if not dry_run:
            self.client.store[key] = copy.deepcopy(obj)
            self.client.writes.append(("apply", key))
        return copy.deepcopy(obj)

    # create/replace: what the Lease lock uses (kube/lease.py), with the API server's compare-and-swap on
    # metadata.resourceVersion (409 Conflict when the object moved since it was read).
    def create(self, body: t.Dict[str, t.Any], field_manager: t.Optional[str] = None) -> t.Dict[str, t.Any]:
        meta = body["metadata"]
        self.client.calls.append(("create", self.kind, meta.get("namespace"), meta["name"]))
        self.client.check_request("create", self.kind, meta.get("namespace"))
        key = self._key(meta["name"], meta.get("namespace"))
        if key in self.client.store:
            raise api_exception(409, "AlreadyExists", '%s "%s" already exists' % (self.plural, meta["name"]))
        return self._store(key, body, self.client.next_uid(), "create")

    def replace(self, body: t.Dict[str, t.Any], field_manager: t.Optional[str] = None) -> t.Dict[str, t.Any]:
        meta = body["metadata"]
        self.client.calls.append(("replace", self.kind, meta.get("namespace"), meta["name"]))
        self.client.check_request("update", self.kind, meta.get("namespace"))
        key = self._key(meta["name"], meta.get("namespace"))
        live = self.client.store.get(key)
        if live is None:
            raise api_exception(404, "NotFound", '%s "%s" not found' % (self.plural, meta["name"]))
        if meta.get("resourceVersion") != live["metadata"].get("resourceVersion"):
            raise api_exception(409, "Conflict", "the object has been modified; please apply your changes to the "
                                                 "latest version and try again")
        return self._store(key, body, live["metadata"].get("uid"), "replace")

    def _store(self, key: t.Tuple[str, str, str], body: t.Dict[str, t.Any], uid: t.Optional[str], verb: str
               ) -> t.Dict[str, t.Any]:
        """Keep ``body`` as the object at ``key`` with ``uid`` and a new resourceVersion (a create or replace)."""
        obj = copy.deepcopy(body)
        obj["metadata"].update({"uid": uid, "resourceVersion": self.client.next_resource_version()})
        self.client.store[key] = obj
        self.client.writes.append((verb, key))
        return copy.deepcopy(obj)

    def delete(self, name: str, namespace: t.Optional[str] = None, propagation_policy: str = "Background",
               dry_run: bool = False, preconditions: t.Optional[t.Mapping[str, t.Any]] = None) -> t.Optional[t.Dict[str, t.Any]]:
        self.client.calls.append(("delete", self.kind, namespace, name, dry_run))
        self.client.check_request("delete", self.kind, namespace)
        key = self._key(name, namespace)
        if key not in self.client.store:
            return None
        live_meta = self.client.store[key]["metadata"]
        if preconditions and any(live_meta.get(k) != v for k, v in preconditions.items() if v is not None):
            raise api_exception(409, "Conflict", "Precondition failed: %s" % dict(preconditions))
        obj = self.client.store[key]
        if not dry_run:
            del self.client.store[key]
            self.client.writes.append(("delete", key))
        return copy.deepcopy(obj)


def foreign_object(kind: str, name: str, namespace: t.Optional[str] = None, spec: t.Optional[t.Any] = None,
                   labels: t.Optional[t.Mapping[str, str]] = None, api_version: str = "kueue.x-k8s.io/v1beta2",
                   manager: str = "kubectl-client-side-apply", **top: t.Any) -> t.Dict[str, t.Any]:
    """An object someone else made (its one managedFields entry is ``manager``'s Update), to seed a fake with."""
    meta: t.Dict[str, t.Any] = {"name": name, "labels": dict(labels or {}),
                                "managedFields": [{"manager": manager, "operation": "Update", "fieldsV1": {}}]}
    if namespace:
        meta["namespace"] = namespace
    obj: t.Dict[str, t.Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if spec is not None:
        obj["spec"] = spec
    obj.update(top)
    return obj


def node(name: str, labels: t.Mapping[str, str], allocatable: t.Mapping[str, str]) -> t.Dict[str, t.Any]:
    """A Node as the kubelet and the device plugin report it (labels and status.allocatable), to seed a fake with."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)},
            "status": {"allocatable": dict(allocatable)}}


def selector_matches(selector: t.Optional[str], labels: t.Mapping[str, str]) -> bool:
    """The API server's label selector grammar as the collection uses it: k=v, k (exists), k in (a,b)."""
    for part in re.findall(r"[^,(]+(?:\([^)]*\))?", selector or ""):
        part = part.strip()
        if not part:
            continue
        if " in (" in part:
            k, values = part.split(" in (", 1)
            if labels.get(k.strip()) not in [v.strip() for v in values.rstrip(")").split(",")]:
                return False
        elif "=" in part:
            k, v = part.split("=", 1)
            if labels.get(k) != v:
                return False
        elif part not in labels:
            return False
    return True


def api_exception(status: int, reason: str, message: str, causes: t.Optional[t.List[t.Dict[str, str]]] = None) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "reason": reason,
                           "details": {"causes": causes or []}, "code": status})
    return exc


class FakeClient:
    """KubeClient-compatible fake."""

    host = "https://fake.example:6443"

    def __init__(self, kueue_versions: t.Sequence[str] = ("v1beta2",), strict_namespaces: bool = False) -> None:
        self.kinds: t.Dict[str, t.Dict[str, t.Tuple[str, bool]]] = {
            k: dict(v) for k, v in KINDS.items() if not k.startswith("kueue")}
        for version in kueue_versions:
            self.kinds["kueue.x-k8s.io/%s" % version] = dict(KINDS["kueue.x-k8s.io/v1beta2"])
        self.store: t.Dict[t.Tuple[str, str, str], t.Dict[str, t.Any]] = {}
        self.calls: t.List[t.Tuple[t.Any, ...]] = []
        self.writes: t.List[t.Tuple[t.Any, ...]] = []
        self.fail_apply: t.Dict[str, Exception] = {}
        # RBAC: (verb, kind) -> the namespaces where the verb is still allowed (empty: nowhere), see forbid()
        self.denied: t.Dict[t.Tuple[str, str], t.Tuple[str, ...]] = {}
        # validating admission (a webhook, a ValidatingAdmissionPolicy): called with (resource, body, dry_run) before
        # an apply is stored; it refuses by raising, as the API server answers a denied request
        self.admission: t.List[t.Callable[[FakeResource, t.Dict[str, t.Any], bool], None]] = []
        self._resource_version = 0
        self._uid = 0
        self.reachable = True  # False: the API server cannot be reached, every request fails (a down cluster)
        self.strict_namespaces = strict_namespaces
        self._resources: t.Dict[t.Tuple[str, str], FakeResource] = {}

    def served(self, group_version: str) -> bool:
        return group_version in self.kinds

    def serve(self, api_version: str, kind: str, plural: str, namespaced: bool = True) -> "FakeClient":
        """Serve one more kind (a CRD installed on the cluster, a core kind the tests need); returns the client."""
        self.kinds.setdefault(api_version, {})[kind] = (plural, namespaced)
        return self

    def seed(self, *objects: t.Dict[str, t.Any]) -> "FakeClient":
        """Store copies of ``objects`` as they are (no managedFields, no defaulting, no write recorded): what is on
        the cluster before the test; returns the client."""
        for obj in objects:
            meta = obj["metadata"]
            self.store[(obj["kind"], meta.get("namespace") or "", meta["name"])] = copy.deepcopy(obj)
        return self

    def resource(self, api_version: str, kind: str) -> FakeResource:
        if api_version not in self.kinds or kind not in self.kinds[api_version]:
            group = api_version.split("/")[0]
            hint = "is Kueue installed? (install it with the gpuaas.platform.kueue role)" if group == "kueue.x-k8s.io" else "?"
            raise GpuaasError("%s %s is not served by the cluster — %s" % (api_version, kind, hint), hint=hint,
                              details={"reason": "NotServed"})
        key = (api_version, kind)
        if key not in self._resources:
            plural, namespaced = self.kinds[api_version][kind]
            self._resources[key] = FakeResource(self, api_version, kind, plural, namespaced)
        return self._resources[key]

    def forbid(self, verb: str, kind: str, except_namespaces: t.Sequence[str] = ()) -> None:
        """Deny ``verb`` (get, list, patch, create, update, delete) on ``kind`` with a 403, as a least-privilege
        account's RBAC does, except in ``except_namespaces`` (a Role bound only there)."""
        self.denied[(verb, kind)] = tuple(except_namespaces)

    def check_request(self, verb: str, kind: str, namespace: t.Optional[str]) -> None:
        """What stops a request before the object is touched: an unreachable server, then RBAC (see forbid)."""
        self.check_reachable()
        allowed = self.denied.get((verb, kind))
        if allowed is not None and namespace not in allowed:
            plural = "%ss" % kind.lower()
            raise api_exception(403, "Forbidden", '%s is forbidden: User "fake" cannot %s resource "%s"%s' % (
                plural, verb, plural, ' in the namespace "%s"' % namespace if namespace else " at the cluster scope"))

    def check_reachable(self) -> None:
        if not self.reachable:
            raise ApiUnreachable("cannot reach the API server at %s" % self.host)

    def next_uid(self) -> str:
        """A uid never handed out before: an object deleted and created again is a new object (a ServiceAccount
        recreated by a credential rotation must not get its predecessor's uid, whose tokens the server refuses)."""
        self._uid += 1
        return "uid-%d" % self._uid

    def next_resource_version(self) -> str:
        """A resourceVersion never handed out before (a counter, so reset_calls cannot make one repeat)."""
        self._resource_version += 1
        return str(self._resource_version)

    def count(self, verb: str) -> int:
        return sum(1 for c in self.calls if c[0] == verb)

    def verbs(self) -> t.List[t.Tuple[str, str]]:
        """Every call as (verb, kind), "-dry" appended to a dry run's verb (an apply, an apply admission refused, a
        delete): the request sequence without names. A request to a path is ("request", method)."""
        return [(c[0] + ("-dry" if len(c) > 4 and c[4] else ""), c[1]) for c in self.calls]

    def side_effects(self) -> t.List[t.Tuple[t.Any, ...]]:
        """Every call that is not a read: applies and deletes (dry runs included), creates, replaces, requests
        other than GET."""
        return [c for c in self.calls if c[0] not in ("get", "list") and not (c[0] == "request" and c[1] == "GET")]

    def reset_calls(self) -> None:
        self.calls = []
        self.writes = []
