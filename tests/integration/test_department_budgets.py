# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Department budgets held by Cohorts (``gpuaas_cohorts[].quotas``) on the real Kueue (issue 26).

Kueue KEP-1714's organisation story: the organisation is the root Cohort, each department a Cohort under it that
holds the department's GPU budget, each team a tenant (ClusterQueue) of its department with **zero** nominal quota,
so everything a team runs is borrowed from its department:

    org                      (root, no quota)
    ├── dept-nlp             quota 4 H100, borrowing_limit 0 (never more than its budget)
    │   ├── team nlp-a       nominal 0
    │   └── team nlp-b       nominal 0
    └── dept-cv              quota 2 H100, lending_limit 0 (keeps its budget for itself)
        └── team cv-a        nominal 0

What is shown, each as the lab's tenant user (context lab-tenant, group nlp-team, a user of nlp-a, nlp-b and cv-a)
submitting one-GPU Jobs:
* the Cohorts on the cluster carry the budgets as ``spec.resourceGroups`` (read back, compared with the values
  written below, not with the builder's output);
* nlp-a's Jobs are admitted by Kueue on the department's quota (the team has none) — 4 of the 6 submitted, never
  more: the 2 idle GPUs of dept-cv and nothing of the organisation are borrowed;
* nlp-b, the other team of the department, gets nothing while nlp-a holds the whole budget;
* cv-a still gets its department's 2 GPUs (the NLP department could not take them).

The objects are applied the way the other Kueue scenario suite does it on a shared lab (test_fair_sharing_scenarios):
shared objects with the single-object modules — the Cohorts with ``quotas`` in the inventory's words, parsed and
grouped by the same code as the tenants role — and the tenants with the tenants module and ``limit_tenants``, which
still validates the whole inventory and checks the GPU capacity with the cohort budgets counted.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from conftest import active_cluster_queues, expect_steady, kwok_job, wait_until

KUEUE = "kueue.x-k8s.io/v1beta2"
RUN = uuid.uuid4().hex[:4]
SETTLE = 8          # seconds the counts must hold still (no late admission past the budget)
TIMEOUT = 90
GPU = "nvidia.com/gpu"
TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Flavors
      gpuaas.platform.resource_flavor:
        name: "{{ item.name }}"
        node_labels: "{{ item.node_labels }}"
        tolerations: "{{ item.tolerations }}"
        state: present
      loop: "{{ gpuaas_flavors if budget_state == 'present' else [] }}"
    - name: Cohorts with their budgets (parents first)
      gpuaas.platform.cohort:
        name: "{{ item.name }}"
        parent: "{{ item.parent | default(omit) }}"
        quotas: "{{ item.quotas | default(omit) }}"
        state: present
      loop: "{{ gpuaas_cohorts if budget_state == 'present' else [] }}"
    - name: Teams
      gpuaas.platform.tenants:
        flavors: "{{ gpuaas_flavors }}"
        cohorts: "{{ gpuaas_cohorts }}"
        priorities: []
        tenants: "{{ gpuaas_tenants | map('combine', {'state': budget_state}) | list }}"
        limit_tenants: "{{ gpuaas_tenants | map(attribute='name') | list }}"
        delete_namespaces: true
        check_capacity: true
        drain_timeout: 120
    - name: Cohorts (children first)
      gpuaas.platform.cohort:
        name: "{{ item.name }}"
        state: absent
      loop: "{{ [] if budget_state == 'present' else gpuaas_cohorts | reverse | list }}"
    - name: Flavors
      gpuaas.platform.resource_flavor:
        name: "{{ item.name }}"
        state: absent
      loop: "{{ [] if budget_state == 'present' else gpuaas_flavors }}"
"""


def name(short: str) -> str:
    return "itdb-%s-%s" % (short, RUN)


FLAVOR, ORG, NLP, CV = name("h100"), name("org"), name("dept-nlp"), name("dept-cv")
NLP_A, NLP_B, CV_A = name("nlp-a"), name("nlp-b"), name("cv-a")


def inventory() -> dict:
    def team(short_name: str, department: str) -> dict:
        return {"name": short_name, "namespaces": [short_name], "cohort": department,
                "quotas": [{"flavor": FLAVOR, "resources": {GPU: 0}}],
                "access": {"users": ["nlp-team"]}}

    return {
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [TOLERATION]}],
        "gpuaas_cohorts": [
            {"name": ORG},
            {"name": NLP, "parent": ORG,
             "quotas": [{"flavor": FLAVOR, "resources": {GPU: 4}, "borrowing_limit": {GPU: 0}}]},
            {"name": CV, "parent": ORG,
             "quotas": [{"flavor": FLAVOR, "resources": {GPU: 2}, "lending_limit": {GPU: 0}}]},
        ],
        "gpuaas_tenants": [team(NLP_A, NLP), team(NLP_B, NLP), team(CV_A, CV)],
    }


def res(kube, kind: str, api_version: str = KUEUE):
    return kube.resources.get(api_version=api_version, kind=kind)


def apply(run_playbook, state: str):
    run = run_playbook(PLAYBOOK, extra_vars=dict(inventory(), budget_state=state), timeout=300)
    assert run.rc == 0 and run.failed == 0, run.explain()
    return run


def kubectl(lab, *args: str, context: str = "lab-admin", stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def submit_as_tenant(lab, namespace: str, count: int) -> None:
    """One-GPU Jobs (KWOK pods that run for an hour), created by the tenant user one after the other."""
    for _attempt in range(count):
        job = kwok_job({GPU: "1"}, generate_name="budget-", image="registry.invalid/train:1", tolerations=[TOLERATION])
        job["metadata"]["namespace"] = namespace
        out = kubectl(lab, "create", "-f", "-", context=lab.tenant_context, stdin=json.dumps(job))
        assert out.returncode == 0, "the tenant user could not create a Job in %s: %s" % (namespace, out.stderr)


def admitted(kube, queues: list[str]) -> dict[str, int]:
    """Workloads per ClusterQueue that Kueue admitted (Admitted=True, not finished), from the Workloads."""
    out = {q: 0 for q in queues}
    for wl in res(kube, "Workload").get().items:
        wl = wl.to_dict()
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
        conds = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}
        if cq in out and conds.get("Admitted") == "True" and conds.get("Finished") != "True":
            out[cq] += 1
    return out


def pending(kube, namespace: str) -> list[str]:
    """Messages of the namespace's Workloads that hold no quota (why Kueue keeps them waiting)."""
    out = []
    for wl in res(kube, "Workload").get(namespace=namespace).items:
        wl = wl.to_dict()
        conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
        if (conds.get("QuotaReserved") or {}).get("status") != "True":
            out.append((conds.get("QuotaReserved") or {}).get("message", ""))
    return out


def expect_admitted(kube, expected: dict[str, int], what: str) -> None:
    """Wait until the admitted counts equal ``expected``, then require them to hold for SETTLE seconds."""
    expect_steady(lambda: admitted(kube, list(expected)), expected, what, TIMEOUT, SETTLE)


def wait_active(kube, queues: list[str]) -> None:
    wait_until(lambda: active_cluster_queues(kube, KUEUE, queues) == len(queues), TIMEOUT,
               "ClusterQueues %s to become Active" % queues, interval=1)


@pytest.fixture
def budgets(lab, kube, run_playbook):
    listed = lab.dir / "components"
    if listed.exists() and "kueue" not in listed.read_text().split():
        pytest.skip("the lab runs without kueue (LAB_COMPONENTS=%s)" % listed.read_text().strip())
    if lab.kueue_api == "v1beta1":
        pytest.skip("a LAB_KUEUE_API=v1beta1 lab runs no Kueue controller")
    try:
        yield apply(run_playbook, "present")
    finally:
        for ns in (NLP_A, NLP_B, CV_A):
            try:
                res(kube, "Job", "batch/v1").delete(namespace=ns, body={"propagationPolicy": "Background"},
                                                    label_selector="kueue.x-k8s.io/queue-name=default")
            except NotFoundError:
                pass
        apply(run_playbook, "absent")


def test_department_budget_is_borrowed_by_its_teams_and_never_exceeded(budgets, lab, kube):
    # The budgets are on the Cohorts as Kueue reads them (values as written in inventory() above).
    def groups(cohort: str) -> list:
        return res(kube, "Cohort").get(name=cohort).to_dict()["spec"].get("resourceGroups")

    assert groups(NLP) == [{"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [
        {"name": GPU, "nominalQuota": "4", "borrowingLimit": "0"}]}]}]
    assert groups(CV) == [{"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [
        {"name": GPU, "nominalQuota": "2", "lendingLimit": "0"}]}]}]
    assert groups(ORG) is None
    # and the teams hold nothing themselves
    for team in (NLP_A, NLP_B, CV_A):
        cq = res(kube, "ClusterQueue").get(name=team).to_dict()["spec"]
        assert cq["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": GPU, "nominalQuota": "0"}]
    wait_active(kube, [NLP_A, NLP_B, CV_A])

    # A team of zero quota runs on its department's budget, up to the budget and no further.
    submit_as_tenant(lab, NLP_A, 6)
    expect_admitted(kube, {NLP_A: 4, NLP_B: 0, CV_A: 0}, "nlp-a borrows the NLP budget of 4, not dept-cv's idle 2")
    waiting = pending(kube, NLP_A)
    assert len(waiting) == 2, waiting

    # The department's other team finds the budget spent.
    submit_as_tenant(lab, NLP_B, 1)
    expect_admitted(kube, {NLP_A: 4, NLP_B: 0, CV_A: 0}, "nlp-b waits while nlp-a holds the whole NLP budget")

    # The CV department kept its budget (lending_limit 0): its team gets both GPUs, and no more.
    submit_as_tenant(lab, CV_A, 3)
    expect_admitted(kube, {NLP_A: 4, NLP_B: 0, CV_A: 2}, "cv-a runs on the 2 GPUs the NLP teams could not take")
