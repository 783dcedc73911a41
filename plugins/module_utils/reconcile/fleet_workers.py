# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which workers a fleet run keeps, removes or skips (docs/multicluster.md "Removing a worker", "An unreachable
worker"): pure decisions on what the run read, so the rules are unit-tested without a cluster.

* A **removed worker** is a MultiKueueCluster the collection made on the manager whose worker is no longer a present
  worker of ``gpuaas_clusters.workers`` (the entry is gone, or it says ``state: absent``).
* It **holds** workloads while a manager Workload dispatched to it (``status.clusterName``) has not finished, or —
  when the run can reach it — a Workload MultiKueue copied there (origin label) has not finished. MultiKueue reads a
  workload's remote only through the MultiKueueConfig: a worker taken out of it while it runs a workload loses that
  workload's status, and after ``workerLostTimeout`` the manager evicts and requeues it (Kueue v0.19.2
  ``admissionchecks/multikueue/workload.go``: ``remoteClientsForAC`` lists the config's clusters only). So a worker
  that holds workloads is never torn out.
* Without ``prune_workers`` a removed worker is **kept** (in the MultiKueueConfig, its MultiKueueCluster and Secret
  as they are) and reported: nothing is removed because it is missing from the inventory (the tenants' safe mode).
* With ``prune_workers`` a removed worker holding nothing is **removed**: dropped from the MultiKueueConfig, its
  MultiKueueCluster and kubeconfig Secret deleted on the manager, and — for a ``state: absent`` entry the run can
  reach — the collection's objects on the worker deleted (labelled ``app.kubernetes.io/managed-by=gpuaas.platform``
  only; namespaces stay). One that holds workloads refuses the run before any write, naming them.

No I/O.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

Obj = t.Dict[str, t.Any]

# The label MultiKueue puts on the Workloads (and jobs) it creates on a worker (v0.19.2 MultiKueueOriginLabel).
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
# How many holding workloads a message names (the count is always given).
NAMED_HOLDERS = 5
# What a retired worker's teardown deletes: the collection's objects of the tenancy and of MultiKueue's identity —
# not those of its other components (a Kueue or KEDA the collection installed there, node pools) — by label.
TEARDOWN_SELECTOR = "app.kubernetes.io/managed-by=gpuaas.platform,gpuaas.io/component in (tenants,multikueue)"


def finished(workload: t.Mapping[str, t.Any]) -> bool:
    """A Workload with condition Finished=True holds no quota and runs nothing."""
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Finished" and cond.get("status") == "True":
            return True
    return False


def _ref(workload: t.Mapping[str, t.Any]) -> str:
    meta = workload.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def dispatched_to(manager_workloads: t.Iterable[t.Mapping[str, t.Any]], worker: str) -> t.List[str]:
    """Manager Workloads MultiKueue placed on ``worker`` that have not finished (``namespace/name``, sorted)."""
    return sorted(_ref(w) for w in manager_workloads
                  if (w.get("status") or {}).get("clusterName") == worker and not finished(w))


def unfinished_on_worker(worker_workloads: t.Iterable[t.Mapping[str, t.Any]],
                         tenant_namespaces: t.Collection[str]) -> t.List[str]:
    """Workloads on a worker that have not finished: MultiKueue's copies (its origin label) and any workload in a
    namespace where the collection made a LocalQueue (a tenant who submitted on the worker directly)."""
    return sorted(_ref(w) for w in worker_workloads if not finished(w) and (
        ((w.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL)
        or (w.get("metadata") or {}).get("namespace") in tenant_namespaces))


@dataclass
class WorkerPlan:
    """What the run does with the workers that are not present workers of the inventory."""
    keep: t.List[str] = field(default_factory=list)      # stay in the MultiKueueConfig, untouched
    remove: t.List[str] = field(default_factory=list)    # drained: config entry, MultiKueueCluster, Secret go
    problems: t.List[str] = field(default_factory=list)  # refuse the run before any write
    warnings: t.List[str] = field(default_factory=list)


def plan_removed_workers(live: t.Iterable[str], present: t.Iterable[str], retired: t.Iterable[str],
                         holders: t.Mapping[str, t.Sequence[str]], prune_workers: bool) -> WorkerPlan:
    """``live``: the MultiKueueClusters the collection made on the manager; ``present``/``retired``: the inventory's
    workers by state; ``holders``: per removed worker, the unfinished workloads it holds (see the module doc)."""
    present_names = set(present)
    removed = sorted((set(live) | set(retired)) - present_names)
    plan = WorkerPlan()
    for name in removed:
        held = list(holders.get(name) or [])
        if not prune_workers:
            plan.keep.append(name)
            plan.warnings.append(
                "worker %r is no longer a present worker of gpuaas_clusters but is kept: still in the "
                "MultiKueueConfig, its MultiKueueCluster and kubeconfig Secret untouched%s (gpuaas_fleet_prune_workers "
                "is false). To remove it, set gpuaas_fleet_prune_workers: true (it is removed once it holds no "
                "workload), or list it again" % (name, "; it holds %d unfinished workload%s" % (
                    len(held), "" if len(held) == 1 else "s") if held else ""))
            continue
        if held:
            plan.keep.append(name)
            plan.problems.append(
                "worker %r cannot be removed: %d workload%s dispatched to it %s not finished: %s%s" % (
                    name, len(held), "" if len(held) == 1 else "s", "has" if len(held) == 1 else "have",
                    ", ".join(held[:NAMED_HOLDERS]), " …" if len(held) > NAMED_HOLDERS else ""))
            continue
        plan.remove.append(name)
    return plan


REMOVAL_HINT = (
    "removing a worker from the MultiKueueConfig while it runs a workload makes MultiKueue lose it (evicted and "
    "requeued after workerLostTimeout). Let the workloads finish (or delete them on the manager), then run again; "
    "meanwhile the worker still receives new work: to stop that, hold its ClusterQueues on the worker "
    "(stopPolicy: Hold) or keep it listed until the queues are empty")


def teardown_kinds(kueue_namespace: str) -> t.List[t.Tuple[str, str, t.Optional[str]]]:
    """``(apiVersion, kind, namespace)`` of what the collection makes on a worker, in the order a retired worker's
    objects are deleted (queues before what they use, bindings before roles, the token before its ServiceAccount).
    ``namespace`` None: every namespace (cluster-scoped kinds, or label-selected LISTs). Namespaces are not deleted
    (a tenant's other objects live there); Secrets are looked for in the Kueue namespace only (the token)."""
    kueue, rbac, vap, keda = ("kueue.x-k8s.io/v1beta2", "rbac.authorization.k8s.io/v1",
                              "admissionregistration.k8s.io/v1", "keda.sh/v1alpha1")
    return [(keda, "ScaledObject", None), (keda, "ClusterTriggerAuthentication", None),
            (kueue, "LocalQueue", None), (kueue, "ClusterQueue", None), (kueue, "Cohort", None),
            (kueue, "ResourceFlavor", None), (kueue, "WorkloadPriorityClass", None),
            (vap, "ValidatingAdmissionPolicyBinding", None), (vap, "ValidatingAdmissionPolicy", None),
            (rbac, "RoleBinding", None), (rbac, "ClusterRoleBinding", None), (rbac, "ClusterRole", None),
            ("v1", "Secret", kueue_namespace), ("v1", "ServiceAccount", kueue_namespace)]
