# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenant isolation on the lab as the collection installs it (issue 11).

Set-up: the collection's install path for Kueue (role gpuaas.platform.kueue with the lab inventory, the way
install.yml runs it) — the lab's real Kueue runs exactly the Configuration that role rendered — then a tenants
reconcile of a small inventory of this module (tenants iso-a, iso-b, iso-strict). Every attempt is made as the
lab's tenant user (context lab-tenant: user alice, group nlp-team) and ends refused with a message that says what
to do instead, or gated by Kueue with a Workload. No GPU pod is ever bound to a node outside quota.

The tenants reconcile replaces the lab's tenancy with this module's inventory: run it on a lab of your own
(LAB_DIR/LAB_PORT_OFFSET), not on a lab another suite is using.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
KUEUE_INSTALL = REPO / "lab" / "components" / "kueue" / "install.yml"
LAB_INVENTORY = REPO / "playbooks" / "inventory" / "lab"
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
POST_RENDERER = REPO / "tests" / "integration" / "files" / "install" / "lab_post_renderer.sh"
CONFIGMAP = ("gpuaas-kueue", "gpuaas-kueue-manager-config")  # release/namespace of the lab inventory
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
GATE = "kueue.x-k8s.io/admission"
A, B, STRICT, OWN = "iso-a", "iso-b", "iso-strict", "iso-own"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# Kueue integrations issue 11 wants on by default (the lab serves every CRD; frameworks by upstream name)
REQUIRED_FRAMEWORKS = {"batch/job", "pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset",
                       "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/pytorchjob",
                       "ray.io/rayjob", "ray.io/raycluster", "workload.codeflare.dev/appwrapper"}


def inventory(lab) -> dict:
    def gpu_quota(gpus):
        return [{"flavor": "h100", "resources": {"nvidia.com/gpu": gpus, "cpu": 16, "memory": "64Gi"}}]

    return {
        "gpuaas_prometheus": {"url": lab.prometheus_url, "token": "lab-platform-token"},
        "gpuaas_flavors": [{"name": "h100", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [TOLERATION]}],
        "gpuaas_cohorts": [],
        # iso-mid is the class open to tenants: B and STRICT (no allowed_priorities) get it and nothing else
        "gpuaas_priorities": [{"name": "iso-low", "value": 100}, {"name": "iso-mid", "value": 1000, "open_to_tenants": True},
                              {"name": "iso-high", "value": 100000}],
        "gpuaas_tenants": [
            {"name": A, "namespaces": [A], "quotas": gpu_quota(1), "allowed_priorities": ["iso-low"],
             "access": {"users": ["nlp-team"]},
             "autoscaling": [{"name": "serve", "namespace": A, "target": {"kind": "Deployment", "name": "serve"},
                              "max_replicas": 1, "idle_scale_to_zero": {
                                  "after_minutes": 15, "wake_query": 'sum(rate(http_requests_total{namespace="iso-a"}[1m]))'}}]},
            {"name": B, "namespaces": [B], "quotas": gpu_quota(8)},
            {"name": STRICT, "namespaces": [STRICT], "quotas": gpu_quota(1), "default_queue": False,
             "queues": [{"name": "train"}], "access": {"users": ["nlp-team"]}},
        ],
    }


# ---------------------------------------------------------------------------------------------- helpers
def kubectl(lab, *args: str, context: str = "lab-admin", stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, input=stdin, check=False)


def as_tenant(lab, obj: dict) -> subprocess.CompletedProcess:
    return kubectl(lab, "create", "-o", "json", "-f", "-", context=lab.tenant_context, stdin=json.dumps(obj))


def get_json(lab, *args: str) -> dict | None:
    out = kubectl(lab, "get", "-o", "json", *args)
    return json.loads(out.stdout) if out.returncode == 0 else None


def name(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:5])


def pod_spec(gpus: int = 2, **extra) -> dict:
    spec = {"tolerations": [TOLERATION], "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.example/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    spec.update(extra)
    return spec


def pod(n: str, ns: str, labels: dict | None = None, **meta) -> dict:
    metadata = {"name": n, "namespace": ns, "labels": labels or {}}
    metadata.update(meta)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec()}


def workload_set(kind: str, n: str, ns: str, labels: dict | None = None) -> dict:
    sel = {"app": n}
    spec = {"replicas": 1, "selector": {"matchLabels": sel},
            "template": {"metadata": {"labels": dict(sel, **(labels or {}))}, "spec": pod_spec(restartPolicy="Always")}}
    if kind == "StatefulSet":
        spec["serviceName"] = n
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": n, "namespace": ns, "labels": labels or {}},
            "spec": spec}


def job(n: str, ns: str, labels: dict | None = None, suspend: bool = False) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": n, "namespace": ns, "labels": labels or {}},
            "spec": {"suspend": suspend, "template": {"spec": pod_spec()}}}


def pods_of(lab, ns: str, selector: str) -> list:
    out = get_json(lab, "pods", "-n", ns, "-l", selector)
    return out["items"] if out else []


def workloads(lab, ns: str) -> list:
    out = get_json(lab, "workloads.kueue.x-k8s.io", "-n", ns)
    return out["items"] if out else []


def assert_gated_not_bound(lab, ns: str, selector: str) -> list:
    """Kueue holds the pods: a scheduling gate, a Workload owning their group, no node."""
    pods = wait_until(lambda: pods_of(lab, ns, selector), 30, "pods of %s in %s" % (selector, ns))
    for p in pods:
        gates = [g["name"] for g in p["spec"].get("schedulingGates") or []]
        assert GATE in gates, "pod %s is not gated by Kueue: %s" % (p["metadata"]["name"], gates)
    wait_until(lambda: [w for w in workloads(lab, ns)
                        if any(p["metadata"]["name"] in json.dumps(w["metadata"].get("ownerReferences", []))
                               for p in pods)], 30, "a Workload for %s" % selector)
    time.sleep(1)
    for p in pods_of(lab, ns, selector):
        assert not p["spec"].get("nodeName"), "pod %s bound outside quota" % p["metadata"]["name"]
    return pods


def refused(result: subprocess.CompletedProcess, *phrases: str) -> None:
    assert result.returncode != 0, "admitted: %s" % result.stdout[:500]
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


# ---------------------------------------------------------------------------------------------- set-up
@pytest.fixture(scope="module")
def installed(lab, run_playbook):
    if lab.kueue_api != "v1beta2":
        pytest.skip("needs the lab's real Kueue (LAB_KUEUE_API=v1beta2)")
    # a previous run's namespaces may still be terminating
    wait_until(lambda: all(get_json(lab, "namespace", ns) is None for ns in (A, B, STRICT, OWN)), 120,
               "the namespaces of a previous run to be gone")
    # 1. the collection's install path for Kueue, as install.yml runs the kueue role
    run = run_playbook(KUEUE_INSTALL, inventory=LAB_INVENTORY,
                       extra_vars={"gpuaas_helm_post_renderer": str(POST_RENDERER)}, timeout=400)
    assert run.rc == 0, run.explain()
    cm = get_json(lab, "configmap", "-n", CONFIGMAP[0], CONFIGMAP[1])
    assert cm, "the kueue role wrote no ConfigMap %s/%s" % CONFIGMAP
    text = cm["data"]["controller_manager_config.yaml"]
    # 2. the lab's Kueue runs exactly that Configuration (the watcher restarts it when it changes)
    digest = hashlib.sha256(text.encode()).hexdigest()
    running = lab.dir / "kueue" / "config.sha256"
    wait_until(lambda: running.exists() and running.read_text().strip() == digest, 90,
               "the lab's Kueue to run the role's Configuration")
    # 3. the tenancy of this module (the platform credential goes to KEDA's namespace, made by install.yml's keda role)
    kubectl(lab, "create", "namespace", "gpuaas-keda")
    tenants = run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=inventory(lab), timeout=300)
    assert tenants.rc == 0, tenants.explain()
    # a namespace alice administers that is no tenant's (a self-provisioned project)
    kubectl(lab, "create", "namespace", OWN)
    kubectl(lab, "create", "rolebinding", "alice-admin", "--clusterrole=admin", "--user=alice", "-n", OWN)
    # ScaledObject rights in her tenant namespace, as KEDA's aggregated roles grant them on a real cluster
    kubectl(lab, "create", "role", "keda-edit", "--verb=get,list,create,update,patch,delete",
            "--resource=scaledobjects.keda.sh,scaledjobs.keda.sh,triggerauthentications.keda.sh", "-n", A)
    kubectl(lab, "create", "rolebinding", "alice-keda", "--role=keda-edit", "--user=alice", "-n", A)
    yield yaml.safe_load(text)
    # leave the lab as other suites expect it: no tenancy of this module, no tenant policy
    kubectl(lab, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "gpuaas-require-kueue-queue",
            "gpuaas-namespace-labels", "--ignore-not-found")
    kubectl(lab, "delete", "namespace", OWN, A, B, STRICT, "--wait=false", "--ignore-not-found")
    kubectl(lab, "delete", "clusterqueues.kueue.x-k8s.io", A, B, STRICT, "--ignore-not-found", "--wait=false")
    kubectl(lab, "delete", "workloadpriorityclasses.kueue.x-k8s.io", "iso-low", "iso-mid", "iso-high", "--ignore-not-found")
    kubectl(lab, "delete", "clustertriggerauthentication.keda.sh", "gpuaas-prometheus", "--ignore-not-found")
    kubectl(lab, "delete", "namespace", "gpuaas-keda", "--wait=false", "--ignore-not-found")


# ---------------------------------------------------------------------------------------------- tests
def test_lab_kueue_runs_the_configuration_the_role_rendered(installed, lab):
    config = installed
    assert REQUIRED_FRAMEWORKS <= set(config["integrations"]["frameworks"]), config["integrations"]
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"] == {"matchExpressions": [
        {"key": "gpuaas.io/tenant", "operator": "Exists"}]}
    # and the running process reads the generated file: role's keys + lab plumbing only
    running = yaml.safe_load((lab.dir / "kueue" / "config.yaml").read_text())
    for key in ("integrations", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "fairSharing"):
        assert running[key] == config[key], key
    assert running["webhook"]["host"] == "127.0.0.1" and running["internalCertManagement"]["enable"] is False


def test_bare_gpu_pod_is_gated_by_kueue(installed, lab):
    n = name("bare")
    created = as_tenant(lab, pod(n, A, labels={"app": n}))
    assert created.returncode == 0, created.stderr
    obj = json.loads(created.stdout)
    assert obj["metadata"]["labels"][QUEUE] == "default"  # Kueue's LocalQueue defaulting
    assert_gated_not_bound(lab, A, "app=%s" % n)


def test_bare_gpu_pod_without_any_queue_is_refused(installed, lab):
    refused(as_tenant(lab, pod(name("bare"), STRICT)),
            "must go through Kueue: add the label %s: train (or another LocalQueue of this namespace" % QUEUE)


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_gpu_deployment_and_statefulset(installed, lab, kind):
    # with the queue label: Kueue gates the pods (2 GPUs > quota 1: never admitted)
    n = name(kind.lower()[:6])
    created = as_tenant(lab, workload_set(kind, n, A, labels={QUEUE: "default"}))
    assert created.returncode == 0, created.stderr
    assert_gated_not_bound(lab, A, "app=%s" % n)
    # without it in a namespace with a default queue: Kueue puts the object into that queue (label defaulting)
    n2 = name(kind.lower()[:6])
    created = as_tenant(lab, workload_set(kind, n2, A))
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["metadata"]["labels"][QUEUE] == "default"
    if kind == "Deployment":  # its pods get the label and Kueue's gate
        assert_gated_not_bound(lab, A, "app=%s" % n2)
    else:
        # Kueue 0.19 labels the StatefulSet but not its pod template, and skips pods whose owner it manages: the
        # pods would run ungated. The policy refuses them; the StatefulSet's events say what to do.
        def refusal():
            out = kubectl(lab, "get", "events", "-n", A, "--field-selector",
                          "involvedObject.name=%s,reason=FailedCreate" % n2, "-o", "json")
            return [e["message"] for e in json.loads(out.stdout)["items"]] if out.returncode == 0 else []
        messages = wait_until(refusal, 30, "the StatefulSet's pods to be refused")
        assert "must go through Kueue: add the label %s: default" % QUEUE in messages[0], messages
        assert not pods_of(lab, A, "app=%s" % n2)
    # without it where no default queue exists: refused, with the label to add
    refused(as_tenant(lab, workload_set(kind, name("nolabel"), STRICT)),
            "GPU workloads in tenant namespace %s must go through Kueue: add the label %s: train" % (STRICT, QUEUE),
            "to the %s metadata.labels" % kind)


def test_pod_with_spoofed_job_owner_reference_is_refused(installed, lab):
    owner = name("owner")
    created = as_tenant(lab, job(owner, A, labels={QUEUE: "default"}, suspend=True))
    assert created.returncode == 0, created.stderr
    uid = json.loads(created.stdout)["metadata"]["uid"]
    spoof = pod(name("spoof"), A, labels={QUEUE: "default"},
                ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": uid,
                                  "controller": True}])
    refused(as_tenant(lab, spoof), "This GPU Pod is not held by Kueue", "ownerReferences written in the Pod do not count",
            "Create a Job")


def test_gpu_pod_in_a_namespace_that_is_no_tenants_is_refused(installed, lab):
    for obj in (pod(name("own"), OWN), job(name("own"), OWN, labels={QUEUE: "default"})):
        refused(as_tenant(lab, obj), "namespace %s is not one (no label gpuaas.io/tenant)" % OWN,
                "kubectl get namespaces -l gpuaas.io/tenant")
    # DRA: a claim is a GPU request too
    claim = pod(name("dra"), OWN)
    claim["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    claim["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "any-gpu"}]
    refused(as_tenant(lab, claim), "is not one (no label gpuaas.io/tenant)")
    # CPU work there is none of the platform's business
    cpu = pod(name("cpu"), OWN)
    cpu["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert as_tenant(lab, cpu).returncode == 0
    # and the namespace's admin cannot make it a tenant's, or a platform namespace, by labelling it
    for label in ("gpuaas.io/tenant=%s" % A, "gpuaas.io/platform=mine"):
        refused(kubectl(lab, "label", "namespace", OWN, label, context=lab.tenant_context), "forbidden")


def test_local_queue_pointing_at_another_tenants_cluster_queue(installed, lab):
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "steal", "namespace": A}, "spec": {"clusterQueue": B}}
    # tenants cannot write LocalQueues at all ...
    refused(as_tenant(lab, lq), "forbidden", "localqueues")
    # ... and one written by someone who can is useless: B's ClusterQueue selects only B's namespaces
    assert kubectl(lab, "apply", "-f", "-", stdin=json.dumps(lq)).returncode == 0
    n = name("steal")
    spec = job(n, A, labels={QUEUE: "steal"})
    spec["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert as_tenant(lab, spec).returncode == 0
    wl = wait_until(lambda: [w for w in workloads(lab, A) if n in json.dumps(w["metadata"].get("ownerReferences"))],
                    30, "the Workload of %s" % n)[0]

    def inadmissible():
        w = get_json(lab, "workloads.kueue.x-k8s.io", "-n", A, wl["metadata"]["name"]) or {}
        conds = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
        q = conds.get("QuotaReserved")
        return q if q and q["status"] == "False" and "namespace" in q.get("message", "").lower() else None
    cond = wait_until(inadmissible, 30, "Kueue to refuse the Workload for B's ClusterQueue")
    assert "doesn't match" in cond["message"] or "not match" in cond["message"], cond
    assert not [p for p in pods_of(lab, A, "job-name=%s" % n) if p["spec"].get("nodeName")]
    kubectl(lab, "delete", "job", n, "-n", A, "--wait=false")
    kubectl(lab, "delete", "localqueue", "steal", "-n", A)


def test_priority_outside_the_allow_list_is_refused(installed, lab):
    refused(as_tenant(lab, job(name("vip"), A, labels={QUEUE: "default", PRIORITY: "iso-high"})),
            "Priority class iso-high is not allowed in tenant namespace %s (allowed: iso-low)" % A,
            "gpuaas_tenants[].allowed_priorities")
    system = job(name("sys"), A, labels={QUEUE: "default"})
    system["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    refused(as_tenant(lab, system), "priorityClassName system-node-critical is not allowed", "(allowed: iso-low)")
    # the allowed class is accepted; another tenant without allowed_priorities gets the class open to tenants only
    ok = as_tenant(lab, job(name("low"), A, labels={QUEUE: "default", PRIORITY: "iso-low"}))
    assert ok.returncode == 0, ok.stderr
    ns = get_json(lab, "namespace", B)
    assert ns["metadata"]["annotations"]["gpuaas.io/allowed-priorities"] == "iso-mid"


def test_top_priority_is_not_open_by_default(installed, lab):
    """Issue 22 item 7, as the tenant user (alice) in STRICT, a tenant whose entry has no allowed_priorities: the
    highest class is refused, the lowest too (a class is marked open_to_tenants, so only that one is the default),
    and the open class iso-mid is accepted."""
    for prio in ("iso-high", "iso-low"):
        refused(as_tenant(lab, job(name("top"), STRICT, labels={QUEUE: "train", PRIORITY: prio})),
                "Priority class %s is not allowed in tenant namespace %s (allowed: iso-mid)" % (prio, STRICT))
    sneaky = job(name("pc"), STRICT, labels={QUEUE: "train"})
    sneaky["spec"]["template"]["spec"]["priorityClassName"] = "iso-high"
    refused(as_tenant(lab, sneaky), "priorityClassName iso-high is not allowed", "(allowed: iso-mid)")
    n = name("open")
    ok = as_tenant(lab, job(n, STRICT, labels={QUEUE: "train", PRIORITY: "iso-mid"}, suspend=True))
    assert ok.returncode == 0, ok.stderr
    kubectl(lab, "delete", "job", n, "-n", STRICT, "--wait=false")


def test_scaled_object_cannot_take_the_platform_credential(installed, lab):
    cta = get_json(lab, "clustertriggerauthentication.keda.sh", "gpuaas-prometheus")
    assert cta, "the tenants reconcile made no ClusterTriggerAuthentication (token in gpuaas_prometheus)"

    def scaled_object(server: str) -> dict:
        return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name("so"), "namespace": A},
                "spec": {"scaleTargetRef": {"name": "serve"}, "triggers": [{
                    "type": "prometheus", "authenticationRef": {"name": "gpuaas-prometheus",
                                                                "kind": "ClusterTriggerAuthentication"},
                    "metadata": {"serverAddress": server, "query": "sum(up)", "threshold": "1", "authModes": "bearer"}}]}}
    # the rights are real: a ScaledObject without the platform credential is accepted
    own = scaled_object("http://metrics.example:9090")
    del own["spec"]["triggers"][0]["authenticationRef"]
    assert as_tenant(lab, own).returncode == 0
    refused(as_tenant(lab, scaled_object("http://attacker.example:9090")),
            "ClusterTriggerAuthentication gpuaas-prometheus is the platform Prometheus credential",
            "use a TriggerAuthentication in namespace %s" % A)
    refused(as_tenant(lab, scaled_object(lab.prometheus_url)), "only the gpuaas.platform automation may reference it")
    # issue 22 item 2: the node pools' credential (same token) is pinned the same way, whether or not pools exist yet
    pools = scaled_object("http://attacker.example:9090")
    pools["spec"]["triggers"][0]["authenticationRef"]["name"] = "gpuaas-prometheus-node-pools"
    refused(as_tenant(lab, pools),
            "ClusterTriggerAuthentication gpuaas-prometheus-node-pools is the platform Prometheus credential")
    # the collection's own ScaledObject (from the inventory) is there and points at the platform Prometheus
    mine = get_json(lab, "scaledobject.keda.sh", "-n", A, "serve")
    assert mine["spec"]["triggers"][0]["metadata"]["serverAddress"] == lab.prometheus_url
    # and a tenant who may edit it cannot re-point it
    patch = [{"op": "replace", "path": "/spec/triggers/0/metadata/serverAddress", "value": "http://attacker.example"}]
    refused(kubectl(lab, "patch", "scaledobject.keda.sh", "serve", "-n", A, "--type=json", "-p", json.dumps(patch),
                    context=lab.tenant_context), "platform Prometheus credential")


def test_queue_label_and_admission_gate_cannot_be_removed(installed, lab):
    n = name("keep")
    assert as_tenant(lab, pod(n, A, labels={QUEUE: "default", "app": n})).returncode == 0
    assert_gated_not_bound(lab, A, "app=%s" % n)
    refused(kubectl(lab, "label", "pod", n, "-n", A, QUEUE + "-", context=lab.tenant_context),
            "The label %s of Pod %s cannot be removed or changed" % (QUEUE, n), "Delete the Pod and create it again")
    refused(kubectl(lab, "label", "pod", n, "-n", A, QUEUE + "=other", "--overwrite", context=lab.tenant_context),
            "cannot be removed or changed")
    ungate = [{"op": "replace", "path": "/spec/schedulingGates", "value": []}]
    refused(kubectl(lab, "patch", "pod", n, "-n", A, "--type=json", "-p", json.dumps(ungate),
                    context=lab.tenant_context), "Only Kueue removes the scheduling gate %s" % GATE)


def test_kueue_itself_admits_within_quota(installed, lab):
    """The policy does not stand in Kueue's way: a labelled 1-GPU pod within quota is ungated by Kueue and bound."""
    n = name("fits")
    p = pod(n, A, labels={QUEUE: "default", "app": n})
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert as_tenant(lab, p).returncode == 0
    bound = wait_until(lambda: (get_json(lab, "pod", "-n", A, n) or {}).get("spec", {}).get("nodeName"), 60,
                       "Kueue to admit and the scheduler to bind %s" % n)
    assert bound.startswith("gpu-h100-")
    kubectl(lab, "delete", "pod", n, "-n", A, "--wait=false")


def test_no_gpu_pod_is_bound_outside_quota(installed, lab):
    for ns in (A, B, STRICT, OWN):
        for p in (get_json(lab, "pods", "-n", ns) or {"items": []})["items"]:
            wants = any(k.startswith(("nvidia.com/", "amd.com/", "gpu.intel.com/"))
                        for c in p["spec"]["containers"] for k in ((c.get("resources") or {}).get("limits") or {}))
            if wants and p["spec"].get("nodeName"):
                assert p["metadata"]["name"].startswith("fits-"), "GPU pod %s/%s bound" % (ns, p["metadata"]["name"])


def test_workload_priority_is_checked_for_crd_kinds(installed, lab):
    """A RayCluster's pod template is not visible to the policy, but the priority Kueue computes for its Workload is:
    a priorityClassName outside the allow-list leaves the RayCluster without a Workload (never admitted), while the
    same RayCluster without it gets one."""
    def ray_cluster(n: str, priority_class: str | None) -> dict:
        spec = pod_spec(gpus=1, restartPolicy="Always")
        spec["containers"][0]["name"] = "ray-head"
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": n, "namespace": A, "labels": {QUEUE: "default"}},
                "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": spec}}}}

    def workload_of(n: str) -> list:
        return [w for w in workloads(lab, A) if n in json.dumps(w["metadata"].get("ownerReferences"))]

    bad, good = name("ray-vip"), name("ray")
    for n, pc in ((bad, "system-node-critical"), (good, None)):
        created = kubectl(lab, "create", "-f", "-", stdin=json.dumps(ray_cluster(n, pc)))  # even the admin
        assert created.returncode == 0, created.stderr
    wait_until(lambda: workload_of(good), 30, "Kueue to create the Workload of the RayCluster without priority")
    time.sleep(3)
    assert not workload_of(bad), "a Workload with priority class system-node-critical was admitted to the API"
    assert get_json(lab, "raycluster.ray.io", "-n", A, bad)["spec"].get("suspend") is True
    kubectl(lab, "delete", "raycluster.ray.io", bad, good, "-n", A, "--wait=false")


def test_a_framework_kueue_does_not_manage_is_refused_even_for_its_operator(lab):
    """Issue 22 item 3, as the operator's service account: on a cluster where Kueue does not manage Ray, the
    KubeRay operator is not a trusted identity and a GPU RayCluster is refused (rule 12), while the Job controller
    (batch/job managed) stays trusted. The policy is the collection's own builder output for a framework list
    without Ray, applied to the lab's API server and bound to this test's namespace only."""
    ns = name("iso-noray")
    code = ("import json\n"
            "from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission, kueue_integrations as ki\n"
            "fw = [i for i in ki.INTEGRATIONS if not i.group.startswith('ray.io')]\n"
            "policy, _binding = admission.admission_policy(admission.AdmissionSettings(), 'http://prometheus.invalid', "
            "frameworks=fw)\n"
            "policy['metadata'] = {'name': %r}\n"
            "print(json.dumps(policy))\n" % ns)
    built = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(REPO / ".build")), timeout=60, check=False)
    assert built.returncode == 0, built.stderr
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": ns}, "spec": {"policyName": ns, "validationActions": ["Deny"], "matchResources": {
                   "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"gpuaas.io/tenant": ns}}}
    objects = {"apiVersion": "v1", "kind": "List", "items": [namespace, json.loads(built.stdout), binding]}
    created = kubectl(lab, "create", "-f", "-", stdin=json.dumps(objects))
    assert created.returncode == 0, created.stderr
    try:
        gpu = {"limits": {"nvidia.com/gpu": "1"}}
        head = {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "head", "image": "registry.example/ray:2"}]}}}
        workers = {"groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 1, "rayStartParams": {},
                   "template": {"spec": {"containers": [
                       {"name": "worker", "image": "registry.example/ray:2", "resources": gpu}]}}}
        ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": ns, "labels": {QUEUE: "default"}},
               "spec": {"headGroupSpec": head, "workerGroupSpecs": [workers]}}
        kuberay = ["--as=system:serviceaccount:ray-system:kuberay-operator", "--as-group=system:masters"]

        def attempt(obj, *identity):
            # the policy takes a moment to be enforced after its creation: retry while it still admits
            def refused_now():
                out = kubectl(lab, "create", "--dry-run=server", "-f", "-", *identity, stdin=json.dumps(obj))
                return out if out.returncode != 0 else None
            return wait_until(refused_now, 30, "the policy to refuse %s" % obj["kind"], interval=1)

        refused(attempt(ray, *kuberay), "Kueue does not manage RayCluster on this cluster", "gpuaas_kueue_integrations")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": ns},
               "spec": {"containers": [{"name": "w", "image": "registry.example/ray:2", "resources": gpu}]}}
        refused(attempt(pod, *kuberay), "must go through Kueue")
        # the Job controller runs batch/job, which Kueue manages here: still trusted for the pods of admitted Jobs
        by_job_controller = kubectl(lab, "create", "--dry-run=server", "-f", "-",
                                    "--as=system:serviceaccount:kube-system:job-controller", "--as-group=system:masters",
                                    stdin=json.dumps(pod))
        assert by_job_controller.returncode == 0, by_job_controller.stderr
    finally:
        kubectl(lab, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", ns, "--ignore-not-found")
        kubectl(lab, "delete", "namespace", ns, "--wait=false", "--ignore-not-found")


# ------------------------------------------------------------------- issue 22 items 1 and 8 (namespace labels, barrier)
NS_BOT = "iso-ns-bot"  # a namespace-as-a-service bot / OpenShift self-provisioner: creates namespaces, admin in them
ONLY_AUTOMATION = "Only the gpuaas.platform automation may set, change or remove the label"


@pytest.fixture(scope="module")
def namespace_bot(installed, lab):
    """User iso-ns-bot with cluster-wide create (and get/list/patch/update) on namespaces — what a namespace-as-a-
    service bot holds — and admin in a namespace it created (as a self-provisioning template grants)."""
    kubectl(lab, "create", "clusterrole", NS_BOT, "--verb=create,get,list,watch,patch,update", "--resource=namespaces")
    kubectl(lab, "create", "clusterrolebinding", NS_BOT, "--clusterrole=%s" % NS_BOT, "--user=%s" % NS_BOT)
    own = name("iso-bot")
    created = kubectl(lab, "create", "namespace", own, "--as=%s" % NS_BOT)
    assert created.returncode == 0, created.stderr  # the rights are real: an unlabelled namespace is fine
    kubectl(lab, "create", "rolebinding", "bot-admin", "--clusterrole=admin", "--user=%s" % NS_BOT, "-n", own)
    yield own
    kubectl(lab, "delete", "namespace", own, "--wait=false", "--ignore-not-found")
    kubectl(lab, "delete", "clusterrolebinding,clusterrole", NS_BOT, "--ignore-not-found")


def as_bot(lab, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return kubectl(lab, *args, "--as=%s" % NS_BOT, stdin=stdin)


def labels_of(lab, ns: str) -> dict:
    return ((get_json(lab, "namespace", ns) or {}).get("metadata") or {}).get("labels") or {}


def test_a_namespace_creator_cannot_make_a_platform_or_another_tenants_namespace(namespace_bot, lab):
    """Issue 22 item 1, as the namespace-as-a-service bot: a namespace created with gpuaas.io/platform (outside every
    GPU rule) or gpuaas.io/tenant=<another tenant> (its ClusterQueue selects it: that tenant's quota) is refused, with
    who may and how to hand a namespace over; nothing is written."""
    def namespace(n: str, label: str) -> str:
        key, value = label.split("=")
        return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {key: value}}})

    # the policy was applied by the fixture's run: wait (dry runs only, nothing written) until it is enforced
    probe = name("iso-probe")
    wait_until(lambda: as_bot(lab, "create", "--dry-run=server", "-f", "-",
                              stdin=namespace(probe, "gpuaas.io/platform=x")).returncode != 0,
               30, "the namespace labels policy to be enforced", interval=1)
    for label in ("gpuaas.io/platform=mine", "gpuaas.io/tenant=%s" % B):
        n = name("iso-selfmade")
        refused(as_bot(lab, "create", "-f", "-", stdin=namespace(n, label)),
                "gpuaas-namespace-labels", "%s %s of a Namespace (%s asked to on namespace %s)"
                % (ONLY_AUTOMATION, label.split("=", maxsplit=1)[0], NS_BOT, n),
                "gpuaas_tenants[].namespaces", "gpuaas_tenants_adopt: Namespace/%s" % n, "system:masters")
        assert get_json(lab, "namespace", n) is None, "namespace %s was written" % n


def test_a_namespace_admin_cannot_label_an_existing_namespace_into_a_tenant_or_the_platform(namespace_bot, lab):
    own = namespace_bot
    before = labels_of(lab, own)
    for label in ("gpuaas.io/platform=mine", "gpuaas.io/tenant=%s" % B):
        refused(as_bot(lab, "label", "namespace", own, label), ONLY_AUTOMATION, "gpuaas_tenants_adopt: Namespace/%s" % own)
    patch = json.dumps({"metadata": {"labels": {"gpuaas.io/tenant": A, "gpuaas.io/platform": "x"}}})
    refused(as_bot(lab, "patch", "namespace", own, "--type=merge", "-p", patch),
            "the labels gpuaas.io/platform, gpuaas.io/tenant of a Namespace")
    assert labels_of(lab, own) == before
    # nor take a tenant namespace away from its tenant, or move it to another
    refused(as_bot(lab, "label", "namespace", A, "gpuaas.io/tenant-"), ONLY_AUTOMATION)
    refused(as_bot(lab, "label", "namespace", A, "gpuaas.io/tenant=%s" % B, "--overwrite"), ONLY_AUTOMATION)
    assert labels_of(lab, A)["gpuaas.io/tenant"] == A
    # other labels stay the bot's business (the refusal is about the two labels, not about its rights)
    ok = as_bot(lab, "label", "namespace", own, "team=bots")
    assert ok.returncode == 0, ok.stderr


def test_the_automation_still_labels_and_hands_over_namespaces(namespace_bot, lab, run_playbook):
    """The automation (here the lab admin, group system:masters; the least-privilege tenants account in
    test_least_privilege.py) onboards a namespace: the adopt path the refusal names works."""
    own = namespace_bot
    inv = inventory(lab)
    inv["gpuaas_tenants"][1]["namespaces"] = [B, own]
    inv["gpuaas_tenants_adopt"] = ["Namespace/%s" % own]
    try:
        run = run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=inv, timeout=300)
        assert run.rc == 0, run.explain()
        assert labels_of(lab, own)["gpuaas.io/tenant"] == B
    finally:
        back = run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=inventory(lab), timeout=300)
        assert back.rc == 0, back.explain()
        kubectl(lab, "label", "namespace", own, "gpuaas.io/tenant-", "app.kubernetes.io/managed-by-",
                "gpuaas.io/component-", "gpuaas.io/suggested-queue-")


def test_a_prometheus_migration_converges_in_one_run(installed, lab, run_playbook):
    """Issue 22 item 8: after a run without gpuaas_prometheus (the policy pins the platform credential to no URL), a
    run with it applies the updated policy, waits until the API server enforces it, then the ScaledObjects: one run
    (before: `apply ScaledObject ... is forbidden: ... may only be sent to the platform Prometheus (none configured)`
    the first time)."""
    without = inventory(lab)
    # extra vars cannot remove the lab inventory's gpuaas_prometheus, only override it: an empty one is "not set"
    without["gpuaas_prometheus"] = {}
    for tenant in without["gpuaas_tenants"]:
        tenant.pop("autoscaling", None)
    without["gpuaas_tenants_prune"] = True  # the ScaledObject goes, as it would on a cluster that never had it
    first = run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=without, timeout=300)
    assert first.rc == 0, first.explain()
    assert get_json(lab, "scaledobject.keda.sh", "-n", A, "serve") is None
    assert "(none configured)" in json.dumps(get_json(lab, "validatingadmissionpolicy", "gpuaas-require-kueue-queue"))

    second = run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=inventory(lab), timeout=300)
    assert second.rc == 0, second.explain()
    mine = get_json(lab, "scaledobject.keda.sh", "-n", A, "serve")
    assert mine and mine["spec"]["triggers"][0]["metadata"]["serverAddress"] == lab.prometheus_url
