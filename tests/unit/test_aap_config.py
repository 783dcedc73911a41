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
    # any name: a tenant onboarded from the survey is not in the inventory; the description lists the inventory's
    # present tenants (not the one already marked absent)
    assert offboard["tenant_name"]["type"] == "text" and "choices" not in offboard["tenant_name"]
    assert offboard["tenant_name"]["question_description"].endswith("the inventory lists nlp, vision")
    assert onboard["tenant_action"]["choices"] == ["create", "update"] and onboard["tenant_action"]["default"] == "create"
    assert onboard["tenant_action"]["required"] is True


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


# docs/production.md's accounts: install (a short-lived administrator) for install and automation RBAC,
# gpuaas-tenants for reconcile/onboard/offboard, gpuaas-observability, gpuaas-validate; node_pool_scaledown its own
ACCOUNT_OF = {"install": "gpuaas-cluster-admin", "automation_rbac": "gpuaas-cluster-admin",
              "reconcile": "gpuaas-tenants", "onboard": "gpuaas-tenants", "offboard": "gpuaas-tenants",
              "validate": "gpuaas-validate", "observability": "gpuaas-observability",
              "node_pool_scaledown": "gpuaas-node-pools"}


def test_job_templates_and_workflow(rendered):
    t = _templates(rendered)
    assert set(t) == set(ACCOUNT_OF)
    collection_playbooks = {p.stem for p in (ROOT / "playbooks").glob("*.yml")}
    for key, jt in t.items():
        m = re.match(r"^playbooks/gpuaas_(\w+)\.yml$", jt["playbook"])
        assert m and m.group(1) in collection_playbooks, jt["playbook"]
    wf = rendered["controller_workflows"][0]
    nodes = {n["identifier"]: n for n in wf["workflow_nodes"]}
    names = {jt["name"] for jt in rendered["controller_templates"]}
    assert nodes["onboard"]["unified_job_template"]["name"] in names
    assert nodes["validate"]["unified_job_template"]["name"] == "GPUaaS validate"
    assert nodes["onboard"]["related"]["success_nodes"] == [{"identifier": "validate"}]
    # awx.awx workflow_job_template: related must list all four, even if empty
    for node in nodes.values():
        assert set(node["related"]) == {"success_nodes", "failure_nodes", "always_nodes", "credentials"}


def test_every_job_template_runs_with_its_accounts_credential(rendered):
    """One cluster credential per template, the account production.md gives its playbook: the administrator's
    (short-lived) only on install and automation RBAC, never on a day-2 or scheduled template."""
    for key, jt in _templates(rendered).items():
        cluster = [c for c in jt["credentials"] if c != "gpuaas-prometheus"]
        assert cluster == [ACCOUNT_OF[key]], (key, jt["credentials"])
        assert ("gpuaas-prometheus" in jt["credentials"]) == (key in ("reconcile", "onboard", "offboard", "validate")), key
    admin = {k for k, jt in _templates(rendered).items() if "gpuaas-cluster-admin" in jt["credentials"]}
    assert admin == {"install", "automation_rbac"}


def test_no_template_asks_for_variables_credentials_or_inventory_on_launch(rendered):
    """Issue 24: ask_variables_on_launch on a survey template lets a launcher pass gpuaas_tenants_prune,
    gpuaas_tenants_override or gpuaas_allow_insecure_tls past every survey check; a credential or inventory asked on
    launch would swap the account or the tenant list. Nothing is asked; the survey templates keep their survey."""
    surveyed = [x for x in rendered["controller_templates"] + rendered["controller_workflows"] if x.get("survey_enabled")]
    assert {x["name"] for x in surveyed} == {"GPUaaS onboard", "GPUaaS offboard", "GPUaaS onboard tenant and validate"}
    for obj in rendered["controller_templates"] + rendered["controller_workflows"]:
        assert obj["ask_variables_on_launch"] is False, obj["name"]
        asked = [k for k, v in obj.items() if k.startswith("ask_") and v is not False]
        assert asked == [], (obj["name"], asked)
        assert "extra_vars" not in obj, obj["name"]
    for obj in surveyed:
        assert obj["survey_spec"]["spec"], obj["name"]


def test_the_role_renders_no_template_that_asks_for_variables_whatever_the_inventory(tmp_path):
    """Also with a minimal inventory (no flavors, cohorts or tenants: text questions) nothing asks for variables."""
    out = tmp_path / "aap.yml"
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp_path, inventory={},
                        extra=["-e", "gpuaas_aap_output_file=%s" % out, "-e", "gpuaas_aap_apply=never"])
    assert proc.returncode == 0, proc.stdout
    rendered = yaml.safe_load(out.read_text())
    assert [o["name"] for o in rendered["controller_templates"] + rendered["controller_workflows"]
            if o.get("ask_variables_on_launch") is not False] == []
    # and apply.yml passes the rendered value on (not a default of the controller module)
    apply = yaml.safe_load((ROOT / "roles" / "aap_config" / "tasks" / "apply.yml").read_text())
    for task in apply:
        module = next(k for k in task if k not in ("name", "loop", "loop_control", "when"))
        if module in ("job_template", "workflow_job_template"):
            assert task[module]["ask_variables_on_launch"] == "{{ item.ask_variables_on_launch }}", module


def test_schedules_run_existing_templates(rendered):
    names = {jt["name"] for jt in rendered["controller_templates"]}
    schedules = {s["unified_job_template"]: s for s in rendered["controller_schedules"]}
    assert set(schedules) == {"GPUaaS node_pool_scaledown", "GPUaaS observability", "GPUaaS validate",
                              "GPUaaS automation_rbac"}
    assert set(schedules) <= names
    for s in schedules.values():
        assert re.match(r"^DTSTART:\d{8}T\d{6}Z RRULE:FREQ=(MINUTELY|HOURLY|DAILY|WEEKLY);INTERVAL=\d+$", s["rrule"]), s
    assert "FREQ=MINUTELY" in schedules["GPUaaS node_pool_scaledown"]["rrule"]
    assert schedules["GPUaaS node_pool_scaledown"]["enabled"] is True
    # the administrator credential is short-lived: its schedule is rendered disabled
    assert schedules["GPUaaS automation_rbac"]["enabled"] is False


def test_ray_idle_reclaim_is_rendered_only_for_an_inventory_with_an_opted_in_raycluster(tmp_path):
    """Issue 25: the reclaim job template (its own fenced account, the Prometheus credential: the module queries DCGM
    itself) and its every-minute schedule exist when a tenant opts a RayCluster in - and not otherwise, so an
    inventory without Ray needs no gpuaas-ray-reclaim credential."""
    ray_tenant = {"name": "ml", "namespaces": ["ml"],
                  "autoscaling": [{"name": "r", "target": {"kind": "RayCluster", "name": "r"}},
                                  {"name": "d", "target": {"kind": "Deployment", "name": "d"}}]}
    out = tmp_path / "aap.yml"
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp_path,
                        inventory=dict(INVENTORY, gpuaas_tenants=INVENTORY["gpuaas_tenants"] + [ray_tenant]),
                        extra=["-e", "gpuaas_aap_output_file=%s" % out, "-e", "gpuaas_aap_apply=never"])
    assert proc.returncode == 0, proc.stdout
    with_ray = yaml.safe_load(out.read_text())
    jt = _templates(with_ray)["ray_idle_reclaim"]
    assert jt["playbook"] == "playbooks/gpuaas_ray_idle_reclaim.yml"
    assert sorted(jt["credentials"]) == ["gpuaas-prometheus", "gpuaas-ray-reclaim"]
    assert jt["ask_variables_on_launch"] is False and not jt["survey_enabled"]
    [sched] = [s for s in with_ray["controller_schedules"] if s["unified_job_template"] == "GPUaaS ray_idle_reclaim"]
    assert sched["rrule"].endswith("RRULE:FREQ=MINUTELY;INTERVAL=1") and sched["enabled"] is True
    # without a RayCluster entry (a Deployment one only): neither, and no ray_reclaim credential is asked for
    out2 = tmp_path / "aap2.yml"
    no_ray = dict(ray_tenant, autoscaling=ray_tenant["autoscaling"][1:])
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp_path,
                        inventory=dict(INVENTORY, gpuaas_tenants=[no_ray]),
                        extra=["-e", "gpuaas_aap_output_file=%s" % out2, "-e", "gpuaas_aap_apply=never", "-e",
                               json.dumps({"gpuaas_aap_credentials": {k: "c-" + k for k in
                                           ("install", "tenants", "observability", "validate", "node_pools")}})])
    assert proc.returncode == 0, proc.stdout
    without = yaml.safe_load(out2.read_text())
    assert "ray_idle_reclaim" not in _templates(without)
    assert [s for s in without["controller_schedules"] if "ray_idle_reclaim" in s["unified_job_template"]] == []


def test_prerequisites_are_rendered_only_when_given(rendered, tmp_path):
    for key in ("controller_projects", "controller_inventories", "controller_inventory_sources",
                "controller_execution_environments"):
        assert rendered[key] == [], key
    out = tmp_path / "aap.yml"
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp_path, inventory=INVENTORY,
                        extra=["-e", "gpuaas_aap_output_file=%s" % out, "-e", "gpuaas_aap_apply=never",
                               "-e", "gpuaas_aap_project_scm_url=https://git.example.com/gpu-site.git",
                               "-e", "gpuaas_aap_execution_environment_image=registry.example.com/gpuaas-ee:1"])
    assert proc.returncode == 0, proc.stdout
    full = yaml.safe_load(out.read_text())
    jt = _templates(full)["onboard"]
    assert [p["name"] for p in full["controller_projects"]] == [jt["project"]]
    assert full["controller_projects"][0]["scm_url"] == "https://git.example.com/gpu-site.git"
    assert [i["name"] for i in full["controller_inventories"]] == [jt["inventory"]]
    src = full["controller_inventory_sources"][0]
    assert (src["inventory"], src["source"], src["source_project"], src["source_path"]) == \
        (jt["inventory"], "scm", jt["project"], "inventory")
    assert full["controller_execution_environments"] == [
        {"name": jt["execution_environment"], "organization": "Default", "image": "registry.example.com/gpuaas-ee:1",
         "pull": "missing"}]
    assert "controller_credentials" not in full  # tokens never pass through the role


def test_a_job_whose_account_has_no_credential_is_refused(tmp_path):
    out = tmp_path / "aap.yml"
    proc = run_playbook(ROOT / "playbooks" / "aap_config.yml", tmp_path, inventory=INVENTORY,
                        extra=["-e", "gpuaas_aap_output_file=%s" % out, "-e", "gpuaas_aap_apply=never",
                               "-e", json.dumps({"gpuaas_aap_credentials": {"tenants": "t", "install": "a"}})])
    assert proc.returncode == 2 and "must name the credential of every account" in proc.stdout, proc.stdout[-2000:]
    assert not out.exists()


# ---------------------------------------------------------------- credentials

def test_prometheus_credential_type_injects_what_the_code_reads(rendered):
    ctype = rendered["controller_credential_types"][0]
    source = (ROOT / "plugins" / "module_utils" / "prometheus_credential.py").read_text()
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
tenant_action: !unsafe 'create'
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
                "provided_arguments": {"gpuaas_tenants": ["{{ _new_tenant }}"]}}},
            {"name": "dump", "ansible.builtin.copy": {
                "dest": str(tmp_path / "tenant.json"), "content": "{{ _new_tenant | to_json }}", "mode": "0644"}},
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
    # an update of an inventory tenant needs no cluster read before the module (a new name asks the cluster first)
    ("onboard_tenant", "---\ntenant_action: !unsafe 'update'\ntenant_name: !unsafe 't007'\ntenant_flavor: !unsafe 'h100'\n"
                       "tenant_gpus: 2\ntenant_namespaces: !unsafe 'nlp'\n",
     # the namespace of the inventory's nlp: the module's claim check sees both tenants
     {"name": "t007", "namespaces": ["t007-a", "nlp"], "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "2"}}],
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


# ---------------------------------------------------------------- extra vars cannot set what the playbooks decide

GOOD_ANSWERS = "---\ntenant_name: !unsafe 'speech'\ntenant_flavor: !unsafe 'h100'\ntenant_gpus: 1\n"

# (playbook, extra var, value): a launcher (or a job template's extra_vars) trying to switch a safety off
EXTRA_VAR_ATTACKS = [
    ("onboard_tenant", "gpuaas_tenants_prune", True),
    ("onboard_tenant", "gpuaas_tenants_override",
     [{"name": "speech", "namespaces": ["kube-system"], "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}}]}]),
    ("onboard_tenant", "gpuaas_allow_insecure_tls", True),
    ("onboard_tenant", "gpuaas_tenants_limit", []),  # an empty limit reconciles every tenant
    ("onboard_tenant", "_dns_label", ".*"),  # the playbook's own check pattern
    ("onboard_tenant", "_subject", ".*"),
    ("onboard_tenant", "_new_tenant", {"name": "speech", "namespaces": ["kube-system"], "quotas": []}),
    # knowing a pin does not help: the value is compared with two different literals
    ("onboard_tenant", "gpuaas_tenants_prune", "gpuaas-pin-1"),
    ("onboard_tenant", "gpuaas_allow_insecure_tls", "gpuaas-pin-2"),
    ("offboard_tenant", "gpuaas_tenants_prune", True),
    ("offboard_tenant", "gpuaas_tenants_override", []),
    ("offboard_tenant", "gpuaas_allow_insecure_tls", True),
    ("offboard_tenant", "gpuaas_delete_namespaces", True),  # the survey's delete_namespaces decides
]


@pytest.mark.parametrize("playbook,var,value", EXTRA_VAR_ATTACKS,
                         ids=["%s-%s-%d" % (c[0][:3], c[1], i) for i, c in enumerate(EXTRA_VAR_ATTACKS)])
def test_extra_vars_cannot_set_what_the_playbook_decides(tmp_path, playbook, var, value):
    """The launcher's view: valid survey answers plus one extra var. The play stops at its first tasks, naming the
    variable, before anything talks to the cluster (K8S_AUTH_HOST points nowhere: a connection would fail otherwise)."""
    answers = GOOD_ANSWERS + "%s: %s\n" % (var, json.dumps(value))
    proc = run_playbook(ROOT / "playbooks" / ("%s.yml" % playbook), tmp_path, answers, inventory=INVENTORY,
                        env={"K8S_AUTH_HOST": "https://127.0.0.1:9", "K8S_AUTH_API_KEY": "x"})
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "%s was set from extra vars" % var in out, proc.stdout[-3000:]
    assert "TASK [Check the survey answers]" not in proc.stdout, proc.stdout[-3000:]
    assert "Reconcile" not in proc.stdout and "Look for the tenant" not in proc.stdout


def test_the_same_value_in_the_inventory_is_not_refused(tmp_path):
    """The check refuses extra vars, not the setting: gpuaas_allow_insecure_tls from the inventory (a lab without a
    CA) passes the pins, and the TLS check then honours it (the run goes on to the cluster lookup)."""
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path, GOOD_ANSWERS,
                        inventory=dict(INVENTORY, gpuaas_allow_insecure_tls=True, gpuaas_tenants_prune=True),
                        env={"K8S_AUTH_KUBECONFIG": str(tmp_path / "missing"), "K8S_AUTH_VERIFY_SSL": "false"})
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "set from extra vars" not in proc.stdout and "K8S_AUTH_VERIFY_SSL is false" not in proc.stdout
    assert "TASK [Look for the tenant on the cluster" in proc.stdout, proc.stdout[-3000:]


def _tasks(playbook: str) -> list[dict]:
    return yaml.safe_load((ROOT / "playbooks" / ("%s.yml" % playbook)).read_text())[0]["tasks"]


@pytest.mark.parametrize("playbook", ["onboard_tenant", "offboard_tenant"])
def test_the_pins_cover_every_variable_the_playbook_decides(playbook):
    """Both pin tasks come first, loop over the same names, pin each to a different literal, and cover the safety
    variables, every variable of the play, every fact or registered result and every variable handed to the role."""
    play = yaml.safe_load((ROOT / "playbooks" / ("%s.yml" % playbook)).read_text())[0]
    tasks = play["tasks"]
    first, second = tasks[0], tasks[1]
    assert "first pin" in first["name"] and "second pin" in second["name"]
    pins = []
    for task, literal in ((first, "gpuaas-pin-1"), (second, "gpuaas-pin-2")):
        assert task["ansible.builtin.assert"]["that"] == "lookup('ansible.builtin.vars', _gpuaas_pinned) == '%s'" % literal
        assert task["loop_control"] == {"loop_var": "_gpuaas_pinned"}
        assert set(task["vars"].values()) == {literal}
        assert sorted(task["vars"]) == sorted(task["loop"])
        pins.append(set(task["loop"]))
    assert pins[0] == pins[1]
    decided = set((play.get("vars") or {})) - {"ansible_python_interpreter"}
    for task in tasks[2:]:
        decided |= set(task.get("ansible.builtin.set_fact") or {})
        if "register" in task:
            decided.add(task["register"])
        if "ansible.builtin.include_role" in task:
            decided |= set(task.get("vars") or {})
    decided -= {"gpuaas_prometheus"}  # inventory data (the lab runner passes it as an extra var); folded, not decided
    assert decided <= pins[0], decided - pins[0]
    assert {"gpuaas_tenants_prune", "gpuaas_tenants_override", "gpuaas_allow_insecure_tls", "gpuaas_tenants_limit"} <= pins[0]


def test_onboarding_an_inventory_tenant_without_update_is_refused_before_the_cluster(tmp_path):
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path,
                        "---\ntenant_name: !unsafe 'nlp'\ntenant_flavor: !unsafe 'h100'\ntenant_gpus: 1\n",
                        inventory=INVENTORY, env={"K8S_AUTH_HOST": "https://127.0.0.1:9", "K8S_AUTH_API_KEY": "x"})
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 2 and 'tenant "nlp" already exists (in the inventory)' in out, proc.stdout[-3000:]
    assert 'answer "update"' in out and "Nothing was changed" in out
    assert "Reconcile" not in proc.stdout


def test_an_unknown_action_is_refused(tmp_path):
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path, GOOD_ANSWERS + "tenant_action: !unsafe 'replace'\n",
                        inventory=INVENTORY, env={"K8S_AUTH_HOST": "https://127.0.0.1:9"})
    assert proc.returncode == 2 and "must be create or update" in " ".join(proc.stdout.split()), proc.stdout[-3000:]


MERGE_INVENTORY = dict(INVENTORY, gpuaas_flavors=[{"name": "h100"}, {"name": "cpu"}], gpuaas_tenants=[
    {"name": "nlp", "namespaces": ["nlp-train", "nlp-serve"], "cohort": "research",
     "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 8, "cpu": 96}, "borrowing_limit": {"nvidia.com/gpu": 4}},
                {"flavor": "cpu", "resources": {"cpu": 32}}],
     "access": {"admins": ["nlp-leads"], "users": ["nlp-team"]},
     "queues": [{"name": "interactive", "namespaces": ["nlp-train"]}],
     "autoscaling": [{"name": "vllm", "namespace": "nlp-serve", "target": {"kind": "Deployment", "name": "vllm"},
                      "max_replicas": 2}]},
    {"name": "vision", "namespaces": ["vision"], "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}}]}])


def test_update_merges_into_the_inventory_tenant(tmp_path):
    """update of an inventory tenant: the answered flavor's quota changes key by key, a namespace and a group are
    added; the other quota, the queues and the autoscaling reach the module unchanged; other tenants as they are."""
    (tmp_path / "callbacks").mkdir()
    (tmp_path / "callbacks" / "capture_args.py").write_text(CAPTURE_CALLBACK)
    capture = tmp_path / "capture.jsonl"
    answers = ("---\ntenant_action: !unsafe 'update'\ntenant_name: !unsafe 'nlp'\ntenant_flavor: !unsafe 'h100'\n"
               "tenant_gpus: 10\ntenant_namespaces: !unsafe 'nlp-eval'\ntenant_users_group: !unsafe 'nlp-interns'\n")
    proc = run_playbook(ROOT / "playbooks" / "onboard_tenant.yml", tmp_path, answers, inventory=MERGE_INVENTORY,
                        env={"ANSIBLE_CALLBACK_PLUGINS": str(tmp_path / "callbacks"), "ANSIBLE_CALLBACKS_ENABLED": "capture_args",
                             "CAPTURE_FILE": str(capture), "K8S_AUTH_KUBECONFIG": str(tmp_path / "missing-kubeconfig")})
    assert proc.returncode == 2, proc.stdout[-3000:]
    failed = [e for e in (json.loads(line) for line in capture.read_text().splitlines()) if "failed" in e]
    assert len(failed) == 1 and "Reconcile the GPU tenancy" in failed[0]["failed"], failed
    args = failed[0]["args"]
    assert args["limit_tenants"] == ["nlp"] and args["prune"] in (False, "False")
    assert args["tenants"][0] == MERGE_INVENTORY["gpuaas_tenants"][1]
    nlp = args["tenants"][1]
    base = MERGE_INVENTORY["gpuaas_tenants"][0]
    assert nlp["namespaces"] == ["nlp-train", "nlp-serve", "nlp-eval"]
    assert nlp["quotas"] == [{"flavor": "h100", "resources": {"nvidia.com/gpu": "10", "cpu": 96},
                              "borrowing_limit": {"nvidia.com/gpu": 4}}, base["quotas"][1]]
    assert nlp["access"] == {"admins": ["nlp-leads"], "users": ["nlp-team", "nlp-interns"]}
    assert nlp["autoscaling"] == base["autoscaling"] and nlp["queues"] == base["queues"]
    assert nlp["cohort"] == "research" and nlp["state"] == "present"


def test_update_adds_a_quota_of_a_new_flavor(tmp_path):
    plays = yaml.safe_load((ROOT / "playbooks" / "onboard_tenant.yml").read_text())
    play_vars = dict(plays[0]["vars"], _gpuaas_existing_tenant=MERGE_INVENTORY["gpuaas_tenants"][1])
    playbook = tmp_path / "merge.yml"
    playbook.write_text(yaml.safe_dump([{"name": "merge", "hosts": "localhost", "gather_facts": False, "vars": play_vars,
                                         "tasks": [{"name": "dump", "ansible.builtin.copy": {
                                             "dest": str(tmp_path / "t.json"), "content": "{{ _merged_tenant | to_json }}",
                                             "mode": "0644"}}]}]))
    proc = run_playbook(playbook, tmp_path, "---\ntenant_name: vision\ntenant_flavor: cpu\ntenant_gpus: 0\ntenant_cpu: '4'\n",
                        inventory=MERGE_INVENTORY)
    assert proc.returncode == 0, proc.stdout[-3000:]
    merged = json.loads((tmp_path / "t.json").read_text())
    assert merged["quotas"] == [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}},
                                {"flavor": "cpu", "resources": {"nvidia.com/gpu": "0", "cpu": "4"}}]
    assert merged["namespaces"] == ["vision"] and merged["access"] == {}
