# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU OPERATOR SIMULATOR for the gpuaas lab -- NOT the NVIDIA GPU Operator or the NFD operator.

The lab's GPU nodes are KWOK fake nodes that already carry the labels and ``nvidia.com/gpu`` capacity
GPU feature discovery and the device plugin would give them. Nothing runs the operators' controllers,
so this simulator performs only the status transitions the gpuaas.platform install roles wait for:

- every ``nvidia.com/v1`` ClusterPolicy gets ``status.state: ready`` (and ``status.namespace``, the
  namespace of the operator Deployment when one is found, else ``gpu-operator``);
- every ``nvidia.com/v1alpha1`` NVIDIADriver gets ``status.state: ready``;
- every NodeFeatureDiscovery (``nfd.openshift.io/v1`` and/or ``nfd.k8s-sigs.io/v1alpha1``, whichever
  the cluster serves) gets an ``Available`` condition.

No DaemonSet, Deployment or node label is created or changed.

Usage:
  python lab/simulators/gpu_operator_simulator.py --kubeconfig .lab/kubeconfig [--once] [--interval 2]
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import typing as t

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sim_loop sits beside it, also when loaded by path
import sim_loop  # noqa: E402  pylint: disable=wrong-import-position

LOG = logging.getLogger("gpu-operator-simulator")
NFD_APIS = (("nfd.openshift.io/v1", "NodeFeatureDiscovery"), ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureDiscovery"))


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def resource(client: DynamicClient, api_version: str, kind: str) -> t.Any:
    try:
        return client.resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        return None


def operator_namespace(client: DynamicClient) -> str:
    deployments = client.resources.get(api_version="apps/v1", kind="Deployment")
    for dep in deployments.get(label_selector="app=gpu-operator").to_dict()["items"]:
        return dep["metadata"]["namespace"]
    return "gpu-operator"


def guarded(call: t.Callable[..., t.Any], **kwargs: t.Any) -> int:
    """One object's failure (deleted meanwhile, namespace terminating) must not stop the others."""
    try:
        call(**kwargs)
        return 1
    except ApiException as exc:
        LOG.warning("status update failed: %s %s", exc.status, exc.reason)
        return 0


def pass_once(client: DynamicClient) -> int:
    actions = 0
    client.resources.invalidate_cache()
    policies = resource(client, "nvidia.com/v1", "ClusterPolicy")
    if policies is not None:
        for obj in policies.get().to_dict()["items"]:
            if (obj.get("status") or {}).get("state") != "ready":
                LOG.info("ClusterPolicy %s -> ready", obj["metadata"]["name"])
                obj["status"] = {"state": "ready", "namespace": operator_namespace(client),
                                 "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled",
                                                 "message": "simulated by the gpuaas lab GPU Operator simulator",
                                                 "lastTransitionTime": now()}]}
                actions += guarded(policies.status.replace, body=obj)
    drivers = resource(client, "nvidia.com/v1alpha1", "NVIDIADriver")
    if drivers is not None:
        for obj in drivers.get().to_dict()["items"]:
            if (obj.get("status") or {}).get("state") != "ready":
                LOG.info("NVIDIADriver %s -> ready", obj["metadata"]["name"])
                obj["status"] = {"state": "ready"}
                actions += guarded(drivers.status.replace, body=obj)
    for api_version, kind in NFD_APIS:
        nfds = resource(client, api_version, kind)
        if nfds is None:
            continue
        for obj in nfds.get().to_dict()["items"]:
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions):
                continue
            LOG.info("%s %s/%s -> Available", kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
            body = {"status": {"conditions": [
                {"type": "Available", "status": "True", "reason": "Simulated", "lastTransitionTime": now(),
                 "message": "simulated by the gpuaas lab GPU Operator simulator"},
                {"type": "Degraded", "status": "False", "reason": "Simulated", "lastTransitionTime": now(),
                 "message": ""}]}}
            actions += guarded(nfds.status.patch, body=body, name=obj["metadata"]["name"],
                               namespace=obj["metadata"].get("namespace"), content_type="application/merge-patch+json")
    return actions


def main(argv: t.Optional[t.List[str]] = None) -> int:
    args = sim_loop.parser(__doc__, interval=2.0).parse_args(argv)
    client = sim_loop.connect("gpu-operator-simulator", args.kubeconfig)
    return sim_loop.run(lambda: pass_once(client), interval=args.interval, once=args.once)


if __name__ == "__main__":
    sys.exit(main())
