# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The MultiKueue fleet options of the tenants module (docs/multicluster.md; reconcile/fleet_runner.py)."""

    DOCUMENTATION = r"""
options:
  clusters:
    description:
      - "A MultiKueue fleet (inventory C(gpuaas_clusters)): C({manager: {name, auth, kueue_namespace}, workers: [{name,
        auth, kueue_namespace, api_server, token_expiration_seconds, flavors: [{name, capacity}]}]}). C(auth) takes the
        connection options of this module per cluster; its credentials (C(api_key), C(password), an inline
        kubeconfig's tokens and keys) are masked in logs and results. See the C(gpuaas.platform.tenants) role's
        argument spec for every key."
      - Not set (default), the module converges the one cluster of its connection options.
      - In a fleet nodes are not read (O(check_capacity) does not apply), each worker declares its capacity per flavor.
    type: dict
  prune_workers:
    description:
      - With O(clusters), remove the workers that are no longer present workers (entry gone, or C(state=absent)) -
        out of the MultiKueueConfig, their MultiKueueCluster and kubeconfig Secret deleted on the manager, and for a
        C(state=absent) entry the objects this collection made on the worker deleted (namespaces stay). Only objects
        carrying this collection's ownership label are deleted.
      - A worker to remove that holds an unfinished workload (a manager Workload dispatched to it, or a workload on
        it) stops the run before any write on any cluster, naming the workloads.
      - False (default), such a worker is kept as it is (still in the MultiKueueConfig) and reported in a warning.
    type: bool
    default: false
  reachable_only:
    description:
      - With O(clusters), converge the manager and the reachable workers when a worker cannot be reached; the
        unreachable workers are skipped (nothing read or written there, their MultiKueueCluster and kubeconfig Secret
        on the manager left as they are) and reported (C(skipped) in RV(workers) and a warning).
      - False (default), an unreachable cluster stops the run before any write on any cluster. An unreachable manager
        always does.
    type: bool
    default: false
  rotate_workers:
    description:
      - With O(clusters), rotate MultiKueue's credential on these present workers (C(*) - every present worker) in
        this run - under the run locks, MultiKueue's ServiceAccount and its token Secret are deleted on each (every
        token of the old ServiceAccount is refused from then on), then written again with the rest of the fleet, and
        the manager's kubeconfig Secret of the worker carries the new ServiceAccount's token (a new bound token with
        C(token_expiration_seconds)). Meanwhile that worker's MultiKueueCluster is inactive.
      - A name that is not a present worker, an unreachable worker, or O(limit_tenants) stops the run before any write.
      - Empty (default), no credential is rotated.
    type: list
    elements: str
    default: []
"""
