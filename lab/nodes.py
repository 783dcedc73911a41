#!/usr/bin/env python3
"""Create the lab's fake (KWOK) nodes from lab/topology.yaml, or check that they are Ready.

Lab tooling only: nothing in the collection imports this file.
"""
from __future__ import annotations

import argparse
import sys

import yaml
from kubernetes import client, config

KWOK_ANNOTATION = "kwok.x-k8s.io/node"


def load_topology(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)["nodes"]


def gpu_resources(node: dict) -> dict[str, str]:
    """Extended resources the device plugin would advertise for this node."""
    gpu = node.get("gpu")
    if not gpu:
        return {}
    mig = gpu.get("mig")
    if mig:
        return {"nvidia.com/mig-%s" % mig["profile"]: str(mig["slices"] * gpu["count"])}
    return {gpu.get("resource", "nvidia.com/gpu"): str(gpu["count"])}


def node_manifest(node: dict, flavor: str) -> dict:
    labels = {
        "kubernetes.io/hostname": node["name"],
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    taints = []
    gpu = node.get("gpu")
    if gpu:
        # the labels GPU feature discovery sets
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": gpu["product"],
            "nvidia.com/gpu.count": str(gpu["count"]),
            "nvidia.com/gpu.memory": str(gpu["memory_mib"]),
            "nvidia.com/mig.config": gpu.get("mig", {}).get("config", "all-disabled"),
            "nvidia.com/mig.config.state": "success",
        })
        if gpu.get("mig"):
            labels["nvidia.com/mig.strategy"] = "mixed"
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    else:
        labels["node-role.kubernetes.io/worker"] = ""
    if flavor == "openshift":
        labels["node.openshift.io/os_id"] = "rhcos"
    capacity = {"cpu": node.get("cpu", "32"), "memory": node.get("memory", "128Gi"), "pods": "250"}
    capacity.update(gpu_resources(node))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node["name"], "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def create(api: client.CoreV1Api, nodes: list[dict], flavor: str) -> None:
    for node in nodes:
        body = node_manifest(node, flavor)
        try:
            api.create_node(body)
        except client.ApiException as e:
            if e.status != 409:
                raise
            api.patch_node(node["name"], {"metadata": body["metadata"], "spec": body["spec"]})
        # status is a subresource: set capacity/allocatable through it
        api.patch_node_status(node["name"], {"status": body["status"]})


def all_ready(api: client.CoreV1Api, nodes: list[dict]) -> bool:
    for node in nodes:
        live = api.read_node(node["name"])
        conds = {c.type: c.status for c in (live.status.conditions or [])}
        if conds.get("Ready") != "True":
            return False
        for res in gpu_resources(node):
            if res not in (live.status.allocatable or {}):
                return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--topology", required=True)
    ap.add_argument("--flavor", default="kubernetes")
    ap.add_argument("--check-ready", action="store_true")
    args = ap.parse_args()
    config.load_kube_config(args.kubeconfig)
    api = client.CoreV1Api()
    nodes = load_topology(args.topology)
    if args.check_ready:
        return 0 if all_ready(api, nodes) else 1
    create(api, nodes, args.flavor)
    return 0


if __name__ == "__main__":
    sys.exit(main())
