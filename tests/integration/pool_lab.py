# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-pool suites' view of the lab (test_node_pools.py: a KEDA pool; test_node_pools_provisioning.py: a
ProvisioningRequest pool; bench/node_pools.py reuses the first): the pool's target on either flavour of the lab (an
OpenShift MachineSet on LAB_FLAVOR=openshift, a Cluster API MachineDeployment on the Kubernetes lab), the API
clients as the lab admin, and the machine-controller SIMULATOR (lab/simulators/machine_simulator.py) standing in for
the cloud."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kubernetes import client, config

REPO = Path(__file__).resolve().parents[2]
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KWOK_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
GPU_TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


class PoolTarget:
    """What differs between the OpenShift MachineSet and the Cluster API MachineDeployment. ``name``: the target
    (its Machines and nodes are named ``<name>-...``); its nodes carry ``pool_label=<pool>``; on Cluster API it lives
    in ``capi_namespace`` (the suite makes it), on OpenShift in openshift-machine-api."""

    def __init__(self, lab_flavor: str, name: str, pool: str, capi_namespace: str) -> None:
        self.openshift = lab_flavor == "openshift"
        self.name, self.pool = name, pool
        if self.openshift:
            self.kind, self.group, self.version, self.plural = "MachineSet", "machine.openshift.io", "v1beta1", "machinesets"
            self.machine_version, self.namespace = "v1beta1", "openshift-machine-api"
            self.pool_label = "gpuaas.io/pool"
            self.delete_annotation = "machine.openshift.io/delete-machine"
            self.size_prefix = "machine.openshift.io/cluster-api-autoscaler-node-group-"
        else:
            self.kind, self.group, self.version, self.plural = ("MachineDeployment", "cluster.x-k8s.io", "v1beta2",
                                                                "machinedeployments")
            self.machine_version, self.namespace = "v1beta2", capi_namespace
            self.pool_label = "node.cluster.x-k8s.io/gpuaas-pool"
            self.delete_annotation = "cluster.x-k8s.io/delete-machine"
            self.size_prefix = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-"

    def body(self, node_labels: dict, annotations: dict, random_deletion: bool = False) -> dict:
        """The target at 0 replicas whose nodes get ``node_labels`` and the GPU taint; ``annotations`` on the target
        (scale-from-zero capacity for the machine SIMULATOR, a node group's size); ``random_deletion``: a scale-down
        may remove any of its Machines (deletePolicy / deletion.order Random)."""
        select = {"gpuaas.io/machine-pool": self.name}
        meta = {"name": self.name, "namespace": self.namespace, "annotations": dict(annotations)}
        if self.openshift:
            spec: dict = {"replicas": 0, "selector": {"matchLabels": select},
                          "template": {"metadata": {"labels": select},
                                       "spec": {"metadata": {"labels": dict(node_labels)}, "taints": GPU_TAINTS,
                                                "providerSpec": {"value": {"apiVersion": "lab.gpuaas.io/v1",
                                                                           "kind": "KwokProviderSpec"}}}}}
            if random_deletion:
                spec["deletePolicy"] = "Random"
        else:
            spec = {"clusterName": "lab", "replicas": 0, "selector": {"matchLabels": select},
                    "template": {"metadata": {"labels": dict(select, **node_labels)},
                                 "spec": {"clusterName": "lab", "bootstrap": {"dataSecretName": "lab-bootstrap"},
                                          "infrastructureRef": {"apiGroup": "infrastructure.lab.gpuaas.io",
                                                                "kind": "KwokMachineTemplate", "name": "kwok"},
                                          "taints": [dict(t_, propagation="Always") for t_ in GPU_TAINTS]}}}
            if random_deletion:
                spec["deletion"] = {"order": "Random"}
        return {"apiVersion": "%s/%s" % (self.group, self.version), "kind": self.kind, "metadata": meta, "spec": spec}


class PoolLab:
    """The lab as its admin (core, batch and custom-objects clients) for one pool ``target`` and the tenant
    namespace ``namespace`` its Jobs run in."""

    def __init__(self, lab, target: PoolTarget, namespace: str) -> None:
        api = config.new_client_from_config(config_file=lab.kubeconfig, context=lab.admin_context)
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.lab = lab
        self.target = target
        self.namespace = namespace

    def create_target(self, body: dict) -> None:
        """The target ``body`` in its namespace (made first: on Cluster API the suite's own, on OpenShift
        openshift-machine-api, which may exist already)."""
        t_ = self.target
        try:
            self.core.create_namespace({"metadata": {"name": t_.namespace}})
        except client.ApiException as exc:
            if not (t_.openshift and exc.status == 409):
                raise
        self.custom.create_namespaced_custom_object(t_.group, t_.version, t_.namespace, t_.plural, body)

    def live_target(self) -> dict:
        t_ = self.target
        return self.custom.get_namespaced_custom_object(t_.group, t_.version, t_.namespace, t_.plural, t_.name)

    def replicas(self) -> int:
        return int(self.live_target()["spec"].get("replicas") or 0)

    def pool_nodes(self) -> list:
        return self.core.list_node(label_selector="%s=%s" % (self.target.pool_label, self.target.pool)).items

    def pool_node_names(self) -> list:
        return [n.metadata.name for n in self.pool_nodes()]

    def workloads(self) -> list:
        return self.custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", self.namespace, "workloads")["items"]

    def job(self, name: str, gpus: int, pods: int = 1, seconds: int = 3600) -> None:
        """A Job in LocalQueue default of ``pods`` pods of ``gpus`` GPUs each, every pod running ``seconds`` on its
        KWOK node."""
        self.batch.create_namespaced_job(self.namespace, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {KWOK_DELAY: "%ds" % seconds}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
                    "name": "train", "image": "registry.invalid/lab/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}})


class MachineSimulator:
    """The machine-controller SIMULATOR for the pool's target only, its log at ``log_path``; started at once."""

    def __init__(self, lab, target: PoolTarget, log_path: Path, provision_seconds: int) -> None:
        self.log_path = log_path
        self.log = open(log_path, "w")  # noqa: SIM115 - handed to the process, closed by stop()
        self.proc = subprocess.Popen([sys.executable, str(REPO / "lab" / "simulators" / "machine_simulator.py"),
                                      "--kubeconfig", str(lab.dir / "lab-tools.kubeconfig"), "--kinds", target.kind,
                                      "--only", target.name, "--provision-seconds", str(provision_seconds)],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
