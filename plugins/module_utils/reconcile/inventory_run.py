# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What every inventory-wide run (tenants, node_pools) holds, once: its client, options, modes, clock, warnings,
secret sink and run lock.

The client is given at construction and owned here: ``entry.run_module`` makes it from the module's connection
options (unit tests give a fake), and the run lock uses the run's client rather than a copy of its own.
"""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.run_lock import RUN_LOCK_ARGUMENT_SPEC, RunLock

# The options both inventory runs take, as the tenants role passes them: the inventory sections, the capacity check,
# the KEDA namespace, prune and the run lock (each module adds its own; documented in plugins/modules/tenants.py and
# plugins/modules/node_pools.py).
INVENTORY_RUN_ARGUMENT_SPEC: t.Dict[str, t.Any] = dict(
    flavors=dict(type="list", elements="dict", default=[]),
    cohorts=dict(type="list", elements="dict", default=[]),
    priorities=dict(type="list", elements="dict", default=[]),
    tenants=dict(type="list", elements="dict", default=[]),
    prometheus=dict(type="dict", no_log=False),
    openshift_ai=dict(type="dict"),
    allow_overcommit=dict(type="bool", default=False),
    check_capacity=dict(type="bool", default=True),
    keda_namespace=dict(type="str"),
    prune=dict(type="bool", default=False),
    **RUN_LOCK_ARGUMENT_SPEC,
)


class InventoryRun:
    """The state shared by the tenants and node pools runs (separate from AnsibleModule, so that unit tests can drive
    a run with a fake client)."""

    def __init__(self, client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False, diff: bool = False,
                 sleep: t.Callable[[float], None] = time.sleep, clock: t.Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.params = params
        self.check_mode = check_mode
        self.diff = diff
        self.sleep = sleep
        self.clock = clock
        self.warnings: t.List[str] = []
        # Called with every secret value read at run time (token_file, token_secret), so the module can register
        # it with no_log_values before anything that could contain it is returned or logged.
        self.secret_sink: t.Callable[[str], None] = lambda _value: None
        # The one Lease both runs hold (run_lock.py); it reads this run's client, options, mode and clock.
        self.run_lock = RunLock(self)

    def finish(self, out: t.Dict[str, t.Any], capacity: t.Any, nodes_read: bool) -> t.Dict[str, t.Any]:
        """``out`` with what every inventory run returns besides its own keys: the GPU capacity per flavor when the
        nodes were read (the capacity check is on), and the lock the run held (none: no C(lock) key)."""
        if nodes_read:
            out["capacity"] = capacity
        lock = self.run_lock.report()
        if lock:
            out["lock"] = lock
        return out
