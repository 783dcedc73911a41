# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Connection options and credentials: the kubernetes.core options, ``K8S_AUTH_*`` environment variables,
kubeconfig loading, and the registration of a kubeconfig's secrets before anything is logged.

``build_configuration`` turns the resolved options into a ``kubernetes.client.Configuration`` without touching the
library's global default.
"""

from __future__ import annotations

import hashlib
import json
import os
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.library import (
    kubernetes,
    silence_insecure_request_warnings,
    urllib3,
)

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

# kubeconfig keys whose values are credentials (as kubernetes.core's args_common redaction)
KUBECONFIG_SENSITIVE_KEYS = frozenset((
    "token", "password", "secret", "client-key-data", "client-certificate-data", "certificate-authority-data",
    "api_key", "access-token", "refresh-token", "id-token",
    "client-secret",  # the OIDC auth-provider's client secret (issue 22 item 4)
))


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


def auth_digest(auth: t.Mapping[str, t.Any]) -> str:
    """The cache key of a client: the resolved options and the KUBECONFIG the library would read."""
    h = hashlib.sha256()
    h.update(json.dumps(auth, sort_keys=True, default=str).encode())
    h.update((os.environ.get("KUBECONFIG") or "").encode())
    return h.hexdigest()


def build_configuration(auth: t.Dict[str, t.Any]) -> t.Any:
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
    if not getattr(configuration, "verify_ssl", True):
        silence_insecure_request_warnings()
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
