# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 22 item 4, end to end: every module of the collection run by a real ``ansible-playbook`` at ``-vvv``
with a kubeconfig dict (the lab admin's real client key, plus a token, a password and an OIDC client secret of
other users), the modules with a ``prometheus`` option with a Prometheus token given inline, and the module that
sends it (prometheus_query) also with a token file and with a token Secret on the lab; none of them, raw or
base64-encoded, is in the playbook's output or in what the modules hand to syslog (the module invocation log).

The invocation log is captured where Ansible writes it: a ``sitecustomize`` on the modules' PYTHONPATH replaces
``syslog.openlog``/``syslog.syslog`` (this host has no journald Python binding, so AnsibleModule.log uses syslog)
with a writer to a file the test reads. The Prometheus "server" is a small HTTP endpoint in the test that answers
401 with the Authorization header it received in the body - the adversarial case, in which every token is echoed
back into the module's error message. The whole play runs in check mode: nothing is written to the lab. The modules fail at their first
request (the kubeconfig's current user is refused), after the invocation log; the play spreads them over three
local hosts that run side by side (strategy free) to keep the test near a minute on a shared machine.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import threading
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MODULES_DIR = REPO / "plugins" / "modules"

# The least each module needs to get through its argument handling (and log its invocation).
MINIMAL_ARGS = {
    "cluster_queue": {"name": "leak-q"},
    "cohort": {"name": "leak-c"},
    "gpu_utilization_info": {},
    "kueue_import": {},
    "kueue_info": {},
    "kueue_integrations_info": {},
    "local_queue": {"name": "leak-q", "namespace": "leak-ns", "cluster_queue": "leak-q"},
    "monitoring_objects": {},
    "node_pool_scaledown": {},
    "node_pools": {},
    "olm_operator": {"package": "leak-p", "namespace": "leak-ns"},
    "platform_health_info": {},
    "platform_info": {},
    "prometheus_query": {"query": "up"},
    "quota_plan": {"inventory": {}},
    "ray_idle_reclaim": {},
    "resource_flavor": {"name": "leak-f"},
    "scaled_object": {"name": "leak-s", "namespace": "leak-ns", "target": {"name": "d"}},
    "tenants": {},
    "workload_priority_class": {"name": "leak-p", "value": 1},
}
# The modules with a ``prometheus`` option (doc fragment gpuaas.platform.prometheus, or the inventory runs').
PROMETHEUS_MODULES = ["gpu_utilization_info", "node_pools", "prometheus_query", "quota_plan", "ray_idle_reclaim", "tenants"]

KUBE_TOKEN = "leak-kube-token-2b7e91"
KUBE_PASSWORD = "leak-kube-password-c40d"
OIDC_CLIENT_SECRET = "leak-oidc-client-secret-77fa"
PROM_INLINE = "leak-prom-inline-5e0c"
PROM_FILE = "leak-prom-file-a91b"
PROM_SECRET = "leak-prom-secret-3f62"
SECRET_REF = {"name": "gpuaas-leak-test-prometheus", "namespace": "default"}
# Local "hosts" the tasks are spread over: one module run costs seconds of CPU on a shared machine, so a few run at once.
HOSTS = 3
PLAY = "- hosts: all\n  connection: local\n  gather_facts: false\n  strategy: free\n  check_mode: true\n  tasks: %s\n"

SITECUSTOMIZE = '''
"""Test only: what AnsibleModule hands to syslog goes to $GPUAAS_TEST_SYSLOG_CAPTURE as well (one JSON per line)."""
import json as _json
import os as _os
import syslog as _syslog

_PATH = _os.environ.get("GPUAAS_TEST_SYSLOG_CAPTURE")
if _PATH:
    _ident = {"value": ""}

    def _openlog(ident="", *args, **kwargs):
        _ident["value"] = ident

    def _syslog_call(*args):
        with open(_PATH, "a", encoding="utf-8") as handle:
            handle.write(_json.dumps({"ident": _ident["value"], "msg": str(args[-1])}) + "\\n")

    _syslog.openlog = _openlog
    _syslog.syslog = _syslog_call
'''


def secret_forms(value: str) -> set[str]:
    """As given, stripped, and base64-encoded (the form Secret data and a kubeconfig's *-data hold)."""
    forms = set()
    for text in (value, value.strip()):
        forms.add(text)
        forms.add(base64.b64encode(text.encode()).decode())
    return forms


def lab_admin_kubeconfig(lab) -> tuple[dict, str]:
    """The lab admin's kubeconfig as a dict with inline data (a real, working credential), other users' secrets
    beside it; and the admin's client-key-data (the secret that must not leak)."""
    config = yaml.safe_load(Path(lab.kubeconfig).read_text())
    context = next(c for c in config["contexts"] if c["name"] == lab.admin_context)["context"]
    user = next(u for u in config["users"] if u["name"] == context["user"])["user"]
    cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])["cluster"]

    def data(entry: dict, key: str) -> str:
        if key + "-data" in entry:
            return entry[key + "-data"]
        return base64.b64encode(Path(entry[key]).read_bytes()).decode()

    key_data = data(user, "client-key")
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "bot",
        "clusters": [{"name": "lab", "cluster": {
            "server": cluster["server"], "certificate-authority-data": data(cluster, "certificate-authority")}}],
        "users": [
            {"name": "admin", "user": {"client-certificate-data": data(user, "client-certificate"),
                                       "client-key-data": key_data}},
            {"name": "bot", "user": {"token": KUBE_TOKEN}},
            {"name": "basic", "user": {"username": "ops", "password": KUBE_PASSWORD}},
            {"name": "sso", "user": {"auth-provider": {"name": "oidc", "config": {
                "client-id": "gpuaas", "client-secret": OIDC_CLIENT_SECRET, "idp-issuer-url": "https://sso.example"}}}},
        ],
        "contexts": [{"name": "admin", "context": {"cluster": "lab", "user": "admin"}},
                     {"name": "bot", "context": {"cluster": "lab", "user": "bot"}}],
    }
    return kubeconfig, key_data


class EchoingPrometheus(http.server.BaseHTTPRequestHandler):
    """Answers every request 401 with the Authorization header in the body: the token comes back in the error."""

    seen: list[str] = []

    def _answer(self) -> None:
        auth = self.headers.get("Authorization") or ""
        EchoingPrometheus.seen.append(auth)
        body = json.dumps({"status": "error", "errorType": "unauthorized",
                           "error": "rejected %s (%s)" % (auth, base64.b64encode(auth.encode()).decode())}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def echoing_prometheus():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoingPrometheus)
    EchoingPrometheus.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def token_secret(kube):
    secrets = kube.resources.get(api_version="v1", kind="Secret")
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SECRET_REF["name"], "namespace": SECRET_REF["namespace"]},
            "data": {"token": base64.b64encode((PROM_SECRET + "\n").encode()).decode()}}
    try:
        secrets.delete(name=SECRET_REF["name"], namespace=SECRET_REF["namespace"])
    except Exception:  # noqa: BLE001 - not there
        pass
    secrets.create(body=body, namespace=SECRET_REF["namespace"])
    yield dict(SECRET_REF)
    secrets.delete(name=SECRET_REF["name"], namespace=SECRET_REF["namespace"])


def module_tasks(url: str, token_file: str, secret_ref: dict) -> list[dict]:
    """One task per module with the kubeconfig dict - the Prometheus modules with the inline token as well - and
    prometheus_query (the module that sends the token) once more with the token file and once with the token Secret.

    The kubeconfig's current context is the ``bot`` user, whose token the lab refuses (401): each module fails at
    its first request, after its argument handling and invocation log, without waiting through discovery on this
    shared machine. The token Secret task switches to the lab admin, whose client key reads the Secret.
    """
    tasks = []
    for name, args in MINIMAL_ARGS.items():
        module_args = dict(args, kubeconfig="{{ leak_kubeconfig }}")
        if name in PROMETHEUS_MODULES:
            module_args["prometheus"] = {"url": url, "token": "  %s\n" % PROM_INLINE}  # as pasted
        tasks.append({"name": "%s with the kubeconfig dict" % name, "gpuaas.platform.%s" % name: module_args,
                      "ignore_errors": True})
    admin = "{{ leak_kubeconfig | combine({'current-context': 'admin'}) }}"
    for form, prometheus in (("token file", {"url": url, "token_file": token_file}),
                             ("token Secret", {"url": url, "token_secret": secret_ref})):
        tasks.append({"name": "prometheus_query with the %s" % form, "ignore_errors": True,
                      "gpuaas.platform.prometheus_query": dict(MINIMAL_ARGS["prometheus_query"], kubeconfig=admin,
                                                               prometheus=prometheus)})
    for index, task in enumerate(tasks):  # spread over the play's hosts (strategy free: they run side by side)
        task["when"] = "inventory_hostname == 'leak%d'" % (index % HOSTS)
    return tasks


def test_every_module_at_vvv_keeps_every_credential_out_of_output_and_invocation_log(
        lab, run_playbook, tmp_path, echoing_prometheus, token_secret):
    modules = sorted(p.stem for p in MODULES_DIR.glob("*.py") if p.stem != "__init__")
    assert sorted(MINIMAL_ARGS) == modules, "a module is missing from this test (or gone): %s" % modules

    kubeconfig, admin_key_data = lab_admin_kubeconfig(lab)
    token_file = tmp_path / "prometheus-token"
    token_file.write_text(PROM_FILE + "\n")
    capture_dir = tmp_path / "capture"
    capture_dir.mkdir()
    (capture_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    capture = tmp_path / "syslog.jsonl"

    playbook = PLAY % json.dumps(module_tasks(echoing_prometheus, str(token_file), token_secret))
    inventory = tmp_path / "hosts"
    inventory.write_text("".join("leak%d ansible_connection=local\n" % i for i in range(HOSTS)))
    env = {"ANSIBLE_VERBOSITY": "3", "ANSIBLE_PIPELINING": "true", "ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_NO_TARGET_SYSLOG": "false",
           "GPUAAS_TEST_SYSLOG_CAPTURE": str(capture),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(capture_dir), os.environ.get("PYTHONPATH")]))}
    for var in ("GPUAAS_PROMETHEUS_TOKEN", "GPUAAS_PROMETHEUS_TOKEN_FILE", "K8S_AUTH_API_KEY"):
        env[var] = ""
    run = run_playbook(playbook, extra_vars={"leak_kubeconfig": kubeconfig}, inventory=inventory, env=env, timeout=300)
    output = run.stdout + run.stderr
    assert "ESTABLISH LOCAL CONNECTION" in output, run.explain()  # -vvv took effect

    logged = [json.loads(line) for line in capture.read_text().splitlines()] if capture.exists() else []
    invoked = {entry["ident"].rsplit(".", 1)[-1] for entry in logged if "Invoked with" in entry["msg"]}
    # every module got through its argument handling and logged its invocation (the log under test is not empty)
    assert invoked >= set(modules), "modules that logged no invocation: %s\n%s" % (
        sorted(set(modules) - invoked), run.explain())
    # the credentials were really there to leak: the three tokens reached the server (the Secret's read from the lab
    # with the admin's key), which echoed them back into the modules' errors
    sent = " ".join(EchoingPrometheus.seen)
    for token in (PROM_INLINE, PROM_FILE, PROM_SECRET):
        assert "Bearer %s" % token in sent, (token, EchoingPrometheus.seen)

    log_text = "\n".join(entry["msg"] for entry in logged)
    secrets = {"kubeconfig client-key-data": admin_key_data, "kubeconfig token": KUBE_TOKEN,
               "kubeconfig password": KUBE_PASSWORD, "kubeconfig OIDC client-secret": OIDC_CLIENT_SECRET,
               "Prometheus token inline": PROM_INLINE, "Prometheus token file": PROM_FILE,
               "Prometheus token Secret": PROM_SECRET}
    leaks = ["%s (%s) in %s" % (what, form[:12] + "...", where)
             for what, value in secrets.items() for form in secret_forms(value)
             for where, text in (("the -vvv output", output), ("the invocation log", log_text)) if form in text]
    assert not leaks, "\n".join(leaks)
