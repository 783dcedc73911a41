# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the engine knows per kind: apply/delete order (tiers) and readiness conditions."""

from __future__ import annotations

import typing as t

# Dependency tiers: lower tiers are applied first and deleted last.
KIND_TIERS: t.Dict[str, int] = {
    "CustomResourceDefinition": 0,
    "Namespace": 0,
    "PriorityClass": 1,
    "StorageClass": 1,
    "ClusterRole": 1,
    "ServiceAccount": 1,
    # after its ServiceAccount: Kubernetes' token controller deletes a ServiceAccount token Secret whose
    # ServiceAccount does not exist yet (seen on the lab: a fleet run's new worker token Secret, written beside its
    # ServiceAccount in one tier, deleted 0.1 s later; the run then waited for a token that never came)
    "Secret": 2,
    "ConfigMap": 1,
    "ResourceQuota": 1,
    "LimitRange": 1,
    "ValidatingAdmissionPolicy": 1,
    "ResourceFlavor": 2,
    "Cohort": 2,
    "WorkloadPriorityClass": 2,
    "AdmissionCheck": 2,
    "Topology": 2,
    "ProvisioningRequestConfig": 2,
    "Role": 2,
    "ClusterRoleBinding": 2,
    "ValidatingAdmissionPolicyBinding": 2,
    "ClusterQueue": 3,
    "RoleBinding": 3,
    "NetworkPolicy": 3,
    "LocalQueue": 4,
    "TriggerAuthentication": 4,
    "ClusterTriggerAuthentication": 4,
    "Service": 4,
    "Deployment": 5,
    "StatefulSet": 5,
    "Job": 5,
    "ServiceMonitor": 5,
    "ScaledObject": 6,
    "ScaledJob": 6,
}
DEFAULT_TIER = 5

# Readiness used by wait=True when no explicit condition is given. Deployments, StatefulSets and DaemonSets are
# not here: a condition cannot say that a rollout is complete (kube/waiter.py ROLLOUT_CHECKS).
READY_CONDITIONS: t.Dict[str, t.Dict[str, str]] = {
    "ClusterQueue": {"type": "Active", "status": "True"},
    "LocalQueue": {"type": "Active", "status": "True"},
    "ScaledObject": {"type": "Ready", "status": "True"},
    "CustomResourceDefinition": {"type": "Established", "status": "True"},
}


# How to drain an object before it is removed: the fields a separate field manager applies (so the inventory's
# own apply never fights it and a re-added tenant can release it), and the status counters that must reach zero.
DRAIN_SPECS: t.Dict[str, t.Dict[str, t.Any]] = {
    "ClusterQueue": {
        "patch": {"spec": {"stopPolicy": "HoldAndDrain"}},
        "busy_status": ("admittedWorkloads", "reservingWorkloads"),
        "busy_labels": ("admitted", "reserving"),
        "what": "drain (stopPolicy HoldAndDrain)",
        "hint": "the queues stay on stopPolicy HoldAndDrain; wait for the workloads to finish or delete them "
                "(kubectl get workloads -A), or raise gpuaas_drain_timeout, then run again",
    },
}


def tier_of(kind: str) -> int:
    return KIND_TIERS.get(kind, DEFAULT_TIER)
