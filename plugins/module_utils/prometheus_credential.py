# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one resolver of the Prometheus URL and credential (issue 21; issue 22 item 4).

Every reader goes through here: the observe modules that query Prometheus now (``prometheus_query``,
``gpu_utilization_info``, through ``GpuaasModule.prometheus_client``), and the tenants and node pools runs that hand
the credential to KEDA (``reconcile/inputs.py``). One precedence for all of them:

* the ``prometheus`` option / ``gpuaas_prometheus`` inventory setting wins;
* where it leaves them empty, the AWX *GPUaaS Prometheus* credential's environment fills in: the token
  (``GPUAAS_PROMETHEUS_TOKEN``, else ``GPUAAS_PROMETHEUS_TOKEN_FILE``) and the CA (``GPUAAS_PROMETHEUS_CA_FILE``);
  the URL (``GPUAAS_PROMETHEUS_URL``) only for queries from the controller — KEDA's pods read the inventory's URL
  in the cluster, an address the controller's environment does not know (docs/awx.md);
* a token comes from exactly one of ``token``, ``token_file``, ``token_secret`` (a Secret read through the caller's
  Kubernetes connection).

Every value read is handed to ``sink`` (the module's ``register_secret``: no_log in raw, stripped and base64 form)
before the caller can put it in a result, a warning or an error. The two uses differ where they must:

* a **query** sends the token now: it is stripped (an HTTP header), and a token file or Secret that holds nothing
  is an error;
* a **hand-over** copies the credential into KEDA's Secret as its source holds it, and an empty token file means no
  credential (the triggers go unauthenticated) — as the tenants and node pools runs always did.
"""

from __future__ import annotations

import base64
import os
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.prometheus import PROMETHEUS_KEYS, TOKEN_SOURCES
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, get_client, translate_api_exception

# The environment of the AWX credential type (roles/aap_config renders it to inject exactly these).
ENV_URL = "GPUAAS_PROMETHEUS_URL"
ENV_TOKEN = "GPUAAS_PROMETHEUS_TOKEN"
ENV_TOKEN_FILE = "GPUAAS_PROMETHEUS_TOKEN_FILE"
ENV_CA_FILE = "GPUAAS_PROMETHEUS_CA_FILE"

OPENSHIFT_THANOS_URL = "https://thanos-querier.openshift-monitoring.svc:9091"
DEFAULT_TIMEOUT = 30
# A token file is a few hundred bytes to a few KiB (a ServiceAccount JWT); what is read before the invocation is
# logged, only to mask it, stops there (the resolver reads the whole file when it uses it).
_TOKEN_FILE_MAX_BYTES = 64 * 1024

SecretSink = t.Callable[[str], None]
SecretReader = t.Callable[[str, str], t.Optional[t.Mapping[str, t.Any]]]
Environment = t.Mapping[str, t.Optional[str]]


class PrometheusError(GpuaasError):
    """Prometheus could not answer: unreachable, TLS, authentication, or a PromQL error."""


def credential_environment() -> t.Dict[str, t.Optional[str]]:
    """The AWX credential's variables in this process (the only place the environment is read)."""
    return {ENV_URL: os.environ.get(ENV_URL), ENV_TOKEN: os.environ.get(ENV_TOKEN),
            ENV_TOKEN_FILE: os.environ.get(ENV_TOKEN_FILE), ENV_CA_FILE: os.environ.get(ENV_CA_FILE)}


def with_environment(options: t.Optional[t.Mapping[str, t.Any]], environ: t.Optional[Environment] = None,
                     url: bool = True) -> t.Dict[str, t.Any]:
    """``options`` (a ``prometheus`` option or ``gpuaas_prometheus``) completed by the credential's environment
    where they leave the token or CA (``url``: and the URL) empty. Only keys that are set are in the result."""
    env = credential_environment() if environ is None else environ
    settings = {k: v for k, v in dict(options or {}).items() if v is not None}
    if url and not settings.get("url") and env.get(ENV_URL):
        settings["url"] = env.get(ENV_URL)
    if not any(settings.get(k) for k in TOKEN_SOURCES):
        for key, var in (("token", ENV_TOKEN), ("token_file", ENV_TOKEN_FILE)):
            settings.pop(key, None)
            if env.get(var):
                settings[key] = env.get(var)
                break
    if not settings.get("ca_file") and env.get(ENV_CA_FILE):
        settings["ca_file"] = env.get(ENV_CA_FILE)
    return settings


def query_settings(options: t.Optional[t.Mapping[str, t.Any]],
                   environ: t.Optional[Environment] = None) -> t.Dict[str, t.Any]:
    """Every key of a ``prometheus`` option for a query from the controller: options, then the environment, then the
    defaults; no URL anywhere is an error."""
    given = with_environment(options, environ)
    settings = {key: given.get(key) for key in PROMETHEUS_KEYS}
    if settings["validate_certs"] is None:
        settings["validate_certs"] = True
    if not settings["timeout"]:
        settings["timeout"] = DEFAULT_TIMEOUT
    if not settings["url"]:
        raise PrometheusError(
            "no Prometheus URL given",
            hint="set gpuaas_prometheus.url (module option prometheus.url) or the %s environment variable; "
            "on OpenShift use %s" % (ENV_URL, OPENSHIFT_THANOS_URL),
        )
    return settings


def _read_token_file_quietly(path: t.Optional[str]) -> t.Optional[str]:
    """The start of a token file, or None when it cannot be read (the resolver reports why when it uses it)."""
    if not path:
        return None
    try:
        with open(os.path.expanduser(path), "r", encoding="utf-8") as handle:
            return handle.read(_TOKEN_FILE_MAX_BYTES)
    except (OSError, UnicodeDecodeError):
        return None


def knowable_tokens(options: t.Optional[t.Mapping[str, t.Any]], environ: t.Optional[Environment] = None,
                    read_files: bool = True) -> t.List[str]:
    """Every Prometheus bearer token knowable without a request: inline, from a token file, from the environment —
    for a module to mask before it logs its invocation.

    The environment's token is listed even when the options give another one: it is in the process environment,
    so registering it costs nothing and keeps it out of output whatever the resolver chooses.
    """
    env = credential_environment() if environ is None else environ
    options = options or {}
    candidates = [options.get("token"), env.get(ENV_TOKEN)]
    if read_files:
        candidates += [_read_token_file_quietly(options.get("token_file")),
                       _read_token_file_quietly(env.get(ENV_TOKEN_FILE))]
    return [str(token) for token in candidates if token and str(token).strip()]


def secret_reader(client: t.Any) -> SecretReader:
    """``read(name, namespace)``: a Secret through ``client`` (API errors translated, with the object named)."""
    def read(name: str, namespace: str) -> t.Optional[t.Mapping[str, t.Any]]:
        try:
            return t.cast(t.Optional[t.Mapping[str, t.Any]], client.resource("v1", "Secret").get(name, namespace))
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "Secret %s/%s" % (namespace, name))
    return read


def kube_secret_reader(module: t.Any) -> SecretReader:
    """``secret_reader`` through a module's Kubernetes connection options, connected on the first read."""
    def read(name: str, namespace: str) -> t.Optional[t.Mapping[str, t.Any]]:
        return secret_reader(get_client(module))(name, namespace)
    return read


def raw_token_from_secret(secret: t.Mapping[str, t.Any], key: str = "token") -> t.Tuple[str, t.Optional[str]]:
    """``(token as stored, the base64 text of data[key] or None)`` of a Secret object (``data``, else ``stringData``)."""
    meta = secret.get("metadata") or {}
    ref = "%s/%s" % (meta.get("namespace", "?"), meta.get("name", "?"))
    data = secret.get("data") or {}
    string_data = secret.get("stringData") or {}
    if key in data and data[key]:
        try:
            return base64.b64decode(data[key]).decode("utf-8"), str(data[key])
        except (ValueError, UnicodeDecodeError) as exc:
            raise PrometheusError("Secret %s: key %r is not valid base64 text: %s" % (ref, key, exc))
    if key in string_data and string_data[key]:
        return str(string_data[key]), None
    raise PrometheusError(
        "Secret %s has no key %r (keys: %s)" % (ref, key, ", ".join(sorted(data)) or "none"),
        hint="for a ServiceAccount token Secret (type kubernetes.io/service-account-token) the key is 'token'; "
        "check that the token controller has filled it",
    )


class PrometheusCredential:
    """Reads the Prometheus token (inline, token file, token Secret) and CA of resolved settings, registering every
    value with ``sink`` as it is read. ``read_secret(name, namespace)`` fetches a Secret (None: it does not exist)."""

    def __init__(self, read_secret: t.Optional[SecretReader] = None, sink: SecretSink = lambda _value: None) -> None:
        self.read_secret = read_secret
        self.sink = sink

    def register(self, value: t.Optional[str]) -> None:
        if value:
            self.sink(value)
            if value.strip() and value.strip() != value:
                self.sink(value.strip())

    # -- a query from the controller: strict, stripped ----------------------------------------------------------
    def query_token(self, settings: t.Mapping[str, t.Any]) -> t.Optional[str]:
        """The bearer token to send now (stripped); None when the settings name none."""
        given = [name for name in TOKEN_SOURCES if settings.get(name)]
        if len(given) > 1:
            raise PrometheusError("Prometheus token given more than once (%s)" % ", ".join(given),
                                  hint="set only one of token, token_file and token_secret")
        if settings.get("token"):
            self.register(settings["token"])
            return t.cast(str, settings["token"]).strip()
        if settings.get("token_file"):
            value = self._read(settings["token_file"], "the Prometheus token file",
                               "check the path and permissions of token_file (inside a pod: "
                               "/var/run/secrets/kubernetes.io/serviceaccount/token)")
            self.register(value)
            if not value.strip():
                raise PrometheusError("the Prometheus token file %s is empty" % settings["token_file"])
            return value.strip()
        if settings.get("token_secret"):
            return self._secret_token(settings["token_secret"]).strip()
        return None

    # -- a hand-over to KEDA: the credential as its source holds it -----------------------------------------------
    def token(self, prom: t.Any) -> t.Optional[str]:
        """The token of ``gpuaas_prometheus`` (a ``PrometheusSettings``); an empty token file is no token."""
        if prom.token:
            self.register(prom.token)
            return t.cast(str, prom.token)
        if prom.token_file:
            value = self._read(prom.token_file, "token_file", _controller_file_hint("token_file"))
            self.register(value)
            return value or None
        if prom.token_secret:
            return self._secret_token(prom.token_secret)
        return None

    def ca(self, prom: t.Any) -> t.Optional[str]:
        """The CA bundle (PEM text) of ``gpuaas_prometheus.ca_file``, for KEDA's Secret; None when not set."""
        if not prom.ca_file:
            return None
        return self._read(prom.ca_file, "ca_file", _controller_file_hint("ca_file"))

    # -- the sources ----------------------------------------------------------------------------------------------
    @staticmethod
    def _read(path: str, what: str, hint: str) -> str:
        try:
            with open(os.path.expanduser(path), "r", encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise PrometheusError("cannot read %s %s: %s" % (what, path, getattr(exc, "strerror", None) or exc),
                                  hint=hint)

    def _secret_token(self, ref: t.Mapping[str, str]) -> str:
        """The token stored in the Secret ``ref`` (``{name, namespace, key}``), as stored; registered first."""
        if self.read_secret is None:
            raise PrometheusError("token_secret needs a Kubernetes connection")
        secret = self.read_secret(ref["name"], ref["namespace"])
        if secret is None:
            raise PrometheusError(
                "the token Secret %s/%s does not exist" % (ref["namespace"], ref["name"]),
                hint="create a ServiceAccount token Secret (type kubernetes.io/service-account-token, annotation "
                "kubernetes.io/service-account.name) or give token/token_file instead",
            )
        token, encoded = raw_token_from_secret(secret, ref.get("key") or "token")
        if encoded:
            self.sink(encoded)
        self.register(token)
        return token


def _controller_file_hint(what: str) -> str:
    return ("gpuaas_prometheus.%s (or the AWX credential's %s) must be a readable file on the Ansible controller"
            % (what, ENV_TOKEN_FILE if what == "token_file" else ENV_CA_FILE))
