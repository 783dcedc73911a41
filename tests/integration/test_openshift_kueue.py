# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real Kueue on the OpenShift-flavoured variant lab, configured the OpenShift way (issue 23).

The variant lab's Kueue (lab/components/kueue.sh on LAB_FLAVOR=openshift) was installed by the collection's OLM path:
Subscriptions answered by the OLM SIMULATOR, the Red Hat Kueue operand ``kueue.openshift.io/v1 Kueue cluster`` written
by the kueue role, translated into ConfigMap openshift-kueue-operator/kueue-manager-config by the Kueue operator
SIMULATOR (as openshift/kueue-operator's pkg/configmap does), and run by the real Kueue controller as the operator's
identity. These tests prove, as the tenant (user alice, group nlp-team):

- Kueue runs exactly the Configuration translated from the collection's operand (the OpenShift namespace selector,
  the frameworks of the operand, fair sharing), as system:serviceaccount:openshift-kueue-operator:kueue-controller-manager;
- a tenant's Jobs are admitted up to the quota the collection set and queued beyond it, and the queued one is
  admitted when quota frees up;
- the API refuses what a real OpenShift with the Red Hat build of Kueue refuses: a tenant moving her running Job to
  another queue (Kueue's Job webhook, served by the real Kueue), or touching her tenant's ClusterQueue (RBAC).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import LAB_INVENTORY, wait_until

REPO = Path(__file__).resolve().parents[2]
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
ID = uuid.uuid4().hex[:5]
TENANT = "osk-%s" % ID
NS = "osk-%s-train" % ID
FLAVOR = "osk-%s-h100" % ID
KUEUE_NS = "openshift-kueue-operator"
KUEUE_USER = "system:serviceaccount:openshift-kueue-operator:kueue-controller-manager"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KWOK_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"


def kubectl(lab, *args: str, stdin: str | None = None, context: str = "lab-admin") -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=False, timeout=120, input=stdin)


def get_json(lab, *args: str, context: str = "lab-admin"):
    out = kubectl(lab, "get", *args, "-o", "json", context=context)
    return json.loads(out.stdout) if out.returncode == 0 else None


def tenancy() -> dict:
    """One tenant of 2 H100 GPUs that may not borrow, its users the group nlp-team (alice)."""
    return {
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_cohorts": [],
        "gpuaas_priorities": [],
        "gpuaas_tenants": [{
            "name": TENANT, "namespaces": [NS],
            "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 2, "cpu": 16, "memory": "64Gi"}}],
            "access": {"users": ["nlp-team"]},
            "state": "present"}],
    }


def gpu_job(name: str, gpus: int, queue: str = "default") -> dict:
    """A Job as a data scientist writes it: its queue, GPUs, the GPU taint tolerated; its pod runs for an hour."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {KWOK_DELAY: "1h"}},
                "spec": {"restartPolicy": "Never",
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [{"name": "train", "image": "registry.example/train:1",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                       "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def as_alice(lab, *args: str, body: dict | None = None) -> subprocess.CompletedProcess:
    return kubectl(lab, *args, stdin=json.dumps(body) if body else None, context=lab.tenant_context)


def workload_of(lab, job: str) -> dict | None:
    items = (get_json(lab, "workloads.kueue.x-k8s.io", "-n", NS) or {}).get("items", [])
    return next((w for w in items if any(o.get("kind") == "Job" and o.get("name") == job
                                         for o in w["metadata"].get("ownerReferences", []))), None)


def condition(obj: dict | None, kind: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions", []) if c["type"] == kind), {})


def admitted(lab, job: str) -> bool:
    return condition(workload_of(lab, job), "Admitted").get("status") == "True"


@pytest.fixture(scope="module")
def tenant(variant_lab, variant_run_playbook):
    wait_until(lambda: get_json(variant_lab, "namespace", NS) is None, 120, "a previous namespace %s to be gone" % NS)
    run = variant_run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=tenancy(), timeout=400)
    assert run.rc == 0, run.explain()
    yield
    gone = tenancy()
    gone["gpuaas_tenants"][0]["state"] = "absent"
    kubectl(variant_lab, "delete", "jobs", "--all", "-n", NS, "--wait=false")
    variant_run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, timeout=400,
                         extra_vars=dict(gone, gpuaas_delete_namespaces=True))
    kubectl(variant_lab, "delete", "resourceflavors.kueue.x-k8s.io", FLAVOR, "--ignore-not-found")


def test_kueue_runs_the_configuration_translated_from_the_collections_operand(variant_lab):
    operand = get_json(variant_lab, "kueues.kueue.openshift.io", "cluster")
    cm = get_json(variant_lab, "configmap", "-n", KUEUE_NS, "kueue-manager-config")
    assert operand and cm, "the lab's bootstrap (the collection's OLM path) left no operand or ConfigMap"
    text = cm["data"]["controller_manager_config.yaml"]
    running_sha = variant_lab.dir / "kueue" / "config.sha256"
    wait_until(lambda: running_sha.exists() and running_sha.read_text().strip() == hashlib.sha256(text.encode()).hexdigest(),
               90, "the variant's Kueue to run the operator SIMULATOR's ConfigMap")
    running = yaml.safe_load((variant_lab.dir / "kueue" / "config.yaml").read_text())
    # the Red Hat operator's fixed choices (openshift/kueue-operator pkg/configmap), not the Helm chart's
    assert running["managedJobsNamespaceSelector"] == {"matchLabels": {"kueue.openshift.io/managed": "true"}}
    assert running["metrics"]["enableClusterQueueResources"] is True
    # the operand the collection wrote: its frameworks under Kueue's names, fair sharing from the lab inventory
    frameworks = operand["spec"]["config"]["integrations"]["frameworks"]
    assert {"BatchJob", "RayJob", "RayCluster"} <= set(frameworks), frameworks
    assert {"batch/job", "ray.io/rayjob", "ray.io/raycluster"} <= set(running["integrations"]["frameworks"])
    assert len(running["integrations"]["frameworks"]) == len(frameworks)
    assert operand["spec"]["config"]["preemption"]["preemptionPolicy"] == "FairSharing"
    assert running["fairSharing"]["enable"] is True
    # lab plumbing only on top (docs/lab.md)
    assert running["webhook"]["host"] == "127.0.0.1" and running["leaderElection"]["leaderElect"] is False


def test_tenant_jobs_are_admitted_up_to_the_quota_and_queued_beyond(tenant, variant_lab):
    ns = get_json(variant_lab, "namespace", NS)
    assert ns["metadata"]["labels"]["kueue.openshift.io/managed"] == "true"  # what the operator's Kueue selects
    first, second = "first-%s" % ID, "second-%s" % ID
    created = as_alice(variant_lab, "create", "-f", "-", body=gpu_job(first, 2))
    assert created.returncode == 0, created.stderr
    wait_until(lambda: admitted(variant_lab, first), 60, "Kueue to admit %s (2 of the tenant's 2 GPUs)" % first)
    pods = wait_until(lambda: [p for p in (get_json(variant_lab, "pods", "-n", NS, "-l", "job-name=" + first) or {})
                               .get("items", []) if p["spec"].get("nodeName")], 60, "the admitted Job's pod on a node")
    assert pods[0]["spec"]["nodeName"].startswith("gpu-h100-")  # the flavor's nodes (Kueue injected its node labels)
    # the tenant's quota is used up: the next GPU Job is queued, suspended, its pod never created
    created = as_alice(variant_lab, "create", "-f", "-", body=gpu_job(second, 1))
    assert created.returncode == 0, created.stderr
    pending = wait_until(lambda: condition(workload_of(variant_lab, second), "QuotaReserved").get("reason") == "Pending"
                         and workload_of(variant_lab, second), 60, "Kueue to queue %s" % second)
    assert "insufficient unused quota" in condition(pending, "QuotaReserved")["message"], pending["status"]
    time.sleep(3)  # Kueue had its chance: nothing of the second Job may run
    assert not admitted(variant_lab, second)
    assert get_json(variant_lab, "job", "-n", NS, second)["spec"]["suspend"] is True
    assert not (get_json(variant_lab, "pods", "-n", NS, "-l", "job-name=" + second) or {}).get("items")
    # Kueue itself (the operator's identity) admitted the first: it wrote the Workload's admission
    audit = [json.loads(line) for line in Path(variant_lab.audit_log).read_text().splitlines() if line.strip()]
    assert any(e["user"]["username"] == KUEUE_USER and e["objectRef"].get("resource") == "workloads"
               and e["objectRef"].get("namespace") == NS and e["verb"] in ("update", "patch")
               for e in audit if "objectRef" in e)
    # the tenant frees her quota: the queued Job is admitted
    deleted = as_alice(variant_lab, "delete", "job", first, "-n", NS, "--cascade=foreground", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    wait_until(lambda: admitted(variant_lab, second), 90, "Kueue to admit %s once quota is free" % second)


def test_the_api_refuses_what_openshift_with_red_hat_kueue_refuses(tenant, variant_lab):
    job = "moving-%s" % ID
    created = as_alice(variant_lab, "create", "-f", "-", body=gpu_job(job, 1))
    assert created.returncode == 0, created.stderr
    wait_until(lambda: admitted(variant_lab, job), 90, "Kueue to admit %s" % job)
    # moving a running Job to another queue would escape the quota it was admitted under: Kueue's webhook says no
    moved = as_alice(variant_lab, "label", "job", job, "-n", NS, "--overwrite", "%s=elsewhere" % QUEUE_LABEL)
    assert moved.returncode != 0, moved.stdout
    assert 'admission webhook "vjob.kb.io" denied the request' in moved.stderr, moved.stderr
    assert "field is immutable" in moved.stderr, moved.stderr
    # nor may she raise her own quota: the ClusterQueue is the platform's (RBAC: her group only uses her namespaces)
    raised = as_alice(variant_lab, "patch", "clusterqueues.kueue.x-k8s.io", TENANT, "--type=merge",
                      "-p", json.dumps({"spec": {"cohortName": "elsewhere"}}))
    assert raised.returncode != 0 and "forbidden" in raised.stderr.lower(), raised.stderr
    kubectl(variant_lab, "delete", "job", job, "-n", NS, "--wait=false")
