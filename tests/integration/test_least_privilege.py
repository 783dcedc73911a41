# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Least privilege, proven on the lab (issue 17): the day-2 playbooks run as ServiceAccounts bound only to the
ClusterRoles of roles/automation_rbac, connected the one documented way (K8S_AUTH_HOST, K8S_AUTH_API_KEY,
K8S_AUTH_SSL_CA_CERT - a token and a CA file, no kubeconfig at all), and are refused where they should be.

Only this module's own objects are written (names start with ``lp-`` / ``gpuaas-lp``); the tenants playbook
runs limited to the test's own tenant (gpuaas_tenants_limit), so the lab's example tenants are never touched
even on a lab another suite uses. The unlimited reconcile runs in safe mode (no prune): the example tenants and
shared objects it does not list are reported as drift and left alone; the shared objects it writes (admission
policy, queue-reader role) are those every inventory writes with the default settings.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
SA_NAMESPACE = "gpuaas-lp"
TENANTS_SA = "gpuaas-lp-tenants"
VALIDATE_SA = "gpuaas-lp-validate"
SCALEDOWN_SA = "gpuaas-lp-scaledown"
# node_pool_scaledown's own objects: a Cluster API MachineDeployment (the Kubernetes lab's pool kind) with two
# Machines and their nodes, a second MachineDeployment that is no pool's, and a node that belongs to no pool
POOL_NS = "gpuaas-lp-machines"
POOL_TARGET, OTHER_TARGET = "lp-pool", "lp-not-a-pool"
POOL_LABEL = {"node.cluster.x-k8s.io/lp-pool": "lp"}
POOL_NODES = ("lp-pool-node-a", "lp-pool-node-b")
FOREIGN_NODE = "lp-foreign-node"
KEDA_NAMESPACE = "gpuaas-lp-keda"
TENANT = "lp-team"
TENANT_NS = "lp-team-work"


def kubectl(lab, *args: str, check: bool = False, token: str | None = None) -> subprocess.CompletedProcess:
    if token is None:
        cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context]
    else:  # no kubeconfig at all: server, CA and token only
        cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", "/dev/null", "--server", lab.apiserver,
               "--certificate-authority", lab.ca, "--token", token]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=check, timeout=120)


def merge_patch(lab, path: str, body: dict, token: str) -> tuple[int, str]:
    """One PATCH request as ``token`` (status code, response body): unlike ``kubectl patch`` it does not GET the
    object first, so it reaches admission with exactly the verb the account holds, as the module's own patch does."""
    request = urllib.request.Request(lab.apiserver + path, data=json.dumps(body).encode(), method="PATCH", headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/merge-patch+json"})
    context = ssl.create_default_context(cafile=lab.ca)
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def inventory(lab) -> dict:
    """A minimal tenancy of the test's own (never the lab's example tenants)."""
    return {
        "gpuaas_prometheus": {"url": lab.prometheus_url},
        "gpuaas_keda_namespace": KEDA_NAMESPACE,
        "gpuaas_flavors": [{"name": "lp-h100", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_cohorts": [],
        "gpuaas_priorities": [{"name": "lp-batch", "value": 100}],
        "gpuaas_tenants": [{"name": TENANT, "namespaces": [TENANT_NS],
                            "quotas": [{"flavor": "lp-h100", "resources": {"nvidia.com/gpu": 1}}],
                            "access": {"admins": ["lp-leads"], "users": ["lp-users"]}}],
    }


def sa_env(lab, token: str) -> dict:
    """The documented connection: K8S_AUTH_HOST + K8S_AUTH_API_KEY + K8S_AUTH_SSL_CA_CERT. The admin kubeconfig the
    test runner would pass is blanked and KUBECONFIG points nowhere, so any fallback to a kubeconfig fails."""
    return {"K8S_AUTH_HOST": lab.apiserver, "K8S_AUTH_API_KEY": token, "K8S_AUTH_SSL_CA_CERT": lab.ca,
            "K8S_AUTH_VERIFY_SSL": "true", "K8S_AUTH_KUBECONFIG": "", "K8S_AUTH_CONTEXT": "",
            "KUBECONFIG": "/nonexistent/gpuaas-no-kubeconfig"}


def sa_user(name: str) -> str:
    return "system:serviceaccount:%s:%s" % (SA_NAMESPACE, name)


def node_pools_vars() -> dict:
    """The inventory's node pool the scaledown account may shrink (its flavor: the pool's label)."""
    return {"gpuaas_flavors": [{"name": "lp-pool", "node_labels": POOL_LABEL}],
            "gpuaas_node_pools": [{"name": "lp", "flavor": "lp-pool", "max_nodes": 2, "gpus_per_node": 8,
                                   "target": {"kind": "MachineDeployment", "name": POOL_TARGET, "namespace": POOL_NS},
                                   "node_labels": POOL_LABEL, "provisioning_seconds": 0, "idle_seconds": 0}]}


def cleanup(lab) -> None:
    """Remove the test's own objects (admin), whatever state a failed run left."""
    kubectl(lab, "delete", "node", *POOL_NODES, FOREIGN_NODE, "--ignore-not-found", "--wait=false")
    for args in (("delete", "clusterqueue", TENANT), ("delete", "resourceflavor", "lp-h100"),
                 ("delete", "workloadpriorityclass", "lp-batch"),
                 ("delete", "clusterrole", "gpuaas-tenant-%s" % TENANT),
                 ("delete", "clusterrolebinding", "gpuaas-tenant-%s" % TENANT),
                 ("delete", "clusterrolebinding", "gpuaas-tenant-lp-escalation"),
                 ("delete", "clusterrole", "gpuaas-tenant-lp-escalation"),
                 ("delete", "namespace", TENANT_NS, "--wait=false")):
        kubectl(lab, *args, "--ignore-not-found")


@pytest.fixture(scope="module")
def accounts(lab, run_playbook):
    """The ServiceAccounts, bound by playbooks/automation_rbac.yml (run as the lab admin), and their tokens."""
    cleanup(lab)
    rbac_vars = dict(node_pools_vars(), **{
        "gpuaas_keda_namespace": KEDA_NAMESPACE,
        "gpuaas_automation_rbac_accounts": [
            {"name": TENANTS_SA, "namespace": SA_NAMESPACE, "playbooks": ["tenants", "validate"]},
            {"name": VALIDATE_SA, "namespace": SA_NAMESPACE, "playbooks": ["validate"]},
            {"name": SCALEDOWN_SA, "namespace": SA_NAMESPACE, "playbooks": ["node_pool_scaledown"]},
        ]})
    kubectl(lab, "create", "namespace", POOL_NS)  # the pools' target namespace exists before its Role is made
    setup = run_playbook(PLAYBOOKS / "automation_rbac.yml", extra_vars=rbac_vars)
    assert setup.rc == 0, setup.explain()
    tokens = {}
    for name in (TENANTS_SA, VALIDATE_SA, SCALEDOWN_SA):
        out = kubectl(lab, "-n", SA_NAMESPACE, "create", "token", name, "--duration=1h", check=True)
        tokens[name] = out.stdout.strip()
    yield tokens
    cleanup(lab)
    teardown = run_playbook(PLAYBOOKS / "automation_rbac.yml", extra_vars=dict(rbac_vars, gpuaas_automation_rbac_state="absent"))
    kubectl(lab, "delete", "namespace", SA_NAMESPACE, KEDA_NAMESPACE, POOL_NS, "--ignore-not-found", "--wait=false")
    assert teardown.rc == 0, teardown.explain()


def run_tenants(run_playbook, lab, token: str, check: bool = False, limit: bool = True, state: str = "present"):
    extra = inventory(lab)
    if state == "absent":
        extra["gpuaas_tenants"] = [{"name": TENANT, "state": "absent"}]
    if limit:
        extra["gpuaas_tenants_limit"] = [TENANT]
    return run_playbook(PLAYBOOKS / "tenants.yml", extra_vars=extra, check=check, diff=check, env=sa_env(lab, token))


def module_result(run) -> dict:
    results = run.task_results("Reconcile the GPU tenancy")
    assert results, run.explain()
    return results[0]


def test_shipped_cluster_roles_grant_no_secrets_cluster_wide_and_bind_only_admin_edit(accounts, lab):
    """kubectl auth can-i as the tenants account: the grants the issue asks about, straight from the API server."""
    token = accounts[TENANTS_SA]

    def can(*args: str) -> str:
        return kubectl(lab, "auth", "can-i", *args, token=token).stdout.strip()

    assert can("list", "secrets", "--all-namespaces") == "no"
    assert can("get", "secrets", "-n", "kube-system") == "no"
    assert can("list", "secrets", "-n", KEDA_NAMESPACE) == "yes"  # only where gpuaas-prometheus lives
    assert can("bind", "clusterroles/cluster-admin") == "no"
    assert can("bind", "clusterroles/edit") == "yes"
    assert can("escalate", "clusterroles") == "no"
    assert can("create", "pods", "-n", "default") == "no"
    assert can("delete", "namespaces") == "no"  # only with gpuaas-automation-tenants-delete-namespaces
    assert can("patch", "clusterqueues.kueue.x-k8s.io") == "yes"
    assert kubectl(lab, "auth", "can-i", "create", "clusterqueues.kueue.x-k8s.io",
                   token=accounts[VALIDATE_SA]).stdout.strip() == "no"


def test_tenants_playbook_runs_end_to_end_as_the_service_account(accounts, lab, run_playbook, audit_writes):
    token = accounts[TENANTS_SA]
    with audit_writes() as audit:
        first = run_tenants(run_playbook, lab, token)
    assert first.rc == 0, first.explain()
    assert first.changed >= 1
    writes = audit.by_user().get(sa_user(TENANTS_SA), [])
    assert any("/clusterqueues/%s" % TENANT in w for w in writes), writes
    assert any("/namespaces/%s/rolebindings/gpuaas-admins" % TENANT_NS in w for w in writes), writes
    assert not audit.by_user().get("lab-admin"), "the admin identity was used: %s" % audit.by_user()["lab-admin"]
    assert all(w.rsplit(" ", 1)[1].startswith("2") for w in writes), writes

    # what the account created is really there, with the tenant's RBAC (bind on admin/edit was enough)
    rb = json.loads(kubectl(lab, "-n", TENANT_NS, "get", "rolebinding", "gpuaas-admins", "-o", "json", check=True).stdout)
    assert rb["roleRef"]["name"] == "admin"
    assert [s["name"] for s in rb["subjects"]] == ["lp-leads"]
    kubectl(lab, "get", "clusterrolebinding", "gpuaas-tenant-%s" % TENANT, check=True)

    second = run_tenants(run_playbook, lab, token)
    assert second.rc == 0, second.explain()
    assert module_result(second)["changed"] is False, module_result(second).get("summary")


def test_check_mode_preview_of_a_change_as_the_service_account_writes_nothing(accounts, lab, run_playbook, audit_writes):
    """--check --diff of a quota change: the dry-run requests are authorized like real ones, nothing is written.
    (A preview of a tenant's *first* onboarding fails for this account: the dry-run ClusterRoleBinding refers to a
    tenant ClusterRole that does not exist yet, and RBAC's escalation check cannot resolve it - see
    docs/production.md.)"""
    extra = inventory(lab)
    extra["gpuaas_tenants"][0]["quotas"][0]["resources"]["nvidia.com/gpu"] = 2
    extra["gpuaas_tenants_limit"] = [TENANT]
    with audit_writes() as audit:
        run = run_playbook(PLAYBOOKS / "tenants.yml", extra_vars=extra, check=True, diff=True,
                           env=sa_env(lab, accounts[TENANTS_SA]))
    assert run.rc == 0, run.explain()
    result = module_result(run)
    assert result["changed"] is True and result["summary"].get("updated", 0) >= 1, result.get("summary")
    assert not audit.by_user().get(sa_user(TENANTS_SA)), "check mode wrote: %s" % audit.by_user()
    live = json.loads(kubectl(lab, "get", "clusterqueue", TENANT, "-o", "json", check=True).stdout)
    quotas = {r["name"]: str(r["nominalQuota"]) for g in live["spec"]["resourceGroups"] for f in g["flavors"]
              for r in f["resources"]}
    assert quotas["nvidia.com/gpu"] == "1", quotas  # unchanged on the cluster


def test_full_reconcile_is_authorized_for_every_kind_the_tenants_module_manages(accounts, lab, run_playbook, audit_writes):
    """Unlimited reconcile (node pools, shared flavors, priorities, admission policy, queue-reader role, prune scope of
    every managed kind) as the shipped account: Secrets are read only in the KEDA namespace (issue 21), so no request
    is refused. First --check (authorized like a real run, writes nothing), then for real, then again (no change)."""
    with audit_writes() as audit:
        check = run_tenants(run_playbook, lab, accounts[TENANTS_SA], check=True, limit=False)
    assert check.rc == 0, check.explain()
    assert not audit.by_user().get(sa_user(TENANTS_SA)), audit.by_user()

    with audit_writes() as audit:
        real = run_tenants(run_playbook, lab, accounts[TENANTS_SA], limit=False)
    assert real.rc == 0, real.explain()
    assert "forbidden" not in real.stdout.lower(), real.explain()
    writes = audit.by_user().get(sa_user(TENANTS_SA), [])
    assert all(w.rsplit(" ", 1)[1].startswith("2") for w in writes), writes
    assert not audit.by_user().get("lab-admin"), "the admin identity was used: %s" % audit.by_user()["lab-admin"]
    kubectl(lab, "get", "clusterqueue", TENANT, check=True)
    kubectl(lab, "get", "workloadpriorityclass", "lp-batch", check=True)  # a shared object: only a full run writes it

    again = run_tenants(run_playbook, lab, accounts[TENANTS_SA], limit=False)
    assert again.rc == 0, again.explain()
    assert module_result(again)["changed"] is False, module_result(again).get("summary")


def test_offboarding_as_the_service_account_drains_and_deletes_the_queues(accounts, lab, run_playbook):
    run_tenants(run_playbook, lab, accounts[TENANTS_SA])  # present (no-op when the previous test ran)
    run = run_tenants(run_playbook, lab, accounts[TENANTS_SA], state="absent")
    assert run.rc == 0, run.explain()
    assert module_result(run)["offboarded"] == [TENANT]
    gone = kubectl(lab, "get", "clusterqueue", TENANT)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    # namespaces are kept (no delete permission, and gpuaas_delete_namespaces is false)
    kubectl(lab, "get", "namespace", TENANT_NS, check=True)


def test_validate_playbook_runs_as_either_account(accounts, lab, run_playbook, tmp_path):
    for name in (VALIDATE_SA, TENANTS_SA):
        report = tmp_path / name
        run = run_playbook(PLAYBOOKS / "validate.yml", env=sa_env(lab, accounts[name]), extra_vars={
            "gpuaas_prometheus": {"url": lab.prometheus_url}, "gpuaas_tenants": inventory(lab)["gpuaas_tenants"],
            "gpuaas_validate_window": "2m", "gpuaas_validate_step": "10s", "gpuaas_validate_on_failure": "warn",
            "gpuaas_validate_report_path": str(report)})
        assert run.rc == 0, run.explain()
        assert "forbidden" not in run.stdout.lower(), run.explain()
        health = run.task_results("Check the health")[0]
        assert health["checks"], health  # the checks ran (their verdict is the lab's business, not RBAC's)
        assert json.loads(Path(str(report) + ".json").read_text())


def test_tenants_account_is_refused_what_it_must_not_do(accounts, lab):
    token = accounts[TENANTS_SA]
    # binding cluster-admin: RBAC's escalation check (no bind on cluster-admin, does not hold its rules)
    crb = kubectl(lab, "create", "clusterrolebinding", "gpuaas-tenant-lp-escalation", "--clusterrole=cluster-admin",
                  "--serviceaccount=%s:%s" % (SA_NAMESPACE, TENANTS_SA), token=token)
    assert crb.returncode != 0
    assert "forbidden" in crb.stderr.lower() and "not currently held" in crb.stderr, crb.stderr
    assert kubectl(lab, "get", "clusterrolebinding", "gpuaas-tenant-lp-escalation").returncode != 0
    # a role with rules it does not hold (would need escalate)
    role = kubectl(lab, "create", "clusterrole", "gpuaas-tenant-lp-escalation", "--verb=get", "--resource=secrets",
                   token=token)
    assert role.returncode != 0 and "forbidden" in role.stderr.lower(), role.stderr
    # Secrets: not cluster-wide, not in the tenant's namespace, not in kube-system
    for args in (("get", "secrets", "--all-namespaces"), ("-n", TENANT_NS, "get", "secrets"),
                 ("-n", "kube-system", "get", "secrets")):
        out = kubectl(lab, *args, token=token)
        assert out.returncode != 0 and "cannot list resource \"secrets\"" in out.stderr, (args, out.stderr)


def test_missing_permission_names_the_verb_and_resource(accounts, lab, run_playbook, kube, audit_writes):
    """The validate-only account runs the tenants playbook: it fails, nothing is written, and the message says which
    verb on which resource (and API group, scope, user) is missing."""
    with audit_writes() as audit:
        run = run_tenants(run_playbook, lab, accounts[VALIDATE_SA])
    assert run.rc != 0
    failed = module_result(run)
    assert failed.get("failed") is True
    msg = failed["msg"]
    match = re.search(r'User "([^"]+)" cannot (\w+) resource "([^"]+)" in API group "([^"]*)"', msg)
    assert match, msg
    assert match.group(1) == sa_user(VALIDATE_SA)
    # the first request the validate account may not make: the ownership guard's read of the desired objects
    # (list namespaces) comes first since issue 17, then the reconcile's LISTs and applies
    assert (match.group(2), match.group(3)) in {("list", "namespaces"), ("list", "localqueues"), ("patch", "namespaces"),
                                                ("create", "namespaces"), ("patch", "clusterqueues")}, msg
    assert failed["error_details"]["status"] == 403
    assert "hint" in failed and failed["hint"], failed
    assert not audit.by_user().get(sa_user(VALIDATE_SA)), audit.by_user()


def test_fence_keeps_the_tenants_account_inside_tenant_namespaces(accounts, lab):
    """What RBAC alone would allow (bind edit anywhere, any ClusterRole name, relabel any namespace) is refused by the
    gpuaas-automation-fence ValidatingAdmissionPolicy, with a message saying why."""
    token = accounts[TENANTS_SA]
    assert kubectl(lab, "auth", "can-i", "create", "rolebindings", "-n", "kube-system", token=token).stdout.strip() == "yes"
    rb = kubectl(lab, "-n", "kube-system", "create", "rolebinding", "lp-fence-attempt", "--clusterrole=edit",
                 "--group=lp-users", token=token)
    assert rb.returncode != 0, rb.stdout
    assert "gpuaas-automation-fence" in rb.stderr and "only in tenant namespaces" in rb.stderr, rb.stderr
    assert kubectl(lab, "-n", "kube-system", "get", "rolebinding", "lp-fence-attempt").returncode != 0
    role = kubectl(lab, "create", "clusterrole", "lp-fence-attempt", "--verb=list", "--resource=nodes", token=token)
    assert role.returncode != 0 and "gpuaas-tenant-*" in role.stderr, role.stderr
    label = kubectl(lab, "label", "namespace", "default", "gpuaas.io/tenant=%s" % TENANT, token=token)
    assert label.returncode != 0 and "already belong to a tenant" in label.stderr, label.stderr
    assert "gpuaas.io/tenant" not in kubectl(lab, "get", "namespace", "default", "--show-labels", check=True).stdout
    # the same account still binds inside a tenant namespace (what the tenants module does)
    ok = kubectl(lab, "-n", TENANT_NS, "create", "rolebinding", "lp-fence-allowed", "--clusterrole=edit",
                 "--group=lp-users", token=token)
    assert ok.returncode == 0, ok.stderr
    kubectl(lab, "-n", TENANT_NS, "delete", "rolebinding", "lp-fence-allowed")


def test_tenants_account_creates_only_tenant_namespaces_and_never_a_platform_one(accounts, lab):
    """Issue 22 item 1: the fence checks CREATE too. The tenants account may label tenant namespaces (RBAC grants it
    update on namespacelabels.gpuaas.io, which gpuaas-namespace-labels checks), but it cannot create a namespace that
    is no tenant's, nor make one a platform namespace (outside every GPU rule)."""
    token = accounts[TENANTS_SA]

    def create(labels: dict, dry_run: bool = False) -> subprocess.CompletedProcess:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lp-fence-ns", "labels": labels}}
        cmd = ["create", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
        full = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", "/dev/null", "--server", lab.apiserver,
                "--certificate-authority", lab.ca, "--token", token] + cmd
        return subprocess.run(full, input=json.dumps(body), capture_output=True, text=True, timeout=60, check=False)

    plain = create({})
    assert plain.returncode != 0 and "may create only tenant namespaces" in plain.stderr, plain.stderr
    platform = create({"gpuaas.io/tenant": TENANT, "gpuaas.io/platform": "mine"})
    assert platform.returncode != 0 and "never labels a namespace gpuaas.io/platform" in platform.stderr, platform.stderr
    assert kubectl(lab, "get", "namespace", "lp-fence-ns").returncode != 0
    allowed = create({"gpuaas.io/tenant": TENANT}, dry_run=True)  # what onboarding does (dry run: nothing to clean)
    assert allowed.returncode == 0, allowed.stderr
    label = kubectl(lab, "label", "namespace", TENANT_NS, "gpuaas.io/platform=mine", token=token)
    assert label.returncode != 0 and "never labels a namespace gpuaas.io/platform" in label.stderr, label.stderr


def apply_as_admin(lab, *objects: dict) -> None:
    proc = subprocess.run([str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context",
                           lab.admin_context, "apply", "--server-side", "-f", "-"],
                          input="\n---\n".join(json.dumps(o) for o in objects), capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


def machine_deployment(name: str, replicas: int) -> dict:
    select = {"gpuaas.io/lp-machines": name}
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": POOL_NS},
            "spec": {"clusterName": "lab", "replicas": replicas, "selector": {"matchLabels": select},
                     "template": {"metadata": {"labels": dict(select, **POOL_LABEL)},
                                  "spec": {"clusterName": "lab", "bootstrap": {"dataSecretName": "lab-bootstrap"},
                                           "infrastructureRef": {"apiGroup": "infrastructure.lab.gpuaas.io",
                                                                 "kind": "KwokMachineTemplate", "name": "kwok"}}}}}


@pytest.fixture
def pool(lab):
    """The pool as a machine controller would have left it (made by the admin): 2 replicas, 2 Machines whose nodes
    carry the pool's label and run nothing (idle), a MachineDeployment that is no pool's, a node of no pool."""
    kubectl(lab, "create", "namespace", POOL_NS)
    apply_as_admin(lab, machine_deployment(POOL_TARGET, 2), machine_deployment(OTHER_TARGET, 1))
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": dict(POOL_LABEL)}} for n in POOL_NODES]
    nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": FOREIGN_NODE, "labels": {"lp": "foreign"}}})
    apply_as_admin(lab, *nodes)
    for index, node in enumerate(POOL_NODES):
        machine = "%s-%d" % (POOL_TARGET, index)
        apply_as_admin(lab, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                             "metadata": {"name": machine, "namespace": POOL_NS,
                                          "labels": {"cluster.x-k8s.io/deployment-name": POOL_TARGET}},
                             "spec": {"clusterName": "lab", "bootstrap": {"dataSecretName": "lab-bootstrap"},
                                      "infrastructureRef": {"apiGroup": "infrastructure.lab.gpuaas.io",
                                                            "kind": "KwokMachine", "name": machine}}})
        status = json.dumps({"status": {"nodeRef": {"name": node}}})
        for extra in (("--subresource=status",), ()):  # the status subresource where the CRD has one
            if kubectl(lab, "-n", POOL_NS, "patch", "machines.cluster.x-k8s.io", machine, "--type=merge", "-p", status,
                       *extra).returncode == 0:
                break
        got = json.loads(kubectl(lab, "-n", POOL_NS, "get", "machines.cluster.x-k8s.io", machine, "-o", "json",
                                 check=True).stdout)
        assert got["status"]["nodeRef"]["name"] == node, got.get("status")
    yield
    kubectl(lab, "delete", "node", *POOL_NODES, FOREIGN_NODE, "--ignore-not-found", "--wait=false")
    kubectl(lab, "-n", POOL_NS, "delete", "machines.cluster.x-k8s.io,machinedeployments.cluster.x-k8s.io", "--all",
            "--ignore-not-found", "--wait=false")


def test_scaledown_account_scales_its_pool_down_and_nothing_else(accounts, lab, run_playbook, pool, audit_writes):
    """Issue 24: node_pool_scaledown runs as its shipped account (token + CA only): it cordons the pool's two idle
    nodes, marks their Machines and lowers the pool's replicas 2 -> 0 - every write its own, every write accepted.
    Then, as the same account, everything beyond scaling its own pools down is refused: deleting or creating a node,
    cordoning a node of no pool, relabelling or tainting a pool node, raising a pool's replicas, touching a
    MachineDeployment that is no pool's, changing a Machine other than marking it, anything in a tenant namespace."""
    token = accounts[SCALEDOWN_SA]
    with audit_writes() as audit:
        run = run_playbook(PLAYBOOKS / "node_pool_scaledown.yml", extra_vars=node_pools_vars(), env=sa_env(lab, token))
    assert run.rc == 0, run.explain()
    result = run.task_results("Remove the idle nodes")[0]["pools"]["lp"]
    assert result["removed"] == sorted(POOL_NODES) and (result["replicas_before"], result["replicas_after"]) == (2, 0), result
    writes = audit.by_user().get(sa_user(SCALEDOWN_SA), [])
    assert writes and all(w.rsplit(" ", 1)[1].startswith("2") for w in writes), writes
    assert not [w for w in writes if "/namespaces/" in w and "/namespaces/%s/" % POOL_NS not in w], writes
    assert not audit.by_user().get("lab-admin"), audit.by_user()["lab-admin"]
    for node in POOL_NODES:
        live = json.loads(kubectl(lab, "get", "node", node, "-o", "json", check=True).stdout)
        assert live["spec"].get("unschedulable") is True, node
    md = json.loads(kubectl(lab, "-n", POOL_NS, "get", "machinedeployments.cluster.x-k8s.io", POOL_TARGET, "-o", "json",
                            check=True).stdout)
    assert md["spec"]["replicas"] == 0
    machine = json.loads(kubectl(lab, "-n", POOL_NS, "get", "machines.cluster.x-k8s.io", POOL_TARGET + "-0", "-o",
                                 "json", check=True).stdout)
    assert machine["metadata"]["annotations"]["cluster.x-k8s.io/delete-machine"] == "true"

    def refused(*args: str, by: str) -> None:
        out = kubectl(lab, *args, token=token)
        assert out.returncode != 0, (args, out.stdout)
        assert by in out.stderr, (args, out.stderr)

    fence = "gpuaas-automation-scaledown-fence"
    pool_node = POOL_NODES[0]
    refused("delete", "node", pool_node, by="forbidden")                             # RBAC: no delete on nodes
    refused("delete", "node", FOREIGN_NODE, by="forbidden")
    # (a patch, not `kubectl cordon`: cordon prints the refusal but exits 0)
    refused("patch", "node", FOREIGN_NODE, "--type=merge", "-p", '{"spec":{"unschedulable":true}}',
            by="may cordon only nodes of its pools")                                      # fence: not a pool node
    refused("label", "node", pool_node, "lp=stolen", by="may change only spec.unschedulable")
    refused("taint", "node", pool_node, "lp=x:NoSchedule", by="may change only spec.unschedulable")
    refused("-n", POOL_NS, "patch", "machinedeployments.cluster.x-k8s.io", POOL_TARGET, "--type=merge",
            "-p", '{"spec":{"replicas":5}}', by="may only lower a pool's replicas")     # fence: never up
    refused("-n", POOL_NS, "scale", "machinedeployments.cluster.x-k8s.io", POOL_TARGET, "--replicas=5", by="forbidden")
    refused("-n", POOL_NS, "patch", "machinedeployments.cluster.x-k8s.io", OTHER_TARGET, "--type=merge",
            "-p", '{"spec":{"replicas":0}}', by="forbidden")                              # RBAC: not a pool's target
    # (a raw PATCH: `kubectl label` and `kubectl patch` read the Machine first, a get the account does not hold, so
    # RBAC would answer before the fence is ever asked)
    code, body = merge_patch(lab, "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/machines/%s-1" % (POOL_NS, POOL_TARGET),
                             {"metadata": {"labels": {"lp": "stolen"}}}, token)
    assert code >= 400 and "may only add the delete-machine annotation" in body, (code, body)
    refused("-n", POOL_NS, "delete", "machines.cluster.x-k8s.io", POOL_TARGET + "-1", by="forbidden")
    refused("create", "configmap", "lp-scaledown-attempt", "-n", "default", by="forbidden")
    refused("-n", "default", "get", "secrets", by="forbidden")
    for verb, resource in (("create", "pods"), ("delete", "pods"), ("create", "nodes"), ("patch", "namespaces"),
                           ("get", "secrets"), ("create", "pods/eviction")):
        assert kubectl(lab, "auth", "can-i", verb, resource, "-n", TENANT_NS, token=token).stdout.strip() == "no", (verb, resource)
    assert fence in kubectl(lab, "patch", "node", FOREIGN_NODE, "--type=merge", "-p", '{"spec":{"unschedulable":true}}',
                            token=token).stderr
    foreign = json.loads(kubectl(lab, "get", "node", FOREIGN_NODE, "-o", "json", check=True).stdout)
    assert not foreign["spec"].get("unschedulable") and foreign["metadata"]["labels"]["lp"] == "foreign"
    assert "lp" not in json.loads(kubectl(lab, "get", "node", pool_node, "-o", "json", check=True).stdout)["metadata"]["labels"]
    # the account may still give a node of its pool back (what the module does when a pod landed meanwhile)
    back = kubectl(lab, "patch", "node", pool_node, "--type=merge", "-p", '{"spec":{"unschedulable":null}}', token=token)
    assert back.returncode == 0, back.stderr
    assert not json.loads(kubectl(lab, "get", "node", pool_node, "-o", "json", check=True).stdout)["spec"].get("unschedulable")
