# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""PromQL over HTTP with Ansible's ``open_url`` (no extra Python dependencies).

Works against a plain Prometheus, Thanos querier (OpenShift in-cluster monitoring:
``https://thanos-querier.openshift-monitoring.svc:9091``) or anything speaking the Prometheus
HTTP API v1. Every failure a user can hit is raised as :class:`PrometheusError` with a hint.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import os
import re
import socket
import ssl
import time as _time
import typing as t
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import SSLValidationError, open_url

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.prometheus import PROMETHEUS_KEYS  # noqa: F401  pylint: disable=unused-import
# The URL and credential are resolved in one place for every reader (prometheus_credential.py); the names below
# are re-exported for the modules and tests that import them from here.
from ansible_collections.gpuaas.platform.plugins.module_utils.prometheus_credential import (  # noqa: F401  pylint: disable=unused-import
    DEFAULT_TIMEOUT,
    ENV_CA_FILE,
    ENV_TOKEN,
    ENV_TOKEN_FILE,
    ENV_URL,
    OPENSHIFT_THANOS_URL,
    PrometheusCredential,
    PrometheusError,
    SecretReader,
    SecretSink,
    kube_secret_reader,
    query_settings,
    raw_token_from_secret,
)

# The options of the ``prometheus`` dict every gpuaas module that talks to Prometheus accepts
# (doc fragment ``gpuaas.platform.prometheus``); it mirrors the ``gpuaas_prometheus`` inventory setting.
PROMETHEUS_ARG_SPEC: t.Dict[str, t.Any] = {
    "prometheus": {
        "type": "dict",
        "default": {},
        "options": {
            "url": {"type": "str"},
            "token": {"type": "str", "no_log": True},
            "token_file": {"type": "path"},
            "token_secret": {
                "type": "dict",
                "no_log": False,
                "options": {
                    "name": {"type": "str", "required": True},
                    "namespace": {"type": "str", "required": True},
                    "key": {"type": "str", "default": "token", "no_log": False},
                },
            },
            "ca_file": {"type": "path"},
            "validate_certs": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 30},
        },
    },
}

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(value: t.Union[str, int, float]) -> float:
    """Seconds in a Prometheus-style duration (``90``, ``"90s"``, ``"1h30m"``, ``"2d"``)."""
    if isinstance(value, bool):
        raise PrometheusError("invalid duration %r" % (value,), hint="use seconds or a duration such as 30s, 10m, 1h")
    if isinstance(value, (int, float)):
        if value < 0:
            raise PrometheusError("invalid duration %r: must not be negative" % (value,))
        return float(value)
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0:
            raise PrometheusError("invalid duration %r: must not be negative" % (value,))
        return seconds
    pos = 0
    total = 0.0
    for match in _DURATION_RE.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise PrometheusError(
            "invalid duration %r" % (value,),
            hint="use seconds or a Prometheus duration such as 30s, 10m, 1h, 1h30m, 7d",
        )
    return total


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration string for ``seconds`` (``3600`` -> ``1h``)."""
    if seconds <= 0:
        return "0s"
    if seconds != int(seconds):
        return "%dms" % int(round(seconds * 1000))
    remaining = int(seconds)
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if remaining >= size:
            out += "%d%s" % (remaining // size, unit)
            remaining %= size
    return out


def escape_label_value(value: str) -> str:
    """Escape a string for use inside a PromQL label matcher's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def regex_alternation(values: t.Iterable[str]) -> str:
    """A PromQL ``=~`` regex matching exactly the given literal values."""
    return "|".join(re.escape(v) for v in sorted(set(values)))


def token_from_secret(secret: t.Mapping[str, t.Any], key: str = "token") -> str:
    """The bearer token stored under ``key`` in a Secret object (e.g. a ServiceAccount token Secret), stripped."""
    return raw_token_from_secret(secret, key)[0].strip()


def resolve_token(
    token: t.Optional[str] = None,
    token_file: t.Optional[str] = None,
    secret: t.Optional[t.Mapping[str, t.Any]] = None,
    secret_key: str = "token",
) -> t.Optional[str]:
    """The bearer token to send from, in order: a value, a file, a Secret object. ``None`` when none is given."""
    meta = (secret or {}).get("metadata") or {}
    ref = {"name": meta.get("name", "?"), "namespace": meta.get("namespace", "?"), "key": secret_key} if secret else None
    return PrometheusCredential(lambda _name, _namespace: secret).query_token(
        {"token": token, "token_file": token_file, "token_secret": ref})


# Warn this long before a bearer token expires: the rotation step of docs/production.md takes minutes, but the token
# is often read only by an AWX schedule or KEDA, and nothing else notices it aging (issue 24).
TOKEN_EXPIRY_WARNING_DAYS = 30


def token_expiry(token: t.Optional[str]) -> t.Optional[datetime.datetime]:
    """When a JWT bearer token (a Kubernetes ServiceAccount token, an OIDC token) expires: its ``exp`` claim, read
    without verifying the signature (only the server can, and the date is all we need). None for an opaque token,
    a JWT without ``exp`` (a legacy ServiceAccount Secret token never expires) or anything unreadable."""
    parts = (token or "").strip().split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)).decode("utf-8"))
        exp = payload.get("exp") if isinstance(payload, dict) else None
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            return None
        return datetime.datetime.fromtimestamp(exp, tz=datetime.timezone.utc)
    except (ValueError, TypeError, OverflowError, OSError, UnicodeDecodeError):
        return None


def token_expiry_report(token: t.Optional[str], now: float,
                        warn_days: float = TOKEN_EXPIRY_WARNING_DAYS) -> t.Tuple[t.Dict[str, t.Any], t.Optional[str]]:
    """``({expires, days_left}, warning or None)`` for the Prometheus bearer token; ``expires`` None when the token
    states no expiry (then nothing is known to warn about)."""
    expires = token_expiry(token)
    if expires is None:
        return {"expires": None, "days_left": None}, None
    days_left = round((expires.timestamp() - now) / 86400.0, 1)
    info = {"expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "days_left": days_left}
    if days_left <= 0:
        return info, ("the Prometheus bearer token expired on %s: validation, KEDA triggers and node pools that use it "
                      "fail from then on; create a new token and update the credential (docs/production.md, rotation)"
                      % info["expires"])
    if days_left <= warn_days:
        return info, ("the Prometheus bearer token expires on %s (in %s days): create a new token and update the "
                      "credential before then (docs/production.md, rotation)" % (info["expires"], days_left))
    return info, None


def settings_from_params(params: t.Optional[t.Mapping[str, t.Any]]) -> t.Dict[str, t.Any]:
    """Complete a ``prometheus`` option dict with the ``GPUAAS_PROMETHEUS_*`` environment variables."""
    return query_settings(params)


def parse_time(value: t.Optional[str], default: float) -> float:
    """Unix seconds from a number or an RFC 3339 timestamp; ``default`` when empty."""
    if value in (None, "", "now"):
        return default
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PrometheusError("invalid time %r" % (value,), hint="use unix seconds or RFC 3339, e.g. 2026-11-30T10:00:00Z")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def client_from_params(
    params: t.Optional[t.Mapping[str, t.Any]],
    read_secret: t.Optional[SecretReader] = None,
    sink: SecretSink = lambda _value: None,
) -> "PrometheusClient":
    """A client for a module's ``prometheus`` option; ``read_secret(name, namespace)`` fetches a Secret
    object for ``token_secret`` (the caller owns the Kubernetes connection); every token read goes to ``sink``."""
    settings = query_settings(params)
    token = PrometheusCredential(read_secret, sink).query_token(settings)
    return PrometheusClient.from_settings(settings, token=token or "")


class PrometheusClient:
    """A small client for the Prometheus HTTP API v1 (instant and range queries)."""

    def __init__(
        self,
        url: str,
        token: t.Optional[str] = None,
        ca_file: t.Optional[str] = None,
        validate_certs: bool = True,
        timeout: float = 30,
        opener: t.Optional[t.Callable[..., t.Any]] = None,
    ) -> None:
        if not url or not re.match(r"^https?://", url):
            raise PrometheusError(
                "invalid Prometheus URL %r" % (url,),
                hint="use the base URL, e.g. http://prometheus.monitoring.svc:9090 or %s" % OPENSHIFT_THANOS_URL,
            )
        self.url = url.rstrip("/")
        self.token = token
        self.ca_file = ca_file
        self.validate_certs = validate_certs
        self.timeout = timeout
        self._open = opener or open_url
        if ca_file and not os.path.isfile(ca_file):
            raise PrometheusError(
                "the CA bundle %s does not exist" % ca_file,
                hint="point ca_file at the PEM file of the CA that signed the Prometheus/Thanos certificate "
                "(OpenShift: the service CA, e.g. /var/run/secrets/kubernetes.io/serviceaccount/service-ca.crt)",
            )

    @classmethod
    def from_settings(cls, settings: t.Mapping[str, t.Any], token: t.Optional[str] = None) -> "PrometheusClient":
        """Build a client from :func:`settings_from_params` output; ``token`` overrides the settings' token."""
        if token is None:
            token = resolve_token(settings.get("token"), settings.get("token_file"))
        return cls(
            settings["url"],
            token=token,
            ca_file=settings.get("ca_file"),
            validate_certs=settings.get("validate_certs", True),
            timeout=settings.get("timeout") or DEFAULT_TIMEOUT,
        )

    # -- HTTP -------------------------------------------------------------------------------
    def _request(self, path: str, params: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
        endpoint = self.url + path
        headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
        if self.token:
            headers["Authorization"] = "Bearer %s" % self.token
        body = urlencode([(k, v) for k, v in params.items() if v is not None])
        try:
            response = self._open(
                endpoint,
                data=body,
                headers=headers,
                method="POST",
                validate_certs=self.validate_certs,
                ca_path=self.ca_file,
                timeout=self.timeout,
                follow_redirects="safe",
                use_netrc=False,
            )
            raw = response.read()
        except HTTPError as exc:
            raise self._http_error(exc, params.get("query"))
        except SSLValidationError as exc:
            raise PrometheusError(
                "TLS verification of %s failed: %s" % (self.url, _first_line(exc)),
                hint="give the CA bundle that signed the server certificate as ca_file; "
                "set validate_certs: false only for a throw-away lab",
            )
        except (URLError, UrlsConnectionError, socket.timeout, TimeoutError, ConnectionError, ssl.SSLError) as exc:
            reason = getattr(exc, "reason", None) or exc
            if isinstance(reason, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(reason):
                raise PrometheusError(
                    "TLS verification of %s failed: %s" % (self.url, reason),
                    hint="give the CA bundle that signed the server certificate as ca_file; "
                    "set validate_certs: false only for a throw-away lab",
                )
            raise PrometheusError(
                "cannot reach Prometheus at %s: %s" % (self.url, reason),
                hint="check the URL and port, that Prometheus (or the Thanos querier) is running and reachable from "
                "the Ansible controller (in-cluster service names only resolve inside the cluster: use a route, "
                "an ingress or kubectl port-forward)",
                details={"url": self.url},
            )
        try:
            payload = json.loads(raw)
        except ValueError:
            raise PrometheusError(
                "%s did not answer with Prometheus API JSON (got %r...)" % (endpoint, raw[:120]),
                hint="the URL must be the Prometheus/Thanos base URL (without /api/v1 or /graph); a login page "
                "means the token is missing or not accepted",
            )
        if payload.get("status") != "success":
            raise self._api_error(payload, params.get("query"))
        data = payload.get("data") or {}
        warnings = payload.get("warnings") or []
        return {"data": data, "warnings": list(warnings)}

    def _http_error(self, exc: HTTPError, query: t.Optional[str]) -> PrometheusError:
        code = exc.code
        try:
            body = exc.read()
        except Exception:  # pylint: disable=broad-except
            body = b""
        payload: t.Dict[str, t.Any] = {}
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = {}
        if code == 401:
            return PrometheusError(
                "Prometheus at %s refused the request: 401 Unauthorized (%s)"
                % (self.url, "no token was sent" if not self.token else "the token was not accepted"),
                hint="give a valid bearer token (token, token_file or token_secret); on OpenShift the token of a "
                "ServiceAccount bound to the cluster-monitoring-view ClusterRole",
                details={"status": code, "url": self.url},
            )
        if code == 403:
            return PrometheusError(
                "Prometheus at %s refused the request: 403 Forbidden (the token is valid but not allowed to query)"
                % self.url,
                hint="grant the identity behind the token read access to metrics, e.g. "
                "oc adm policy add-cluster-role-to-user cluster-monitoring-view -z <serviceaccount> -n <namespace>",
                details={"status": code, "url": self.url},
            )
        if isinstance(payload, dict) and payload.get("status") == "error":
            return self._api_error(payload, query, code)
        text = body.decode("utf-8", "replace").strip()[:200] if isinstance(body, bytes) else str(body)[:200]
        hint = "check the URL: it must be the Prometheus/Thanos base URL" if code == 404 else (
            "Prometheus is overloaded or not ready; retry later or query a shorter window / larger step"
            if code in (502, 503, 504) else None)
        return PrometheusError(
            "Prometheus at %s answered HTTP %s: %s" % (self.url, code, text or exc.msg),
            hint=hint,
            details={"status": code, "url": self.url},
        )

    def _api_error(self, payload: t.Mapping[str, t.Any], query: t.Optional[str], code: t.Optional[int] = None) -> PrometheusError:
        error_type = payload.get("errorType") or "error"
        error = payload.get("error") or "unknown error"
        if error_type in ("bad_data",) and query:
            return PrometheusError(
                "PromQL error in %r: %s" % (query, error),
                hint="fix the expression; try it in the Prometheus UI (Graph tab) first",
                details={"status": code, "error_type": error_type, "query": query},
            )
        if error_type == "timeout":
            hint = "the query timed out: shorten the window, raise the step or narrow the selectors"
        elif error_type == "execution" and "too many" in error:
            hint = "the query touches too many samples: shorten the window or raise the step"
        else:
            hint = None
        return PrometheusError(
            "Prometheus query failed (%s): %s%s" % (error_type, error, " in %r" % query if query else ""),
            hint=hint,
            details={"status": code, "error_type": error_type, "query": query},
        )

    # -- API --------------------------------------------------------------------------------
    def query(self, promql: str, time: t.Optional[float] = None) -> t.Dict[str, t.Any]:
        """Instant query. Returns ``{"result_type", "result", "warnings"}``."""
        answer = self._request("/api/v1/query", {"query": promql, "time": _ts(time)})
        data = answer["data"]
        return {"result_type": data.get("resultType"), "result": data.get("result") or [], "warnings": answer["warnings"]}

    def query_range(
        self,
        promql: str,
        start: float,
        end: float,
        step: t.Union[str, float],
    ) -> t.Dict[str, t.Any]:
        """Range query from ``start`` to ``end`` (unix seconds) every ``step`` (seconds or duration)."""
        step_s = parse_duration(step)
        if step_s <= 0:
            raise PrometheusError("step must be positive", hint="e.g. step: 30s")
        if end < start:
            raise PrometheusError("range query end (%s) is before start (%s)" % (end, start))
        points = (end - start) / step_s
        if points > 11000:
            raise PrometheusError(
                "range query would return %d points per series (Prometheus allows 11000)" % int(points),
                hint="raise the step or shorten the window",
            )
        answer = self._request(
            "/api/v1/query_range",
            {"query": promql, "start": _ts(start), "end": _ts(end), "step": _num(step_s)},
        )
        data = answer["data"]
        return {"result_type": data.get("resultType"), "result": data.get("result") or [], "warnings": answer["warnings"]}

    def buildinfo(self) -> t.Dict[str, t.Any]:
        """``/api/v1/status/buildinfo`` (version of the server; Thanos answers too)."""
        return self._request("/api/v1/status/buildinfo", {})["data"]


def sample_value(raw: t.Any) -> float:
    """A Prometheus sample value (a string such as ``"85"``, ``"NaN"``, ``"+Inf"``) as a float."""
    return float(raw)


def vector_samples(result: t.Iterable[t.Mapping[str, t.Any]]) -> t.List[t.Tuple[t.Dict[str, str], float, float]]:
    """``(labels, timestamp, value)`` for each series of an instant-vector result."""
    out = []
    for series in result:
        ts, val = series["value"]
        out.append((dict(series.get("metric") or {}), float(ts), sample_value(val)))
    return out


def matrix_samples(result: t.Iterable[t.Mapping[str, t.Any]]) -> t.List[t.Tuple[t.Dict[str, str], t.List[t.Tuple[float, float]]]]:
    """``(labels, [(timestamp, value), ...])`` for each series of a range-vector (matrix) result."""
    out = []
    for series in result:
        values = [(float(ts), sample_value(val)) for ts, val in series.get("values") or []]
        out.append((dict(series.get("metric") or {}), values))
    return out


def jsonable_result(result: t.Iterable[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
    """Result series with values as floats (NaN/Inf as ``None``) for Ansible's JSON output."""
    out = []
    for series in result:
        item: t.Dict[str, t.Any] = {"metric": dict(series.get("metric") or {})}
        if "value" in series:
            ts, val = series["value"]
            item["timestamp"] = float(ts)
            item["value"] = _finite(sample_value(val))
        if "values" in series:
            item["values"] = [[float(ts), _finite(sample_value(val))] for ts, val in series["values"]]
        out.append(item)
    return out


def now() -> float:
    """Current unix time (separate so tests can pin it)."""
    return _time.time()


def _finite(value: float) -> t.Optional[float]:
    return value if math.isfinite(value) else None


def _ts(value: t.Optional[float]) -> t.Optional[str]:
    return None if value is None else _num(value)


def _num(value: float) -> str:
    return ("%.3f" % value).rstrip("0").rstrip(".")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__
