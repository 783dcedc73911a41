# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module is built on GpuaasModule, and no credential reaches the invocation log or the module output.

Ansible writes a module's parameters to syslog/journald (``_log_invocation``) at the end of
``AnsibleModule.__init__``: a credential not in ``no_log_values`` by then is in the host's log for good.
"""

from __future__ import annotations

import ast
import base64
import glob
import importlib
import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuaas.platform.plugins.module_utils import module_base
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule, prometheus_tokens, secret_forms
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import PrometheusClient, PrometheusError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODULE_FILES = sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))

# The least each module needs to get as far as logging its invocation.
MINIMAL_ARGS = {
    "cluster_queue": {"name": "q"},
    "cohort": {"name": "c"},
    "gpu_utilization_info": {},
    "kueue_import": {},
    "kueue_info": {},
    "kueue_integrations_info": {},
    "local_queue": {"name": "q", "namespace": "ns", "cluster_queue": "q"},
    "monitoring_objects": {},
    "node_pool_scaledown": {},
    "node_pools": {},
    "olm_operator": {"package": "p", "namespace": "ns"},
    "platform_health_info": {},
    "platform_info": {},
    "prometheus_query": {"query": "up", "prometheus": {"url": "https://prometheus.example:9091"}},
    "quota_plan": {"inventory": {}},
    "ray_idle_reclaim": {"prometheus": {"url": "https://prometheus.example:9091"}},
    "resource_flavor": {"name": "f"},
    "scaled_object": {"name": "s", "namespace": "ns", "target": {"name": "d"}},
    "tenants": {},
    "workload_priority_class": {"name": "p", "value": 1},
}

KUBE_TOKEN = "kube-token-5f1d"
KUBE_KEY_DATA = "a2V5LWRhdGEtOTlh"
KUBE_PASSWORD = "kube-password-7c2e"
OIDC_CLIENT_SECRET = "oidc-client-secret-3b8f"
API_KEY = "api-key-0e4a"
PROM_TOKEN = "prom-token-9d6c"


def kubeconfig(user):
    return {"apiVersion": "v1", "kind": "Config", "current-context": "x",
            "clusters": [{"name": "c", "cluster": {"server": "https://kube.example:6443"}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}


def module_name(path):
    return os.path.splitext(os.path.basename(path))[0]


class Logged(Exception):
    """Raised by the patched ``log``: the invocation line is the first log line, nothing after it matters here."""


def logged_invocation(monkeypatch, name, args):
    """What the module's ``_log_invocation`` hands to syslog/journald, and ``no_log_values`` at that moment."""
    seen = {}

    def log(self, msg, log_args=None):
        seen.update(msg=msg, log_args=dict(log_args or {}), no_log_values=set(self.no_log_values))
        raise Logged()

    def fail_json(self, **kwargs):
        raise AssertionError("%s failed before logging: %s" % (name, kwargs.get("msg")))

    monkeypatch.setattr(basic.AnsibleModule, "log", log)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    module = importlib.import_module("ansible_collections.gpuaas.platform.plugins.modules.%s" % name)
    with patch_module_args(dict(MINIMAL_ARGS[name], **args)):
        with pytest.raises(Logged):
            module.main()
    return seen


def assert_not_logged(seen, *secrets):
    text = seen["msg"] + " " + json.dumps(seen["log_args"], default=str)
    assert "Invoked with" in seen["msg"]
    for secret in secrets:
        assert secret not in text


# -- every module on the shared base ---------------------------------------------------------------------------

def bare_ansible_module_calls(path):
    """Lines where ``path`` imports or calls ``AnsibleModule`` itself instead of the collection's base."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "AnsibleModule" for alias in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called == "AnsibleModule":
                lines.append(node.lineno)
    return lines


def test_module_files_found():
    assert len(MODULE_FILES) >= 18


@pytest.mark.parametrize("name", [module_name(p) for p in MODULE_FILES])
def test_module_is_built_on_the_shared_base(name):
    path = os.path.join(ROOT, "plugins", "modules", name + ".py")
    assert bare_ansible_module_calls(path) == [], (
        "%s constructs a bare AnsibleModule: use module_utils.module_base.GpuaasModule, which registers the "
        "credentials before Ansible logs the invocation" % name)


@pytest.mark.parametrize("name", [module_name(p) for p in MODULE_FILES])
def test_every_module_has_minimal_args_for_the_log_tests(name):
    assert name in MINIMAL_ARGS, "add %s to MINIMAL_ARGS so that its invocation log is tested" % name


# -- kubeconfig credentials, every module ----------------------------------------------------------------------

@pytest.mark.parametrize("name", [module_name(p) for p in MODULE_FILES])
def test_kubeconfig_credentials_never_reach_the_invocation_log(monkeypatch, name):
    user = {"token": KUBE_TOKEN, "client-key-data": KUBE_KEY_DATA, "password": KUBE_PASSWORD}
    seen = logged_invocation(monkeypatch, name, {"kubeconfig": kubeconfig(user), "api_key": API_KEY})
    assert_not_logged(seen, KUBE_TOKEN, KUBE_KEY_DATA, KUBE_PASSWORD, API_KEY)


def test_oidc_client_secret_never_reaches_the_invocation_log(monkeypatch):
    user = {"auth-provider": {"name": "oidc", "config": {"client-id": "gpuaas", "client-secret": OIDC_CLIENT_SECRET}}}
    seen = logged_invocation(monkeypatch, "platform_info", {"kubeconfig": kubeconfig(user)})
    assert_not_logged(seen, OIDC_CLIENT_SECRET)


# -- Prometheus token: inline, file, AWX credential env, Secret ------------------------------------------------

PROMETHEUS_MODULES = ["prometheus_query", "gpu_utilization_info", "ray_idle_reclaim"]


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(PROM_TOKEN + "\n")
    return str(path)


def prometheus_option(kind, token_file=None):
    option = {"url": "https://prometheus.example:9091"}
    if kind == "inline":
        option["token"] = "  %s\n" % PROM_TOKEN  # as pasted: the client sends it stripped
    elif kind == "file":
        option["token_file"] = token_file
    elif kind == "secret":
        option["token_secret"] = {"name": "reader", "namespace": "gpuaas-system"}
    return option


@pytest.fixture(params=["inline", "file", "env", "env_file"])
def token_before_logging(request, monkeypatch, token_file):
    """A Prometheus token given in a way the module can know before it logs its invocation."""
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN", raising=False)
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN_FILE", raising=False)
    if request.param == "env":
        monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN", PROM_TOKEN)
    elif request.param == "env_file":
        monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN_FILE", token_file)
    return prometheus_option(request.param, token_file)


@pytest.mark.parametrize("name", PROMETHEUS_MODULES)
def test_prometheus_token_is_registered_before_the_invocation_is_logged(monkeypatch, name, token_before_logging):
    seen = logged_invocation(monkeypatch, name, {"prometheus": token_before_logging})
    assert_not_logged(seen, PROM_TOKEN)
    assert secret_forms(PROM_TOKEN) <= seen["no_log_values"]


def run_query_against_a_leaking_server(monkeypatch, capsys, prometheus, secret=None):
    """prometheus_query at -vvv against a server whose error echoes the Authorization header; its output and log."""
    logged = []
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, msg, log_args=None: logged.append(msg))

    def leaking_request(self, path, params):
        encoded = base64.b64encode(self.token.encode()).decode()
        raise PrometheusError("401 for Authorization: Bearer %s (%s)" % (self.token, encoded))

    monkeypatch.setattr(PrometheusClient, "_request", leaking_request)
    monkeypatch.setattr(module_base, "kube_secret_reader", lambda module: lambda name, namespace: secret)
    from ansible_collections.gpuaas.platform.plugins.modules import prometheus_query

    args = {"query": "up", "prometheus": prometheus, "_ansible_inject_invocation": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        prometheus_query.main()
    return " ".join(logged), json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kind", ["inline", "file", "secret"])
def test_prometheus_token_never_reaches_log_or_output(monkeypatch, capsys, token_file, kind):
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN", raising=False)
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN_FILE", raising=False)
    secret = {"metadata": {"name": "reader", "namespace": "gpuaas-system"},
              "data": {"token": base64.b64encode(PROM_TOKEN.encode()).decode()}}
    log, result = run_query_against_a_leaking_server(monkeypatch, capsys, prometheus_option(kind, token_file), secret)
    assert result["failed"] and "401 for Authorization" in result["msg"]
    assert "invocation" in result
    output = json.dumps(result)
    for form in secret_forms(PROM_TOKEN):
        assert form not in output
        assert form not in log


def test_awx_credential_env_token_never_reaches_output(monkeypatch, capsys):
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN", PROM_TOKEN)
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN_FILE", raising=False)
    log, result = run_query_against_a_leaking_server(monkeypatch, capsys, prometheus_option("env"))
    assert result["failed"] and "401 for Authorization" in result["msg"]
    for form in secret_forms(PROM_TOKEN):
        assert form not in json.dumps(result)


# -- the base itself -------------------------------------------------------------------------------------------

def test_secret_forms_cover_raw_stripped_and_base64():
    assert secret_forms(" t0k\n") == {" t0k\n", "t0k", base64.b64encode(b" t0k\n").decode(), base64.b64encode(b"t0k").decode()}
    assert secret_forms("") == set() and secret_forms(None) == set() and secret_forms("  ") == set()


def test_prometheus_tokens_skip_unreadable_files(tmp_path):
    assert prometheus_tokens({"token_file": str(tmp_path / "missing")}, environ={}) == []
    assert prometheus_tokens({}, environ={"GPUAAS_PROMETHEUS_TOKEN": "e"}) == ["e"]


def test_credentials_are_registered_without_invocation_logging():
    """``no_log: true`` on the task skips _log_invocation; the results must be masked all the same."""
    args = {"kubeconfig": kubeconfig({"token": KUBE_TOKEN}), "_ansible_no_log": True}
    with patch_module_args(args):
        module = GpuaasModule(argument_spec={})
    assert KUBE_TOKEN in module.no_log_values


def test_run_turns_a_gpuaas_error_into_a_failure_with_hint(monkeypatch):
    failures = []
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", lambda self, **kw: failures.append(kw))
    with patch_module_args({}):
        module = GpuaasModule(argument_spec={})

    def work(module):
        raise PrometheusError("no answer", hint="check the URL")

    module.run(work, changed=False)
    assert failures == [{"msg": "no answer\nHint: check the URL", "hint": "check the URL", "changed": False}]
