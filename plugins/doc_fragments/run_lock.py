# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The run lock options of the inventory modules (tenants, node_pools): one Lease for both."""

    DOCUMENTATION = r"""
options:
  lock:
    description:
      - Hold the cluster-side C(coordination.k8s.io/v1) Lease O(lock_name) in O(lock_namespace) during a run that
        writes. M(gpuaas.platform.tenants) and M(gpuaas.platform.node_pools) hold the same Lease, so two automation
        runs never interleave their writes (the pools' ScaledObjects and credential live beside the tenants').
      - The holder renews it in the background and releases it at the end; another run waits up to O(lock_wait)
        seconds, then fails with who holds the lock since when. A Lease not renewed for O(lock_duration) seconds
        (of this host's own clock) is taken over. Check mode takes no lock but warns when another run holds it.
      - An account without rights on the Lease runs unguarded, with a warning.
    type: bool
    default: true
  lock_namespace:
    description: Namespace of the lock Lease (it must exist; C(kube-system) always does).
    type: str
    default: kube-system
  lock_name:
    description: Name of the lock Lease.
    type: str
    default: gpuaas-tenants
  lock_wait:
    description: Seconds to wait for another run's lock before failing.
    type: int
    default: 60
  lock_duration:
    description: Seconds after its last renewal that a lock of a run that died is taken over (renewed every third).
    type: int
    default: 60
"""
