# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""prometheus.py against a local fake Prometheus HTTP API (real sockets, real open_url)."""

from __future__ import annotations

import base64
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.observe import prometheus
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import (
    PrometheusClient,
    PrometheusError,
    format_duration,
    jsonable_result,
    matrix_samples,
    parse_duration,
    resolve_token,
    settings_from_params,
    token_from_secret,
    vector_samples,
)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeProm/1"

    def log_message(self, *args):  # silence
        pass

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        self.server.requests.append({"path": self.path, "form": form, "headers": dict(self.headers)})
        status, body = self.server.route(self.path, form, self.headers)
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _default_route(path, form, headers):
    if path == "/api/v1/query":
        if "(" in form["query"] and ")" not in form["query"]:
            return 400, {"status": "error", "errorType": "bad_data",
                         "error": "1:9: parse error: unclosed left parenthesis"}
        return 200, {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"gpu": "0", "Hostname": "gpu-h100-0"}, "value": [1700000000.5, "85"]},
            {"metric": {"gpu": "1", "Hostname": "gpu-h100-0"}, "value": [1700000000.5, "NaN"]},
        ]}}
    if path == "/api/v1/query_range":
        return 200, {"status": "success", "warnings": ["partial response"], "data": {"resultType": "matrix", "result": [
            {"metric": {"gpu": "0"}, "values": [[1700000000, "10"], [1700000005, "20"]]},
        ]}}
    return 404, b"404 page not found"


@pytest.fixture
def fake_prom():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.requests = []
    server.route = _default_route
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield server
    server.shutdown()
    server.server_close()


def _self_signed(tmp_path):
    """A self-signed certificate for 127.0.0.1 (cryptography ships with ansible-core)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-prometheus")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


@pytest.fixture
def fake_prom_tls(tmp_path):
    import ssl

    cert_file, key_file = _self_signed(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.requests = []
    server.route = _default_route
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.url = "https://127.0.0.1:%d" % server.server_address[1]
    server.ca_file = cert_file
    yield server
    server.shutdown()
    server.server_close()


def test_tls_verified_against_ca_bundle(fake_prom_tls):
    # default: verification on, the self-signed certificate is refused with a hint to give the CA bundle
    with pytest.raises(PrometheusError) as err:
        PrometheusClient(fake_prom_tls.url, timeout=5).query("up")
    assert "TLS verification of %s failed" % fake_prom_tls.url in str(err.value)
    assert "ca_file" in err.value.hint
    assert fake_prom_tls.requests == []
    # with the CA bundle: the same server is trusted
    answer = PrometheusClient(fake_prom_tls.url, ca_file=fake_prom_tls.ca_file, timeout=5).query("up")
    assert answer["result_type"] == "vector"
    # verification explicitly off (throw-away lab only)
    answer = PrometheusClient(fake_prom_tls.url, validate_certs=False, timeout=5).query("up")
    assert len(fake_prom_tls.requests) == 2


def test_instant_query_sends_promql_time_and_token(fake_prom):
    client = PrometheusClient(fake_prom.url + "/", token="s3cret")
    answer = client.query('up{job="x"}', time=1700000000.25)
    assert answer["result_type"] == "vector"
    samples = vector_samples(answer["result"])
    assert samples[0] == ({"gpu": "0", "Hostname": "gpu-h100-0"}, 1700000000.5, 85.0)
    req = fake_prom.requests[-1]
    assert req["path"] == "/api/v1/query"
    assert req["form"] == {"query": 'up{job="x"}', "time": "1700000000.25"}
    assert req["headers"]["Authorization"] == "Bearer s3cret"
    # NaN becomes None in JSON output
    assert jsonable_result(answer["result"])[1]["value"] is None


def test_no_authorization_header_without_token(fake_prom):
    PrometheusClient(fake_prom.url).query("up")
    assert "Authorization" not in fake_prom.requests[-1]["headers"]


def test_range_query_parameters_and_warnings(fake_prom):
    client = PrometheusClient(fake_prom.url)
    answer = client.query_range("rate(x[1m])", start=1700000000, end=1700000060, step="5s")
    assert fake_prom.requests[-1]["form"] == {"query": "rate(x[1m])", "start": "1700000000", "end": "1700000060", "step": "5"}
    assert answer["warnings"] == ["partial response"]
    assert matrix_samples(answer["result"]) == [({"gpu": "0"}, [(1700000000.0, 10.0), (1700000005.0, 20.0)])]


def test_range_query_refuses_too_many_points(fake_prom):
    with pytest.raises(PrometheusError) as err:
        PrometheusClient(fake_prom.url).query_range("up", 0, 86400 * 7, "15s")
    assert "11000" in str(err.value) and "raise the step" in err.value.hint
    assert fake_prom.requests == []


def test_promql_error_names_query_and_reason(fake_prom):
    with pytest.raises(PrometheusError) as err:
        PrometheusClient(fake_prom.url).query("sum(rate(x")
    assert "PromQL error in 'sum(rate(x'" in str(err.value)
    assert "unclosed left parenthesis" in str(err.value)
    assert err.value.details["error_type"] == "bad_data"


@pytest.mark.parametrize("code,expected,hint", [
    (401, "401 Unauthorized (the token was not accepted)", "cluster-monitoring-view"),
    (403, "403 Forbidden", "add-cluster-role-to-user cluster-monitoring-view"),
])
def test_auth_failures(fake_prom, code, expected, hint):
    fake_prom.route = lambda path, form, headers: (code, b"Unauthorized\n")
    with pytest.raises(PrometheusError) as err:
        PrometheusClient(fake_prom.url, token="bad").query("up")
    assert expected in str(err.value)
    assert hint in err.value.hint
    assert err.value.details["status"] == code


def test_401_without_token_says_so(fake_prom):
    fake_prom.route = lambda path, form, headers: (401, b"")
    with pytest.raises(PrometheusError, match="no token was sent"):
        PrometheusClient(fake_prom.url).query("up")


def test_wrong_path_404_and_non_json(fake_prom):
    with pytest.raises(PrometheusError) as err:
        PrometheusClient(fake_prom.url + "/graph").query("up")
    assert "HTTP 404" in str(err.value) and "base URL" in err.value.hint
    fake_prom.route = lambda path, form, headers: (200, b"<html>login</html>")
    with pytest.raises(PrometheusError, match="did not answer with Prometheus API JSON"):
        PrometheusClient(fake_prom.url).query("up")


def test_execution_timeout_error(fake_prom):
    fake_prom.route = lambda path, form, headers: (503, {"status": "error", "errorType": "timeout", "error": "query timed out"})
    with pytest.raises(PrometheusError) as err:
        PrometheusClient(fake_prom.url).query("up")
    assert "timeout" in str(err.value) and "shorten the window" in err.value.hint


def test_unreachable_server():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(PrometheusError) as err:
        PrometheusClient("http://127.0.0.1:%d" % port, timeout=3).query("up")
    assert "cannot reach Prometheus at http://127.0.0.1:%d" % port in str(err.value)
    assert "port-forward" in err.value.hint


def test_invalid_url_and_missing_ca_file(tmp_path):
    with pytest.raises(PrometheusError, match="invalid Prometheus URL"):
        PrometheusClient("prometheus:9090")
    with pytest.raises(PrometheusError, match="CA bundle .* does not exist"):
        PrometheusClient("https://x:9091", ca_file=str(tmp_path / "nope.pem"))


def test_token_sources(tmp_path):
    path = tmp_path / "token"
    path.write_text("abc\n")
    assert resolve_token(token_file=str(path)) == "abc"
    assert resolve_token(token=" xyz ") == "xyz"
    assert resolve_token() is None
    secret = {"metadata": {"name": "prom-reader", "namespace": "gpuaas"},
              "data": {"token": base64.b64encode(b"from-secret").decode()}}
    assert resolve_token(secret=secret) == "from-secret"
    assert token_from_secret({"stringData": {"t": "plain"}}, "t") == "plain"
    with pytest.raises(PrometheusError, match="more than once"):
        resolve_token(token="a", token_file=str(path))
    with pytest.raises(PrometheusError, match="has no key 'token'"):
        token_from_secret({"metadata": {"name": "s", "namespace": "n"}, "data": {"ca.crt": "eA=="}})
    with pytest.raises(PrometheusError, match="cannot read the Prometheus token file"):
        resolve_token(token_file=str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(PrometheusError, match="is empty"):
        resolve_token(token_file=str(tmp_path / "empty"))


def test_settings_from_params_and_environment(monkeypatch):
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://env:9090")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN", "envtoken")
    settings = settings_from_params({})
    assert settings["url"] == "http://env:9090" and settings["token"] == "envtoken"
    assert settings["validate_certs"] is True and settings["timeout"] == 30
    settings = settings_from_params({"url": "https://thanos:9091", "token_file": "/t", "validate_certs": False})
    assert settings["url"] == "https://thanos:9091" and settings["token"] is None and settings["token_file"] == "/t"
    assert settings["validate_certs"] is False
    monkeypatch.delenv("GPUAAS_PROMETHEUS_URL")
    with pytest.raises(PrometheusError) as err:
        settings_from_params(None)
    assert "thanos-querier.openshift-monitoring.svc:9091" in err.value.hint


@pytest.mark.parametrize("text,seconds", [
    ("90", 90.0), (90, 90.0), ("30s", 30.0), ("10m", 600.0), ("1h30m", 5400.0), ("2d", 172800.0), ("500ms", 0.5),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "10x", "m10", "1h 30m", -5, True])
def test_parse_duration_rejects(bad):
    with pytest.raises(PrometheusError):
        parse_duration(bad)


def test_format_duration():
    assert format_duration(5400) == "1h30m"
    assert format_duration(600) == "10m"
    assert format_duration(0.5) == "500ms"
    assert format_duration(90061) == "1d1h1m1s"


def _jwt(payload):
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return "%s.%s.%s" % (part({"alg": "RS256"}), part(payload), "c2lnbmF0dXJl")


def test_token_expiry_is_read_from_the_jwt_and_warned_ahead():
    """Issue 24: the Prometheus reader token ages visibly. 2027-01-01T00:00:00Z is 1798761600 (hand-computed:
    57 years * 365 days + 14 leap days = 20819 days since 1970-01-01, * 86400)."""
    token = _jwt({"sub": "system:serviceaccount:monitoring:reader", "exp": 1798761600})
    assert prometheus.token_expiry(token).strftime("%Y-%m-%dT%H:%M:%SZ") == "2027-01-01T00:00:00Z"
    # 10 days before: a warning naming the date; 40 days before: none; after: expired
    info, warning = prometheus.token_expiry_report(token, 1798761600 - 10 * 86400)
    assert info == {"expires": "2027-01-01T00:00:00Z", "days_left": 10.0}
    assert "expires on 2027-01-01T00:00:00Z (in 10.0 days)" in warning
    assert prometheus.token_expiry_report(token, 1798761600 - 40 * 86400)[1] is None
    assert "expired on 2027-01-01T00:00:00Z" in prometheus.token_expiry_report(token, 1798761600 + 1)[1]
    # an opaque token, a JWT without exp (legacy ServiceAccount Secret token), garbage: nothing known
    for opaque in ("sha256~abcdef", _jwt({"sub": "x"}), "a.b.c", "", None):
        assert prometheus.token_expiry_report(opaque, 0) == ({"expires": None, "days_left": None}, None)
