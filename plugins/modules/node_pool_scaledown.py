#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_pool_scaledown
short_description: Remove only the idle nodes of a GPU node pool (cordon, mark the Machine, lower replicas)
version_added: "0.2.0"
description:
  - The safe way down for a pool that M(gpuaas.platform.node_pools) grows (the HPA never shrinks a pool, because
    the machine controller would choose the machine to delete by its delete policy, busy or not).
  - "A node is busy while any pod bound to it (DaemonSet pods aside) is Pending or Running: it is never chosen. An
    idle node goes once it is older than C(provisioning_seconds) and its last pod finished C(idle_seconds) ago;
    idle nodes are kept for unscheduled pods that ask for the pool's GPUs and for C(min_nodes)."
  - "Per chosen node: cordon it, read its pods again (a pod that landed meanwhile makes the module uncordon it and
    keep it), annotate its Machine with C(machine.openshift.io/delete-machine) (MachineSet) or
    C(cluster.x-k8s.io/delete-machine) (MachineDeployment), then lower the target's C(spec.replicas) by the number
    of marked machines. The machine controller deletes annotated machines first."
  - Run it on a schedule (AWX, see C(playbooks/node_pool_scaledown.yml)); each run is idempotent.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  node_pools:
    description: The pools (inventory C(gpuaas_node_pools), see M(gpuaas.platform.node_pools)).
    type: list
    elements: dict
    default: []
  flavors:
    description: Kueue ResourceFlavors (inventory C(gpuaas_flavors)), to validate the pools.
    type: list
    elements: dict
    default: []
  pools:
    description: Only these pools (by name); all pools when omitted.
    type: list
    elements: str
  idle_seconds:
    description: Override every pool's C(idle_seconds) for this run (for example C(0) to remove every idle node now).
    type: int
attributes:
  check_mode:
    description: Reports the nodes that would go; nothing is written.
    support: full
  diff_mode:
    description: Not supported; RV(pools) lists what changes.
    support: none
notes:
  - Needs to list pods and nodes, patch nodes, Machines and the target.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
"""

EXAMPLES = r"""
- name: Remove the idle nodes of every GPU pool
  gpuaas.platform.node_pool_scaledown:
    node_pools: "{{ gpuaas_node_pools }}"
    flavors: "{{ gpuaas_flavors }}"

- name: Only the h100 pool, idle nodes right away
  gpuaas.platform.node_pool_scaledown:
    node_pools: "{{ gpuaas_node_pools }}"
    flavors: "{{ gpuaas_flavors }}"
    pools: [h100]
    idle_seconds: 0
"""

RETURN = r"""
changed:
  description: Whether a node was cordoned and its Machine marked (or would be, in check mode).
  returned: always
  type: bool
pools:
  description:
    - Per pool the replicas before and after, the removed nodes, and the nodes kept with the reason.
    - A C(scale_by=provisioning_request) pool is left to the cluster autoscaler; its entry has C(skipped) (why) and an
      empty C(removed).
  returned: always
  type: dict
  sample: {"h100": {"replicas_before": 4, "replicas_after": 1, "removed": ["gpu-h100-a-x1"], "busy": ["gpu-h100-a-x2"],
           "idle_kept": [], "provisioning": [], "waiting_gpus": 0}}
"""

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import NodePool, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.node_pools import SCALE_BY_KEDA
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import node_pools as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule

MERGE = "application/merge-patch+json"
CAPI_DEPLOYMENT_LABEL = "cluster.x-k8s.io/deployment-name"


class ScaleDown:
    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False,
                 clock: t.Callable[[], float] = time.time) -> None:
        self.client = client
        self.params = params
        self.check_mode = check_mode
        self.clock = clock

    def _call(self, what: str, verb: str, func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any:
        try:
            return func(*args, **kwargs)
        except ApiException as exc:
            raise translate_api_exception(exc, verb, what)

    def pods_on(self, node: str) -> t.List[t.Dict[str, t.Any]]:
        return self._call("pods", "list", self.client.resource("v1", "Pod").list, field_selector="spec.nodeName=%s" % node)

    def patch(self, api_version: str, kind: str, name: str, namespace: t.Optional[str], body: t.Dict[str, t.Any]) -> None:
        res = self.client.resource(api_version, kind)
        self._call("%s %s" % (kind, name), "patch", self.client.request, "PATCH", res.path(name, namespace), body=body,
                   content_type=MERGE)

    def machines_of(self, pool: NodePool, target: t.Mapping[str, t.Any]) -> t.List[t.Dict[str, t.Any]]:
        group = pool.target_api_version.split("/")[0]
        version = "v1beta1" if group == "machine.openshift.io" else pool.target_api_version.split("/")[1]
        uid = (target.get("metadata") or {}).get("uid")
        items = self._call("Machines", "list", self.client.resource("%s/%s" % (group, version), "Machine").list,
                           namespace=pool.target_namespace)

        def belongs(machine: t.Mapping[str, t.Any]) -> bool:
            meta = machine.get("metadata") or {}
            if any(o.get("uid") == uid for o in meta.get("ownerReferences") or []):
                return True  # OpenShift: the MachineSet owns its Machines
            # Cluster API: a MachineDeployment's Machines are owned by its MachineSets and carry its name as a label
            return pool.target_kind == "MachineDeployment" and \
                (meta.get("labels") or {}).get(CAPI_DEPLOYMENT_LABEL) == pool.target_name
        return [m for m in items if belongs(m)]

    def pool(self, pool: NodePool) -> t.Dict[str, t.Any]:
        what = "%s %s/%s" % (pool.target_kind, pool.target_namespace, pool.target_name)
        target = self._call(what, "read", self.client.resource(pool.target_api_version, pool.target_kind).get,
                            pool.target_name, pool.target_namespace)
        if target is None:
            raise GpuaasError("%s (pool %s) does not exist" % (what, pool.name),
                              hint="create the MachineSet/MachineDeployment or remove the pool from gpuaas_node_pools")
        machines = self.machines_of(pool, target)
        node_names = [((m.get("status") or {}).get("nodeRef") or {}).get("name") for m in machines]
        nodes = {}
        for name in node_names:
            if name:
                node = self._call("node %s" % name, "read", self.client.resource("v1", "Node").get, name)
                if node:
                    nodes[name] = node
        pods: t.List[t.Dict[str, t.Any]] = []
        for name in nodes:
            pods.extend(self.pods_on(name))
        pods.extend(p for p in self._call("pods", "list", self.client.resource("v1", "Pod").list,
                                          field_selector="status.phase=Pending")
                    if not (p.get("spec") or {}).get("nodeName"))
        plan = builders.plan_scale_down(pool, machines, nodes, pods, self.clock())
        before = int((target.get("spec") or {}).get("replicas") or 0)
        removed: t.List[str] = []
        annotation = builders.DELETE_MACHINE_ANNOTATIONS.get(pool.target_kind, "cluster.x-k8s.io/delete-machine")
        machine_av = "machine.openshift.io/v1beta1" if pool.target_kind == "MachineSet" else pool.target_api_version
        for victim in plan["remove"]:
            if self.check_mode:
                removed.append(victim["node"])
                continue
            self.patch("v1", "Node", victim["node"], None, {"spec": {"unschedulable": True}})
            # a pod may have landed between the plan and the cordon: look again, give the node back if so
            again = [p for p in self.pods_on(victim["node"])
                     if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not builders._is_daemon(p)]
            if again:
                self.patch("v1", "Node", victim["node"], None, {"spec": {"unschedulable": None}})
                plan["busy"].append(victim["node"])
                continue
            self.patch(machine_av, "Machine", victim["machine"], pool.target_namespace,
                       {"metadata": {"annotations": {annotation: "true"}}})
            removed.append(victim["node"])
        after = before
        if removed:
            after = max(before - len(removed), 0)
            if not self.check_mode:
                # read again: the HPA may have grown the pool meanwhile; lower from what it is now
                fresh = self._call(what, "read", self.client.resource(pool.target_api_version, pool.target_kind).get,
                                   pool.target_name, pool.target_namespace) or target
                current = int((fresh.get("spec") or {}).get("replicas") or 0)
                after = max(current - len(removed), 0)
                self.patch(pool.target_api_version, pool.target_kind, pool.target_name, pool.target_namespace,
                           {"spec": {"replicas": after}})
        return {"replicas_before": before, "replicas_after": after, "removed": sorted(removed),
                "busy": sorted(plan["busy"]), "idle_kept": plan["idle_kept"], "provisioning": plan["provisioning"],
                "waiting_gpus": plan["waiting_gpus"]}

    def run(self) -> t.Dict[str, t.Any]:
        p = self.params
        model = TenantModel.from_inventory({"gpuaas_flavors": p.get("flavors") or [],
                                            "gpuaas_node_pools": p.get("node_pools") or []})
        wanted = p.get("pools")
        known = {x.name for x in model.node_pools}
        if wanted:
            unknown = sorted(set(wanted) - known)
            if unknown:
                raise GpuaasError("pools names %s, which node_pools does not define" % ", ".join(unknown),
                                  hint="defined pools: %s" % (", ".join(sorted(known)) or "none"))
        out: t.Dict[str, t.Any] = {}
        for pool in model.node_pools:
            if wanted and pool.name not in wanted:
                continue
            if pool.scale_by != SCALE_BY_KEDA:
                # the cluster autoscaler removes the unneeded nodes of a ProvisioningRequest pool itself; two
                # removers of one node group would race
                out[pool.name] = {"skipped": "scale_by: %s: the cluster autoscaler scales this pool down" % pool.scale_by,
                                  "removed": []}
                continue
            if p.get("idle_seconds") is not None:
                pool.idle_seconds = int(p["idle_seconds"])
            out[pool.name] = self.pool(pool)
        return {"changed": any(x["removed"] for x in out.values()), "pools": out}


def main() -> None:
    argument_spec: t.Dict[str, t.Any] = dict(
        node_pools=dict(type="list", elements="dict", default=[]),
        flavors=dict(type="list", elements="dict", default=[]),
        pools=dict(type="list", elements="str"),
        idle_seconds=dict(type="int"),
    )
    module = GpuaasModule(argument_spec=argument_spec, supports_check_mode=True)
    module.run(lambda m: ScaleDown(get_client(m), m.params, m.check_mode).run(), changed=False)


if __name__ == "__main__":
    main()
