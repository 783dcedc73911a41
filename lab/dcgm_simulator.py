#!/usr/bin/env python3
"""SIMULATED NVIDIA DCGM exporter for the lab's fake GPU nodes.

There is no GPU here, so this process stands in for dcgm-exporter: for every GPU (or MIG slice) of every
live GPU node (re-read with the pods, so nodes the machine SIMULATOR adds or removes come and go; lab/topology.yaml
only adds MIG details for the nodes it names) it serves the exporter's metric names with its real label set
(gpu, UUID, device, modelName, Hostname, pci_bus_id, and namespace/pod/container of the pod holding the
GPU). GPUs are handed to running pods in a stable order (oldest pod first, lowest index first), the way
the device plugin would.

A pod's annotations set what its GPUs report, so tests can create busy and idle GPUs at will:
  lab.gpuaas.io/gpu-util: "85"        DCGM_FI_DEV_GPU_UTIL (%), default 0
  lab.gpuaas.io/fb-used-mib: "40000"  DCGM_FI_DEV_FB_USED (MiB), default 1024 for a held GPU, 0 otherwise
GPUs held by no pod report 0% and 0 MiB. Lab tooling only: nothing in the collection imports this file.
"""
from __future__ import annotations

import argparse
import threading
import time
import uuid
from wsgiref.simple_server import WSGIRequestHandler, make_server

import yaml
from kubernetes import client, config
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily

UTIL_ANNOTATION = "lab.gpuaas.io/gpu-util"
FB_ANNOTATION = "lab.gpuaas.io/fb-used-mib"
LABELS = ["gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id", "GPU_I_PROFILE", "GPU_I_ID",
          "namespace", "pod", "container"]


def gpu_devices(topology: list[dict]) -> list[dict]:
    """Every GPU (or MIG slice) in the lab, with the resource name a pod asks for to get it."""
    devices = []
    for node in topology:
        gpu = node.get("gpu")
        if not gpu:
            continue
        mig = gpu.get("mig")
        for index in range(gpu["count"]):
            slices = mig["slices"] if mig else 1
            for s in range(slices):
                devices.append({
                    "node": node["name"],
                    "gpu": str(index),
                    "UUID": "GPU-%s" % uuid.uuid5(uuid.NAMESPACE_DNS, "%s/%d" % (node["name"], index)),
                    "device": "nvidia%d" % index,
                    "modelName": gpu["product"].replace("-", " "),
                    "pci_bus_id": "00000000:%02X:00.0" % (0x18 + index),
                    "GPU_I_PROFILE": mig["profile"] if mig else "",
                    "GPU_I_ID": str(s) if mig else "",
                    "resource": "nvidia.com/mig-%s" % mig["profile"] if mig else gpu.get("resource", "nvidia.com/gpu"),
                    "memory_mib": gpu["memory_mib"] // slices,
                })
    return devices


def live_devices(nodes, topology: list[dict]) -> list[dict]:
    """The devices of the live nodes: from the topology entry when the node has one, else from its GPU labels
    and allocatable (a node the machine SIMULATOR created from a MachineSet/MachineDeployment template)."""
    by_name = {n["name"]: n for n in topology}
    out = []
    for node in nodes:
        name = node.metadata.name
        if name in by_name:
            out.extend(gpu_devices([by_name[name]]))
            continue
        alloc = (node.status.allocatable if node.status else None) or {}
        labels = node.metadata.labels or {}
        for resource, amount in alloc.items():
            if resource.startswith("nvidia.com/") and str(amount).isdigit() and int(amount) > 0:
                out.extend(gpu_devices([{"name": name, "gpu": {
                    "count": int(amount), "resource": resource,
                    "product": labels.get("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
                    "memory_mib": int(labels.get("nvidia.com/gpu.memory", "81559"))}}]))
    return out


def pod_gpu_requests(pod) -> list[tuple[str, str, int]]:
    """(container, resource, count) for every GPU-like extended resource the pod's containers ask for."""
    out = []
    for c in pod.spec.containers or []:
        res: dict[str, int] = {}
        resources = c.resources
        sources = [resources.limits or {}, resources.requests or {}] if resources else []
        for src in sources:
            for k, v in src.items():
                if k.startswith("nvidia.com/"):
                    res[k] = max(res.get(k, 0), int(v))
        out.extend((c.name, k, n) for k, n in res.items())
    return out


class DcgmCollector:
    def __init__(self, api: client.CoreV1Api, devices: list[dict], refresh_seconds: float = 2.0,
                 topology: list[dict] | None = None):
        self.api = api
        self.devices = devices
        self.topology = topology
        self.refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._assignment: dict[str, dict] = {}
        self._fetched = 0.0

    def _assign(self) -> dict[str, dict]:
        if self.topology is not None:
            self.devices = live_devices(self.api.list_node().items, self.topology)
        pods = self.api.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
        pods.sort(key=lambda p: (p.metadata.creation_timestamp, p.metadata.namespace, p.metadata.name))
        free: dict[tuple[str, str], list[dict]] = {}
        for d in self.devices:
            free.setdefault((d["node"], d["resource"]), []).append(d)
        held = {}
        for pod in pods:
            if not pod.spec.node_name:
                continue
            ann = pod.metadata.annotations or {}
            for container, resource, count in pod_gpu_requests(pod):
                pool = free.get((pod.spec.node_name, resource), [])
                for d in pool[:count]:
                    held[d["UUID"] + d["GPU_I_ID"]] = {
                        "namespace": pod.metadata.namespace, "pod": pod.metadata.name, "container": container,
                        "util": float(ann.get(UTIL_ANNOTATION, "0")),
                        "fb": float(ann.get(FB_ANNOTATION, "1024")),
                    }
                del pool[:count]
        return held

    def assignment(self) -> dict[str, dict]:
        with self._lock:
            if time.monotonic() - self._fetched > self.refresh_seconds:
                try:
                    self._assignment = self._assign()
                except Exception as e:  # keep serving the last known state if the apiserver blips
                    print("dcgm-simulator: listing pods failed: %s" % e, flush=True)
                self._fetched = time.monotonic()
            return self._assignment

    def collect(self):
        held = self.assignment()
        util = GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels=LABELS)
        fb_used = GaugeMetricFamily("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels=LABELS)
        fb_free = GaugeMetricFamily("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=LABELS)
        temp = GaugeMetricFamily("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", labels=LABELS)
        power = GaugeMetricFamily("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", labels=LABELS)
        engine = GaugeMetricFamily("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", labels=LABELS)
        xid = GaugeMetricFamily("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", labels=LABELS)
        for d in self.devices:
            h = held.get(d["UUID"] + d["GPU_I_ID"])
            u = h["util"] if h else 0.0
            fb = min(h["fb"], d["memory_mib"]) if h else 0.0
            labels = [d["gpu"], d["UUID"], d["device"], d["modelName"], d["node"], d["pci_bus_id"],
                      d["GPU_I_PROFILE"], d["GPU_I_ID"],
                      h["namespace"] if h else "", h["pod"] if h else "", h["container"] if h else ""]
            util.add_metric(labels, u)
            fb_used.add_metric(labels, fb)
            fb_free.add_metric(labels, d["memory_mib"] - fb)
            temp.add_metric(labels, 30 + 0.4 * u)
            power.add_metric(labels, 60 + 6.0 * u)
            engine.add_metric(labels, u / 100.0)
            xid.add_metric(labels, 0)
        return [util, fb_used, fb_free, temp, power, engine, xid]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):  # one line per scrape is noise
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--topology", required=True)
    ap.add_argument("--port", type=int, default=9400)
    args = ap.parse_args()
    config.load_kube_config(args.kubeconfig)
    with open(args.topology, encoding="utf-8") as f:
        topology = yaml.safe_load(f)["nodes"]
    devices = gpu_devices(topology)
    registry = CollectorRegistry()
    registry.register(DcgmCollector(client.CoreV1Api(), devices, topology=topology))
    server = make_server("127.0.0.1", args.port, make_wsgi_app(registry), handler_class=QuietHandler)
    print("dcgm-simulator: serving %d GPUs on 127.0.0.1:%d" % (len(devices), args.port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
