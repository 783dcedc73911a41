# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes API client shared by every module of the collection.

Connection options and ``K8S_AUTH_*`` environment variables are the same as
kubernetes.core's (documented once in the ``gpuaas.platform.k8s_auth`` doc fragment).
API discovery is done per group/version (one small request) and cached for the
life of the process; requests go straight through ``ApiClient.call_api`` and are
decoded as plain dicts, which keeps LISTs of hundreds of objects cheap.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import typing as t
from urllib.parse import quote

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

try:
    import kubernetes
    from kubernetes.client.rest import ApiException
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as _imp_err:  # pragma: no cover - reported by check_requirements()
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = _imp_err

    class ApiException(Exception):  # type: ignore[no-redef]
        """Placeholder so that ``except ApiException`` works without the library."""

        status = 0
        reason = ""
        body = ""

try:
    import urllib3
    urllib3.disable_warnings()
except ImportError:  # pragma: no cover
    pass


K8S_AUTH_ARG_SPEC: t.Dict[str, t.Dict[str, t.Any]] = {
    "kubeconfig": {"type": "raw"},
    "context": {"type": "str"},
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"]},
    "proxy": {"type": "str"},
    "no_proxy": {"type": "str"},
    "proxy_headers": {
        "type": "dict",
        "options": {
            "proxy_basic_auth": {"type": "str", "no_log": True},
            "basic_auth": {"type": "str", "no_log": True},
            "user_agent": {"type": "str"},
        },
    },
    "persist_config": {"type": "bool"},
    "impersonate_user": {"type": "str"},
    "impersonate_groups": {"type": "list", "elements": "str"},
}

# option name -> additional environment variable names (besides K8S_AUTH_<OPTION>), as kubernetes.core
_ENV_ALIASES: t.Dict[str, t.Tuple[str, ...]] = {
    "validate_certs": ("K8S_AUTH_VERIFY_SSL",),
    "ca_cert": ("K8S_AUTH_SSL_CA_CERT",),
    "client_cert": ("K8S_AUTH_CERT_FILE",),
    "client_key": ("K8S_AUTH_KEY_FILE",),
}

GROUP_HINTS: t.Dict[str, str] = {
    "kueue.x-k8s.io": "is Kueue installed? (install it with the gpuaas.platform.kueue role)",
    "keda.sh": "is KEDA installed? (install it with the gpuaas.platform.keda role)",
    "nvidia.com": "is the NVIDIA GPU Operator installed? (install it with the gpuaas.platform.gpu_operator role)",
    "nfd.k8s-sigs.io": "is Node Feature Discovery installed? (the gpuaas.platform.gpu_operator role installs it)",
    "nfd.openshift.io": "is the OpenShift NFD operator installed? (the gpuaas.platform.gpu_operator role installs it)",
    "operators.coreos.com": "is OLM installed? (OpenShift ships it; on Kubernetes use the Helm path of the install roles)",
    "monitoring.coreos.com": "is the Prometheus Operator installed? (ServiceMonitors need its CRDs)",
    "config.openshift.io": "this API only exists on OpenShift",
    "kueue.openshift.io": "is Red Hat's build of Kueue operator installed? (install it with the gpuaas.platform.kueue role)",
}

HTTP_TIMEOUT = 60

# Transient API errors are retried with a bounded exponential backoff (see RetryPolicy).
RETRY_STATUSES = frozenset((429, 500, 502, 503, 504))
# kubeconfig keys whose values are credentials (as kubernetes.core's args_common redaction)
KUBECONFIG_SENSITIVE_KEYS = frozenset((
    "token", "password", "secret", "client-key-data", "client-certificate-data", "certificate-authority-data",
    "api_key", "access-token", "refresh-token", "id-token",
))

_lock = threading.Lock()
_CLIENTS: t.Dict[str, "KubeClient"] = {}


class RetryPolicy:
    """Bounded exponential backoff for transient API errors.

    ``attempts`` requests at most, delays ``base * factor**n`` capped at ``max_delay`` (plus up to ``jitter``
    of it at random), a server's ``Retry-After`` honoured up to ``max_delay``, and never more than ``budget``
    seconds of waiting in total per request.
    """

    def __init__(self, attempts: int = 6, base: float = 0.5, factor: float = 2.0, max_delay: float = 8.0,
                 budget: float = 30.0, jitter: float = 0.1) -> None:
        self.attempts = max(1, int(attempts))
        self.base = float(base)
        self.factor = float(factor)
        self.max_delay = float(max_delay)
        self.budget = float(budget)
        self.jitter = float(jitter)

    def delay(self, attempt: int, retry_after: t.Optional[float] = None,
              rand: t.Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(float(retry_after), self.max_delay)
        wait = min(self.base * (self.factor ** (attempt - 1)), self.max_delay)
        return wait * (1.0 + self.jitter * rand())


DEFAULT_RETRY = RetryPolicy()


class ApiUnreachable(GpuaasError):
    """The API server stayed unreachable (connection refused/reset, timeouts) through the retry budget."""


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection-class failure (the request may not have reached the API server)."""
    try:
        from urllib3 import exceptions as u3
    except ImportError:  # pragma: no cover
        u3 = None  # type: ignore[assignment]
    if u3 is not None:
        if isinstance(exc, u3.MaxRetryError):
            reason = getattr(exc, "reason", None)
            return reason is None or not isinstance(reason, u3.SSLError)
        if isinstance(exc, u3.SSLError):
            return False
        if isinstance(exc, (u3.ProtocolError, u3.TimeoutError, u3.NewConnectionError)):
            return True
    return isinstance(exc, (ConnectionError, TimeoutError))


def _retry_after(exc: t.Any) -> t.Optional[float]:
    headers = getattr(exc, "headers", None) or {}
    try:
        value = headers.get("Retry-After") or headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def is_transient_status(exc: t.Any) -> bool:
    """HTTP errors worth retrying: 429, 5xx and etcd timeouts, but not a failing admission webhook."""
    status = getattr(exc, "status", None) or 0
    if status not in RETRY_STATUSES:
        return False
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = ("%s %s" % (body or "", getattr(exc, "reason", "") or "")).lower()
    return "failed calling webhook" not in text and "admission webhook" not in text


def kubeconfig_secrets(data: t.Any) -> t.Set[str]:
    """Credential values inside a kubeconfig given as a dict (tokens, keys, certificates, passwords)."""
    values: t.Set[str] = set()

    def walk(node: t.Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in KUBECONFIG_SENSITIVE_KEYS and isinstance(value, str) and value:
                    values.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return values


def register_secrets(module: t.Any, params: t.Optional[t.Mapping[str, t.Any]] = None) -> None:
    """Add the credentials inside the connection options to ``module.no_log_values``.

    ``api_key``/``password`` are ``no_log`` options already; a kubeconfig passed as a dict is not, so its tokens,
    keys and certificates are registered here (kubernetes.core does the same).
    """
    if module is None or not hasattr(module, "no_log_values"):
        return
    params = params if params is not None else (getattr(module, "params", None) or {})
    kubeconfig = params.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        module.no_log_values.update(kubeconfig_secrets(kubeconfig))


try:
    from ansible.module_utils.basic import AnsibleModule as _AnsibleModule
except ImportError:  # pragma: no cover - module_utils are always used under Ansible
    _AnsibleModule = object  # type: ignore[assignment,misc]


class KubeAnsibleModule(_AnsibleModule):  # type: ignore[misc,valid-type]
    """AnsibleModule that registers the credentials inside a kubeconfig dict before the invocation is logged.

    ``kubeconfig`` is a ``raw`` option (path or dict), so Ansible cannot mark it ``no_log``; its secret values go
    to ``no_log_values`` before ``_log_invocation`` writes the parameters to syslog/journald, and are therefore
    masked there and in every result. Modules with other secret-bearing dict options extend ``register_secrets``.
    """

    def register_secrets(self) -> None:
        register_secrets(self)

    def _log_invocation(self) -> None:
        self.register_secrets()
        super()._log_invocation()  # type: ignore[misc]


class _MultiHeader(str):
    """A header name that may appear several times in one dict (Impersonate-Group)."""

    def __hash__(self) -> int:  # identity, so two equal names are two keys
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def lower(self) -> str:
        return self


def _env_value(name: str) -> t.Optional[str]:
    for env in ("K8S_AUTH_%s" % name.upper(),) + _ENV_ALIASES.get(name, ()):
        value = os.environ.get(env)
        if value is not None and value != "":
            return value
    return None


def _to_bool(value: t.Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in ("0", "false", "no", "off", "n", "f")


def auth_params(params: t.Optional[t.Mapping[str, t.Any]] = None) -> t.Dict[str, t.Any]:
    """Connection options: module parameters first, then ``K8S_AUTH_*`` environment variables."""
    params = params or {}
    auth: t.Dict[str, t.Any] = {}
    for name, spec in K8S_AUTH_ARG_SPEC.items():
        value = params.get(name)
        if value is None and name != "proxy_headers":
            raw = _env_value(name)
            if raw is not None:
                if spec.get("type") == "bool":
                    value = _to_bool(raw)
                elif spec.get("type") == "list":
                    value = [v.strip() for v in raw.split(",") if v.strip()]
                else:
                    value = raw
        if name == "proxy_headers" and value is None:
            headers = {}
            for key in spec["options"]:
                raw = os.environ.get("K8S_AUTH_PROXY_HEADERS_%s" % key.upper())
                if raw:
                    headers[key] = raw
            value = headers or None
        if value is not None:
            auth[name] = value
    return auth


def _digest(auth: t.Mapping[str, t.Any]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(auth, sort_keys=True, default=str).encode())
    h.update((os.environ.get("KUBECONFIG") or "").encode())
    return h.hexdigest()


def _build_configuration(auth: t.Dict[str, t.Any]) -> t.Any:
    """Create a ``kubernetes.client.Configuration`` from the resolved options (no global state)."""
    def has(*names: str) -> bool:
        return all(auth.get(n) for n in names)

    host = auth.get("host")
    if host:
        host = host.rstrip("/")

    use_ocp_login = has("username", "password", "host")
    if use_ocp_login:
        try:
            from openshift.helper.userpassauth import OCPLoginConfiguration  # type: ignore
        except ImportError as exc:
            raise GpuaasError(
                "username/password login needs the 'openshift' Python package (%s)" % exc,
                hint="pip install openshift (it is listed in the collection's requirements.txt), or use api_key/kubeconfig",
            )
        configuration = OCPLoginConfiguration(host=host, ocp_username=auth["username"], ocp_password=auth["password"])
    else:
        configuration = kubernetes.client.Configuration()
        enough = has("api_key", "host") or has("client_cert", "client_key", "host")
        if not enough:
            try:
                kubeconfig = auth.get("kubeconfig")
                if kubeconfig or auth.get("context"):
                    _load_kubeconfig(auth, configuration)
                else:
                    try:
                        kubernetes.config.load_incluster_config(client_configuration=configuration)
                    except kubernetes.config.ConfigException:
                        _load_kubeconfig(auth, configuration)
            except (kubernetes.config.ConfigException, OSError) as exc:
                raise GpuaasError(
                    "cannot load the Kubernetes client configuration: %s" % exc,
                    hint="set kubeconfig (or K8S_AUTH_KUBECONFIG / KUBECONFIG) and context, or host with api_key",
                )

    if host:
        configuration.host = host
    if auth.get("api_key"):
        configuration.api_key = {"authorization": "Bearer %s" % auth["api_key"]}
    if auth.get("validate_certs") is not None:
        configuration.verify_ssl = bool(auth["validate_certs"])
    if auth.get("ca_cert"):
        configuration.ssl_ca_cert = auth["ca_cert"]
    if auth.get("client_cert"):
        configuration.cert_file = auth["client_cert"]
    if auth.get("client_key"):
        configuration.key_file = auth["client_key"]
    if auth.get("proxy"):
        configuration.proxy = auth["proxy"]
    if auth.get("no_proxy"):
        configuration.no_proxy = auth["no_proxy"]
    if auth.get("proxy_headers"):
        configuration.proxy_headers = urllib3.util.make_headers(**auth["proxy_headers"])
    configuration.connection_pool_maxsize = max(getattr(configuration, "connection_pool_maxsize", 4) or 4, 16)
    # No urllib3-level retries: KubeClient.request retries transient failures itself, with backoff.
    configuration.retries = False

    if use_ocp_login:
        try:
            configuration.get_token()
        except Exception as exc:  # OCPLoginException, requests errors
            raise GpuaasError(
                "OpenShift OAuth login as %r at %s failed: %s" % (auth["username"], host, exc),
                hint="username/password works only with an OpenShift OAuth server; check the credentials, "
                     "or use api_key/kubeconfig on plain Kubernetes",
            )
    return configuration


def _load_kubeconfig(auth: t.Dict[str, t.Any], configuration: t.Any) -> None:
    kubeconfig = auth.get("kubeconfig")
    kwargs = {"context": auth.get("context"), "client_configuration": configuration}
    if auth.get("persist_config") is not None:
        kwargs["persist_config"] = auth["persist_config"]
    if isinstance(kubeconfig, dict):
        kubernetes.config.load_kube_config_from_dict(config_dict=kubeconfig, **kwargs)
    else:
        kubernetes.config.load_kube_config(config_file=kubeconfig or None, **kwargs)


def check_requirements() -> None:
    """Raise a GpuaasError when the ``kubernetes`` Python library is missing."""
    if not HAS_KUBERNETES:
        raise GpuaasError(
            "the 'kubernetes' Python library is required (%s)" % KUBERNETES_IMPORT_ERROR,
            hint="pip install -r requirements.txt of the gpuaas.platform collection on the Ansible controller",
        )


def get_client(module: t.Any = None, params: t.Optional[t.Mapping[str, t.Any]] = None) -> "KubeClient":
    """A cached KubeClient for the module's connection options (or ``params``)."""
    check_requirements()
    if params is None:
        params = module.params if module is not None else {}
    register_secrets(module, params)
    auth = auth_params(params)
    key = _digest(auth)
    with _lock:
        client = _CLIENTS.get(key)
        if client is None:
            client = KubeClient(_build_configuration(dict(auth)), auth)
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


def missing_api_hint(group: str) -> str:
    return GROUP_HINTS.get(group, "is the operator that provides this API installed and its CRDs established?")


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


def with_retries(call: t.Callable[[], t.Any], client: t.Any, what: str = "the request") -> t.Any:
    """Run ``call`` under ``client.retry`` (RetryPolicy), ``client.sleep`` and ``client.clock``.

    Raises the last ApiException for HTTP errors, ApiUnreachable when connection failures outlast the budget,
    and anything else unchanged.
    """
    policy: RetryPolicy = getattr(client, "retry", None) or DEFAULT_RETRY
    sleep = getattr(client, "sleep", None) or time.sleep
    clock = getattr(client, "clock", None) or time.monotonic
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            value = call()
        except ApiException as exc:
            if not is_transient_status(exc):
                raise
            last: BaseException = exc
            connection = False
            retry_after = _retry_after(exc)
        except Exception as exc:  # noqa: BLE001 - classified below
            if not is_connection_error(exc):
                raise
            last = exc
            connection = True
            retry_after = None
        else:
            if getattr(client, "unreachable", None) is not None:
                client.unreachable = None
            return value
        known_down = getattr(client, "unreachable", None)
        wait = policy.delay(attempt, retry_after)
        spent = clock() - start
        if known_down is not None and connection:
            raise ApiUnreachable(known_down.message, hint=known_down.hint, details=dict(known_down.details))
        if attempt >= policy.attempts or spent + wait > policy.budget:
            if connection:
                err = ApiUnreachable(
                    "the Kubernetes API server at %s is unreachable: %s (%d attempts in %.0fs)"
                    % (getattr(client, "host", "?"), _short(last), attempt, spent),
                    hint="check that the API server is up and reachable (network, proxy, host/kubeconfig), then re-run",
                    details={"reason": "Unreachable", "attempts": attempt, "seconds": round(spent, 1),
                             "request": what})
                try:
                    client.unreachable = err
                except AttributeError:  # pragma: no cover - clients without the attribute
                    pass
                raise err
            raise last
        try:
            client.retried = getattr(client, "retried", 0) + 1
        except AttributeError:  # pragma: no cover
            pass
        sleep(wait)


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    text = text.split("\n", maxsplit=1)[0]
    return text if len(text) <= 200 else text[:197] + "..."


# -- error translation ----------------------------------------------------------------------------------

def _status_body(exc: t.Any) -> t.Dict[str, t.Any]:
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip().startswith("{"):
        try:
            return json.loads(body)
        except ValueError:
            return {}
    return {}


def connection_error(host: str, exc: Exception) -> GpuaasError:
    if isinstance(exc, GpuaasError):
        return exc
    return GpuaasError(
        "cannot reach the Kubernetes API server at %s: %s" % (host, exc),
        hint="check host/kubeconfig/context, the network path and proxy settings, and ca_cert/validate_certs",
    )


def translate_api_exception(exc: t.Any, action: str, ref: t.Optional[str] = None) -> GpuaasError:
    """Turn an ApiException into 'what is wrong / how to fix it' for the object ``ref``."""
    status = getattr(exc, "status", None) or 0
    body = _status_body(exc)
    message = body.get("message") or getattr(exc, "reason", "") or str(exc)
    reason = body.get("reason") or getattr(exc, "reason", "")
    details = body.get("details") or {}
    causes = details.get("causes") or []
    what = ref or "the request"
    problems = []
    for cause in causes:
        field = cause.get("field")
        text = cause.get("message") or cause.get("reason") or ""
        problems.append("%s: %s" % (field, text) if field else text)
    info = {"status": status, "reason": reason, "action": action}
    if ref:
        info["object"] = ref
    lower = message.lower()
    if "admission webhook" in lower and "denied" in lower:
        hint = ("an admission webhook rejected %s; the message above says which field to change" % what)
        if "failed calling webhook" in lower:
            hint = "the webhook is not reachable: is its controller (e.g. kueue-controller-manager) running?"
        return GpuaasError("%s %s was denied: %s" % (action, what, message), hint=hint, problems=problems, details=info)
    if "failed calling webhook" in lower:
        return GpuaasError(
            "%s %s failed: %s" % (action, what, message),
            hint="the admission webhook is not reachable: is its controller (e.g. kueue-controller-manager in "
                 "kueue-system) running and its Service ready?", problems=problems, details=info)
    if status == 422 or reason == "Invalid":
        return GpuaasError(
            "%s %s: the API server rejected the object as invalid: %s" % (action, what, message),
            hint="fix the fields listed (option names map to the API fields in snake_case); immutable fields "
                 "need the object to be deleted and recreated", problems=problems, details=info)
    if status == 403:
        if "being terminated" in lower:
            return GpuaasError("%s %s: %s" % (action, what, message),
                               hint="the namespace is being deleted: wait until it is gone (kubectl get ns), then "
                                    "re-run to create it again", problems=problems, details=info)
        if "validatingadmissionpolicy" in lower or "denied request" in lower:
            hint = "an admission policy denied it; the message above says why"
        elif "not currently held" in message:
            hint = ("RBAC lets an account grant only permissions it holds: it needs the bind verb on the referenced "
                    "role (the collection's gpuaas-automation-tenants ClusterRole binds admin and edit only) or every "
                    "rule of the role it creates; roles/automation_rbac/files lists what each playbook needs")
        else:
            import re  # only this message parses the API server's words

            denied = re.search(r'User "([^"]*)" cannot ([\w-]+) resource "([^"]+)" in API group "([^"]*)"'
                               r'(?: in the namespace "([^"]+)")?', message)
            if denied:
                user, verb, resource, group, namespace = denied.groups()
                info.update({"user": user, "verb": verb, "resource": resource, "api_group": group,
                             "namespace": namespace})
                hint = ("grant %s on %s%s %s to %s: bind the ClusterRole the collection ships for this playbook "
                        "(roles/automation_rbac, gpuaas-automation-<playbook>; docs/production.md) or add the verb to "
                        "its role; check with: kubectl auth can-i %s %s%s%s --as=%s"
                        % (verb, resource, " (API group %s)" % group if group else "",
                           "in namespace %s" % namespace if namespace else "cluster-wide", user,
                           verb, resource, ".%s" % group if group else "", " -n %s" % namespace if namespace else "",
                           user))
            else:
                hint = ("the credentials in use lack RBAC permission for this; grant the verb on this resource (the "
                        "ClusterRoles per playbook are in roles/automation_rbac; kubectl auth can-i ...)")
        return GpuaasError("%s %s is forbidden: %s" % (action, what, message), hint=hint, problems=problems,
                           details=info)
    if status == 401:
        return GpuaasError("%s %s: not authenticated: %s" % (action, what, message),
                           hint="the token/certificate was rejected or expired; refresh the kubeconfig or api_key",
                           details=info)
    if status == 409:
        if problems or "conflict" in lower:
            return GpuaasError(
                "%s %s: fields are managed by another field manager: %s" % (action, what, message),
                hint="someone else (e.g. kubectl) owns these fields; set force_conflicts: true to take them over, "
                     "or stop managing them elsewhere", problems=problems, details=info)
        return GpuaasError("%s %s: conflict: %s" % (action, what, message),
                           hint="the object changed or is being deleted; re-run", details=info)
    if status == 404:
        if "namespaces" in lower and "not found" in lower:
            hint = "the namespace does not exist; create it first (or let the tenants module create it)"
        elif "the server could not find the requested resource" in lower:
            hint = "the API is not served; is the operator/CRD installed?"
        else:
            hint = "the object or its API does not exist"
        return GpuaasError("%s %s: not found: %s" % (action, what, message), hint=hint, details=info)
    if status == 400 and "dry" in lower:
        return GpuaasError("%s %s: %s" % (action, what, message),
                           hint="a webhook on this resource does not support dry-run; check mode cannot simulate "
                                "it (sideEffects must be None/NoneOnDryRun)", details=info)
    if status in (500, 502, 503, 504) or status == 0:
        return GpuaasError("%s %s failed (HTTP %s): %s" % (action, what, status, message),
                           hint="the API server or an aggregated API/webhook is unhealthy; check "
                                "kubectl get apiservices and the operator pods, then re-run", details=info)
    return GpuaasError("%s %s failed (HTTP %s %s): %s" % (action, what, status, reason, message),
                       problems=problems, details=info)
