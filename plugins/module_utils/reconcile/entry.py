# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The thin module side of an inventory-wide run (tenants, node_pools): secrets registered before the invocation is
logged, the runner driven, its warnings and result (Secret data redacted) handed back to Ansible."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, fail_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.auth import K8S_AUTH_ARG_SPEC, kubeconfig_secrets
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import get_client
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule

REDACTED = "<redacted>"


class InventoryModule(GpuaasModule):
    """The collection's one module base (``module_base.GpuaasModule``): the connection options, and every
    credential — kubeconfig secrets, ``prometheus.token`` inline, from a token file or from the AWX credential's
    environment — registered before ``_log_invocation`` writes the parameters to syslog/journald, so they are
    masked there and in every result. Its own name only says which modules run an inventory-wide runner."""

    # the runners read the credential (token file, Secret) under the run lock and register it then (secret_sink)
    read_token_files_at_start = False

    def register_secrets(self) -> None:
        super().register_secrets()
        for value in fleet_secrets(self.params.get("clusters") if "clusters" in self.argument_spec else None):
            self.register_secret(value)


# The connection options that are credentials (no_log in K8S_AUTH_ARG_SPEC), aliases included.
_SECRET_AUTH_KEYS = {key for name, spec in K8S_AUTH_ARG_SPEC.items() if spec.get("no_log")
                     for key in (name,) + tuple(spec.get("aliases", ()))}


def fleet_secrets(clusters: t.Any) -> t.List[str]:
    """Every credential in the ``auth`` of the fleet's clusters (option clusters = gpuaas_clusters): tokens,
    passwords, and what an inline kubeconfig carries, so none reaches the logged invocation or a result."""
    if not isinstance(clusters, t.Mapping):
        return []
    entries = [clusters.get("manager")] + list(clusters.get("workers") or [])
    out: t.List[str] = []
    for entry in entries:
        auth = entry.get("auth") if isinstance(entry, t.Mapping) else None
        if not isinstance(auth, t.Mapping):
            continue
        for key, value in auth.items():
            if key in _SECRET_AUTH_KEYS and isinstance(value, str) and value:
                out.append(value)
        if isinstance(auth.get("kubeconfig"), t.Mapping):
            out.extend(kubeconfig_secrets(auth["kubeconfig"]))
    return out


def redact_secret_data(diffs: t.Optional[t.List[t.Dict[str, t.Any]]]) -> None:
    """Replace the values of Secrets in per-object diffs (the keys stay, so a changed key still shows)."""
    for entry in diffs or []:
        for side in ("before", "after"):
            obj = entry.get(side)
            if isinstance(obj, dict) and obj.get("kind") == "Secret":
                for key in ("data", "stringData"):
                    if isinstance(obj.get(key), dict):
                        obj[key] = {k: REDACTED for k in obj[key]}


def run_module(argument_spec: t.Mapping[str, t.Any], make_runner: t.Callable[[t.Any, t.Any], t.Any]) -> None:
    """main() of an inventory-wide module: build the module, its client and its runner, run it, report warnings and
    the result.

    The client is made here, once, before the runner: ``make_runner(module, client)`` returns an object built with
    that client (its run lock uses the same one) with ``warnings``, ``secret_sink`` and ``run()``.
    """
    module = InventoryModule(argument_spec=argument_spec, supports_check_mode=True)  # registers every secret
    warnings: t.List[str] = []
    try:
        # a fleet run (the tenants option clusters) connects to each cluster with that cluster's own options
        client = None if module.params.get("clusters") else get_client(module)
        runner = make_runner(module, client)
        warnings = runner.warnings
        runner.secret_sink = module.register_secret  # a token read later (a Secret): as given, stripped, base64
        result = runner.run()
    except GpuaasError as err:
        for warning in warnings:
            module.warn(warning)
        fail_module(module, err, changed=False)
        return
    for warning in warnings:
        module.warn(warning)
    module.exit_json(**result)
