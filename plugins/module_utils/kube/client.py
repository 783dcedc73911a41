# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes API client shared by every module of the collection.

Connection options and ``K8S_AUTH_*`` environment variables are the same as
kubernetes.core's (documented once in the ``gpuaas.platform.k8s_auth`` doc fragment).
API discovery is done per group/version (one small request) and cached for the
life of the process; requests go straight through ``ApiClient.call_api`` and are
decoded as plain dicts, which keeps LISTs of hundreds of objects cheap.

The pieces it is made of live beside it (``auth``: options, kubeconfig, secrets; ``retries``: transient failures
and backoff; ``api_errors``: error translation; ``library``: the optional ``kubernetes`` import); their public
names are importable from here too, the one import path modules use.
"""

from __future__ import annotations

import json
import threading
import time
import typing as t
from urllib.parse import quote

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
# Re-exported: modules and tests import these from kube.client.
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.api_errors import (  # pylint: disable=unused-import
    GROUP_HINTS,
    connection_error,
    missing_api_hint,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.auth import (  # pylint: disable=unused-import
    K8S_AUTH_ARG_SPEC,
    KUBECONFIG_SENSITIVE_KEYS,
    KubeAnsibleModule,
    auth_digest,
    auth_params,
    build_configuration,
    kubeconfig_secrets,
    register_secrets,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.library import (  # pylint: disable=unused-import
    HAS_KUBERNETES,
    ApiException,
    check_requirements,
    kubernetes,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.retries import (  # pylint: disable=unused-import
    DEFAULT_RETRY,
    RETRY_STATUSES,
    ApiUnreachable,
    RetryPolicy,
    is_connection_error,
    is_transient_status,
    with_retries,
)

HTTP_TIMEOUT = 60

_lock = threading.Lock()
_CLIENTS: t.Dict[str, "KubeClient"] = {}


class _MultiHeader(str):
    """A header name that may appear several times in one dict (Impersonate-Group)."""

    def __hash__(self) -> int:  # identity, so two equal names are two keys
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def lower(self) -> str:
        return self


def get_client(module: t.Any = None, params: t.Optional[t.Mapping[str, t.Any]] = None) -> "KubeClient":
    """A cached KubeClient for the module's connection options (or ``params``)."""
    check_requirements()
    if params is None:
        params = module.params if module is not None else {}
    register_secrets(module, params)
    auth = auth_params(params)
    key = auth_digest(auth)
    with _lock:
        client = _CLIENTS.get(key)
        if client is None:
            client = KubeClient(build_configuration(dict(auth)), auth)
            _CLIENTS[key] = client
    return client


def split_api_version(api_version: str) -> t.Tuple[str, str]:
    """'kueue.x-k8s.io/v1beta2' -> ('kueue.x-k8s.io', 'v1beta2'); 'v1' -> ('', 'v1')."""
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def gv_path(api_version: str) -> str:
    group, version = split_api_version(api_version)
    if not group:
        return "/api/%s" % version
    return "/apis/%s/%s" % (group, version)


class ApiResource:
    """One API resource (group/version/kind) with plain-dict REST helpers."""

    def __init__(self, client: "KubeClient", api_version: str, kind: str, plural: str,
                 namespaced: bool, verbs: t.Sequence[str]) -> None:
        self.client = client
        self.api_version = api_version
        self.group, self.version = split_api_version(api_version)
        self.kind = kind
        self.plural = plural
        self.name = plural
        self.namespaced = namespaced
        self.verbs = list(verbs)

    def __repr__(self) -> str:
        return "ApiResource(%s %s)" % (self.api_version, self.kind)

    def path(self, name: t.Optional[str] = None, namespace: t.Optional[str] = None) -> str:
        base = gv_path(self.api_version)
        if self.namespaced and namespace:
            base += "/namespaces/%s" % quote(namespace, safe="")
        base += "/%s" % self.plural
        if name:
            base += "/%s" % quote(name, safe="")
        return base

    def get(self, name: str, namespace: t.Optional[str] = None) -> t.Optional[t.Dict[str, t.Any]]:
        """The object, or None when it does not exist."""
        try:
            return self.client.request("GET", self.path(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, namespace: t.Optional[str] = None, label_selector: t.Optional[str] = None,
             field_selector: t.Optional[str] = None) -> t.List[t.Dict[str, t.Any]]:
        """Every object (all namespaces unless ``namespace``); items carry apiVersion and kind."""
        query: t.List[t.Tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        items: t.List[t.Dict[str, t.Any]] = []
        cont = None
        while True:
            q = list(query) + [("limit", "500")]
            if cont:
                q.append(("continue", cont))
            data = self.client.request("GET", self.path(namespace=namespace), query=q)
            for item in data.get("items") or []:
                item.setdefault("apiVersion", self.api_version)
                item.setdefault("kind", self.kind)
                items.append(item)
            cont = (data.get("metadata") or {}).get("continue")
            if not cont:
                return items

    def apply(self, body: t.Dict[str, t.Any], field_manager: str, force: bool = False,
              dry_run: bool = False) -> t.Dict[str, t.Any]:
        """Server-side apply of ``body`` (PATCH application/apply-patch+yaml)."""
        meta = body.get("metadata") or {}
        query = [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        return self.client.request(
            "PATCH", self.path(meta.get("name"), meta.get("namespace")), query=query,
            body=json.dumps(body), content_type="application/apply-patch+yaml",
        )

    def create(self, body: t.Dict[str, t.Any], field_manager: t.Optional[str] = None) -> t.Dict[str, t.Any]:
        """POST a new object (409 AlreadyExists when it exists)."""
        meta = body.get("metadata") or {}
        query = [("fieldManager", field_manager)] if field_manager else []
        return self.client.request("POST", self.path(namespace=meta.get("namespace")), query=query,
                                   body=body, content_type="application/json")

    def replace(self, body: t.Dict[str, t.Any], field_manager: t.Optional[str] = None) -> t.Dict[str, t.Any]:
        """PUT an object; with metadata.resourceVersion set it is a compare-and-swap (409 Conflict when stale)."""
        meta = body.get("metadata") or {}
        query = [("fieldManager", field_manager)] if field_manager else []
        return self.client.request("PUT", self.path(meta.get("name"), meta.get("namespace")), query=query,
                                   body=body, content_type="application/json")

    def delete(self, name: str, namespace: t.Optional[str] = None, propagation_policy: str = "Background",
               dry_run: bool = False, preconditions: t.Optional[t.Mapping[str, str]] = None
               ) -> t.Optional[t.Dict[str, t.Any]]:
        """Delete; None when the object was already gone. ``preconditions``: {uid, resourceVersion}."""
        body: t.Dict[str, t.Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation_policy}
        if preconditions:
            body["preconditions"] = dict(preconditions)
        query = []
        if dry_run:
            body["dryRun"] = ["All"]
            query.append(("dryRun", "All"))  # in the URL too, so audit logs show it
        try:
            return self.client.request("DELETE", self.path(name, namespace), query=query, body=body,
                                       content_type="application/json")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


class KubeClient:
    """Configured API client plus cached per-group/version discovery."""

    def __init__(self, configuration: t.Any, auth: t.Optional[t.Dict[str, t.Any]] = None) -> None:
        self.configuration = configuration
        self.auth = auth or {}
        self.api_client = kubernetes.client.ApiClient(configuration)
        self.api_client.user_agent = "gpuaas.platform/ansible"
        user = self.auth.get("impersonate_user")
        if user:
            self.api_client.default_headers["Impersonate-User"] = user
        for group in self.auth.get("impersonate_groups") or []:
            self.api_client.default_headers[_MultiHeader("Impersonate-Group")] = group
        self._discovery: t.Dict[str, t.Optional[t.Dict[str, ApiResource]]] = {}
        self._disc_lock = threading.Lock()
        self._dynamic = None
        self.retry = DEFAULT_RETRY
        self.sleep: t.Callable[[float], None] = time.sleep
        self.clock: t.Callable[[], float] = time.monotonic
        # Set when a request used up its retries on connection failures; later requests then fail at once
        # instead of each waiting through the backoff again (reset by the next successful request).
        self.unreachable: t.Optional[ApiUnreachable] = None
        self.retried = 0  # requests retried (for results/benchmarks)

    @property
    def host(self) -> str:
        return self.configuration.host

    @property
    def dynamic(self) -> t.Any:
        """A ``kubernetes.dynamic.DynamicClient`` on the same connection (created on first use)."""
        if self._dynamic is None:
            from kubernetes.dynamic import DynamicClient
            self._dynamic = DynamicClient(self.api_client)
        return self._dynamic

    # -- raw requests -------------------------------------------------------------------------------
    def request(self, method: str, path: str, query: t.Optional[t.Sequence[t.Tuple[str, str]]] = None,
                body: t.Any = None, content_type: t.Optional[str] = None,
                timeout: t.Optional[float] = HTTP_TIMEOUT) -> t.Any:
        """One API call with retries; returns the decoded JSON body.

        Transient failures (connection refused/reset, timeouts, 429 with Retry-After, 5xx, etcd timeouts) are
        retried with ``self.retry``'s bounded backoff. HTTP errors left raise ApiException; connection failures
        that outlast the budget raise ApiUnreachable (a GpuaasError with one message).
        """
        return with_retries(lambda: self._request_once(method, path, query, body, content_type, timeout),
                            self, "%s %s" % (method, path))

    def _request_once(self, method: str, path: str, query: t.Optional[t.Sequence[t.Tuple[str, str]]],
                      body: t.Any, content_type: t.Optional[str], timeout: t.Optional[float]) -> t.Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        if hasattr(self.api_client, "param_serialize"):
            # kubernetes >= 35 (new OpenAPI generator): serialize, send, and raise on HTTP errors ourselves.
            method_, url, hdrs, body_, _post = self.api_client.param_serialize(
                method, path, query_params=list(query or []), header_params=headers, body=body,
                auth_settings=["BearerToken"])
            resp = self.api_client.call_api(method_, url, header_params=hdrs, body=body_, _request_timeout=timeout)
            resp.read()
            if not 200 <= resp.status <= 299:
                raise ApiException(http_resp=resp)
        else:  # pragma: no cover - kubernetes < 35
            resp = self.api_client.call_api(
                path, method, query_params=list(query or []), header_params=headers, body=body,
                auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
                _request_timeout=timeout,
            )
        data = resp.data
        if not data:
            return {}
        return json.loads(data)

    # -- discovery ----------------------------------------------------------------------------------
    def _discover(self, api_version: str) -> t.Optional[t.Dict[str, ApiResource]]:
        with self._disc_lock:
            if api_version in self._discovery:
                return self._discovery[api_version]
        try:
            data = self.request("GET", gv_path(api_version))
        except ApiException as exc:
            if exc.status == 404:
                data = None
            else:
                raise translate_api_exception(exc, "discover API %s" % api_version)
        except Exception as exc:  # connection errors
            raise connection_error(self.host, exc)
        kinds: t.Optional[t.Dict[str, ApiResource]] = None
        if data is not None:
            kinds = {}
            for res in data.get("resources") or []:
                if "/" in res.get("name", ""):
                    continue  # subresource
                kinds[res["kind"]] = ApiResource(self, api_version, res["kind"], res["name"],
                                                 bool(res.get("namespaced")), res.get("verbs") or [])
        with self._disc_lock:
            self._discovery[api_version] = kinds
        return kinds

    def invalidate(self, api_version: t.Optional[str] = None) -> None:
        """Forget cached discovery (after installing CRDs in the same process)."""
        with self._disc_lock:
            if api_version is None:
                self._discovery.clear()
            else:
                self._discovery.pop(api_version, None)

    def served(self, group_version: str) -> bool:
        """Whether the cluster serves ``group_version`` (e.g. 'kueue.x-k8s.io/v1beta2')."""
        return self._discover(group_version) is not None

    def resource(self, api_version: str, kind: str) -> ApiResource:
        """The ApiResource for ``api_version``/``kind``; GpuaasError with an install hint when not served."""
        kinds = self._discover(api_version)
        if kinds is None or kind not in kinds:
            group, _version = split_api_version(api_version)
            raise GpuaasError(
                "%s %s is not served by the cluster — %s" % (api_version, kind, missing_api_hint(group)),
                hint=missing_api_hint(group),
                details={"api_version": api_version, "kind": kind, "reason": "NotServed"},
            )
        return kinds[kind]
