# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jobs run the way AWX / Automation Platform runs them, against the lab.

An AWX-shaped private data dir: the project holds wrapper playbooks that import the collection's playbooks, the
inventory lists `localhost` without an interpreter (as AWX inventories do), survey answers are env/extravars with
every string `!unsafe`, and the cluster credential is env vars from a ServiceAccount token + CA file in the
worker's env/ (K8S_AUTH_HOST, K8S_AUTH_API_KEY, K8S_AUTH_VERIFY_SSL, K8S_AUTH_SSL_CA_CERT; no kubeconfig anywhere),
the Prometheus credential GPUAAS_PROMETHEUS_URL and gpuaas_prometheus_validate_certs. It goes through
`ansible-runner transmit | ansible-runner worker | ansible-runner process`, AWX's receptor path.
The token only holds tests/integration/files/awx/rbac.yml and rbac-lock.yml, the minimum RBAC docs/awx.md documents.
make test-matrix runs this file with every ansible-core of the matrix.
"Nothing written" is read from the API server's audit log as the job's own ServiceAccount (`sa_writes`): the
conftest's audit_writes leaves out every system: user, so it cannot see this job's writes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import contextlib

import pytest
import yaml
from conftest import audit_events_after, completed_write

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NAMESPACE = "gpuaas-awx-runner"
SA = "awx-job"
TENANT = "awx-speech"
EXISTING = "awx-existing"  # onboarded from the survey, then onboarded again (create refused, update merged)
SCALER = "awx-scaler"  # an inventory tenant with autoscaling, updated from the survey
SA_USER = "system:serviceaccount:%s:%s" % (NAMESPACE, SA)
WRAPPERS = ("onboard_tenant", "offboard_tenant", "validate")


def _collections_path() -> str:
    if os.environ.get("GPUAAS_COLLECTIONS_PATH"):
        return os.environ["GPUAAS_COLLECTIONS_PATH"]
    root = REPO.parents[2] if REPO.parts[-3] == "ansible_collections" else REPO / ".build"
    venv = Path("/work/main/.venv") if not (REPO / ".venv").exists() else REPO / ".venv"
    return ":".join([str(root)] + [str(p) for p in (venv / "lib").glob("python3*/site-packages")])


@pytest.fixture(scope="module")
def token(lab, kube) -> Any:
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=lab.kubeconfig, context=lab.admin_context)
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    role = yaml.safe_load((REPO / "tests/integration/files/awx/rbac.yml").read_text())
    lock_role = yaml.safe_load((REPO / "tests/integration/files/awx/rbac-lock.yml").read_text())
    _cleanup(core, rbac, kube)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": SA}})
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding({
        "metadata": {"name": "gpuaas-awx-tenants"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]})
    rbac.create_namespaced_role("kube-system", lock_role)
    rbac.create_namespaced_role_binding("kube-system", {
        "metadata": {"name": "gpuaas-awx-tenants-lock"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": lock_role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]})
    req = core.create_namespaced_service_account_token(SA, NAMESPACE, {"spec": {"expirationSeconds": 3600}})
    yield req.status.token
    _cleanup(core, rbac, kube)


def _cleanup(core, rbac, kube) -> None:
    from kubernetes.client.rest import ApiException

    for call, args in ((rbac.delete_cluster_role_binding, ("gpuaas-awx-tenants",)),
                       (rbac.delete_cluster_role, ("gpuaas-awx-tenants",)),
                       (rbac.delete_namespaced_role_binding, ("gpuaas-awx-tenants-lock", "kube-system")),
                       (rbac.delete_namespaced_role, ("gpuaas-awx-tenants-lock", "kube-system")),
                       (core.delete_namespace, (NAMESPACE,))):
        try:
            call(*args)
        except ApiException as exc:
            if exc.status != 404:
                raise
    cq = kube.resources.get(api_version="kueue.x-k8s.io/v1beta2" if _kueue_v1beta2(kube) else "kueue.x-k8s.io/v1beta1",
                            kind="ClusterQueue")
    for name in (TENANT, EXISTING, SCALER):
        try:
            cq.delete(name=name)
        except Exception:  # noqa: BLE001 - absent is fine
            pass
    for ns in ("%s-dev" % TENANT, "%s-prod" % TENANT, EXISTING, SCALER):
        try:
            core.delete_namespace(ns)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _kueue_v1beta2(kube) -> bool:
    try:
        kube.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
        return True
    except Exception:  # noqa: BLE001
        return False


class Job:
    def __init__(self, pdd: Path, ident: str, proc: subprocess.CompletedProcess):
        self.dir = pdd / "artifacts" / ident
        self.proc = proc
        self.status = (self.dir / "status").read_text().strip() if (self.dir / "status").exists() else "missing"
        self.rc = int((self.dir / "rc").read_text()) if (self.dir / "rc").exists() else None
        self.stdout = (self.dir / "stdout").read_text() if (self.dir / "stdout").exists() else ""
        files = sorted((self.dir / "job_events").glob("*.json"), key=lambda p: int(p.name.split("-")[0]))
        self.events = [json.loads(p.read_text()) for p in files]

    def results(self, event: str, task_substring: str) -> list[dict]:
        return [e["event_data"].get("res", {}) for e in self.events
                if e.get("event") == event and task_substring in e.get("event_data", {}).get("task", "")]

    def explain(self) -> str:
        return "status=%s rc=%s\n%s\n--- runner stderr ---\n%s" % (self.status, self.rc, self.stdout[-5000:],
                                                                   self.proc.stderr[-2000:])


@pytest.fixture
def awx_job(lab, token, tmp_path):
    """awx_job(playbook, extravars_yaml, envvars=None) -> Job, run through transmit | worker | process."""
    base = yaml.safe_load((REPO / "playbooks/inventory/lab/group_vars/all/tenants.yml").read_text())
    group_vars = {k: v for k, v in base.items() if k != "gpuaas_prometheus"}  # Prometheus comes from the credential
    # KEDA ScaledObjects need gpuaas_prometheus.url in the inventory (KEDA's pods read it, the credential's env var
    # only reaches the controller): the inventory tenant here does not autoscale, so Prometheus comes from the credential
    group_vars["gpuaas_tenants"] = [{k: v for k, v in t.items() if k != "autoscaling"}
                                    for t in base["gpuaas_tenants"] if t["name"] == "nlp"]
    group_vars.update({"gpuaas_validate_health_checks": ["gpu_nodes"], "gpuaas_validate_window": "2m",
                       "gpuaas_validate_step": "10s", "gpuaas_validate_on_failure": "fail",
                       "gpuaas_validate_report_path": str(tmp_path / "report")})

    def _run(playbook: str, extravars: str, envvars: dict | None = None, timeout: int = 300,
             inventory_vars: dict | None = None) -> Job:
        pdd = tmp_path / ("pdd-" + uuid.uuid4().hex[:6])
        worker_dir = tmp_path / ("worker-" + uuid.uuid4().hex[:6])
        (pdd / "project").mkdir(parents=True)
        for name in WRAPPERS:
            (pdd / "project" / ("gpuaas_%s.yml" % name)).write_text(
                "---\n- name: gpuaas.platform %s\n  ansible.builtin.import_playbook: gpuaas.platform.%s\n" % (name, name))
        (pdd / "inventory" / "group_vars").mkdir(parents=True)
        (pdd / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
        (pdd / "inventory" / "group_vars" / "all.yml").write_text(yaml.safe_dump(dict(group_vars, **(inventory_vars or {}))))
        (pdd / "env").mkdir()
        (pdd / "env" / "extravars").write_text(extravars)
        # AWX writes the credential's CA into the job's env/ and points K8S_AUTH_SSL_CA_CERT at it (inside the
        # worker's private data dir, not the controller's)
        shutil.copy(lab.ca, pdd / "env" / "tmp_k8s_ca")
        env = {"K8S_AUTH_HOST": lab.apiserver, "K8S_AUTH_API_KEY": token, "K8S_AUTH_VERIFY_SSL": "True",
               "K8S_AUTH_SSL_CA_CERT": str(worker_dir / "env" / "tmp_k8s_ca"),
               "GPUAAS_PROMETHEUS_URL": lab.prometheus_url, "ANSIBLE_COLLECTIONS_PATH": _collections_path(),
               "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LOCALHOST_WARNING": "false"}
        env.update(envvars or {})
        (pdd / "env" / "envvars").write_text(yaml.safe_dump(env))
        (pdd / "env" / "settings").write_text(yaml.safe_dump({"job_timeout": timeout}))
        ident = "job-" + uuid.uuid4().hex[:6]
        # the worker process: no kubeconfig, no K8S_AUTH_* / ANSIBLE_* / GPUAAS_* of the test's own environment
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("K8S_AUTH_", "ANSIBLE_", "GPUAAS_", "KUBECONFIG", "LAB_"))}
        clean["PATH"] = "%s:/usr/local/bin:/usr/bin:/bin" % BIN
        runner = str(BIN / "ansible-runner")
        pipeline = ("%s transmit %s -p gpuaas_%s.yml --ident %s | %s worker --private-data-dir %s | %s process %s --ident %s"
                    % (runner, pdd, playbook, ident, runner, worker_dir, runner, pdd, ident))
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], capture_output=True, text=True, env=clean,
                              timeout=timeout + 60, check=False)
        return Job(pdd, ident, proc)

    return _run


class SaWrites:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def describe(self) -> str:
        return "\n".join("%s %s -> %s" % (e["verb"], e["requestURI"], e.get("responseStatus", {}).get("code"))
                         for e in self.events)


@pytest.fixture
def sa_writes(lab):
    """sa_writes() -> context manager: the write requests the job's ServiceAccount sent to the API server (audit log)."""
    @contextlib.contextmanager
    def _window():
        offset = os.path.getsize(lab.audit_log)
        window = SaWrites()
        yield window
        window.events.extend(ev for ev in audit_events_after(lab.audit_log, offset)
                             if completed_write(ev) and ev.get("user", {}).get("username") == SA_USER)
    return _window


def _unsafe_yaml(answers: dict) -> str:
    """env/extravars as AWX writes them: every string tagged !unsafe."""
    lines = ["---"]
    for k, v in answers.items():
        lines.append("%s: %s" % (k, v if isinstance(v, (int, float)) and not isinstance(v, bool) else "!unsafe " + json.dumps(v)))
    return "\n".join(lines) + "\n"


GOOD = {"tenant_name": TENANT, "tenant_namespaces": "%s-dev, %s-prod" % (TENANT, TENANT), "tenant_flavor": "h100",
        "tenant_gpus": 2, "tenant_cpu": "8", "tenant_memory": "32Gi", "tenant_cohort": "research",
        "tenant_borrowing_limit_gpus": 1, "tenant_admins_group": "speech-leads", "tenant_users_group": "speech-team",
        "gpuaas_prometheus_validate_certs": "True"}


def test_onboard_validate_offboard_as_awx_runs_them(lab, kube, awx_job, sa_writes):
    with sa_writes() as writes:
        job = awx_job("onboard_tenant", _unsafe_yaml(GOOD))
    assert job.status == "successful" and job.rc == 0, job.explain()
    # the audit reader of the refusal tests sees this job's writes (it is not blind to the ServiceAccount)
    assert [e for e in writes.events if "/clusterqueues" in e["requestURI"]], writes.describe()
    res = job.results("runner_on_ok", "Reconcile the GPU tenancy")
    assert len(res) == 1, job.explain()
    created = {(o.get("kind"), o.get("name")) for o in res[0]["created"]}
    assert ("ClusterQueue", TENANT) in created and ("Namespace", "%s-prod" % TENANT) in created, res[0]["created"]
    assert res[0]["tenants"] == {TENANT: ["%s-dev" % TENANT, "%s-prod" % TENANT]}
    # the inventory snippet travels as the job's artifact (set_stats), for the workflow and for Git
    stats = [e for e in job.events if e["event"] == "playbook_on_stats"][0]["event_data"]
    assert stats["artifact_data"]["gpuaas_onboarded_tenant"]["name"] == TENANT

    api = "kueue.x-k8s.io/v1beta2" if _kueue_v1beta2(kube) else "kueue.x-k8s.io/v1beta1"
    cq = kube.resources.get(api_version=api, kind="ClusterQueue").get(name=TENANT).to_dict()
    assert cq["spec"]["cohort" if api.endswith("v1beta1") else "cohortName"] == "research"
    gpu = [r for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "h100"
           for r in f["resources"] if r["name"] == "nvidia.com/gpu"][0]
    assert str(gpu["nominalQuota"]) == "2" and str(gpu["borrowingLimit"]) == "1"
    for ns in ("%s-dev" % TENANT, "%s-prod" % TENANT):
        assert kube.resources.get(api_version="v1", kind="Namespace").get(name=ns).metadata.labels["gpuaas.io/tenant"] == TENANT
        bindings = kube.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding").get(namespace=ns).to_dict()
        subjects = {(s["kind"], s["name"]) for b in bindings["items"] for s in (b.get("subjects") or [])}
        assert ("Group", "speech-team") in subjects and ("Group", "speech-leads") in subjects, subjects

    # the inventory's tenant was only read, never written
    assert not [o for o in res[0]["created"] + res[0]["updated"] if o.get("name", "").startswith("nlp")]

    job = awx_job("validate", "--- {}\n")
    assert job.status == "successful" and job.rc == 0, job.explain()

    job = awx_job("offboard_tenant", _unsafe_yaml({"tenant_name": TENANT, "delete_namespaces": "true", "drain_timeout": 60}))
    assert job.status == "successful" and job.rc == 0, job.explain()
    res = job.results("runner_on_ok", "Reconcile the GPU tenancy")
    assert res[0]["offboarded"] == [TENANT], res[0]
    from kubernetes.dynamic.exceptions import NotFoundError

    with pytest.raises(NotFoundError):
        kube.resources.get(api_version=api, kind="ClusterQueue").get(name=TENANT)
    for ns in ("%s-dev" % TENANT, "%s-prod" % TENANT):
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                phase = kube.resources.get(api_version="v1", kind="Namespace").get(name=ns).status.phase
            except NotFoundError:
                break
            if phase == "Terminating":
                break
            time.sleep(1)
        else:
            pytest.fail("namespace %s still active after offboarding" % ns)


BAD = [
    ({"tenant_gpus": "lots"}, "must be whole numbers of GPUs"),
    ({"tenant_admins_group": "{{ lookup('ansible.builtin.pipe', 'touch /tmp/gpuaas-awx-pwned') }}"}, "is not a valid group name"),
    ({"tenant_users_group": "system:authenticated"}, "system: groups are refused"),
    ({"tenant_flavor": "b200"}, "must be one of the inventory's flavors"),
]


@pytest.mark.parametrize("override,message", BAD, ids=["gpus", "template", "system-group", "flavor"])
def test_bad_answers_fail_with_the_playbooks_message(kube, awx_job, audit_writes, sa_writes, override, message):
    answers = dict(GOOD, **override)
    marker = Path("/tmp/gpuaas-awx-pwned")
    marker.unlink(missing_ok=True)
    with audit_writes() as writes, sa_writes() as sa:
        job = awx_job("onboard_tenant", _unsafe_yaml(answers))
    assert job.status == "failed" and job.rc == 2, job.explain()
    assert sa.events == [], sa.describe()
    # one failed task; a looped check (group names) reports its message in the runner_item_on_failed event
    assert len([e for e in job.events if e["event"] == "runner_on_failed"]) == 1, job.explain()
    failed = [" ".join(str(e["event_data"]["res"].get("msg", "")) for e in job.events
                       if e["event"] in ("runner_on_failed", "runner_item_on_failed"))]
    assert message in failed[0], failed
    for value in override.values():
        assert json.dumps(value)[1:-1] in failed[0] or value in failed[0], "the answer is shown as given: %s" % failed[0]
    assert not marker.exists(), "an answer was templated"
    assert writes.events == [], writes.describe()


# ---------------------------------------------------------------- issue 24: what a launcher must not be able to do

SAFETY_ATTACKS = [
    ("gpuaas_tenants_prune", True),
    # the survey's tenant with another tenant's namespace, past the claim check: the module would get this list
    ("gpuaas_tenants_override", [{"name": TENANT, "namespaces": ["nlp-train"],
                                  "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1}}]}]),
    ("gpuaas_allow_insecure_tls", True),
]


@pytest.mark.parametrize("playbook", ["onboard_tenant", "offboard_tenant"])
@pytest.mark.parametrize("var,value", SAFETY_ATTACKS, ids=[a[0] for a in SAFETY_ATTACKS])
def test_extra_vars_setting_a_safety_variable_are_refused(kube, awx_job, sa_writes, playbook, var, value):
    """A launch whose extra vars (env/extravars, as AWX writes them) set prune, override or insecure TLS beside valid
    answers: the playbook refuses it, names the variable, and the job writes nothing. For TLS the credential also
    turns verification off, so the refusal is what stands between the job and an unverified API server."""
    answers = GOOD if playbook == "onboard_tenant" else {"tenant_name": TENANT, "delete_namespaces": "false"}
    extravars = _unsafe_yaml(answers) + "%s: %s\n" % (var, json.dumps(value))
    env = {"K8S_AUTH_VERIFY_SSL": "False", "K8S_AUTH_SSL_CA_CERT": ""} if var == "gpuaas_allow_insecure_tls" else None
    with sa_writes() as writes:
        job = awx_job(playbook, extravars, env)
    assert job.status == "failed" and job.rc == 2, job.explain()
    failed = [e["event_data"]["res"].get("msg", "") for e in job.events if e["event"] == "runner_item_on_failed"]
    assert any("%s was set from extra vars" % var in m for m in failed), job.explain()
    assert not job.results("runner_on_ok", "Reconcile the GPU tenancy"), job.explain()
    assert writes.events == [], writes.describe()


def _priority_classes(kube) -> None:
    """The inventory's WorkloadPriorityClasses, as a full reconcile leaves them (created as the lab admin)."""
    from kubernetes.dynamic.exceptions import ConflictError

    api = "kueue.x-k8s.io/v1beta2" if _kueue_v1beta2(kube) else "kueue.x-k8s.io/v1beta1"
    wpc = kube.resources.get(api_version=api, kind="WorkloadPriorityClass")
    base = yaml.safe_load((REPO / "playbooks/inventory/lab/group_vars/all/tenants.yml").read_text())
    for prio in base["gpuaas_priorities"]:
        try:
            wpc.create(body={"apiVersion": api, "kind": "WorkloadPriorityClass",
                             "metadata": {"name": prio["name"], "labels": {"app.kubernetes.io/managed-by": "gpuaas.platform"}},
                             "value": prio["value"]})
        except ConflictError:
            pass


def _cluster_queue(kube, name: str) -> dict:
    api = "kueue.x-k8s.io/v1beta2" if _kueue_v1beta2(kube) else "kueue.x-k8s.io/v1beta1"
    return kube.resources.get(api_version=api, kind="ClusterQueue").get(name=name).to_dict()


def _quotas(cq: dict) -> dict:
    return {(f["name"], r["name"]): str(r["nominalQuota"]) for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
            for r in f["resources"]}


def test_onboarding_an_existing_tenant_needs_update_and_then_merges(kube, awx_job, sa_writes):
    """A tenant onboarded from the survey (on the cluster only): onboarding the name again is refused with nothing
    written; with "update" the answers are merged into what the cluster holds (its h100 quota survives a cpu
    update); "update" of an unknown name is refused too; it is offboarded from the survey."""
    first = {"tenant_name": EXISTING, "tenant_flavor": "h100", "tenant_gpus": 2, "tenant_cpu": "8",
             "tenant_memory": "32Gi", "tenant_users_group": "existing-team"}
    job = awx_job("onboard_tenant", _unsafe_yaml(first))
    assert job.status == "successful", job.explain()
    before = _cluster_queue(kube, EXISTING)

    again = dict(first, tenant_gpus=1, tenant_flavor="cpu")
    with sa_writes() as writes:
        job = awx_job("onboard_tenant", _unsafe_yaml(again))
    assert job.status == "failed", job.explain()
    assert 'tenant "%s" already exists (on the cluster' % EXISTING in " ".join(job.stdout.split()), job.explain()
    assert writes.events == [], writes.describe()
    assert _cluster_queue(kube, EXISTING)["spec"] == before["spec"]

    with sa_writes() as writes:
        job = awx_job("onboard_tenant", _unsafe_yaml({"tenant_action": "update", "tenant_name": EXISTING + "-typo",
                                                      "tenant_flavor": "h100", "tenant_gpus": 1}))
    assert job.status == "failed" and "does not exist" in " ".join(job.stdout.split()), job.explain()
    assert writes.events == [], writes.describe()

    # the update reads the tenant back with kueue_import, which checks the namespaces' allowed priorities against the
    # cluster's WorkloadPriorityClasses: a full reconcile (the reconcile template) makes them; a limited run does not
    _priority_classes(kube)
    update = {"tenant_action": "update", "tenant_name": EXISTING, "tenant_flavor": "cpu", "tenant_gpus": 0,
              "tenant_cpu": "4", "tenant_memory": "16Gi", "tenant_admins_group": "existing-leads"}
    job = awx_job("onboard_tenant", _unsafe_yaml(update))
    assert job.status == "successful", job.explain()
    quotas = _quotas(_cluster_queue(kube, EXISTING))
    assert quotas[("h100", "nvidia.com/gpu")] == "2" and quotas[("h100", "cpu")] == "8", quotas
    assert quotas[("cpu", "cpu")] == "4" and quotas[("cpu", "memory")] == "16Gi", quotas
    bindings = kube.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding").get(namespace=EXISTING).to_dict()
    subjects = {s["name"] for b in bindings["items"] for s in (b.get("subjects") or [])}
    assert {"existing-team", "existing-leads"} <= subjects, subjects

    job = awx_job("offboard_tenant", _unsafe_yaml({"tenant_name": EXISTING, "delete_namespaces": "true", "drain_timeout": 30}))
    assert job.status == "successful", job.explain()
    assert job.results("runner_on_ok", "Reconcile the GPU tenancy")[0]["offboarded"] == [EXISTING]


def test_update_of_an_inventory_tenant_keeps_its_scaled_objects_and_other_quotas(lab, kube, awx_job):
    """An inventory tenant with two quotas and autoscaling, updated from the survey twice: each run changes only the
    answered flavor's quota; the other quota and the ScaledObject stay (never deleted)."""
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    try:
        scaled = kube.resources.get(api_version="keda.sh/v1alpha1", kind="ScaledObject")
    except ResourceNotFoundError:
        pytest.skip("KEDA CRDs are not in this lab (LAB_COMPONENTS)")
    tenant = {"name": SCALER, "namespaces": [SCALER],
              "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": 1, "cpu": 4, "memory": "8Gi"}},
                         {"flavor": "cpu", "resources": {"nvidia.com/gpu": 0, "cpu": 2, "memory": "4Gi"}}],
              "autoscaling": [{"name": "server", "namespace": SCALER, "target": {"kind": "Deployment", "name": "server"},
                               "max_replicas": 2, "idle_scale_to_zero": {"after_minutes": 15}}]}
    base = yaml.safe_load((REPO / "playbooks/inventory/lab/group_vars/all/tenants.yml").read_text())
    inv = {"gpuaas_tenants": [{k: v for k, v in t.items() if k != "autoscaling"} for t in base["gpuaas_tenants"]
                              if t["name"] == "nlp"] + [tenant],
           "gpuaas_prometheus": {"url": lab.prometheus_url}}
    # a tenant the inventory lists exists: "create" is refused before anything is written
    job = awx_job("onboard_tenant", _unsafe_yaml({"tenant_name": SCALER, "tenant_flavor": "h100", "tenant_gpus": 1}),
                  inventory_vars=inv)
    assert job.status == "failed" and "already exists (in the inventory)" in " ".join(job.stdout.split()), job.explain()

    job = awx_job("onboard_tenant", _unsafe_yaml({"tenant_action": "update", "tenant_name": SCALER, "tenant_flavor": "h100",
                                                  "tenant_gpus": 2}), inventory_vars=inv)
    assert job.status == "successful", job.explain()
    objects = scaled.get(namespace=SCALER).to_dict()["items"]
    assert len(objects) == 1 and "server" in objects[0]["metadata"]["name"], objects
    uid = objects[0]["metadata"]["uid"]
    quotas = _quotas(_cluster_queue(kube, SCALER))
    assert quotas[("h100", "nvidia.com/gpu")] == "2" and quotas[("h100", "cpu")] == "4" and quotas[("cpu", "cpu")] == "2", quotas

    job = awx_job("onboard_tenant", _unsafe_yaml({"tenant_action": "update", "tenant_name": SCALER, "tenant_flavor": "cpu",
                                                  "tenant_gpus": 0, "tenant_cpu": "3"}), inventory_vars=inv)
    assert job.status == "successful", job.explain()
    res = job.results("runner_on_ok", "Reconcile the GPU tenancy")[0]
    assert not [o for o in res["deleted"] if o.get("kind") == "ScaledObject"], res["deleted"]
    # the same object, never deleted and recreated
    assert [o["metadata"]["uid"] for o in scaled.get(namespace=SCALER).to_dict()["items"]] == [uid]
    quotas = _quotas(_cluster_queue(kube, SCALER))
    assert quotas[("cpu", "cpu")] == "3" and quotas[("h100", "nvidia.com/gpu")] == "1", quotas  # the inventory's h100

    job = awx_job("offboard_tenant", _unsafe_yaml({"tenant_name": SCALER, "delete_namespaces": "true", "drain_timeout": 30}),
                  inventory_vars=inv)
    assert job.status == "successful", job.explain()


def test_tls_verification_silently_off_is_refused(awx_job):
    """AWX's bearer-token credential with 'Verify SSL' on but no CA injects K8S_AUTH_VERIFY_SSL=False."""
    job = awx_job("onboard_tenant", _unsafe_yaml(GOOD), {"K8S_AUTH_VERIFY_SSL": "False", "K8S_AUTH_SSL_CA_CERT": ""})
    assert job.status == "failed", job.explain()
    assert "K8S_AUTH_VERIFY_SSL is false" in job.stdout, job.explain()


def test_missing_python_dependency_names_the_package(awx_job, tmp_path):
    """An interpreter without the collection's requirements: the module's message names the library."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    job = awx_job("onboard_tenant", _unsafe_yaml(dict(GOOD, gpuaas_python_interpreter=str(bare / "bin" / "python"))))
    assert job.status == "failed", job.explain()
    failed = [e["event_data"]["res"].get("msg", "") for e in job.events if e["event"] == "runner_on_failed"]
    assert failed and "'kubernetes' Python library is required" in failed[0], job.explain()
