# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What an inventory-wide run reads before it builds anything: the inventory from the module options (the
Prometheus setting completed by the AWX credential's environment) and the nodes. The Prometheus credential is read
by the one resolver, ``prometheus_credential.py`` (registered as a secret the moment it is read)."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.prometheus_credential import (
    PrometheusCredential,
    SecretSink,
    secret_reader,
    with_environment,
)

# Module options -> inventory variables (the shape TenantModel.from_inventory parses).
INVENTORY_OPTIONS = (("flavors", "gpuaas_flavors"), ("cohorts", "gpuaas_cohorts"), ("priorities", "gpuaas_priorities"),
                     ("tenants", "gpuaas_tenants"))


def inventory_from_params(params: t.Mapping[str, t.Any], node_pools: bool = False) -> t.Dict[str, t.Any]:
    """The inventory variables a module's options stand for (``node_pools``: with gpuaas_node_pools).

    ``gpuaas_prometheus`` takes the token and CA of the AWX Prometheus credential's environment where it leaves
    them empty, as every reader does; never its URL: KEDA's pods read the inventory's URL in the cluster.
    """
    inventory: t.Dict[str, t.Any] = {var: params.get(option) or [] for option, var in INVENTORY_OPTIONS}
    inventory["gpuaas_prometheus"] = with_environment(params.get("prometheus"), url=False)
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


def prometheus_credential(client: t.Any, sink: SecretSink) -> PrometheusCredential:
    """The resolver reading gpuaas_prometheus's token (a token Secret through ``client``) and CA for KEDA."""
    return PrometheusCredential(secret_reader(client), sink)
