# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU node pools grow from Kueue's reserved quota and shrink only by idle nodes (issue 13), with the lab's REAL
Kueue, KEDA, HPA (kube-controller-manager, 5 s sync) and Prometheus, and the machine-controller SIMULATOR
(lab/simulators/machine_simulator.py, started here) standing in for the cloud.

The target follows the lab's flavour: an OpenShift MachineSet on LAB_FLAVOR=openshift, a Cluster API
MachineDeployment on the Kubernetes lab. The ScaledObject is built and applied by the gpuaas.platform.node_pools
module from an inventory (never written here); quota and queues by the tenants module.

One pool (0..4 nodes x 8 GPUs) feeds one flavor; one tenant has 32 GPUs of quota on it. In order:

  1. four 8-GPU Jobs -> replicas 0 -> 4 within 60 s of admission, one pod per node, every Job succeeds, no
     Workload evicted, the simulated DCGM exporter follows the new nodes; replicas back to 0 within 90 s after
     the last completion (KEDA, nothing reserved for idle_seconds)
  2. six 8-GPU Jobs -> replicas never above 4, two Workloads wait for quota, the second wave runs on first-wave nodes
  3. one busy and three idle nodes -> node_pool_scaledown removes exactly the three idle ones (check mode first:
     nothing written); the busy pod keeps running; the SIMULATOR never deleted a node with a running pod

Short timings: idle_seconds 15, polling 5 s, Job pods complete after 8 s (KWOK). The repeated measurement
(admission -> node Ready, last completion -> node gone) is bench/node_pools.py.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from conftest import local_play, promql, true_since, wait_until
from pool_lab import MachineSimulator, PoolLab, PoolTarget

S = uuid.uuid4().hex[:5]
TENANT = NS = "np-" + S
FLAVOR = "np-h100-" + S
POOL = "h100-" + S
TARGET = "np-h100-" + S
H100 = "NVIDIA-H100-80GB-HBM3"
MAX_NODES, GPUS = 4, 8
IDLE, POLLING, JOB_SECONDS = 15, 5, 8
UP_BOUND, DOWN_BOUND = 60, 90


def node_labels(target: PoolTarget) -> dict:
    """The labels the pool's nodes get (the pool's node_labels in the inventory): the pool label, on OpenShift also
    the GPU product."""
    return {target.pool_label: POOL, "nvidia.com/gpu.product": H100} if target.openshift else {target.pool_label: POOL}


def target_body(target: PoolTarget) -> dict:
    """The pool's target at 0 nodes of 8 GPUs (scale-from-zero capacity for the machine SIMULATOR), any Machine
    removable on a scale-down."""
    return target.body(node_labels(target),
                       {"capacity.cluster-autoscaler.kubernetes.io/gpu-count": str(GPUS),
                        "capacity.cluster-autoscaler.kubernetes.io/gpu-type": "nvidia.com/gpu",
                        "capacity.cluster-autoscaler.kubernetes.io/cpu": "96",
                        "capacity.cluster-autoscaler.kubernetes.io/memory": "1Ti"}, random_deletion=True)


class Lab(PoolLab):
    """The lab for this suite's pool (KEDA grows it, node_pool_scaledown shrinks it)."""

    def __init__(self, lab) -> None:
        super().__init__(lab, PoolTarget(lab.flavor, TARGET, POOL, "np-machines-" + S), NS)

    def machines(self) -> list:
        f = self.target
        return [m for m in self.custom.list_namespaced_custom_object(f.group, f.machine_version, f.namespace, "machines")["items"]
                if m["metadata"]["name"].startswith(TARGET + "-")]

    def ready_pool_nodes(self) -> list:
        return [n.metadata.name for n in self.pool_nodes()
                if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))]

    def jobs_done(self, names) -> bool:
        return all((self.batch.read_namespaced_job(n, NS).status.succeeded or 0) >= 1 for n in names)

    def prom(self, query: str) -> float:
        result = promql(self.lab, query)
        return float(result[0]["value"][1]) if result else 0.0


class Sampler(threading.Thread):
    """Records the target's spec.replicas every 0.5 s (the 'never above 4' guarantee needs the whole history)."""

    def __init__(self, lab: Lab) -> None:
        super().__init__(daemon=True)
        self.lab, self.samples, self.stop = lab, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append((time.time(), self.lab.replicas()))
            except Exception:  # noqa: BLE001 - a blip must not end the sampling
                pass
            time.sleep(0.5)


def inventory(target: PoolTarget, quota: int = MAX_NODES * GPUS) -> dict:
    flavor = {"name": FLAVOR, "node_labels": {target.pool_label: POOL},
              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    tenants = [{"name": TENANT, "namespaces": [NS], "quotas": [{"flavor": FLAVOR, "resources": {"nvidia.com/gpu": quota}}]}]
    pools = [{"name": POOL, "flavor": FLAVOR,
              "target": {"kind": target.kind, "name": TARGET, "namespace": target.namespace},
              "min_nodes": 0, "max_nodes": MAX_NODES, "gpus_per_node": GPUS,
              "node_labels": node_labels(target),
              "idle_seconds": IDLE, "polling_interval": POLLING, "provisioning_seconds": 5}]
    return {"flavor": flavor, "tenants": tenants, "pools": pools}


PLAYBOOK = local_play("""
  tasks:
    - name: The pool's ScaledObject (validates the whole inventory with the pools first)
      gpuaas.platform.node_pools:
        flavors: ["{{ inv.flavor }}"]
        tenants: "{{ inv.tenants }}"
        node_pools: "{{ inv.pools }}"
        prometheus: {url: "{{ prometheus_url }}"}
      register: pools
    - name: The test's ResourceFlavor
      gpuaas.platform.resource_flavor: "{{ inv.flavor }}"
    - name: Quota and queues (the capacity was checked by node_pools, with the pools)
      gpuaas.platform.tenants:
        flavors: ["{{ inv.flavor }}"]
        tenants: "{{ inv.tenants }}"
        check_capacity: false
        lock: false
        limit_tenants: ["%s"]
""") % TENANT

SCALEDOWN = local_play("""
  tasks:
    - name: Remove idle pool nodes
      gpuaas.platform.node_pool_scaledown:
        flavors: ["{{ inv.flavor }}"]
        node_pools: "{{ inv.pools }}"
        idle_seconds: 0
      register: down
""")


@pytest.fixture(scope="module")
def pool(lab, run_playbook):
    for component in ("kueue", "keda"):
        if not list((lab.dir / "pids").glob("%s*.pid" % component)):
            pytest.fail("the lab runs without %s: bring it up with LAB_COMPONENTS including kueue and keda" % component)
    env = Lab(lab)
    f = env.target
    try:
        env.custom.list_cluster_custom_object(f.group, f.version, f.plural, limit=1)
    except client.ApiException as exc:
        pytest.fail("the lab does not serve %s.%s/%s (%s): lab.sh up loads it on the %s flavour; restart the lab"
                    % (f.plural, f.group, f.version, exc.reason, lab.flavor))
    env.create_target(target_body(f))
    sim = MachineSimulator(lab, f, lab.dir / "logs" / ("machine-simulator-%s.log" % S), provision_seconds=2)
    state = {"env": env, "log": sim.log_path, "sampler": Sampler(env)}
    try:
        inv = inventory(f)
        run = run_playbook(PLAYBOOK, extra_vars={"inv": inv, "prometheus_url": lab.prometheus_url})
        assert run.rc == 0, run.explain()
        state.update(inv=inv, run=run)
        state["sampler"].start()
        yield state
    finally:
        state["sampler"].stop.set()
        sim.stop()
        cleanup(env, f)


def cleanup(env: Lab, f: PoolTarget) -> None:
    try:
        for name in [j.metadata.name for j in env.batch.list_namespaced_job(NS).items]:
            env.batch.delete_namespaced_job(name, NS, propagation_policy="Background")
    except client.ApiException:
        pass
    for call in (lambda: env.custom.delete_namespaced_custom_object("keda.sh", "v1alpha1", f.namespace, "scaledobjects",
                                                                    "gpuaas-pool-" + POOL),
                 lambda: env.custom.delete_namespaced_custom_object(f.group, f.version, f.namespace, f.plural, TARGET)):
        try:
            call()
        except client.ApiException:
            pass
    # the garbage collector may delete the Machines first (owner reference to the target): 404 is fine
    for m in env.machines():
        try:
            env.custom.delete_namespaced_custom_object(f.group, f.machine_version, f.namespace, "machines", m["metadata"]["name"])
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    for n in env.pool_nodes():
        try:
            env.core.delete_node(n.metadata.name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    for ns in ([NS] if f.openshift else [NS, f.namespace]):
        try:
            env.core.delete_namespace(ns)
        except client.ApiException:
            pass


def simulator_events(path: Path, event: str) -> list:
    return [line.split() for line in path.read_text().splitlines() if line.split()[1:2] == [event]]


def test_pool_objects_come_from_the_inventory(pool):
    env = pool["env"]
    f = env.target
    so = env.custom.get_namespaced_custom_object("keda.sh", "v1alpha1", f.namespace, "scaledobjects", "gpuaas-pool-" + POOL)
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "%s/%s" % (f.group, f.version), "kind": f.kind, "name": TARGET}
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (0, MAX_NODES)
    trigger = so["spec"]["triggers"][0]
    assert trigger["metricType"] == "AverageValue" and trigger["metadata"]["threshold"] == str(GPUS)
    assert 'kueue_cluster_queue_resource_reservation{flavor="%s",resource="nvidia.com/gpu"' % FLAVOR in trigger["metadata"]["query"]
    # the pool is at 0 nodes, yet quota for the pool's maximum validated: capacity counts max x GPUs per node
    result = pool["run"].task_results("ScaledObject")[0]
    assert result["capacity"][FLAVOR]["nvidia.com/gpu"] == str(MAX_NODES * GPUS)
    assert env.replicas() == 0 and not env.pool_nodes()


def test_node_pools_is_idempotent(pool, lab, run_playbook):
    again = run_playbook(PLAYBOOK, extra_vars={"inv": pool["inv"], "prometheus_url": lab.prometheus_url}, diff=True)
    assert again.rc == 0, again.explain()
    result = again.task_results("ScaledObject")[0]
    assert result["changed"] is False and result["summary"]["unchanged"] == 1, result


def test_quota_above_the_pools_maximum_is_refused(pool, lab, run_playbook):
    inv = inventory(pool["env"].target, quota=MAX_NODES * GPUS + 8)
    run = run_playbook(PLAYBOOK, extra_vars={"inv": inv, "prometheus_url": lab.prometheus_url}, check=True)
    assert run.rc != 0
    assert "quotas ask for 40 nvidia.com/gpu on flavor %r" % FLAVOR in run.stdout, run.explain()


def test_template_without_the_flavors_labels_is_refused(pool, lab, run_playbook):
    env = pool["env"]
    # the inventory says the right labels, but the live template gives its nodes other ones
    f = env.target
    bad = node_labels(f)
    bad[f.pool_label] = "elsewhere"
    patch = ({"spec": {"template": {"spec": {"metadata": {"labels": bad}}}}} if f.openshift
             else {"spec": {"template": {"metadata": {"labels": bad}}}})
    env.custom.patch_namespaced_custom_object(f.group, f.version, f.namespace, f.plural, TARGET, patch)
    try:
        run = run_playbook(PLAYBOOK, extra_vars={"inv": pool["inv"], "prometheus_url": lab.prometheus_url}, check=True)
        assert run.rc != 0
        assert "does not give its nodes the node labels of flavor" in run.stdout, run.explain()
        assert "%s=%s" % (f.pool_label, POOL) in run.stdout
    finally:
        fix = node_labels(f)
        patch = ({"spec": {"template": {"spec": {"metadata": {"labels": fix}}}}} if f.openshift
                 else {"spec": {"template": {"metadata": {"labels": fix}}}})
        env.custom.patch_namespaced_custom_object(f.group, f.version, f.namespace, f.plural, TARGET, patch)


def test_four_jobs_grow_the_pool_to_four_nodes_and_back_to_zero(pool):
    env = pool["env"]
    names = ["wave1-%d" % i for i in range(4)]
    for name in names:
        env.job(name, GPUS, seconds=JOB_SECONDS)
    admitted = wait_until(lambda: len([w for w in env.workloads() if true_since(w, "Admitted")]) == 4 and env.workloads(),
                          30, "four Workloads admitted (quota 32, the pool at 0 nodes)")
    last_admission = max(true_since(w, "Admitted") for w in admitted)
    ready = wait_until(lambda: len(env.ready_pool_nodes()) == MAX_NODES and env.ready_pool_nodes(), UP_BOUND + 5,
                       "four Ready pool nodes")
    up = time.time() - last_admission
    assert up <= UP_BOUND, "admission -> 4 Ready nodes took %.0f s" % up
    assert env.replicas() == MAX_NODES
    # the simulated DCGM exporter follows the live nodes: 32 GPUs of the pool's nodes are scraped
    wait_until(lambda: env.prom('count(DCGM_FI_DEV_GPU_UTIL{Hostname=~"%s-.*"})' % TARGET) == MAX_NODES * GPUS, 30,
               "DCGM series of the pool's 32 GPUs in Prometheus")
    wait_until(lambda: env.jobs_done(names), 90, "every Job succeeded")
    pods = env.core.list_namespaced_pod(NS).items
    nodes = [p.spec.node_name for p in pods if p.metadata.labels.get("job-name") in names]
    assert len(nodes) == 4 and len(set(nodes)) == 4 and set(nodes) <= set(ready), nodes
    for w in env.workloads():
        assert not true_since(w, "Evicted") and not true_since(w, "Preempted"), w["status"]["conditions"]
    for name in names:
        assert (env.batch.read_namespaced_job(name, NS).status.failed or 0) == 0
    finished = max(true_since(w, "Finished") for w in env.workloads())
    wait_until(lambda: env.replicas() == 0 and not env.pool_nodes() and not env.machines(), DOWN_BOUND + 5,
               "the pool back at 0 nodes", interval=1)
    down = time.time() - finished
    assert down <= DOWN_BOUND, "last completion -> 0 nodes took %.0f s" % down
    assert simulator_events(pool["log"], "KILLED") == []
    print("\nnode_pools: admission -> 4 Ready nodes %.1f s; last completion -> 0 nodes %.1f s" % (up, down))
    for name in names:
        env.batch.delete_namespaced_job(name, NS, propagation_policy="Background")
    wait_until(lambda: not env.workloads(), 30, "the first wave's Workloads gone")


def test_six_jobs_never_more_than_four_nodes_and_the_second_wave_reuses_them(pool):
    env = pool["env"]
    start = time.time()
    names = ["wave2-%d" % i for i in range(6)]
    for name in names:
        env.job(name, GPUS, seconds=JOB_SECONDS)

    def four_admitted_two_waiting():
        ws = env.workloads()
        adm = [w for w in ws if true_since(w, "Admitted")]
        return len(ws) == 6 and len(adm) == 4 and ws
    ws = wait_until(four_admitted_two_waiting, 30, "four Workloads admitted, two waiting for quota")
    waiting = {w["metadata"]["name"] for w in ws if not true_since(w, "Admitted")}
    assert len(waiting) == 2
    wait_until(lambda: len(env.ready_pool_nodes()) == MAX_NODES, UP_BOUND + 5, "four Ready pool nodes")
    first_nodes = set(env.ready_pool_nodes())
    wait_until(lambda: env.jobs_done(names), 120, "all six Jobs succeeded")
    pods = {p.metadata.labels.get("job-name"): p.spec.node_name for p in env.core.list_namespaced_pod(NS).items
            if p.metadata.labels.get("job-name") in names}
    owners = {w["metadata"]["name"]: w["metadata"]["ownerReferences"][0]["name"] for w in env.workloads()}
    second = [owners[w] for w in waiting]
    assert all(pods[j] in first_nodes for j in second), (pods, first_nodes)
    most = max(r for t_, r in pool["sampler"].samples if t_ >= start)
    assert most == MAX_NODES, "replicas went to %d" % most
    for w in env.workloads():
        assert not true_since(w, "Evicted"), w["status"]["conditions"]
    for name in names:
        env.batch.delete_namespaced_job(name, NS, propagation_policy="Background")
    wait_until(lambda: env.replicas() == 0 and not env.pool_nodes(), DOWN_BOUND + 5, "the pool back at 0 nodes", interval=1)
    wait_until(lambda: not env.workloads(), 30, "the second wave's Workloads gone")


def test_scale_down_removes_exactly_the_idle_nodes(pool, run_playbook):
    env = pool["env"]
    env.job("busy", GPUS, seconds=600)
    for i in range(3):
        env.job("short-%d" % i, GPUS, seconds=3)
    wait_until(lambda: len(env.ready_pool_nodes()) == MAX_NODES, UP_BOUND + 20, "four Ready pool nodes")
    wait_until(lambda: env.jobs_done(["short-0", "short-1", "short-2"]), 60, "the three short Jobs succeeded")
    busy_pod = [p for p in env.core.list_namespaced_pod(NS).items if p.metadata.labels.get("job-name") == "busy"][0]
    busy_node = busy_pod.spec.node_name
    assert busy_pod.status.phase == "Running"
    # the HPA does not shrink the pool on its own (scaleDown disabled): still four nodes, one busy
    time.sleep(2 * POLLING)
    assert env.replicas() == MAX_NODES and len(env.pool_nodes()) == MAX_NODES
    idle = set(env.ready_pool_nodes()) - {busy_node}

    check = run_playbook(SCALEDOWN, extra_vars={"inv": pool["inv"]}, check=True)
    assert check.rc == 0, check.explain()
    planned = check.task_results("Remove idle")[0]["pools"][POOL]
    assert set(planned["removed"]) == idle and planned["busy"] == [busy_node]
    assert env.replicas() == MAX_NODES and not any(n.spec.unschedulable for n in env.pool_nodes())

    run = run_playbook(SCALEDOWN, extra_vars={"inv": pool["inv"]})
    assert run.rc == 0, run.explain()
    done = run.task_results("Remove idle")[0]["pools"][POOL]
    assert set(done["removed"]) == idle and done["busy"] == [busy_node]
    assert (done["replicas_before"], done["replicas_after"]) == (MAX_NODES, 1)
    wait_until(lambda: [n.metadata.name for n in env.pool_nodes()] == [busy_node], 30, "only the busy node left")
    deleted = simulator_events(pool["log"], "machine-deleted")
    marked = [e for e in deleted if "marked=True" in " ".join(e)]
    assert {e[2].rsplit("/", 1)[1] for e in marked[-3:]} == idle
    assert simulator_events(pool["log"], "KILLED") == []
    assert env.core.read_namespaced_pod(busy_pod.metadata.name, NS).status.phase == "Running"
    # a second run finds nothing to remove (idempotent); the busy node stays
    again = run_playbook(SCALEDOWN, extra_vars={"inv": pool["inv"]})
    assert again.rc == 0 and again.changed == 0, again.explain()
    assert env.replicas() == 1


ROLE = local_play("""
  roles:
    - role: gpuaas.platform.tenants
""")
TENANCY_TASK = "Reconcile the GPU tenancy"


def test_the_tenants_role_applies_the_pools_and_prunes_a_removed_pool(pool, lab, run_playbook):
    env = pool["env"]
    f = env.target
    inv = pool["inv"]
    role_vars = {"gpuaas_flavors": [inv["flavor"]], "gpuaas_tenants": inv["tenants"], "gpuaas_node_pools": inv["pools"],
                 "gpuaas_prometheus": {"url": lab.prometheus_url}, "gpuaas_tenants_lock": False}
    env.custom.delete_namespaced_custom_object("keda.sh", "v1alpha1", f.namespace, "scaledobjects", "gpuaas-pool-" + POOL)
    run = run_playbook(ROLE, extra_vars=role_vars)
    assert run.rc == 0, run.explain()
    so = env.custom.get_namespaced_custom_object("keda.sh", "v1alpha1", f.namespace, "scaledobjects", "gpuaas-pool-" + POOL)
    assert so["spec"]["scaleTargetRef"]["name"] == TARGET
    # quota 32 on a flavor whose nodes offer 0 GPUs: the role passed because the pools' maximum counts
    (result,) = run.task_results(TENANCY_TASK)  # one call: the pools are a step of the tenancy run
    assert result["capacity"][FLAVOR]["nvidia.com/gpu"] == "32"
    assert result["node_pools"]["pools"][POOL]["target"].endswith("/" + TARGET)
    # without the pool the flavor's nodes offer 0 GPUs: the quota is only accepted as an over-commit (warning);
    # safe mode: the pool's ScaledObject is kept and reported until prune is asked for
    run = run_playbook(ROLE, extra_vars=dict(role_vars, gpuaas_node_pools=[], gpuaas_allow_overcommit=True))
    assert run.rc == 0, run.explain()
    kept = run.task_results(TENANCY_TASK)[0]["node_pools"]
    assert kept["deleted"] == [] and [(d["kind"], d["name"]) for d in kept["drift"]] == [("ScaledObject", "gpuaas-pool-" + POOL)]
    env.custom.get_namespaced_custom_object("keda.sh", "v1alpha1", f.namespace, "scaledobjects", "gpuaas-pool-" + POOL)
    run = run_playbook(ROLE, extra_vars=dict(role_vars, gpuaas_node_pools=[], gpuaas_allow_overcommit=True,
                                             gpuaas_tenants_prune=True))
    assert run.rc == 0, run.explain()
    (result,) = run.task_results(TENANCY_TASK)
    deleted = result["node_pools"]["deleted"]
    assert [(d["kind"], d["name"]) for d in deleted] == [("ScaledObject", "gpuaas-pool-" + POOL)], deleted
    assert ("ScaledObject", "gpuaas-pool-" + POOL) in [(d["kind"], d["name"]) for d in result["deleted"]]
