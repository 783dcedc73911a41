#!/usr/bin/env python3
"""Machine-controller SIMULATOR for the lab (issue 13): node pools without clouds.

No cloud provider exists here, so this process stands in for the OpenShift Machine API controller
(MachineSet -> Machine -> Node) and for the Cluster API MachineDeployment controller (MachineDeployment ->
Machine -> Node; the intermediate CAPI MachineSet is skipped). It is a SIMULATOR: it only does what the
collection's node-pool scaling depends on, through the real apiserver, as the ``lab:tools`` user:

* replicas -> Machines: a target with fewer Machines than ``spec.replicas`` gets new Machines (labels from the
  template, owner reference to the target); each Machine gets a KWOK Node after ``--provision-seconds`` with
  the template's node labels (MachineSet ``spec.template.spec.metadata.labels``, MachineDeployment
  ``spec.template.metadata.labels`` of the domains Cluster API propagates: ``node.cluster.x-k8s.io``,
  ``node-role.kubernetes.io``, ``node-restriction.kubernetes.io``) and taints (MachineSet ``spec.template.spec.taints``), and the capacity
  of the scale-from-zero annotations (``capacity.cluster-autoscaler.kubernetes.io/gpu-count`` + ``gpu-type``,
  or OpenShift's ``machine.openshift.io/GPU``, ``vCPU``, ``memoryMb``); KWOK then makes it Ready;
* more Machines than replicas -> the surplus is deleted: Machines annotated ``machine.openshift.io/delete-machine``
  / ``cluster.x-k8s.io/delete-machine`` first, then by the delete policy (MachineSet ``spec.deletePolicy``,
  MachineDeployment ``spec.deletion.order``: Random (default), Newest, Oldest). A deleted Machine's Node is
  deleted with it; pods still bound to it are logged as ``KILLED`` (a real controller would drain them);
* status: Machine ``status.phase`` (Provisioning/Provisioned/Running) and ``nodeRef``; target
  ``status.replicas``, ``readyReplicas``, ``availableReplicas``, ``observedGeneration`` and the scale selector
  (MachineSet ``status.labelSelector``, MachineDeployment ``status.selector``) the HPA needs past 1 replica.

Every action is one line on stdout (``<time> <event> <kind>/<ns>/<name> ...``) so tests can read the timeline.
Lab tooling only: nothing in the collection imports this file.
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
import signal
import string
import sys
import time

from kubernetes import client, config

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
MACHINE_OF_NODE = "lab.gpuaas.io/machine"
TARGETS = {
    # kind: (group, version, plural, machine version, delete annotation, selector status field)
    "MachineSet": ("machine.openshift.io", "v1beta1", "machinesets", "v1beta1",
                   "machine.openshift.io/delete-machine", "labelSelector"),
    "MachineDeployment": ("cluster.x-k8s.io", "v1beta2", "machinedeployments", "v1beta2",
                          "cluster.x-k8s.io/delete-machine", "selector"),
}
GPU_COUNT = ("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "machine.openshift.io/GPU")
GPU_TYPE = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
CPU = ("capacity.cluster-autoscaler.kubernetes.io/cpu", "machine.openshift.io/vCPU")
MEMORY = ("capacity.cluster-autoscaler.kubernetes.io/memory", "machine.openshift.io/memoryMb")


def log(event: str, what: str, detail: str = "") -> None:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    print("%s %s %s %s" % (now, event, what, detail), flush=True)


def first(annotations: dict, keys) -> str | None:
    for k in keys:
        if annotations.get(k):
            return str(annotations[k])
    return None


def node_capacity(annotations: dict) -> dict:
    """Capacity of a new node from the target's scale-from-zero annotations."""
    cap = {"cpu": first(annotations, CPU) or "32", "pods": "250"}
    mem = first(annotations, MEMORY)
    if mem and mem.isdigit() and MEMORY[1] in annotations and annotations.get(MEMORY[1]) == mem:
        cap["memory"] = "%sMi" % mem  # machine.openshift.io/memoryMb is in MiB
    else:
        cap["memory"] = mem or "128Gi"
    gpus = first(annotations, GPU_COUNT)
    if gpus and gpus != "0":
        cap[annotations.get(GPU_TYPE) or "nvidia.com/gpu"] = gpus
    return cap


def capi_propagates(key: str) -> bool:
    """Cluster API (>= 1.4) syncs Machine labels of these domains to the Node."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return (domain == "node.cluster.x-k8s.io" or domain.endswith(".node.cluster.x-k8s.io")
            or domain in ("node-role.kubernetes.io", "node-restriction.kubernetes.io")
            or domain.endswith(".node-restriction.kubernetes.io"))


def template(kind: str, target: dict) -> tuple[dict, dict, list]:
    """(machine labels, node labels, node taints) of the target's template (also read by the cluster-autoscaler
    SIMULATOR, lab/simulators/autoscaler_simulator.py: the nodes a scale-up would give)."""
    tpl = target["spec"].get("template") or {}
    machine_labels = dict((tpl.get("metadata") or {}).get("labels") or {})
    if kind == "MachineSet":
        spec_meta = (tpl.get("spec") or {}).get("metadata") or {}
        return machine_labels, dict(spec_meta.get("labels") or {}), list((tpl.get("spec") or {}).get("taints") or [])
    # Cluster API propagates only these label domains from the Machine to its Node
    node_labels = {k: v for k, v in machine_labels.items() if capi_propagates(k)}
    # v1beta2 taints carry a propagation mode (Always | OnInitialization) that a Node taint does not have
    taints = [{k: v for k, v in t_.items() if k != "propagation"} for t_ in (tpl.get("spec") or {}).get("taints") or []]
    return machine_labels, node_labels, taints


def selector_string(selector: dict) -> str:
    parts = ["%s=%s" % kv for kv in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        if op == "In":
            parts.append("%s in (%s)" % (expr["key"], ",".join(expr.get("values") or [])))
        elif op == "NotIn":
            parts.append("%s notin (%s)" % (expr["key"], ",".join(expr.get("values") or [])))
        elif op == "Exists":
            parts.append(expr["key"])
        elif op == "DoesNotExist":
            parts.append("!" + expr["key"])
    return ",".join(parts)


class Simulator:
    def __init__(self, kinds, provision_seconds: float, seed: int | None, only: str | None = None) -> None:
        self.custom = client.CustomObjectsApi()
        self.core = client.CoreV1Api()
        self.kinds = kinds
        self.provision_seconds = provision_seconds
        self.random = random.Random(seed)
        self.only = set(only.split(",")) if only else None  # target names this instance manages (None: all)
        self.created_at: dict[str, float] = {}  # machine uid -> monotonic creation (for the provisioning delay)

    # -- helpers ------------------------------------------------------------------------------------------
    def machines(self, kind: str, ns: str) -> list:
        group, _, _, mver, _, _ = TARGETS[kind]
        return self.custom.list_namespaced_custom_object(group, mver, ns, "machines")["items"]

    def template(self, kind: str, target: dict) -> tuple[dict, dict, list]:
        return template(kind, target)

    def delete_policy(self, kind: str, target: dict) -> str:
        spec = target.get("spec") or {}
        if kind == "MachineSet":
            return spec.get("deletePolicy") or "Random"
        return ((spec.get("deletion") or {}).get("order")) or "Random"

    # -- one target ------------------------------------------------------------------------------------------
    def reconcile_target(self, kind: str, target: dict) -> None:
        group, version, plural, mver, delete_ann, sel_field = TARGETS[kind]
        meta = target["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        what = "%s/%s/%s" % (kind, ns, name)
        want = (target.get("spec") or {}).get("replicas")
        want = 1 if want is None else int(want)
        owned = [m for m in self.machines(kind, ns)
                 if any(o.get("uid") == uid for o in (m["metadata"].get("ownerReferences") or []))
                 and not m["metadata"].get("deletionTimestamp")]
        machine_labels, node_labels, taints = self.template(kind, target)
        if len(owned) < want:
            for _ in range(want - len(owned)):
                suffix = "".join(self.random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
                mname = "%s-%s" % (name, suffix)
                body = {
                    "apiVersion": "%s/%s" % (group, mver), "kind": "Machine",
                    "metadata": {"name": mname, "namespace": ns, "labels": machine_labels,
                                 "ownerReferences": [{"apiVersion": "%s/%s" % (group, version), "kind": kind,
                                                      "name": name, "uid": uid, "controller": True,
                                                      "blockOwnerDeletion": True}]},
                    "spec": dict(((target["spec"].get("template") or {}).get("spec")) or {}),
                }
                if kind == "MachineDeployment":  # as Cluster API labels the Machines of a MachineDeployment
                    body["metadata"]["labels"] = dict(machine_labels, **{"cluster.x-k8s.io/deployment-name": name})
                if kind == "MachineSet":
                    body["spec"].pop("metadata", None)
                    body["spec"]["providerID"] = "kwok://%s" % mname
                else:
                    body["spec"].setdefault("clusterName", target["spec"].get("clusterName", "lab"))
                created = self.custom.create_namespaced_custom_object(group, mver, ns, "machines", body)
                self.created_at[created["metadata"]["uid"]] = time.monotonic()
                owned.append(created)
                log("machine-created", "Machine/%s/%s" % (ns, mname), "for %s replicas=%d" % (what, want))
        elif len(owned) > want:
            surplus = len(owned) - want
            marked = [m for m in owned if delete_ann in (m["metadata"].get("annotations") or {})]
            rest = [m for m in owned if m not in marked]
            policy = self.delete_policy(kind, target)
            if policy == "Newest":
                rest.sort(key=lambda m: m["metadata"]["creationTimestamp"], reverse=True)
            elif policy == "Oldest":
                rest.sort(key=lambda m: m["metadata"]["creationTimestamp"])
            else:
                self.random.shuffle(rest)
            for victim in (marked + rest)[:surplus]:
                self.delete_machine(kind, victim, "%s replicas=%d policy=%s marked=%s" % (
                    what, want, policy, victim in marked))
                owned.remove(victim)
        # machines -> nodes, machine status
        ready = 0
        for machine in owned:
            if self.reconcile_machine(kind, target, machine, node_labels, taints):
                ready += 1
        status = {"replicas": len(owned), "readyReplicas": ready, "availableReplicas": ready,
                  "observedGeneration": meta.get("generation", 1),
                  sel_field: selector_string((target["spec"].get("selector")) or {})}
        if kind == "MachineSet":
            status["fullyLabeledReplicas"] = len(owned)
        else:
            status["upToDateReplicas"] = len(owned)
        current = target.get("status") or {}
        if any(current.get(k) != v for k, v in status.items()):
            self.custom.patch_namespaced_custom_object_status(group, version, ns, plural, name, {"status": status})

    def reconcile_machine(self, kind: str, target: dict, machine: dict, node_labels: dict, taints: list) -> bool:
        """Create the machine's node once provisioned; keep its status. True when its node is Ready."""
        group, _, _, mver, _, _ = TARGETS[kind]
        meta = machine["metadata"]
        ns, mname = meta["namespace"], meta["name"]
        started = self.created_at.setdefault(meta["uid"], -1e9)  # made before this process: provisioned
        try:
            node = self.core.read_node(mname)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            node = None
        phase = "Provisioning"
        if node is None and time.monotonic() - started >= self.provision_seconds:
            labels = {"kubernetes.io/hostname": mname, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                      "type": "kwok"}
            labels.update(node_labels)
            cap = node_capacity((target["metadata"].get("annotations") or {}))
            body = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": mname, "labels": labels,
                                 "annotations": {KWOK_ANNOTATION: "fake", MACHINE_OF_NODE: "%s/%s" % (ns, mname)}},
                    "spec": {"taints": taints, "providerID": "kwok://%s" % mname}}
            self.core.create_node(body)
            self.core.patch_node_status(mname, {"status": {"capacity": cap, "allocatable": cap}})
            log("node-created", "Node/%s" % mname, "machine=%s/%s capacity=%s" % (ns, mname, cap))
            node = self.core.read_node(mname)
        is_ready = False
        if node is not None:
            phase = "Provisioned"
            conds = {c.type: c.status for c in (node.status.conditions or [])}
            if conds.get("Ready") == "True":
                phase, is_ready = "Running", True
        status = {"phase": phase}
        if node is not None:
            status["nodeRef"] = {"kind": "Node", "name": mname} if kind == "MachineSet" else {"name": mname}
        current = machine.get("status") or {}
        if current.get("phase") != status["phase"] or current.get("nodeRef") != status.get("nodeRef"):
            self.custom.patch_namespaced_custom_object_status(group, mver, ns, "machines", mname, {"status": status})
            if phase == "Running" and current.get("phase") != "Running":
                log("node-ready", "Node/%s" % mname, "machine=%s/%s" % (ns, mname))
        return is_ready

    def delete_machine(self, kind: str, machine: dict, why: str) -> None:
        group, _, _, mver, _, _ = TARGETS[kind]
        ns, mname = machine["metadata"]["namespace"], machine["metadata"]["name"]
        pods = [p for p in self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % mname).items
                if p.status.phase in ("Pending", "Running")]
        if pods:
            log("KILLED", "Node/%s" % mname, "running pods %s" % ",".join("%s/%s" % (p.metadata.namespace, p.metadata.name)
                                                                          for p in pods))
        try:
            self.core.delete_node(mname)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        try:
            self.custom.delete_namespaced_custom_object(group, mver, ns, "machines", mname)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        log("machine-deleted", "Machine/%s/%s" % (ns, mname), why)

    def served(self, kind: str) -> bool:
        group, version, plural, _, _, _ = TARGETS[kind]
        try:
            self.custom.list_cluster_custom_object(group, version, plural, limit=1)
            return True
        except client.ApiException:
            return False

    def loop(self, interval: float) -> None:
        kinds = [k for k in self.kinds if self.served(k)]
        log("started", ",".join(kinds) or "nothing", "provision_seconds=%s" % self.provision_seconds)
        while True:
            for kind in kinds:
                group, version, plural, _, _, _ = TARGETS[kind]
                try:
                    for target in self.custom.list_cluster_custom_object(group, version, plural)["items"]:
                        if self.only is not None and target["metadata"]["name"] not in self.only:
                            continue
                        if not target["metadata"].get("deletionTimestamp"):
                            self.reconcile_target(kind, target)
                except client.ApiException as exc:  # a conflict or a blip: next round
                    log("error", kind, "%s %s" % (exc.status, exc.reason))
            time.sleep(interval)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--kinds", default="MachineSet,MachineDeployment")
    ap.add_argument("--provision-seconds", type=float, default=3.0, help="Machine created -> Node created")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=None, help="for the Random delete policy and machine names")
    ap.add_argument("--only", default=None, help="comma-separated target names to manage (default: every target)")
    args = ap.parse_args()
    config.load_kube_config(args.kubeconfig)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    Simulator([k for k in args.kinds.split(",") if k], args.provision_seconds, args.seed, args.only).loop(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
