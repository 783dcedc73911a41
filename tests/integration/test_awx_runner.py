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

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NAMESPACE = "gpuaas-awx-runner"
SA = "awx-job"
TENANT = "awx-speech"
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
    try:
        cq.delete(name=TENANT)
    except Exception:  # noqa: BLE001 - absent is fine
        pass
    for ns in ("%s-dev" % TENANT, "%s-prod" % TENANT):
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

    def _run(playbook: str, extravars: str, envvars: dict | None = None, timeout: int = 300) -> Job:
        pdd = tmp_path / ("pdd-" + uuid.uuid4().hex[:6])
        worker_dir = tmp_path / ("worker-" + uuid.uuid4().hex[:6])
        (pdd / "project").mkdir(parents=True)
        for name in WRAPPERS:
            (pdd / "project" / ("gpuaas_%s.yml" % name)).write_text(
                "---\n- name: gpuaas.platform %s\n  ansible.builtin.import_playbook: gpuaas.platform.%s\n" % (name, name))
        (pdd / "inventory" / "group_vars").mkdir(parents=True)
        (pdd / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
        (pdd / "inventory" / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
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


def test_onboard_validate_offboard_as_awx_runs_them(lab, kube, awx_job):
    job = awx_job("onboard_tenant", _unsafe_yaml(GOOD))
    assert job.status == "successful" and job.rc == 0, job.explain()
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
def test_bad_answers_fail_with_the_playbooks_message(kube, awx_job, audit_writes, override, message):
    answers = dict(GOOD, **override)
    marker = Path("/tmp/gpuaas-awx-pwned")
    marker.unlink(missing_ok=True)
    with audit_writes() as writes:
        job = awx_job("onboard_tenant", _unsafe_yaml(answers))
    assert job.status == "failed" and job.rc == 2, job.explain()
    # one failed task; a looped check (group names) reports its message in the runner_item_on_failed event
    assert len([e for e in job.events if e["event"] == "runner_on_failed"]) == 1, job.explain()
    failed = [" ".join(str(e["event_data"]["res"].get("msg", "")) for e in job.events
                       if e["event"] in ("runner_on_failed", "runner_item_on_failed"))]
    assert message in failed[0], failed
    for value in override.values():
        assert json.dumps(value)[1:-1] in failed[0] or value in failed[0], "the answer is shown as given: %s" % failed[0]
    assert not marker.exists(), "an answer was templated"
    assert writes.events == [], writes.describe()


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
