# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One resolver of the Prometheus URL and credential for every reader (issue 21; issue 22 item 4).

The observe modules (queries from the controller) and the tenants and node pools runs (the credential handed to
KEDA) read ``prometheus_credential.py`` only: one precedence (the option/inventory, then the AWX credential's
environment), every value registered as a secret as it is read. Before, tenants and node pools ignored the AWX
credential's ``GPUAAS_PROMETHEUS_TOKEN``, so a reconcile template with the credential gave KEDA no token.
"""

from __future__ import annotations

import base64
import os
import re

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils import prometheus_credential as pc
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import PrometheusSettings
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_runner import NodePoolsRunner
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import TenancyRunner

from fake_kube import FakeKube  # noqa: E402  (tests/unit/modules, on sys.path)
from test_node_pools_module import SERVED, machineset
from test_node_pools_module import params as pool_params
from test_tenants import cluster, params

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ENV_TOKEN = "awx-credential-t0ken"


@pytest.fixture
def awx_env(monkeypatch):
    """The environment the AWX GPUaaS Prometheus credential injects (a URL the controller reaches, a token)."""
    for var in (pc.ENV_URL, pc.ENV_TOKEN, pc.ENV_TOKEN_FILE, pc.ENV_CA_FILE):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(pc.ENV_URL, "https://prometheus-route.apps.example")
    monkeypatch.setenv(pc.ENV_TOKEN, ENV_TOKEN)
    return monkeypatch


def tenants_run(client, p):
    registered = []
    runner = TenancyRunner(client, p, sleep=lambda s: None, clock=lambda: 0.0)
    runner.secret_sink = registered.append
    runner.run()
    return registered


def bearer(client, name="gpuaas-prometheus"):
    return base64.b64decode(client.objects[("Secret", "keda", name)]["data"]["bearerToken"]).decode()


# -- tenants and node pools honour the AWX credential ---------------------------------------------------------

def test_tenants_hand_the_awx_credential_token_to_keda(awx_env):
    client = cluster()
    registered = tenants_run(client, params())  # the lab inventory: url, no token
    assert bearer(client) == ENV_TOKEN
    assert ENV_TOKEN in registered  # masked from the moment it was read
    # KEDA reads the inventory's URL in the cluster, never the controller's route from the environment
    so = client.objects[("ScaledObject", "nlp-serve", "vllm")]
    assert {t["metadata"]["serverAddress"] for t in so["spec"]["triggers"]} == {"http://127.0.0.1:9090"}


def test_the_inventory_token_wins_over_the_awx_credential(awx_env):
    client = cluster()
    tenants_run(client, params(prometheus={"url": "https://prom:9091", "token": "inventory-token"}))
    assert bearer(client) == "inventory-token"


def test_without_the_credential_nothing_changes(monkeypatch):
    for var in (pc.ENV_URL, pc.ENV_TOKEN, pc.ENV_TOKEN_FILE, pc.ENV_CA_FILE):
        monkeypatch.delenv(var, raising=False)
    client = cluster()
    tenants_run(client, params())
    assert ("Secret", "keda", "gpuaas-prometheus") not in client.objects


def test_node_pools_hand_the_awx_credential_token_to_keda(awx_env):
    kube = FakeKube(SERVED)
    kube.add(machineset({"gpuaas.io/pool": "h100"}))
    registered = []
    runner = NodePoolsRunner(kube, pool_params())
    runner.secret_sink = registered.append
    runner.run()
    secret = kube.objects[("Secret", "keda", "gpuaas-prometheus-node-pools")]
    assert base64.b64decode(secret["data"]["bearerToken"]).decode() == ENV_TOKEN and ENV_TOKEN in registered


def test_the_credential_token_file_and_ca_fill_in_too(tmp_path, monkeypatch):
    token, ca = tmp_path / "token", tmp_path / "ca.pem"
    token.write_text("from-file\n")
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {pc.ENV_TOKEN_FILE: str(token), pc.ENV_CA_FILE: str(ca)}
    settings = pc.with_environment({"url": "https://prom:9091"}, env, url=False)
    assert settings == {"url": "https://prom:9091", "token_file": str(token), "ca_file": str(ca)}
    credential = pc.PrometheusCredential(None, lambda _v: None)
    prom = PrometheusSettings(**settings)
    assert credential.token(prom) == "from-file\n"  # handed over as the file holds it, as before
    assert credential.ca(prom) == "-----BEGIN CERTIFICATE-----\n"


# -- one precedence ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options,expected", [
    ({}, {"url": "http://env:9090", "token": "env-token", "ca_file": "/env/ca"}),
    ({"url": "http://opt:9090"}, {"url": "http://opt:9090", "token": "env-token", "ca_file": "/env/ca"}),
    ({"token_file": "/opt/token"}, {"url": "http://env:9090", "token_file": "/opt/token", "ca_file": "/env/ca"}),
    ({"token_secret": {"name": "s", "namespace": "n"}, "ca_file": "/opt/ca"},
     {"url": "http://env:9090", "token_secret": {"name": "s", "namespace": "n"}, "ca_file": "/opt/ca"}),
    # an empty option is no option: the environment fills it
    ({"token": "", "token_file": None}, {"url": "http://env:9090", "token": "env-token", "ca_file": "/env/ca"}),
])
def test_options_win_and_the_environment_fills_the_rest(options, expected):
    env = {pc.ENV_URL: "http://env:9090", pc.ENV_TOKEN: "env-token", pc.ENV_TOKEN_FILE: "/env/token",
           pc.ENV_CA_FILE: "/env/ca"}
    assert pc.with_environment(options, env) == expected
    without_url = dict(expected)
    if "url" not in options:
        del without_url["url"]
    assert pc.with_environment(options, env, url=False) == without_url


def test_env_token_file_only_when_there_is_no_env_token():
    env = {pc.ENV_TOKEN_FILE: "/env/token"}
    assert pc.with_environment({}, env, url=False) == {"token_file": "/env/token"}


def test_a_query_strips_and_refuses_an_empty_token_file_a_hand_over_does_not(tmp_path):
    empty, padded = tmp_path / "empty", tmp_path / "padded"
    empty.write_text("")
    padded.write_text(" tok\n")
    registered = []
    credential = pc.PrometheusCredential(None, registered.append)
    assert credential.query_token({"token_file": str(padded)}) == "tok"
    assert credential.token(PrometheusSettings(token_file=str(padded))) == " tok\n"
    assert {" tok\n", "tok"} <= set(registered)
    with pytest.raises(pc.PrometheusError, match="is empty"):
        credential.query_token({"token_file": str(empty)})
    assert credential.token(PrometheusSettings(token_file=str(empty))) is None


def test_a_secret_token_is_registered_in_every_form_it_was_read_in():
    registered = []
    data = base64.b64encode(b"tok\n").decode()
    secret = {"metadata": {"name": "reader", "namespace": "mon"}, "data": {"token": data}}
    credential = pc.PrometheusCredential(lambda name, namespace: secret, registered.append)
    ref = {"name": "reader", "namespace": "mon", "key": "token"}
    assert credential.token(PrometheusSettings(token_secret=ref)) == "tok\n"
    assert credential.query_token({"token_secret": ref}) == "tok"
    assert {data, "tok\n", "tok"} <= set(registered)
    missing = pc.PrometheusCredential(lambda name, namespace: None)
    with pytest.raises(pc.PrometheusError, match="the token Secret mon/reader does not exist"):
        missing.token(PrometheusSettings(token_secret=ref))


# -- the only place ---------------------------------------------------------------------------------------------

def test_no_other_code_reads_the_credential_environment_or_a_token_file():
    """Nothing under plugins/ but the resolver reads GPUAAS_PROMETHEUS_* or opens a token/CA file."""
    offenders = []
    for base, _dirs, files in os.walk(os.path.join(ROOT, "plugins")):
        for name in files:
            path = os.path.join(base, name)
            if not name.endswith(".py") or path.endswith(os.path.join("module_utils", "prometheus_credential.py")):
                continue
            source = open(path).read()
            if re.search(r"environ[^\n]*(ENV_(URL|TOKEN|TOKEN_FILE|CA_FILE)\b|GPUAAS_PROMETHEUS_)", source):
                offenders.append("%s reads the credential environment" % path)
            if re.search(r"open\([^)\n]*(token_file|ca_file)", source):
                offenders.append("%s opens a token/CA file" % path)
    assert offenders == []
