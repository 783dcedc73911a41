# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The run lock of the inventory runners (tenants, node_pools): one Lease, the same options, the same messages.

Both runs write objects the other reads or shares (ScaledObjects, the Prometheus credential's Secrets, KEDA's
trigger authentications), so they hold the same Lease (``gpuaas-tenants`` in ``kube-system`` by default): a node pools
run and a tenants run of two automation jobs never interleave their writes (issue 22, item 5).
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.lease import LeaseLock, read_holder

DEFAULT_LOCK_NAME = "gpuaas-tenants"
DEFAULT_LOCK_NAMESPACE = "kube-system"

# The lock options, as both modules take them (documented once in the doc fragment gpuaas.platform.run_lock).
RUN_LOCK_ARGUMENT_SPEC: t.Dict[str, t.Any] = dict(
    lock=dict(type="bool", default=True),
    lock_namespace=dict(type="str", default=DEFAULT_LOCK_NAMESPACE),
    lock_name=dict(type="str", default=DEFAULT_LOCK_NAME),
    lock_wait=dict(type="int", default=60),
    lock_duration=dict(type="int", default=60),
)


class RunLock:
    """The Lease a run that writes holds from its first write to its end (see kube/lease.py for the protocol).

    ``run`` is the run that holds it (``inventory_run.InventoryRun``): the lock talks to the API server with the run's
    client, reads the lock options from its parameters, follows its check mode and clock and adds to its warnings;
    it keeps no client of its own.
    """

    def __init__(self, run: t.Any) -> None:
        self.run = run
        self.lease: t.Optional[LeaseLock] = None

    def take(self) -> bool:
        """Hold the Lease for a run that writes; in check mode warn about a holder. True when this run holds it."""
        run = self.run
        p = run.params
        if not p.get("lock", True):
            return False
        name = p.get("lock_name") or DEFAULT_LOCK_NAME
        namespace = p.get("lock_namespace") or DEFAULT_LOCK_NAMESPACE
        if run.check_mode:
            holder = read_holder(run.client, name, namespace)
            if holder:
                run.warnings.append("another run (holder %s) holds the lock since %s: a real run would wait for it"
                                    % (holder.get("holderIdentity"), holder.get("acquireTime")))
            return False
        lease = LeaseLock(run.client, name, namespace, wait=float(p.get("lock_wait", 60)),
                          duration=int(p.get("lock_duration") or 60), sleep=run.sleep, clock=run.clock)
        try:
            lease.acquire()
        except GpuaasError as err:
            if err.details.get("status") != 403:
                raise
            # Credentials without rights on the lock Lease: run unguarded, but say so loudly.
            run.warnings.append(
                "the lock %s could not be taken (forbidden): this run is not guarded against a concurrent run. "
                "Grant get, create, update and delete on leases.coordination.k8s.io in %s to the automation "
                "account, or set gpuaas_tenants_lock: false to silence this" % (lease.ref, lease.namespace))
            return False
        self.lease = lease
        lease.start_renewal()
        if lease.took_over:
            run.warnings.append("took over the lock %s from %s, which had not renewed it for %ss (a run that "
                                "died?)" % (lease.ref, lease.took_over, lease.duration))
        return True

    def confirm(self, before: str) -> None:
        """LockLost unless this run still holds its lock (nothing to confirm without one: check mode, lock off)."""
        if self.lease is not None and not self.run.check_mode:
            self.lease.confirm(before)

    def release(self) -> None:
        """Give the Lease back; a failed release is a warning, except when the API server is gone (said already)."""
        if self.lease is None:
            return
        unreachable = getattr(self.run.client, "unreachable", None) is not None
        warning = self.lease.release()
        if warning and not unreachable:
            self.run.warnings.append(warning)

    def report(self) -> t.Optional[t.Dict[str, t.Any]]:
        """The module's C(lock) return value, None when no lock was held."""
        if self.lease is None:
            return None
        return {"lease": self.lease.ref, "holder": self.lease.identity, "waited": round(self.lease.waited, 1),
                "took_over": self.lease.took_over}
