# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The thin module side of an inventory-wide run (tenants, node_pools): secrets registered before the invocation is
logged, the runner driven, its warnings and result (Secret data redacted) handed back to Ansible."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    K8S_AUTH_ARG_SPEC,
    KubeAnsibleModule,
    get_client,
    register_secrets,
)

REDACTED = "<redacted>"


class InventoryModule(KubeAnsibleModule):
    """KubeAnsibleModule that also registers ``prometheus.token`` before the invocation is logged.

    ``prometheus`` and a kubeconfig given as a dict are not ``no_log`` options (dicts with other, harmless keys);
    their secret values go to ``no_log_values`` before ``_log_invocation`` writes the parameters to
    syslog/journald, and so are masked there and in every result.
    """

    def register_secrets(self) -> None:
        register_module_secrets(self)


def register_module_secrets(module: t.Any) -> None:
    register_secrets(module)
    token = (module.params.get("prometheus") or {}).get("token")
    if token:
        module.no_log_values.add(str(token))


def redact_secret_data(diffs: t.Optional[t.List[t.Dict[str, t.Any]]]) -> None:
    """Replace the values of Secrets in per-object diffs (the keys stay, so a changed key still shows)."""
    for entry in diffs or []:
        for side in ("before", "after"):
            obj = entry.get(side)
            if isinstance(obj, dict) and obj.get("kind") == "Secret":
                for key in ("data", "stringData"):
                    if isinstance(obj.get(key), dict):
                        obj[key] = {k: REDACTED for k in obj[key]}


def run_module(argument_spec: t.Mapping[str, t.Any], make_runner: t.Callable[[t.Any], t.Any]) -> None:
    """main() of an inventory-wide module: build the module and its runner, run it, report warnings and the result.

    ``make_runner(module)`` returns an object with ``client``, ``warnings``, ``secret_sink`` and ``run()``.
    """
    spec = dict(argument_spec)
    spec.update(K8S_AUTH_ARG_SPEC)
    module = InventoryModule(argument_spec=spec, supports_check_mode=True)
    runner = make_runner(module)
    runner.secret_sink = module.no_log_values.add
    register_module_secrets(module)  # also when invocation logging is off (no_log, ANSIBLE_NO_LOG)
    try:
        runner.client = get_client(module)
        result = runner.run()
    except GpuaasError as err:
        for warning in runner.warnings:
            module.warn(warning)
        fail_module(module, err, changed=False)
        return
    for warning in runner.warnings:
        module.warn(warning)
    module.exit_json(**result)
