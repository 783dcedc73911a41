# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Client: kubernetes.core-compatible options and K8S_AUTH_* variables, discovery cache, missing-API hints."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.kube import client as cl
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os
    for key in list(os.environ):
        if key.startswith("K8S_AUTH_"):
            monkeypatch.delenv(key)


def test_params_win_over_env(monkeypatch):
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "from-env")
    assert cl.auth_params({"context": "from-param"})["context"] == "from-param"
    assert cl.auth_params({})["context"] == "from-env"


@pytest.mark.parametrize("env,value,option,expected", [
    ("K8S_AUTH_VERIFY_SSL", "no", "validate_certs", False),
    ("K8S_AUTH_VALIDATE_CERTS", "true", "validate_certs", True),
    ("K8S_AUTH_SSL_CA_CERT", "/ca.crt", "ca_cert", "/ca.crt"),
    ("K8S_AUTH_CERT_FILE", "/c.crt", "client_cert", "/c.crt"),
    ("K8S_AUTH_KEY_FILE", "/c.key", "client_key", "/c.key"),
    ("K8S_AUTH_IMPERSONATE_GROUPS", "a,b", "impersonate_groups", ["a", "b"]),
    ("K8S_AUTH_API_KEY", "tok", "api_key", "tok"),
    ("K8S_AUTH_NO_PROXY", "localhost", "no_proxy", "localhost"),
])
def test_env_variables(monkeypatch, env, value, option, expected):
    monkeypatch.setenv(env, value)
    assert cl.auth_params({})[option] == expected


def test_proxy_headers_from_env(monkeypatch):
    monkeypatch.setenv("K8S_AUTH_PROXY_HEADERS_USER_AGENT", "ua")
    assert cl.auth_params({})["proxy_headers"] == {"user_agent": "ua"}


def test_configuration_from_host_and_token():
    conf = cl.build_configuration({"host": "https://k8s.example:6443/", "api_key": "tok", "validate_certs": False,
                                   "ca_cert": "/ca", "proxy": "http://proxy:3128", "no_proxy": "localhost"})
    assert conf.host == "https://k8s.example:6443"
    assert conf.api_key == {"authorization": "Bearer tok"}
    assert conf.verify_ssl is False and conf.ssl_ca_cert == "/ca"
    assert conf.proxy == "http://proxy:3128" and conf.no_proxy == "localhost"


def test_configuration_from_kubeconfig_dict():
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://1.2.3.4:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "abc"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u", "namespace": "x"}}],
    }
    conf = cl.build_configuration({"kubeconfig": kubeconfig, "context": "b"})
    assert conf.host == "https://1.2.3.4:6443"
    assert conf.verify_ssl is False
    assert (conf.api_key.get("BearerToken") or conf.api_key.get("authorization")) == "Bearer abc"


def test_bad_kubeconfig_is_explained(tmp_path):
    with pytest.raises(GpuaasError) as err:
        cl.build_configuration({"kubeconfig": str(tmp_path / "missing"), "context": "x"})
    assert "kubeconfig" in err.value.hint


def test_impersonation_headers():
    conf = cl.build_configuration({"host": "https://h", "api_key": "t"})
    kc = cl.KubeClient(conf, {"impersonate_user": "alice", "impersonate_groups": ["g1", "g2"]})
    headers = kc.api_client.default_headers
    assert headers["Impersonate-User"] == "alice"
    assert sorted(v for k, v in headers.items() if str(k) == "Impersonate-Group") == ["g1", "g2"]


class Discovery(cl.KubeClient):
    def __init__(self, served):
        super().__init__(cl.build_configuration({"host": "https://h", "api_key": "t"}))
        self.served_gv = served
        self.requests = []

    def request(self, method, path, query=None, body=None, content_type=None, timeout=None):
        self.requests.append(path)
        for gv, resources in self.served_gv.items():
            if path == cl.gv_path(gv):
                return {"resources": resources}
        raise cl.ApiException(status=404, reason="Not Found")


def test_discovery_is_cached_and_missing_crd_has_hint():
    client = Discovery({"kueue.x-k8s.io/v1beta2": [
        {"name": "clusterqueues", "kind": "ClusterQueue", "namespaced": False, "verbs": ["get", "list", "patch"]},
        {"name": "clusterqueues/status", "kind": "ClusterQueue", "namespaced": False},
        {"name": "localqueues", "kind": "LocalQueue", "namespaced": True}]})
    res = client.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    assert (res.plural, res.namespaced) == ("clusterqueues", False)
    assert client.resource("kueue.x-k8s.io/v1beta2", "LocalQueue").path("q", "ns") == \
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/q"
    assert client.requests == ["/apis/kueue.x-k8s.io/v1beta2"]
    assert client.served("kueue.x-k8s.io/v1beta2") and not client.served("kueue.x-k8s.io/v1beta1")
    with pytest.raises(GpuaasError) as err:
        client.resource("kueue.x-k8s.io/v1beta1", "ClusterQueue")
    assert str(err.value).startswith("kueue.x-k8s.io/v1beta1 ClusterQueue is not served by the cluster — is Kueue "
                                     "installed? (install it with the gpuaas.platform.kueue role)")
    with pytest.raises(GpuaasError, match="KEDA"):
        client.resource("keda.sh/v1alpha1", "ScaledObject")
    assert not client.served("v1")
    client.served_gv["v1"] = [{"name": "namespaces", "kind": "Namespace", "namespaced": False}]
    client.invalidate("v1")
    assert client.resource("v1", "Namespace").path("x") == "/api/v1/namespaces/x"


def test_translate_422_lists_causes():
    exc = cl.ApiException(status=422, reason="Unprocessable Entity")
    exc.body = json.dumps({"message": "ClusterQueue.kueue.x-k8s.io \"q\" is invalid", "reason": "Invalid",
                           "details": {"causes": [{"field": "spec.stopPolicy", "message": "Unsupported value"}]}})
    err = cl.translate_api_exception(exc, "apply", "ClusterQueue q")
    assert err.problems == ["spec.stopPolicy: Unsupported value"]
    assert "ClusterQueue q" in err.message and "invalid" in err.message


class _FakeApiServer:
    """A tiny HTTP server speaking just enough of the Kubernetes API to exercise KubeClient.request for real."""

    def __init__(self):
        import http.server
        import threading

        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                outer.requests.append({"method": self.command, "path": self.path, "body": body,
                                       "headers": {k.lower(): self.headers.get_all(k) for k in self.headers.keys()}})
                if self.path.startswith("/apis/kueue.x-k8s.io/v1beta2?") or self.path == "/apis/kueue.x-k8s.io/v1beta2":
                    return self._reply(200, {"resources": [{"name": "clusterqueues", "kind": "ClusterQueue",
                                                            "namespaced": False, "verbs": ["list", "patch"]}]})
                if self.path.startswith("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/missing"):
                    return self._reply(404, {"kind": "Status", "reason": "NotFound", "message": "not found"})
                if self.path.startswith("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/bad"):
                    return self._reply(422, {"kind": "Status", "reason": "Invalid", "message": "is invalid",
                                             "details": {"causes": [{"field": "spec.x", "message": "nope"}]}})
                if self.path.startswith("/apis/kueue.x-k8s.io/v1beta2/clusterqueues"):
                    if self.command == "DELETE":
                        return self._reply(200, {"kind": "Status", "status": "Success", "details": json.loads(body)})
                    if self.command == "PATCH":
                        return self._reply(200, json.loads(body))
                    return self._reply(200, {"items": [{"metadata": {"name": "a"}}], "metadata": {}})
                return self._reply(404, {"kind": "Status", "reason": "NotFound", "message": "no such API"})

            do_GET = do_PATCH = do_DELETE = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def apiserver():
    server = _FakeApiServer()
    yield server
    server.close()


def test_requests_through_the_installed_kubernetes_library(apiserver):
    conf = cl.build_configuration({"host": apiserver.url, "api_key": "sekret"})
    client = cl.KubeClient(conf, {"impersonate_user": "alice", "impersonate_groups": ["g1", "g2"]})
    res = client.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    items = res.list(label_selector="app.kubernetes.io/managed-by=gpuaas.platform")
    assert items == [{"metadata": {"name": "a"}, "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"}]
    applied = res.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}},
                        "gpuaas.platform", force=True, dry_run=True)
    assert applied["metadata"]["name"] == "q"
    assert res.get("missing") is None
    with pytest.raises(cl.ApiException) as err:
        res.apply({"metadata": {"name": "bad"}}, "gpuaas.platform")
    assert err.value.status == 422
    assert cl.translate_api_exception(err.value, "apply", "ClusterQueue bad").problems == ["spec.x: nope"]

    listing = apiserver.requests[1]
    assert listing["path"].startswith("/apis/kueue.x-k8s.io/v1beta2/clusterqueues?")
    from urllib.parse import parse_qs, urlsplit
    query = parse_qs(urlsplit(listing["path"]).query)
    assert query == {"labelSelector": ["app.kubernetes.io/managed-by=gpuaas.platform"], "limit": ["500"]}
    patch = apiserver.requests[2]
    assert patch["method"] == "PATCH"
    assert "fieldManager=gpuaas.platform" in patch["path"] and "force=true" in patch["path"]
    assert "dryRun=All" in patch["path"]
    assert patch["headers"]["content-type"] == ["application/apply-patch+yaml"]
    assert patch["headers"]["authorization"] == ["Bearer sekret"]
    assert patch["headers"]["impersonate-user"] == ["alice"]
    assert sorted(patch["headers"]["impersonate-group"]) == ["g1", "g2"]
    assert json.loads(patch["body"])["metadata"]["name"] == "q"

    deleted = res.delete("q", dry_run=True, propagation_policy="Foreground")
    assert deleted["details"] == {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
                                  "dryRun": ["All"]}
    assert apiserver.requests[-1]["headers"]["content-type"] == ["application/json"]
    assert apiserver.requests[-1]["path"].endswith("/clusterqueues/q?dryRun=All")


def test_client_keeps_exporting_what_modules_import():
    """client.py is split (auth, retries, api_errors, library); kube.client stays the one import path."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.kube import api_errors, auth, library, retries

    for module, names in ((auth, ("K8S_AUTH_ARG_SPEC", "KubeAnsibleModule", "auth_params", "build_configuration",
                                  "register_secrets", "kubeconfig_secrets")),
                          (retries, ("ApiUnreachable", "RetryPolicy", "is_connection_error", "with_retries")),
                          (api_errors, ("translate_api_exception", "connection_error", "missing_api_hint")),
                          (library, ("ApiException", "check_requirements", "HAS_KUBERNETES"))):
        for name in names:
            assert getattr(cl, name) is getattr(module, name), name
