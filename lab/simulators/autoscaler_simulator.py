#!/usr/bin/env python3
"""Cluster-autoscaler SIMULATOR for the lab (issue 23): the ProvisioningRequest side of the cluster autoscaler.

No cloud exists here and the real cluster-autoscaler needs one (its clusterapi provider scales MachineSets /
MachineDeployments and then waits for cloud machines). This process stands in for the part Kueue's
ProvisioningRequest admission check talks to, and only that part, through the real apiserver as user
``lab:autoscaler``:

* it watches ``autoscaling.x-k8s.io/v1`` ProvisioningRequests of the classes it serves (``--classes``; upstream's
  ``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` and ``check-capacity.autoscaling.x-k8s.io``), sets
  ``Accepted=True`` and reads the PodTemplates they reference (``spec.podSets[].podTemplateRef``, ``count``);
* capacity is judged on the accelerator resources the pods request (names with a ``/``: ``nvidia.com/gpu`` …), their
  node selector and their tolerations against the nodes' taints; existing nodes give their allocatable minus the pods
  bound to them and minus the capacity booked for other Provisioned requests whose pods have not arrived yet;
* node groups are the MachineSets / MachineDeployments carrying the cluster autoscaler's size annotations
  (``machine.openshift.io/cluster-api-autoscaler-node-group-max-size`` on OpenShift, set by a MachineAutoscaler;
  ``cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size`` on Cluster API); a new node of a group has the
  labels and taints of its template and the capacity of its scale-from-zero annotations (read with the machine
  SIMULATOR's own functions, lab/simulators/machine_simulator.py, which then makes the Machines and KWOK Nodes);
  replicas not yet backed by a node count as upcoming empty nodes, as the autoscaler counts upcoming nodes;
* ``best-effort-atomic-scale-up``: everything fits the existing capacity -> ``Provisioned=True``
  ``CapacityIsFound``; else the pods that do not fit must all fit new nodes of ONE group within its max size ->
  the group's ``spec.replicas`` is raised and ``Provisioned=True`` ``CapacityIsProvisioned`` at once (upstream admits
  right after requesting the scale-up, before the nodes exist); otherwise ``Provisioned=False``
  ``CapacityIsNotFound`` "Capacity is not found, CA will try to find it later." and it is tried again every round;
* ``check-capacity``: only the existing capacity: ``CapacityIsFound`` or ``CapacityIsNotFound``, never a scale-up;
* a booking lasts ``--booking-seconds`` (upstream 10 min) after ``Provisioned=True``, then ``BookingExpired=True``
  ``CapacityReservationTimeExpired`` releases it.

Messages and reasons are upstream's (k8s.io/autoscaler cluster-autoscaler/provisioningrequest/conditions/
conditions.go, besteffortatomic/provisioning_class.go). What it does NOT do: scale down (the real autoscaler removes
unneeded nodes after --scale-down-unneeded-time; here nodes stay until a test lowers replicas), ``Failed`` (upstream
sets it when the request cannot be processed, e.g. its pods cannot be created), ``CapacityRevoked``, CPU/memory
fitting, affinity, topology spread, other classes. Every action is one line on stdout.
Lab tooling only: nothing in the collection imports this file.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_simulator import TARGETS, node_capacity, template  # noqa: E402  (the machine SIMULATOR's template reading)

PR = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
# the pod annotation that names the request whose booking the pod consumes (Kueue sets it through podSetUpdates)
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
MAX_SIZE = {"MachineSet": "machine.openshift.io/cluster-api-autoscaler-node-group-max-size",
            "MachineDeployment": "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"}
# cluster-autoscaler/provisioningrequest/conditions/conditions.go
ACCEPTED = ("Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
FOUND = ("CapacityIsFound", "Capacity is found in the cluster")
PROVISIONED = ("CapacityIsProvisioned", "Capacity is found in the cluster")
NOT_FOUND = ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
BOOKING_EXPIRED = ("CapacityReservationTimeExpired", "Capacity reservation time is expired")


def log(event: str, what: str, detail: str = "") -> None:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    print("%s %s %s %s" % (now, event, what, detail), flush=True)


# -- pure planning (unit-tested: tests/unit/test_autoscaler_simulator.py) ------------------------------------

def accelerators(resources: dict) -> dict:
    """The accelerator amounts of a resource map (names with a '/', e.g. nvidia.com/gpu), as numbers."""
    out = {}
    for name, amount in (resources or {}).items():
        if "/" in name and not name.startswith(("kubernetes.io/", "hugepages-")):
            try:
                out[name] = float(amount)
            except (TypeError, ValueError):
                continue
    return out


def pod_shape(pod_spec: dict) -> dict:
    """What placement needs of a pod: accelerator requests (limits stand for requests), node selector, tolerations."""
    need: dict = {}
    for container in pod_spec.get("containers") or []:
        res = container.get("resources") or {}
        merged = dict(res.get("limits") or {})
        merged.update(res.get("requests") or {})
        for name, amount in accelerators(merged).items():
            need[name] = need.get(name, 0.0) + amount
    return {"need": need, "selector": dict(pod_spec.get("nodeSelector") or {}),
            "tolerations": list(pod_spec.get("tolerations") or [])}


def tolerates(tolerations: list, taint: dict) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def fits(pod: dict, slot: dict) -> bool:
    labels = slot["labels"]
    if any(labels.get(k) != v for k, v in pod["selector"].items()):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod["tolerations"], t) for t in slot["taints"]):
        return False
    return all(slot["free"].get(name, 0.0) >= amount for name, amount in pod["need"].items())


def place(pods: list, slots: list) -> list:
    """First fit of ``pods`` onto ``slots`` (their free capacity is used up); the pods that found no slot."""
    left = []
    for pod in pods:
        for slot in slots:
            if fits(pod, slot):
                for name, amount in pod["need"].items():
                    slot["free"][name] = slot["free"].get(name, 0.0) - amount
                break
        else:
            left.append(pod)
    return left


def new_nodes_needed(pods: list, group: dict) -> int | None:
    """Fresh nodes of ``group`` that hold every one of ``pods`` (first fit), None when a pod fits no such node."""
    slots: list = []
    for pod in pods:
        if place([pod], slots):
            fresh = {"labels": group["labels"], "taints": group["taints"], "free": dict(group["capacity"])}
            if place([pod], [fresh]):
                return None
            slots.append(fresh)
    return len(slots)


def plan(pods: list, booked: list, existing: list, groups: list, provisioning_class: str) -> dict:
    """Decide one ProvisioningRequest: ``{"provisioned": bool, "reason": (reason, message), "scale": (group, n)}``.

    ``existing`` are slots of the existing nodes (free = allocatable - bound pods); every group's replicas without a
    node are added as upcoming empty slots; ``booked`` (the unconsumed pods of other Provisioned requests) are placed
    first."""
    slots = [dict(s, free=dict(s["free"])) for s in existing]
    for group in groups:
        slots.extend({"labels": group["labels"], "taints": group["taints"], "free": dict(group["capacity"])}
                     for _ in range(max(group["replicas"] - group["nodes"], 0)))
    place(booked, slots)
    left = place(pods, slots)
    if not left:
        return {"provisioned": True, "reason": FOUND, "scale": None}
    if provisioning_class == CHECK_CAPACITY:
        return {"provisioned": False, "reason": NOT_FOUND, "scale": None}
    for group in sorted(groups, key=lambda g: g["name"]):
        needed = new_nodes_needed(left, group)
        if needed is not None and group["replicas"] + needed <= group["max"]:
            return {"provisioned": True, "reason": PROVISIONED, "scale": (group, needed)}
    return {"provisioned": False, "reason": NOT_FOUND, "scale": None}


def condition(conditions: list, kind: str) -> dict | None:
    return next((c for c in conditions or [] if c.get("type") == kind), None)


def is_true(conditions: list, kind: str) -> bool:
    return (condition(conditions, kind) or {}).get("status") == "True"


# -- the process --------------------------------------------------------------------------------------------

class Simulator:
    def __init__(self, classes: list, booking_seconds: float) -> None:
        from kubernetes import client  # only the process needs the client (the unit tests import the planning)
        self.client = client
        self.custom = client.CustomObjectsApi()
        self.core = client.CoreV1Api()
        self.classes = set(classes)
        self.booking_seconds = booking_seconds

    def set_conditions(self, pr: dict, updates: list) -> None:
        """Add or update conditions (type, status, (reason, message)); written only when one changes."""
        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = list((pr.get("status") or {}).get("conditions") or [])
        changed = False
        for kind, status, (reason, message) in updates:
            new = {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now,
                   "observedGeneration": pr["metadata"].get("generation", 1)}
            old = condition(conditions, kind)
            if old and all(old.get(k) == new[k] for k in ("status", "reason", "message")):
                continue
            if old and old.get("status") == status:
                new["lastTransitionTime"] = old.get("lastTransitionTime", now)
            conditions = [c for c in conditions if c.get("type") != kind] + [new]
            changed = True
            log("condition", "ProvisioningRequest/%s/%s" % (pr["metadata"]["namespace"], pr["metadata"]["name"]),
                "%s=%s %s: %s" % (kind, status, reason, message))
        if changed:
            status = dict(pr.get("status") or {}, conditions=conditions)
            status.setdefault("provisioningClassDetails", {})
            pr["status"] = self.custom.patch_namespaced_custom_object_status(
                PR[0], PR[1], pr["metadata"]["namespace"], PR[2], pr["metadata"]["name"], {"status": status})["status"]

    def pods_of(self, pr: dict) -> list | None:
        """The pods a request asks for (count copies of each PodTemplate); None while a template is missing."""
        pods = []
        for pod_set in (pr.get("spec") or {}).get("podSets") or []:
            name = (pod_set.get("podTemplateRef") or {}).get("name")
            try:
                tpl = self.core.read_namespaced_pod_template(name, pr["metadata"]["namespace"])
            except self.client.ApiException as exc:
                if exc.status == 404:
                    return None
                raise
            spec = self.client.ApiClient().sanitize_for_serialization(tpl.template.spec) or {}
            pods.extend(pod_shape(spec) for _ in range(int(pod_set.get("count") or 1)))
        return pods

    def groups(self) -> list:
        out = []
        for kind, (group, version, plural, *_rest) in TARGETS.items():
            try:
                items = self.custom.list_cluster_custom_object(group, version, plural)["items"]
            except self.client.ApiException:
                continue  # kind not served on this flavour of the lab
            for target in items:
                annotations = target["metadata"].get("annotations") or {}
                if not annotations.get(MAX_SIZE[kind]) or target["metadata"].get("deletionTimestamp"):
                    continue
                _, labels, taints = template(kind, target)
                out.append({"name": "%s/%s/%s" % (kind, target["metadata"]["namespace"], target["metadata"]["name"]),
                            "kind": kind, "target": target, "labels": labels, "taints": taints,
                            "capacity": accelerators(node_capacity(annotations)),
                            "replicas": int((target.get("spec") or {}).get("replicas") or 0),
                            "max": int(annotations[MAX_SIZE[kind]]), "nodes": 0})
        return out

    def existing(self, groups: list) -> tuple:
        """(slots of the schedulable nodes with their free accelerators, every pod), counting each group's nodes."""
        api = self.client.ApiClient()
        pods = [api.sanitize_for_serialization(p) for p in self.core.list_pod_for_all_namespaces().items]
        used: dict = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                for name, amount in pod_shape(pod["spec"])["need"].items():
                    used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0.0) + amount
        slots = []
        for node in (api.sanitize_for_serialization(n) for n in self.core.list_node().items):
            meta, spec = node["metadata"], node.get("spec") or {}
            labels = meta.get("labels") or {}
            for group in groups:
                if group["labels"] and all(labels.get(k) == v for k, v in group["labels"].items()):
                    group["nodes"] += 1
            if meta.get("deletionTimestamp") or spec.get("unschedulable"):
                continue
            free = accelerators((node.get("status") or {}).get("allocatable") or {})
            for name, amount in used.get(meta["name"], {}).items():
                free[name] = free.get(name, 0.0) - amount
            slots.append({"labels": labels, "taints": spec.get("taints") or [], "free": free})
        return slots, pods

    def scale(self, group: dict, needed: int, pr: dict) -> None:
        kind = group["kind"]
        g, version, plural = TARGETS[kind][:3]
        meta = group["target"]["metadata"]
        after = group["replicas"] + needed
        self.custom.patch_namespaced_custom_object(g, version, meta["namespace"], plural, meta["name"],
                                                   {"spec": {"replicas": after}})
        log("scale-up", group["name"], "replicas %d -> %d (max %d) for ProvisioningRequest/%s/%s" % (
            group["replicas"], after, group["max"], pr["metadata"]["namespace"], pr["metadata"]["name"]))
        group["replicas"] = after

    def round(self) -> None:
        prs = [p for p in self.custom.list_cluster_custom_object(*PR)["items"]
               if (p.get("spec") or {}).get("provisioningClassName") in self.classes]
        live = [p for p in prs if not is_true((p.get("status") or {}).get("conditions"), "Failed")
                and not is_true((p.get("status") or {}).get("conditions"), "BookingExpired")]
        pending = [p for p in live if not is_true((p.get("status") or {}).get("conditions"), "Provisioned")]
        now = time.time()
        for pr in live:  # bookings end after booking_seconds
            provisioned = condition((pr.get("status") or {}).get("conditions"), "Provisioned")
            if provisioned and provisioned.get("status") == "True":
                since = dt.datetime.strptime(provisioned["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=dt.timezone.utc).timestamp()
                if now - since > self.booking_seconds:
                    self.set_conditions(pr, [("BookingExpired", "True", BOOKING_EXPIRED)])
        if not pending:
            return
        groups = self.groups()
        existing, pods = self.existing(groups)
        consumed: dict = {}
        for pod in pods:
            ann = ((pod.get("metadata") or {}).get("annotations") or {}).get(CONSUME_ANNOTATION)
            if ann and (pod.get("spec") or {}).get("nodeName"):
                key = (pod["metadata"]["namespace"], ann)
                consumed[key] = consumed.get(key, 0) + 1
        booked = []
        for pr in live:
            if pr in pending:
                continue
            key = (pr["metadata"]["namespace"], pr["metadata"]["name"])
            wanted = self.pods_of(pr) or []
            booked.extend(wanted[consumed.get(key, 0):])
        for pr in sorted(pending, key=lambda p: p["metadata"]["creationTimestamp"]):
            if not condition((pr.get("status") or {}).get("conditions"), "Accepted"):
                self.set_conditions(pr, [("Accepted", "True", ACCEPTED)])
            wanted = self.pods_of(pr)
            if wanted is None:
                continue  # Kueue writes the PodTemplates first; next round
            decision = plan(wanted, booked, existing, groups, pr["spec"]["provisioningClassName"])
            if decision["scale"]:
                self.scale(decision["scale"][0], decision["scale"][1], pr)
            self.set_conditions(pr, [("Provisioned", "True" if decision["provisioned"] else "False", decision["reason"])])
            if decision["provisioned"]:
                booked.extend(wanted)  # the next request in this round sees it booked

    def loop(self, interval: float) -> None:
        log("started", ",".join(sorted(self.classes)), "booking_seconds=%s" % self.booking_seconds)
        while True:
            try:
                self.round()
            except self.client.ApiException as exc:  # a conflict, a blip, the CRD not served yet: next round
                log("error", "round", "%s %s" % (exc.status, exc.reason))
            except Exception as exc:  # noqa: BLE001 - one odd object must not stop the lab's autoscaler
                log("error", "round", "%s: %s" % (type(exc).__name__, exc))
            time.sleep(interval)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--classes", default="%s,%s" % (BEST_EFFORT_ATOMIC, CHECK_CAPACITY))
    ap.add_argument("--booking-seconds", type=float, default=600.0, help="Provisioned -> BookingExpired (upstream 10 min)")
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    from kubernetes import config
    config.load_kube_config(args.kubeconfig)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    Simulator([c for c in args.classes.split(",") if c], args.booking_seconds).loop(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
