# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What an inventory-wide run reads before it builds anything: the inventory from the module options, the nodes,
files on the controller and the Prometheus credential (registered as a secret the moment it is read)."""

from __future__ import annotations

import base64
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception

# Module options -> inventory variables (the shape TenantModel.from_inventory parses).
INVENTORY_OPTIONS = (("flavors", "gpuaas_flavors"), ("cohorts", "gpuaas_cohorts"), ("priorities", "gpuaas_priorities"),
                     ("tenants", "gpuaas_tenants"))

SecretSink = t.Callable[[str], None]


def inventory_from_params(params: t.Mapping[str, t.Any], node_pools: bool = False) -> t.Dict[str, t.Any]:
    """The inventory variables a module's options stand for (``node_pools``: with gpuaas_node_pools)."""
    inventory: t.Dict[str, t.Any] = {var: params.get(option) or [] for option, var in INVENTORY_OPTIONS}
    inventory["gpuaas_prometheus"] = params.get("prometheus") or {}
    if params.get("openshift_ai"):  # issue 23 (the tenants and node_pools modules)
        inventory["gpuaas_openshift_ai"] = params.get("openshift_ai")
    if node_pools:
        inventory["gpuaas_node_pools"] = params.get("node_pools") or []
    inventory["gpuaas_allow_overcommit"] = bool(params.get("allow_overcommit"))
    return inventory


def read_nodes(client: t.Any) -> t.List[t.Dict[str, t.Any]]:
    """Name, labels and allocatable of every node (one LIST)."""
    try:
        items = client.resource("v1", "Node").list()
    except ApiException as exc:
        raise translate_api_exception(exc, "list", "nodes")
    return [{"name": (n.get("metadata") or {}).get("name"), "labels": (n.get("metadata") or {}).get("labels") or {},
             "allocatable": (n.get("status") or {}).get("allocatable") or {}} for n in items]


def read_controller_file(path: t.Optional[str], what: str) -> t.Optional[str]:
    """The content of gpuaas_prometheus.<what> (a file on the Ansible controller), None when not set."""
    if not path:
        return None
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        raise GpuaasError("cannot read %s %s: %s" % (what, path, exc),
                          hint="gpuaas_prometheus.%s must be a readable file on the Ansible controller" % what)


class PrometheusCredential:
    """Reads the Prometheus bearer token (inline, token_file or token_secret) and CA file of gpuaas_prometheus.

    Every secret value read goes to ``sink`` (the module's no_log_values) before it can reach a result or a log.
    """

    def __init__(self, client: t.Any, sink: SecretSink = lambda _value: None) -> None:
        self.client = client
        self.sink = sink

    def register(self, value: t.Optional[str]) -> None:
        if value:
            self.sink(value)
            if value.strip() and value.strip() != value:
                self.sink(value.strip())

    def token(self, prom: t.Any) -> t.Optional[str]:
        """The token from the inventory, token_file or token_secret — registered first."""
        if prom.token:
            self.register(prom.token)
            return t.cast(str, prom.token)
        from_file = read_controller_file(prom.token_file, "token_file")
        if from_file:
            self.register(from_file)
            return from_file
        return self.secret_token(prom.token_secret)

    def ca(self, prom: t.Any) -> t.Optional[str]:
        return read_controller_file(prom.ca_file, "ca_file")

    def secret_token(self, ref: t.Optional[t.Mapping[str, str]]) -> t.Optional[str]:
        """The bearer token stored in gpuaas_prometheus.token_secret (one GET)."""
        if not ref:
            return None
        try:
            secret = self.client.resource("v1", "Secret").get(ref["name"], ref["namespace"])
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "Secret %s/%s" % (ref["namespace"], ref["name"]))
        value = ((secret or {}).get("data") or {}).get(ref["key"])
        if not value:
            raise GpuaasError("gpuaas_prometheus.token_secret: Secret %s/%s has no key %r"
                              % (ref["namespace"], ref["name"], ref["key"]),
                              hint="point token_secret at a Secret holding the Prometheus bearer token (key: token)")
        self.sink(value)
        token = base64.b64decode(value).decode()
        self.register(token)
        return token
