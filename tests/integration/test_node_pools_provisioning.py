# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node pool grown through Kueue's ProvisioningRequest admission check (issue 23, ``scale_by:
provisioning_request``) with the lab's REAL Kueue v0.19.2 (its ProvisioningRequest controller, set up because the
lab serves the autoscaling.x-k8s.io/v1 CRD before Kueue starts), the cluster-autoscaler SIMULATOR (component
``autoscaler``, lab/simulators/autoscaler_simulator.py) and the machine-controller SIMULATOR (started here) standing
in for the cloud.

The ProvisioningRequestConfig and AdmissionCheck come from the node_pools module, the ClusterQueue's check from the
tenants module (both given the same gpuaas_node_pools); nothing is written here but the pool's target (with the
autoscaler's node-group size annotations a MachineAutoscaler would set), the Jobs and the tenant's attempts.

One pool (0..2 nodes x 8 GPUs) feeds one flavor; the tenant has 16 GPUs of quota on it. In order:

  1. a 2 x 8-GPU Job at 0 nodes: Kueue reserves quota, creates a ProvisioningRequest; the SIMULATOR raises the
     target to 2 replicas and reports Provisioned=True; the Workload is admitted only then, its pods carry the
     request's consume annotation and run on the two new nodes;
  2. a 3 x 5-GPU Job (15 GPUs: within the quota, but no two pods share an 8-GPU node: 3 nodes, beyond the pool's 2):
     not admitted, the check stays Pending with the autoscaler's "Capacity is not found" message, replicas stay 2;
  3. the tenant user (alice) cannot admit that Workload herself: creating a ProvisioningRequest, writing a
     request's status, the AdmissionCheck, the ClusterQueue or the Workload's status is refused by RBAC.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kubernetes import client
from conftest import component_enabled, condition, lab_kubectl as kubectl, local_play, true_since, wait_until
from pool_lab import MachineSimulator, PoolLab, PoolTarget

S = uuid.uuid4().hex[:5]
TENANT = NS = "npr-" + S
FLAVOR = "npr-h100-" + S
POOL = "prh100-" + S
TARGET = "npr-h100-" + S
CHECK = "gpuaas-provisioning-" + FLAVOR
MAX_NODES, GPUS = 2, 8
PR = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
NOT_FOUND = "Capacity is not found, CA will try to find it later."
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def target_body(target: PoolTarget) -> dict:
    """The pool's target at 0 nodes of 8 GPUs: scale-from-zero capacity (machine SIMULATOR) and the node group's size
    (what a MachineAutoscaler sets on OpenShift; on Cluster API the annotations themselves): the autoscaler reads
    max_nodes from here."""
    return target.body({target.pool_label: POOL}, {
        "capacity.cluster-autoscaler.kubernetes.io/gpu-count": str(GPUS),
        "capacity.cluster-autoscaler.kubernetes.io/gpu-type": "nvidia.com/gpu",
        target.size_prefix + "min-size": "0", target.size_prefix + "max-size": str(MAX_NODES)})


def inventory(target: PoolTarget) -> dict:
    return {"flavor": {"name": FLAVOR, "node_labels": {target.pool_label: POOL}, "tolerations": [TOLERATION]},
            "tenants": [{"name": TENANT, "namespaces": [NS], "access": {"users": ["nlp-team"]},
                         "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": MAX_NODES * GPUS}}]}],
            "pools": [{"name": POOL, "flavor": FLAVOR, "scale_by": "provisioning_request",
                       "target": {"kind": target.kind, "name": TARGET, "namespace": target.namespace},
                       "max_nodes": MAX_NODES, "gpus_per_node": GPUS, "node_labels": {target.pool_label: POOL},
                       "provisioning": {"retry": {"backoff_limit_count": 0}}}]}


PLAYBOOK = local_play("""
  tasks:
    - name: The flavor's ProvisioningRequestConfig and AdmissionCheck (no Prometheus for such a pool)
      gpuaas.platform.node_pools:
        flavors: ["{{ inv.flavor }}"]
        tenants: "{{ inv.tenants }}"
        node_pools: "{{ inv.pools }}"
      register: pools
    - name: The test's ResourceFlavor
      gpuaas.platform.resource_flavor: "{{ inv.flavor }}"
    - name: Quota, queues and the ClusterQueue's admission check (the tenants run with the pools)
      gpuaas.platform.tenants:
        flavors: ["{{ inv.flavor }}"]
        tenants: "{{ inv.tenants }}"
        node_pools: "{{ inv.pools }}"
        check_capacity: false
        lock: false
        limit_tenants: ["%s"]
""") % TENANT

# The tenant offboarded afterwards, as a limited run does it: a later full run of another suite on the shared lab
# would otherwise find it and offboard it in that suite's result.
OFFBOARD = local_play("""
  tasks:
    - name: Offboard the test's tenant (its namespace deleted)
      gpuaas.platform.tenants:
        flavors: ["{{ inv.flavor }}"]
        tenants: "{{ inv.tenants | map('combine', {'state': 'absent'}) | list }}"
        check_capacity: false
        lock: false
        delete_namespaces: true
        drain_timeout: 60
        limit_tenants: ["%s"]
    - name: The test's ResourceFlavor
      gpuaas.platform.resource_flavor:
        name: "{{ inv.flavor.name }}"
        state: absent
""") % TENANT


class Env(PoolLab):
    """The lab for this suite's pool (Kueue's ProvisioningRequests grow it)."""

    def __init__(self, lab) -> None:
        super().__init__(lab, PoolTarget(lab.flavor, TARGET, POOL, "npr-machines-" + S), NS)

    def workload_of(self, job: str) -> dict | None:
        return next((w for w in self.workloads()
                     if any(o.get("name") == job for o in w["metadata"].get("ownerReferences") or [])), None)

    def requests_of(self, workload: dict) -> list:
        """The ProvisioningRequests Kueue made for ``workload`` (owner reference; an earlier Workload's may linger
        until the garbage collector removes it)."""
        return [r for r in self.custom.list_namespaced_custom_object(PR[0], PR[1], NS, PR[2])["items"]
                if any(o.get("uid") == workload["metadata"]["uid"] for o in r["metadata"].get("ownerReferences") or [])]


def check_state(workload: dict | None) -> dict:
    return next((c for c in ((workload or {}).get("status") or {}).get("admissionChecks") or [] if c["name"] == CHECK), {})


@pytest.fixture(scope="module")
def pool(lab, run_playbook):
    for component in ("kueue", "autoscaler"):
        if not component_enabled(lab, component):
            pytest.fail("the lab runs without %s: bring it up with LAB_COMPONENTS including it (the default)" % component)
    env = Env(lab)
    t_ = env.target
    try:
        env.custom.list_cluster_custom_object(*PR, limit=1)
    except client.ApiException as exc:
        pytest.fail("the lab does not serve %s.%s/%s (%s): lab.sh loads it with the CRDs; restart the lab"
                    % (PR[2], PR[0], PR[1], exc.reason))
    env.create_target(target_body(t_))
    sim = MachineSimulator(lab, t_, lab.dir / "logs" / ("machine-simulator-%s.log" % S), provision_seconds=1)
    inv = inventory(t_)
    try:
        run = run_playbook(PLAYBOOK, extra_vars={"inv": inv})
        assert run.rc == 0, run.explain()
        # Active only when Kueue runs its ProvisioningRequest controller (the CRD was served when Kueue started)
        wait_until(lambda: (condition(env.custom.get_cluster_custom_object(*KUEUE, "admissionchecks", CHECK), "Active")
                            or {}).get("status") == "True", 30,
                   "AdmissionCheck %s Active (Kueue's ProvisioningRequest controller)" % CHECK)
        yield {"env": env, "run": run}
    finally:
        for job in [j.metadata.name for j in env.batch.list_namespaced_job(NS).items]:
            env.batch.delete_namespaced_job(job, NS, propagation_policy="Background")
        offboard = run_playbook(OFFBOARD, extra_vars={"inv": inv})
        sim_cleanup(env, sim)
    assert offboard.rc == 0, offboard.explain()


def sim_cleanup(env: Env, sim: MachineSimulator) -> None:
    t_ = env.target
    for job in [j.metadata.name for j in env.batch.list_namespaced_job(NS).items]:
        env.batch.delete_namespaced_job(job, NS, propagation_policy="Background")
    try:  # the machine SIMULATOR removes the machines and nodes, then the target goes
        env.custom.patch_namespaced_custom_object(t_.group, t_.version, t_.namespace, t_.plural, TARGET,
                                                  {"spec": {"replicas": 0}})
        wait_until(lambda: not env.pool_node_names(), 30, "the pool's nodes gone")
    finally:
        sim.stop()
        for call in (lambda: env.custom.delete_namespaced_custom_object(t_.group, t_.version, t_.namespace, t_.plural, TARGET),
                     lambda: env.custom.delete_cluster_custom_object(*KUEUE, "admissionchecks", CHECK),
                     lambda: env.custom.delete_cluster_custom_object(*KUEUE, "provisioningrequestconfigs", CHECK),
                     lambda: env.core.delete_namespace(NS)):
            try:
                call()
            except client.ApiException:
                pass
        for n in env.pool_node_names():
            env.core.delete_node(n)
        if not t_.openshift:
            env.core.delete_namespace(t_.namespace)


def test_the_check_comes_from_the_inventory(pool):
    env = pool["env"]
    config_ = env.custom.get_cluster_custom_object(*KUEUE, "provisioningrequestconfigs", CHECK)
    assert config_["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert config_["spec"]["managedResources"] == ["nvidia.com/gpu"]
    assert config_["spec"]["retryStrategy"]["backoffLimitCount"] == 0
    cq = env.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", TENANT)
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": CHECK, "onFlavors": [FLAVOR]}]}
    # no KEDA object for such a pool
    scaled = env.custom.list_namespaced_custom_object("keda.sh", "v1alpha1", env.target.namespace, "scaledobjects")
    assert not [s for s in scaled["items"] if s["metadata"]["name"] == "gpuaas-pool-" + POOL]
    assert env.replicas() == 0 and env.pool_node_names() == []


def test_admission_waits_until_the_nodes_are_provisioned(pool):
    env = pool["env"]
    start = time.time()
    env.job("two", pods=2, gpus=GPUS)
    admitted = wait_until(lambda: true_since(env.workload_of("two"), "Admitted") and env.workload_of("two"), 45,
                          "the 2 x 8-GPU Workload admitted")
    request = wait_until(lambda: env.requests_of(admitted), 5, "Kueue's ProvisioningRequest")[0]
    assert request["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert [p["count"] for p in request["spec"]["podSets"]] == [2]
    provisioned = true_since(request, "Provisioned")
    assert provisioned is not None and condition(request, "Provisioned")["reason"] == "CapacityIsProvisioned"
    assert true_since(admitted, "Admitted") >= provisioned >= int(start), (request["status"], admitted["status"])
    assert true_since(admitted, "QuotaReserved") <= provisioned  # quota first, then the request, then admission
    assert check_state(admitted)["state"] == "Ready"
    assert env.replicas() == MAX_NODES
    nodes = wait_until(lambda: len(env.pool_node_names()) == MAX_NODES and env.pool_node_names(), 30, "two pool nodes")

    def running():
        pods = env.core.list_namespaced_pod(NS, label_selector="job-name=two").items
        return len(pods) == 2 and all(p.status.phase == "Running" for p in pods) and pods
    pods = wait_until(running, 30, "both pods Running")
    assert sorted(p.spec.node_name for p in pods) == sorted(nodes)  # one per new node
    assert {p.metadata.annotations.get(CONSUME) for p in pods} == {request["metadata"]["name"]}
    print("\nprovisioning: Job -> Provisioned %.1f s, -> admitted %.1f s, -> pods Running %.1f s" % (
        provisioned - start, true_since(admitted, "Admitted") - start, time.time() - start))
    env.batch.delete_namespaced_job("two", NS, propagation_policy="Background")
    wait_until(lambda: not env.workloads() and not env.core.list_namespaced_pod(NS).items, 30, "the Job's pods gone")


def test_beyond_the_pools_maximum_is_not_admitted(pool):
    env = pool["env"]
    env.job("three", pods=3, gpus=5)  # 15 of 16 GPUs of quota, but three nodes of 8

    def not_found():
        w = env.workload_of("three")
        return check_state(w).get("message") == NOT_FOUND and w
    waiting = wait_until(not_found, 30, "the check reporting the autoscaler's 'Capacity is not found'")
    assert true_since(waiting, "QuotaReserved") and not true_since(waiting, "Admitted")
    assert check_state(waiting)["state"] == "Pending"
    time.sleep(5)  # several SIMULATOR rounds: still waiting, the pool still at its maximum
    again = env.workload_of("three")
    assert not true_since(again, "Admitted") and check_state(again)["state"] == "Pending", again["status"]
    assert env.replicas() == MAX_NODES
    assert env.core.list_namespaced_pod(NS, label_selector="job-name=three").items == []


def test_the_tenant_cannot_admit_herself(pool, lab):
    env = pool["env"]
    waiting = env.workload_of("three")
    assert waiting and not true_since(waiting, "Admitted")
    request = env.requests_of(waiting)[0]["metadata"]["name"]
    tenant = lab.tenant_context
    forged = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
              "metadata": {"name": "forged", "namespace": NS},
              "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                       "podSets": [{"podTemplateRef": {"name": "x"}, "count": 1}]}}
    provisioned = json.dumps({"status": {"conditions": [{
        "type": "Provisioned", "status": "True", "reason": "Forged", "message": "forged",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    attempts = {
        "create a ProvisioningRequest": kubectl(lab, "create", "-f", "-", context=tenant, stdin=json.dumps(forged)),
        "set Kueue's request Provisioned": kubectl(lab, "patch", "provisioningrequests.autoscaling.x-k8s.io", request,
                                                   "-n", NS, "--subresource=status", "--type=merge", "-p", provisioned,
                                                   context=tenant),
        "delete Kueue's request": kubectl(lab, "delete", "provisioningrequests.autoscaling.x-k8s.io", request, "-n", NS,
                                          context=tenant),
        "repoint the AdmissionCheck": kubectl(lab, "patch", "admissionchecks.kueue.x-k8s.io", CHECK, "--type=merge",
                                              "-p", '{"spec":{"controllerName":"example.com/yes"}}', context=tenant),
        "drop the check from the ClusterQueue": kubectl(lab, "patch", "clusterqueues.kueue.x-k8s.io", TENANT,
                                                        "--type=merge", "-p", '{"spec":{"admissionChecksStrategy":null}}',
                                                        context=tenant),
        "mark the check Ready on the Workload": kubectl(
            lab, "patch", "workloads.kueue.x-k8s.io", waiting["metadata"]["name"], "-n", NS, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"admissionChecks": [dict(check_state(waiting), state="Ready")]}}),
            context=tenant),
    }
    for what, out in attempts.items():
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), "%s: %s%s" % (what, out.stdout, out.stderr)
    time.sleep(2)
    after = env.workload_of("three")
    assert not true_since(after, "Admitted") and check_state(after)["state"] == "Pending", after["status"]
    assert [r["metadata"]["name"] for r in env.requests_of(after)] == [request]
