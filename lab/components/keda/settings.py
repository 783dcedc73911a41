#!/usr/bin/env python3
"""The KEDA settings the collection's keda role controls, read from the operator Deployment its Helm release wrote.

The lab runs KEDA's operator out of cluster; what the role decides for the in-cluster operator — which namespaces
it watches (``WATCH_NAMESPACE``, from ``gpuaas_keda_watch_namespaces``) and its own namespace, where it reads the
Secrets of ClusterTriggerAuthentications (``KEDA_CLUSTER_OBJECT_NAMESPACE``, default the pod's namespace =
``gpuaas_keda_namespace``) — is taken from that Deployment. Everything else about the lab's KEDA is lab plumbing
(ports, certificates, the APIService), listed in docs/lab.md.

Usage: settings.py DEPLOYMENT_JSON  -> prints shell assignments WATCH_NAMESPACE=... KEDA_NAMESPACE=...
"""
from __future__ import annotations

import json
import shlex
import sys


def settings(deployment: dict) -> dict:
    namespace = deployment["metadata"]["namespace"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    env = {}
    for container in containers:
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = item["value"]
    return {"WATCH_NAMESPACE": env.get("WATCH_NAMESPACE", ""),
            "KEDA_NAMESPACE": env.get("KEDA_CLUSTER_OBJECT_NAMESPACE") or namespace}


def main() -> int:
    with open(sys.argv[1]) as f:
        out = settings(json.load(f))
    for key, value in out.items():
        print("%s=%s" % (key, shlex.quote(value)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
