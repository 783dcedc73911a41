# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/production.md, run as written (issue 24): the page's marked ``bash`` blocks are extracted and executed in
order, on both lab flavours, so the page and what works cannot drift apart.

How a block runs: ``bash -eo pipefail`` in one shell *session* per flavour - each block starts from the exported
variables and the working directory the previous block left (saved with ``export -p`` / ``$PWD``), like a reader
typing the page into one terminal. The environment starts empty of any cluster login: a fresh ``HOME`` (no
``~/.kube/config``, no ``~/.ansible``), no ``KUBECONFIG`` / ``K8S_AUTH_*`` (``make integration`` exports the lab
admin's), ``PATH`` = the lab's ``kubectl`` + the venv's ``ansible-playbook`` + the system's tools.

What the reader brings, put in place by the test before the first block (the page's premises):
* ``/secure/admin.kubeconfig`` - the administrator's login (the lab's admin kubeconfig), ``/secure/cluster-ca.crt`` -
  the CA of the API server (the lab's CA);
* the collection installed where step 1's ``ansible-galaxy collection install`` puts it
  (``~/.ansible/collections/ansible_collections/gpuaas/platform`` -> the tree ``make collection`` built);
  kubernetes.core comes with the venv's ``ansible`` package, as step 1 says.

SUBSTITUTIONS (the only text the test changes in a block; each must occur in the page): the example API server
URL, ``/secure/`` and ``/path/to/inventory-repo``.

INVENTORY ADAPTATION (only what section 3 tells a reader to change, applied right after the block that copies the
example): ``gpuaas_prometheus.url`` (and ``ca_file`` when the example has one) -> the lab's Prometheus and CA;
tenant, namespace and cohort names prefixed ``wt-`` (the lab is shared with other suites whose tenants are called
``nlp``/``vision``, and safe mode would only report them, never give them back); ``gpuaas_allow_overcommit: true``
(the lab has no L40S nodes and 7 MIG slices where the OpenShift example asks for 14).

Blocks marked ``not-run-in-lab`` are not run; the set of them must equal NOT_RUN_IN_LAB below (no silent skip).

Checked beyond "every block exits 0": step 5's tenants and later runs are made by the automation ServiceAccounts
only (audit log: no write by the administrator or any other non-system identity), every account's writes succeed,
the repeated reconcile reports changed=0, the tenants' ClusterQueues exist, and no request is refused by RBAC.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import OWNED_SELECTOR

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "production.md"
PLAYBOOKS = REPO / "playbooks"
VENV_BIN = REPO / ".venv" / "bin"
BUILT_COLLECTION = REPO / ".build" / "ansible_collections" / "gpuaas" / "platform"

# step id -> flavour of every block the page marks not-run-in-lab, and only those (issue 24: no silent skips)
NOT_RUN_IN_LAB = {("1-install", "both"), ("5-install", "both")}
# the blocks that run, in page order, per lab flavour
RUN_ORDER = {
    "kubernetes": ["2-connect", "3-inventory", "4-accounts", "5-tenants", "5-observability-validate", "5-node-pools"],
    "openshift": ["2-connect", "3-inventory", "4-accounts", "4-prometheus-reader", "4-rotate-prometheus-token",
                  "5-tenants", "5-observability-validate", "5-node-pools"],
}
EXAMPLE_API_SERVER = "https://api.gpu.example.com:6443"
PREFIX = "wt-"
ACCOUNTS_NAMESPACE = "gpuaas-automation"
ACCOUNTS = ("gpuaas-tenants", "gpuaas-observability", "gpuaas-validate", "gpuaas-node-pools")
REFUSED = re.compile(r'is forbidden: User "[^"]*" cannot')
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
MARKER = re.compile(
    r"<!-- walkthrough: step (?P<step>[\w.-]+), flavour: (?P<flavour>[a-z]+)"
    r"(?:, not-run-in-lab: (?P<reason>[^\n]*?))? -->\n```bash\n(?P<body>.*?)\n```", re.S)


@dataclass
class Block:
    step: str
    flavour: str
    reason: str | None
    body: str

    def runs_on(self, flavour: str) -> bool:
        return self.reason is None and self.flavour in ("both", flavour)


def doc_blocks() -> list[Block]:
    text = DOC.read_text(encoding="utf-8")
    blocks = [Block(m["step"], m["flavour"], m["reason"], m["body"]) for m in MARKER.finditer(text)]
    # every shell block of the page is a marked step: an unmarked one would be a step nobody runs
    shell_fences = re.findall(r"^```(?:bash|sh|shell|console)\s*$", text, re.M)
    assert len(shell_fences) == len(blocks), (
        "docs/production.md has %d shell blocks but %d walkthrough markers: mark every block "
        "(<!-- walkthrough: step <id>, flavour: kubernetes|openshift|both[, not-run-in-lab: <why>] -->)"
        % (len(shell_fences), len(blocks)))
    return blocks


def test_the_page_marks_every_shell_block_and_skips_exactly_the_documented_steps():
    """Structure only (no lab): flavours are valid, the not-run list is exactly NOT_RUN_IN_LAB, each with a reason,
    and the substitutions the runner makes all occur in the page (a stale substitution would hide a changed URL)."""
    blocks = doc_blocks()
    assert all(b.flavour in ("kubernetes", "openshift", "both") for b in blocks), [b.flavour for b in blocks]
    not_run = {(b.step, b.flavour) for b in blocks if b.reason is not None}
    assert not_run == NOT_RUN_IN_LAB
    assert all(len(b.reason) > 40 for b in blocks if b.reason is not None), "say why a step cannot run on the lab"
    for flavour, order in RUN_ORDER.items():
        assert [b.step for b in blocks if b.runs_on(flavour)] == order, flavour
    run_text = "\n".join(b.body for b in blocks if b.reason is None)
    for original in (EXAMPLE_API_SERVER, "/secure/", "/path/to/inventory-repo"):
        assert original in run_text, original
    assert "…" not in run_text, "a placeholder a shell cannot run"


def substitute(body: str, lab, work: Path) -> str:
    for original, lab_value in ((EXAMPLE_API_SERVER, lab.apiserver), ("/secure/", "%s/" % (work / "secure")),
                                ("/path/to/inventory-repo", str(work / "inventory-repo"))):
        body = body.replace(original, lab_value)
    return body


def adapt_inventory(inventory: Path, lab, secure: Path) -> dict:
    """What section 3 tells a reader to change, nothing else (see the module docstring)."""
    path = inventory / "group_vars" / "all" / "tenants.yml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["gpuaas_prometheus"]["url"] = lab.prometheus_url
    if "ca_file" in data["gpuaas_prometheus"]:
        data["gpuaas_prometheus"]["ca_file"] = str(secure / "cluster-ca.crt")
    for cohort in data.get("gpuaas_cohorts", []):
        cohort["name"] = PREFIX + cohort["name"]
        if "parent" in cohort:
            cohort["parent"] = PREFIX + cohort["parent"]
    for tenant in data["gpuaas_tenants"]:
        tenant["name"] = PREFIX + tenant["name"]
        tenant["namespaces"] = [PREFIX + ns for ns in tenant["namespaces"]]
        if "cohort" in tenant:
            tenant["cohort"] = PREFIX + tenant["cohort"]
        for scaled in tenant.get("autoscaling", []):
            scaled["namespace"] = PREFIX + scaled["namespace"]
    data["gpuaas_allow_overcommit"] = True
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return data


class Session:
    """One reader's shell: blocks run one after another, exported variables and the working directory carry over."""

    def __init__(self, work: Path, lab):
        self.work = work
        self.state = work / "shell-state.sh"
        home = work / "home"
        installed = home / ".ansible" / "collections" / "ansible_collections" / "gpuaas"
        installed.mkdir(parents=True)
        (installed / "platform").symlink_to(BUILT_COLLECTION)
        self.env = {"HOME": str(home), "PATH": "%s:%s:/usr/local/bin:/usr/bin:/bin" % (lab.dir / "bin", VENV_BIN),
                    "LANG": os.environ.get("LANG", "C.UTF-8"), "TMPDIR": str(work), "ANSIBLE_NOCOLOR": "1"}
        self.state.write_text("cd %s\n" % work)

    def run(self, body: str, timeout: int = 900) -> subprocess.CompletedProcess:
        script = "source %s\n%s\n{ export -p; printf 'cd %%q\\n' \"$PWD\"; } > %s\n" % (self.state, body, self.state)
        return subprocess.run(["bash", "-eo", "pipefail", "-c", script], capture_output=True, text=True,
                              env=self.env, cwd=str(self.work), timeout=timeout, check=False)


def kubectl(lab, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=check, timeout=120)


# Cluster-scoped kinds the tenants playbook writes under shared names (the admission policies and their bindings, the
# tenant reader role): the walkthrough's cleanup removes those the collection labelled as its own that were not there
# before the test. Left behind, the admission policies fenced the main lab for every later test file (CI of stop 36:
# test_autoscaling's StatefulSet and test_awx_runner's namespace labels refused after this file had run).
OWNED_KINDS = ("validatingadmissionpolicies.admissionregistration.k8s.io",
               "validatingadmissionpolicybindings.admissionregistration.k8s.io",
               "clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
               "clustertriggerauthentications.keda.sh")


def names(lab, resource: str, selector: str | None = None) -> set[str]:
    out = kubectl(lab, "get", resource, "-o", "name", *(("-l", selector) if selector else ()))
    return {line.split("/", 1)[1] for line in out.stdout.split()} if out.returncode == 0 else set()


def foreign_writers(writes: dict[str, list[str]]) -> dict[str, list[str]]:
    """Writes by a person - the administrator (lab-admin) above all: any user that is neither a Kubernetes identity
    (system:*, which includes the automation ServiceAccounts and the controllers that keep status, finalizers,
    default ServiceAccounts and CA ConfigMaps) nor a lab component (lab:*)."""
    return {user: w for user, w in writes.items() if not user.startswith(("system:", "lab:"))}


def recaps(output: str) -> list[dict[str, int]]:
    return [dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m))) for m in RECAP.findall(output)]


def explain(step: str, proc: subprocess.CompletedProcess) -> str:
    return "step %s: rc=%s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        step, proc.returncode, proc.stdout[-8000:], proc.stderr[-3000:])


def cleanup(lab, inventory: Path | None, run_playbook, before: dict[str, set[str]]) -> None:
    """Remove what the walkthrough created (as the lab admin), whatever state a failed run left."""
    if inventory is not None and inventory.exists():
        run_playbook(PLAYBOOKS / "observability.yml", inventory=inventory,
                     extra_vars={"gpuaas_observability_state": "absent"})
        run_playbook(PLAYBOOKS / "automation_rbac.yml", inventory=inventory,
                     extra_vars={"gpuaas_automation_rbac_state": "absent"})
    for resource in ("clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io"):
        for name in names(lab, resource):
            if name.startswith(PREFIX):
                kubectl(lab, "delete", resource, name, "--ignore-not-found", "--wait=false")
    for resource in ("clusterrolebindings", "clusterroles"):
        for name in names(lab, resource):
            if name.startswith("gpuaas-tenant-" + PREFIX):
                kubectl(lab, "delete", resource, name, "--ignore-not-found")
    for resource, existed in before.items():  # shared objects the walkthrough added (flavors, policies...)
        for name in names(lab, resource, OWNED_SELECTOR if resource in OWNED_KINDS else None) - existed:
            kubectl(lab, "delete", resource, name, "--ignore-not-found", "--wait=false")
    kubectl(lab, "delete", "clusterrolebinding", "gpuaas-prometheus-reader", "--ignore-not-found")
    spaces = [n for n in names(lab, "namespaces") if n.startswith(PREFIX)] + [ACCOUNTS_NAMESPACE]
    kubectl(lab, "delete", "namespace", *spaces, "--ignore-not-found", "--wait=false")


def wait_namespaces_gone(lab) -> None:
    end = time.monotonic() + 180
    while time.monotonic() < end:
        left = [n for n in names(lab, "namespaces") if n.startswith(PREFIX) or n == ACCOUNTS_NAMESPACE]
        if not left:
            return
        time.sleep(2)
    raise AssertionError("namespaces of an earlier walkthrough still terminating: %s" % left)


@pytest.mark.parametrize("flavour", ["kubernetes", "openshift"])
def test_production_walkthrough_runs_as_written(flavour, request, tmp_path):
    lab = request.getfixturevalue("lab" if flavour == "kubernetes" else "variant_lab")
    run_playbook = request.getfixturevalue("run_playbook" if flavour == "kubernetes" else "variant_run_playbook")
    audit = request.getfixturevalue("audit_writes" if flavour == "kubernetes" else "variant_audit_writes")
    assert lab.flavor == flavour, "the %s lab runs LAB_FLAVOR=%s" % (flavour, lab.flavor)
    assert BUILT_COLLECTION.is_dir(), "make collection first"

    # cluster-scoped objects the walkthrough may add beside its own wt-* ones: removed afterwards if new
    shared_kinds = ("resourceflavors.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io", "namespaces",
                    *OWNED_KINDS)
    cleanup(lab, None, run_playbook, {})  # a failed earlier run's leftovers
    wait_namespaces_gone(lab)
    before = {kind: names(lab, kind) for kind in shared_kinds}

    work = tmp_path
    secure = work / "secure"
    secure.mkdir()
    shutil.copy(lab.kubeconfig, secure / "admin.kubeconfig")
    shutil.copy(lab.ca, secure / "cluster-ca.crt")
    inventory = work / "inventory-repo" / "gpu-prod"
    session = Session(work, lab)
    outputs: dict[str, subprocess.CompletedProcess] = {}
    writes: dict[str, dict[str, list[str]]] = {}
    tenancy: dict = {}
    try:
        for block in doc_blocks():
            if not block.runs_on(flavour):
                continue
            started = time.monotonic()
            with audit() as window:
                proc = session.run(substitute(block.body, lab, work))
            print("walkthrough %s %s: %.0f s" % (flavour, block.step, time.monotonic() - started))
            assert proc.returncode == 0, explain(block.step, proc)
            # a refusal by RBAC reads 'X is forbidden: User "..." cannot ...' (the admission policy's own
            # expressions, shown by --diff, contain reason: forbidden and do not count)
            assert not REFUSED.search(proc.stdout + proc.stderr), explain(block.step, proc)
            outputs[block.step], writes[block.step] = proc, window.by_user()
            if block.step == "3-inventory":
                tenancy = adapt_inventory(inventory, lab, secure)
        assert list(outputs) == RUN_ORDER[flavour]

        for account in ACCOUNTS:
            assert (secure / ("%s.token" % account)).read_text().count(".") == 2, account  # a JWT per account

        # step 5: the first preview (admin, dry run) writes nothing; the reconcile and its repeat are the
        # tenants account's; the repeat changes nothing
        tenants_run = outputs["5-tenants"]
        runs = recaps(tenants_run.stdout)
        assert len(runs) == 3 and all(r["failed"] == 0 and r["unreachable"] == 0 for r in runs), explain("5-tenants", tenants_run)
        assert runs[1]["changed"] >= 1 and runs[2]["changed"] == 0, runs
        tenant_names = [t["name"] for t in tenancy["gpuaas_tenants"]]  # inventory order, as the role prints them
        assert "%d tenant(s) %s" % (len(tenant_names), tenant_names) in tenants_run.stdout, explain("5-tenants", tenants_run)
        step5 = writes["5-tenants"]
        assert not foreign_writers(step5), "step 5 wrote as someone else than the accounts: %s" % foreign_writers(step5)
        by_tenants = step5.get("system:serviceaccount:%s:gpuaas-tenants" % ACCOUNTS_NAMESPACE, [])
        assert any("/clusterqueues/%s" % tenant_names[0] in w for w in by_tenants), by_tenants
        assert all(w.rsplit(" ", 1)[1].startswith("2") for w in by_tenants), by_tenants
        for name in tenant_names:
            kubectl(lab, "get", "clusterqueues.kueue.x-k8s.io", name, check=True)

        # observability and validate, each as its own account
        last = outputs["5-observability-validate"]
        runs = recaps(last.stdout)
        assert len(runs) == 2 and all(r["failed"] == 0 and r["unreachable"] == 0 for r in runs), explain("5-observability-validate", last)
        step5b = writes["5-observability-validate"]
        assert not foreign_writers(step5b), foreign_writers(step5b)
        by_observability = step5b.get("system:serviceaccount:%s:gpuaas-observability" % ACCOUNTS_NAMESPACE, [])
        assert by_observability and all(w.rsplit(" ", 1)[1].startswith("2") for w in by_observability), by_observability
        assert not step5b.get("system:serviceaccount:%s:gpuaas-validate" % ACCOUNTS_NAMESPACE), "validate wrote"
        assert "Show GPU utilization per tenant" in last.stdout, explain("5-observability-validate", last)

        # the node-pools account runs its playbook (no pool in the examples: nothing to do, nothing written)
        pools = outputs["5-node-pools"]
        runs = recaps(pools.stdout)
        assert len(runs) == 1 and runs[0]["failed"] == 0 and runs[0]["changed"] == 0, explain("5-node-pools", pools)
        assert not writes["5-node-pools"].get("system:serviceaccount:%s:gpuaas-node-pools" % ACCOUNTS_NAMESPACE)
        assert not foreign_writers(writes["5-node-pools"]), foreign_writers(writes["5-node-pools"])
    finally:
        cleanup(lab, inventory, run_playbook, before)
