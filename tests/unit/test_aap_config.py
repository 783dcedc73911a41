# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/aap_config: the rendered AWX objects are valid by AWX's rules and match what the playbooks and the
modules read; survey answers typed as AWX sends them (strings, !unsafe) pass the argument specs and are never
templated; bad answers fail with the playbook's message before anything touches a cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# AWX's survey rules (awx/api/views JobTemplateSurveySpec._validate_spec_data and
# awx/main/models/mixins.py SurveyJobTemplateMixin._survey_element_validation), written out independently.
AWX_TYPES = {"text": (str,), "textarea": (str,), "password": (str,), "multiplechoice": (str,), "multiselect": (str,),
             "integer": (int,), "float": (float, int)}

INVENTORY = {
    "gpuaas_flavors": [{"name": "h100"}, {"name": "a100-mig"}],
    "gpuaas_cohorts": [{"name": "research"}, {"name": "prod"}],
    "gpuaas_tenants": [{"name": "nlp"}, {"name": "vision", "state": "present"}, {"name": "old", "state": "absent"}],
}


def awx_survey_errors(survey: Any) -> list[str]:
    errors = []
    if not isinstance(survey, dict):
        return ["survey is not an object"]
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if field not in survey:
            errors.append("Field '%s' is missing from survey spec." % field)
        elif not isinstance(survey[field], kind):
            errors.append("Expected %s for field '%s'" % (kind.__name__, field))
    if errors:
        return errors
    if not survey["spec"]:
        return ["'spec' doesn't contain any items."]
    seen = set()
    for idx, q in enumerate(survey["spec"]):
        if not isinstance(q, dict):
            errors.append("question %d is not an object" % idx)
            continue
        for field in ("type", "question_name", "variable", "required"):
            if field not in q:
                errors.append("'%s' missing from survey question %d" % (field, idx))
            elif not isinstance(q[field], bool if field == "required" else str):
                errors.append("'%s' in survey question %d has the wrong type" % (field, idx))
        if errors:
            continue
        if q["variable"] in seen:
            errors.append("'variable' '%s' duplicated" % q["variable"])
        seen.add(q["variable"])
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", q["variable"]):
            errors.append("variable %r is not a valid Ansible variable name" % q["variable"])
        if q["type"] not in AWX_TYPES:
            errors.append("'%s' in survey question %d is not an allowed type" % (q["type"], idx))
            continue
        if "default" in q and q["default"] != "" and not isinstance(q["default"], AWX_TYPES[q["type"]]):
            errors.append("Default value %r in survey question %d has the wrong type" % (q["default"], idx))
        if isinstance(q.get("default"), bool):
            errors.append("boolean default in question %d" % idx)
        for key in ("min", "max"):
            if q.get(key) is not None and (not isinstance(q[key], int) or isinstance(q[key], bool)):
                errors.append("The %s limit in survey question %d expected to be integer." % (key, idx))
        if q["type"] in ("multiplechoice", "multiselect"):
            if "choices" not in q:
                errors.append("Survey question %d of type %s must specify choices." % (idx, q["type"]))
                continue
            choices = q["choices"].splitlines() if isinstance(q["choices"], str) else q["choices"]
            if not choices or not all(isinstance(c, str) and c.strip() for c in choices):
                errors.append("question %d: choices must be non-empty strings" % idx)
            default = q.get("default", "")
            defaults = [d for d in default.splitlines() if d.strip()] if isinstance(default, str) else default
            if q["type"] == "multiplechoice" and len(defaults) > 1:
                errors.append("Multiple Choice (Single Select) can only have one default value.")
            if any(d not in choices for d in defaults):
                errors.append("Default choice must be answered from the choices listed (question %d)." % idx)
        if isinstance(q.get("default"), str) and q["default"].startswith("$encrypted$"):
            errors.append("$encrypted$ is reserved")
    return errors


def awx_answer_errors(survey: dict, answers: dict) -> list[str]:
    """What AWX refuses at launch (SurveyJobTemplateMixin._survey_element_validation)."""
    errors = []
    for q in survey["spec"]:
        var = q["variable"]
        if var not in answers:
            if q["required"]:
                errors.append("'%s' value missing" % var)
            continue
        value = answers[var]
        if q["type"] in ("text", "textarea", "password"):
            if not isinstance(value, str):
                errors.append("%s: not a string" % var)
            elif q.get("min") is not None and len(value) < q["min"] and (q["required"] or value):
                errors.append("%s: shorter than %s" % (var, q["min"]))
            elif q.get("max") is not None and len(value) > q["max"]:
                errors.append("%s: longer than %s" % (var, q["max"]))
        elif q["type"] == "integer":
            if not isinstance(value, int) or isinstance(value, bool):
                errors.append("%s: not an integer" % var)
            elif (q.get("min") is not None and value < q["min"]) or (q.get("max") is not None and value > q["max"]):
                errors.append("%s: out of range" % var)
        elif q["type"] == "float":
            if not isinstance(value, (int, float)):
                errors.append("%s: not a number" % var)
        elif q["type"] == "multiplechoice":
            choices = q["choices"].splitlines() if isinstance(q["choices"], str) else q["choices"]
            if value not in choices and not (value == "" and not q["required"]):
                errors.append("%s: %r is not a choice" % (var, value))
    return errors


def run_playbook(playbook: Path | str, tmp_path: Path, extravars_yaml: str = "", extra: list[str] | None = None,
                 inventory: dict | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}},
                                           "vars": inventory or {}}}))
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inv), str(playbook)]
    if extravars_yaml:
        ev = tmp_path / "extravars.yml"
        ev.write_text(extravars_yaml)
        cmd += ["-e", "@%s" % ev]
    cmd += extra or []
    coll_root = os.environ.get("GPUAAS_COLLECTIONS_ROOT") or str(ROOT.parents[2] if ROOT.parts[-3] == "ansible_collections" else ROOT / ".build")
    run_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=coll_root, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
                   ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="false")
    for k in ("K8S_AUTH_VERIFY_SSL", "KUBECONFIG", "K8S_AUTH_KUBECONFIG"):
        run_env.pop(k, None)
    run_env.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=run_env, cwd=str(tmp_path), check=False, timeout=300)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("aap")
    out = tmp / "aap.yml"
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp, inventory=INVENTORY,
                        extra=["-e", "gpuaas_aap_output_file=%s" % out, "-e", "gpuaas_aap_apply=never"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return yaml.safe_load(out.read_text())


def _templates(rendered: dict) -> dict:
    return {t["name"].split(" ", 1)[1]: t for t in rendered["controller_templates"]}


# ---------------------------------------------------------------- what the playbooks read

class _AnyName(dict):
    """Every filter and test name exists (Ansible's come from plugins; only variable names matter here)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str):
        return lambda *a, **k: None

    def get(self, key: str, default: object = None):
        return self[key]


_JINJA = jinja2.Environment()
_JINJA.filters = _AnyName()
_JINJA.tests = _AnyName()
_BUILTIN = {"item", "omit", "lookup", "query", "q", "playbook_dir", "inventory_hostname", "hostvars", "groups",
            "true", "false", "none", "True", "False", "None"}


def _template_strings(node: Any):
    if isinstance(node, str):
        yield node if ("{{" in node or "{%" in node) else None
    elif isinstance(node, dict):
        for v in node.values():
            yield from _template_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _template_strings(v)


def playbook_reads(playbook: Path) -> set[str]:
    """Variables a playbook reads that it does not define itself (and that are not the inventory's gpuaas_*)."""
    plays = yaml.safe_load(playbook.read_text())
    read: set[str] = set()
    defined: set[str] = set()
    for play in plays:
        defined |= set((play.get("vars") or {}).keys())
        strings = list(_template_strings(play.get("vars") or {})) + [play.get("hosts", "")]
        for task in play.get("tasks", []):
            defined |= set((task.get("ansible.builtin.set_fact") or {}).keys())
            if "register" in task:
                defined.add(task["register"])
            for key in ("when", "that", "failed_when", "changed_when"):
                val = task.get(key) or (task.get("ansible.builtin.assert") or {}).get(key)
                for v in (val if isinstance(val, list) else [val] if val else []):
                    strings.append("{{ %s }}" % v if "{{" not in str(v) else v)
            strings += list(_template_strings(task))
        for s in strings:
            if s:
                read |= jinja2.meta.find_undeclared_variables(_JINJA.parse(s))
    return {v for v in read - defined - _BUILTIN if not v.startswith(("gpuaas_", "ansible_", "_"))}


def test_every_survey_is_valid_by_awx_rules(rendered):
    surveys = [t["survey_spec"] for t in rendered["controller_templates"] if t.get("survey_enabled")]
    surveys += [w["survey_spec"] for w in rendered["controller_workflows"]]
    assert len(surveys) == 3
    for survey in surveys:
        assert awx_survey_errors(survey) == [], survey["name"]


def test_the_validator_refuses_what_awx_refuses():
    """The rules above are not vacuous: each broken spec is refused."""
    good = {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "text", "required": True}]}
    assert awx_survey_errors(good) == []
    broken = [
        {"name": "n", "description": "d", "spec": []},
        {"name": "n", "spec": good["spec"]},
        {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "boolean", "required": True}]},
        {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "text", "required": "yes"}]},
        {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "multiplechoice", "required": True}]},
        {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "multiplechoice",
                                                    "required": True, "choices": ["a"], "default": "b"}]},
        {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "integer",
                                                    "required": True, "default": "1"}]},
        {"name": "n", "description": "d", "spec": [{"question_name": "q", "variable": "v", "type": "text",
                                                    "required": True, "min": "1"}]},
        {"name": "n", "description": "d", "spec": good["spec"] * 2},
    ]
    for spec in broken:
        assert awx_survey_errors(spec), spec


def test_survey_choices_come_from_the_inventory(rendered):
    t = _templates(rendered)
    onboard = {q["variable"]: q for q in t["onboard"]["survey_spec"]["spec"]}
    assert onboard["tenant_flavor"]["choices"] == ["h100", "a100-mig"]
    assert onboard["tenant_cohort"]["choices"] == ["research", "prod"]
    offboard = {q["variable"]: q for q in t["offboard"]["survey_spec"]["spec"]}
    assert offboard["tenant_name"]["choices"] == ["nlp", "vision"]  # not the tenant already marked absent


def test_survey_variables_equal_what_the_playbooks_read(rendered):
    t = _templates(rendered)
    for key, playbook in (("onboard", "onboard_tenant"), ("offboard", "offboard_tenant")):
        survey_vars = {q["variable"] for q in t[key]["survey_spec"]["spec"]}
        assert survey_vars == playbook_reads(ROOT / "playbooks" / ("%s.yml" % playbook)), key
    workflow = rendered["controller_workflows"][0]
    assert workflow["survey_spec"] == t["onboard"]["survey_spec"]


def test_without_cohorts_the_onboard_survey_has_no_cohort_questions(tmp_path):
    out = tmp_path / "aap.yml"
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp_path, inventory={"gpuaas_flavors": [{"name": "h100"}]},
                        extra=["-e", "gpuaas_aap_output_file=%s" % out, "-e", "gpuaas_aap_apply=never"])
    assert proc.returncode == 0, proc.stdout
    t = _templates(yaml.safe_load(out.read_text()))
    variables = {q["variable"] for q in t["onboard"]["survey_spec"]["spec"]}
    assert "tenant_cohort" not in variables and "tenant_borrowing_limit_gpus" not in variables
    assert awx_survey_errors(t["onboard"]["survey_spec"]) == []
    # no tenants in the inventory: the offboard survey asks for a name
    assert t["offboard"]["survey_spec"]["spec"][0]["type"] == "text"


def test_job_templates_and_workflow(rendered):
    t = _templates(rendered)
    assert set(t) == {"install", "reconcile", "onboard", "offboard", "validate"}
    collection_playbooks = {p.stem for p in (ROOT / "playbooks").glob("*.yml")}
    for key, jt in t.items():
        m = re.match(r"^playbooks/gpuaas_(\w+)\.yml$", jt["playbook"])
        assert m and m.group(1) in collection_playbooks, jt["playbook"]
        assert jt["credentials"][0] == "gpuaas-cluster"
        assert ("gpuaas-prometheus" in jt["credentials"]) == (key != "install")
    wf = rendered["controller_workflows"][0]
    nodes = {n["identifier"]: n for n in wf["workflow_nodes"]}
    names = {jt["name"] for jt in rendered["controller_templates"]}
    assert nodes["onboard"]["unified_job_template"]["name"] in names
    assert nodes["validate"]["unified_job_template"]["name"] == "GPUaaS validate"
    assert nodes["onboard"]["related"]["success_nodes"] == [{"identifier": "validate"}]
    # awx.awx workflow_job_template: related must list all four, even if empty
    for node in nodes.values():
        assert set(node["related"]) == {"success_nodes", "failure_nodes", "always_nodes", "credentials"}


# ---------------------------------------------------------------- credentials

def test_prometheus_credential_type_injects_what_the_code_reads(rendered):
    ctype = rendered["controller_credential_types"][0]
    source = (ROOT / "plugins" / "module_utils" / "observe" / "prometheus.py").read_text()
    env_read = dict(re.findall(r'^(ENV_\w+) = "(GPUAAS_PROMETHEUS_\w+)"', source, re.M))
    for const in env_read:
        assert "os.environ.get(%s)" % const in source, const
    injected = set(ctype["injectors"]["env"])
    assert injected == {env_read["ENV_URL"], env_read["ENV_TOKEN"], env_read["ENV_CA_FILE"]}
    # the extra var is read by the playbooks the Prometheus credential is attached to
    for extra in ctype["injectors"]["extra_vars"]:
        for pb in ("onboard_tenant", "offboard_tenant"):
            assert extra in (ROOT / "playbooks" / ("%s.yml" % pb)).read_text()
    # injector templates only use the type's own inputs (and AWX's tower.filename), kept unrendered
    fields = {f["id"] for f in ctype["inputs"]["fields"]} | {"tower"}
    assert {f["id"] for f in ctype["inputs"]["fields"]} >= {"url", "token", "ca_cert", "validate_certs"}
    for section in ("env", "extra_vars", "file"):
        for value in ctype["injectors"][section].values():
            assert "{{" in value
            assert jinja2.meta.find_undeclared_variables(_JINJA.parse(value)) <= fields, value
    validate_certs = next(f for f in ctype["inputs"]["fields"] if f["id"] == "validate_certs")
    assert validate_certs["type"] == "boolean" and validate_certs["default"] is True


def test_awx_kubernetes_bearer_token_env_is_what_the_client_reads(monkeypatch):
    """AWX's 'OpenShift or Kubernetes API Bearer Token' credential injects K8S_AUTH_HOST, K8S_AUTH_API_KEY,
    K8S_AUTH_VERIFY_SSL and K8S_AUTH_SSL_CA_CERT; the collection's client must take every one of them."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.kube import client

    for k in list(os.environ):
        if k.startswith("K8S_AUTH_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("K8S_AUTH_HOST", "https://api.example:6443")
    monkeypatch.setenv("K8S_AUTH_API_KEY", "sha256~token")
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "True")
    monkeypatch.setenv("K8S_AUTH_SSL_CA_CERT", "/runner/env/tmpca")
    auth = client.auth_params({})
    assert auth["host"] == "https://api.example:6443" and auth["api_key"] == "sha256~token"
    assert auth["validate_certs"] is True and auth["ca_cert"] == "/runner/env/tmpca"
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "False")
    assert client.auth_params({})["validate_certs"] is False


# ---------------------------------------------------------------- answers as AWX sends them

AWX_ANSWERS = """---
tenant_name: !unsafe 'speech'
tenant_namespaces: !unsafe 'speech-dev, speech-prod'
tenant_flavor: !unsafe 'h100'
tenant_gpus: 2
tenant_gpu_resource: !unsafe 'nvidia.com/gpu'
tenant_cpu: !unsafe '16'
tenant_memory: !unsafe '64Gi'
tenant_cohort: !unsafe 'research'
tenant_borrowing_limit_gpus: 2
tenant_fair_sharing_weight: 1.5
tenant_admins_group: !unsafe 'speech-leads'
tenant_users_group: !unsafe 'speech-{{ lookup("env", "HOME") }}'
"""


def _answers_as_dict() -> dict:
    class L(yaml.SafeLoader):
        pass

    L.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(AWX_ANSWERS, Loader=L)  # noqa: S506 - SafeLoader subclass


def test_awx_answers_are_valid_survey_answers(rendered):
    survey = _templates(rendered)["onboard"]["survey_spec"]
    assert awx_answer_errors(survey, _answers_as_dict()) == []
    assert awx_answer_errors(survey, {"tenant_name": "x", "tenant_flavor": "b200", "tenant_gpus": "2"}) != []


def test_awx_typed_answers_pass_the_tenants_role_argument_spec_untemplated(tmp_path):
    """The tenant the onboard playbook builds from AWX-typed answers passes the tenants role's argument spec, and
    the answer containing {{ }} stays literal text."""
    plays = yaml.safe_load((ROOT / "playbooks" / "onboard_tenant.yml").read_text())
    play_vars = dict(plays[0]["vars"])
    spec = yaml.safe_load((ROOT / "roles" / "tenants" / "meta" / "argument_specs.yml").read_text())
    playbook = tmp_path / "check.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "check", "hosts": "localhost", "gather_facts": False, "vars": play_vars,
        "tasks": [
            {"name": "argument spec", "ansible.builtin.validate_argument_spec": {
                "argument_spec": spec["argument_specs"]["main"]["options"],
                # gpuaas_tenants: checked key by key (gpuaas_tenants_override is only a list of dicts to the spec)
                "provided_arguments": {"gpuaas_tenants": ["{{ _tenant }}"]}}},
            {"name": "dump", "ansible.builtin.copy": {
                "dest": str(tmp_path / "tenant.json"), "content": "{{ _tenant | to_json }}", "mode": "0644"}},
        ]}]))
    proc = run_playbook(playbook, tmp_path, AWX_ANSWERS, inventory=INVENTORY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tenant = json.loads((tmp_path / "tenant.json").read_text())
    assert tenant["namespaces"] == ["speech-dev", "speech-prod"]
    assert tenant["quotas"] == [{"flavor": "h100", "resources": {"nvidia.com/gpu": "2", "cpu": "16", "memory": "64Gi"},
                                 "borrowing_limit": {"nvidia.com/gpu": "2"}}]
    assert tenant["access"] == {"admins": ["speech-leads"], "users": ['speech-{{ lookup("env", "HOME") }}']}
    assert tenant["fair_sharing_weight"] == "1.5" and tenant["cohort"] == "research"


BAD_ANSWERS = [
    ({"tenant_name": "Speech_Team"}, "must be a DNS-1123 label"),
    ({"tenant_namespaces": "ok, Not-OK"}, "must be a DNS-1123 label"),
    ({"tenant_gpus": "two"}, "must be whole numbers"),
    ({"tenant_gpus": "-1"}, "must be whole numbers"),
    ({"tenant_flavor": "b200"}, "must be one of the inventory's flavors"),
    ({"tenant_cohort": "nope"}, "one of its cohorts"),
    ({"tenant_users_group": "system:authenticated"}, "is not a valid group name"),
    ({"tenant_users_group": "team a"}, "is not a valid group name"),
    ({"tenant_admins_group": "{{ lookup('env', 'HOME') }}"}, "is not a valid group name"),
    ({"tenant_name": ""}, "tenant_name, tenant_flavor and tenant_gpus are required"),
]


@pytest.mark.parametrize("override,message", BAD_ANSWERS, ids=[m[1][:20] + str(i) for i, m in enumerate(BAD_ANSWERS)])
def test_bad_answers_fail_with_the_playbooks_message(tmp_path, override, message):
    answers = {"tenant_name": "speech", "tenant_flavor": "h100", "tenant_gpus": 2}
    answers.update(override)
    text = "---\n" + "".join("%s: %s\n" % (k, v if isinstance(v, int) else "!unsafe " + json.dumps(v))
                             for k, v in answers.items())
    # no cluster at all: the checks must stop the play before anything connects
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path, text, inventory=INVENTORY,
                        env={"K8S_AUTH_HOST": "https://127.0.0.1:9", "HOME": "/home/should-not-appear"})
    assert proc.returncode == 2, proc.stdout
    # older ansible-core wraps long messages in the default callback's YAML-ish output
    assert message in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    assert "Reconcile the tenant" not in proc.stdout
    assert "/home/should-not-appear" not in proc.stdout


def test_zero_gpus_is_an_answer(tmp_path):
    """AWX sends an integer 0 for a CPU-only tenant: the checks pass it on (no cluster: the module fails later)."""
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path,
                        "---\ntenant_name: !unsafe 'cpuonly'\ntenant_flavor: !unsafe 'h100'\ntenant_gpus: 0\n",
                        inventory=INVENTORY, env={"K8S_AUTH_KUBECONFIG": str(tmp_path / "missing-kubeconfig")})
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "are required" not in proc.stdout and "Kubernetes client configuration" in proc.stdout, proc.stdout[-3000:]


def test_tls_verification_switched_off_by_the_credential_is_refused(tmp_path):
    answers = "---\ntenant_name: !unsafe 'speech'\ntenant_flavor: !unsafe 'h100'\ntenant_gpus: 1\n"
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path, answers, inventory=INVENTORY,
                        env={"K8S_AUTH_HOST": "https://127.0.0.1:9", "K8S_AUTH_VERIFY_SSL": "False"})
    assert proc.returncode == 2 and "K8S_AUTH_VERIFY_SSL is false" in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    proc = run_playbook(ROOT / "playbooks" / "offboard_tenant.yml", tmp_path, answers, inventory=INVENTORY,
                        env={"K8S_AUTH_HOST": "https://127.0.0.1:9", "K8S_AUTH_VERIFY_SSL": "false"})
    assert proc.returncode == 2 and "K8S_AUTH_VERIFY_SSL is false" in " ".join(proc.stdout.split()), proc.stdout[-3000:]


def test_offboard_refuses_a_bad_tenant_name(tmp_path):
    proc = run_playbook(ROOT / "playbooks" / "offboard_tenant.yml", tmp_path,
                        "---\ntenant_name: !unsafe '{{ 7 * 6 }}'\n", inventory=INVENTORY)
    assert proc.returncode == 2 and "must be a tenant name" in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    assert "42" not in proc.stdout.split("TASK [Check the survey answers]")[1].split("PLAY RECAP")[0]


CAPTURE_CALLBACK = """
import json, os
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "capture_args"
    CALLBACK_NEEDS_ENABLED = True

    def v2_runner_on_start(self, host, task):
        with open(os.environ["CAPTURE_FILE"], "a") as f:
            f.write(json.dumps({"started": task.get_name()}) + "\\n")

    def v2_runner_on_ok(self, result):
        with open(os.environ["CAPTURE_FILE"], "a") as f:
            f.write(json.dumps({"ok": result._task.get_name(), "facts": list(result._result.get("ansible_facts") or {})}) + "\\n")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        with open(os.environ["CAPTURE_FILE"], "a") as f:
            f.write(json.dumps({"failed": result._task.get_name(), "args": result._task_fields.get("args"),
                                "msg": result._result.get("msg")}, default=str) + "\\n")
"""


DAY2_CASES = [
    ("onboard_tenant", "---\ntenant_name: !unsafe 'speech'\ntenant_flavor: !unsafe 'h100'\ntenant_gpus: 2\n"
                       "tenant_namespaces: !unsafe 'nlp'\n",
     # the namespace of the inventory's nlp: the module's claim check sees both tenants
     {"name": "speech", "namespaces": ["nlp"], "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "2"}}],
      "access": {}, "state": "present"}),
    ("offboard_tenant", "---\ntenant_name: !unsafe 't007'\n", {"name": "t007", "state": "absent"}),
]


@pytest.mark.parametrize("playbook,answers,last", DAY2_CASES, ids=[c[0] for c in DAY2_CASES])
def test_day2_playbooks_hand_the_module_every_inventory_tenant_without_walking_the_list_in_ansible(tmp_path, playbook, answers, last):
    """Issue 15: onboarding (offboarding) one tenant costs one tenant's time. The module gets the inventory's tenants
    with the survey's one added (marked absent) — it checks namespace claims and capacity across all of them — and
    reconciles only that one; Ansible neither copies the list with set_fact nor runs the role's argument spec over
    it (each walks, templates and deep-copies every tenant: seconds at 500, docs/benchmarks.md)."""
    inventory = dict(INVENTORY, gpuaas_tenants=INVENTORY["gpuaas_tenants"] + [
        {"name": "t%03d" % i, "namespaces": ["t%03d-a" % i], "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}}]}
        for i in range(50)])
    (tmp_path / "callbacks").mkdir()
    (tmp_path / "callbacks" / "capture_args.py").write_text(CAPTURE_CALLBACK)
    capture = tmp_path / "capture.jsonl"
    # no cluster: the module fails on its client configuration, after Ansible has handed it its arguments
    proc = run_playbook(ROOT / "playbooks" / ("%s.yml" % playbook), tmp_path, answers, inventory=inventory,
                        env={"ANSIBLE_CALLBACK_PLUGINS": str(tmp_path / "callbacks"), "ANSIBLE_CALLBACKS_ENABLED": "capture_args",
                             "CAPTURE_FILE": str(capture), "K8S_AUTH_KUBECONFIG": str(tmp_path / "missing-kubeconfig")})
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    events = [json.loads(line) for line in capture.read_text().splitlines()]
    started = [e["started"] for e in events if "started" in e]
    assert not [name for name in started if "Validating arguments against arg spec" in name], started
    failed = [e for e in events if "failed" in e]
    assert len(failed) == 1 and "Reconcile the GPU tenancy with the inventory" in failed[0]["failed"], failed
    assert "Kubernetes client configuration" in failed[0]["msg"], failed
    args = failed[0]["args"]
    others = [x for x in inventory["gpuaas_tenants"] if x["name"] != last["name"]]
    assert args["tenants"] == others + [last]
    assert args["limit_tenants"] == [last["name"]]
    assert not [e for e in events if "gpuaas_tenants_override" in str(e.get("facts"))]


def test_playbooks_default_the_controller_local_interpreter():
    """Every play of every playbook sets the controller-local Python; an import points at a playbook checked here."""
    playbooks = sorted((ROOT / "playbooks").glob("*.yml"))
    names = {pb.name for pb in playbooks}
    checked = []
    for pb in playbooks:
        for index, play in enumerate(yaml.safe_load(pb.read_text())):
            where = "%s play %d (%s)" % (pb.name, index, play.get("name"))
            if "ansible.builtin.import_playbook" in play:
                assert play["ansible.builtin.import_playbook"] in names, where
                continue
            assert (play.get("vars") or {}).get("ansible_python_interpreter") == \
                "{{ gpuaas_python_interpreter | default(ansible_playbook_python) }}", where
            checked.append(pb.stem)
    # the playbooks the audit of issue 15 found without it are among the checked ones
    assert {"tenants", "onboard_tenant", "offboard_tenant", "demo", "automation_rbac", "node_pool_scaledown",
            "validate", "install", "observability", "aap_config"} <= set(checked), checked
