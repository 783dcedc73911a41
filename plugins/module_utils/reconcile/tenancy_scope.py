# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a tenancy run reads and may prune: its LIST selector and its prune scope."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    COMPONENT_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    TENANT_LABEL,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import PruneScope
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders

OWNED_SELECTOR = "%s=%s,%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE, COMPONENT_LABEL, builders.COMPONENT_VALUE)

# Shared (not per tenant) kinds: neither applied nor pruned with limit_tenants.
SHARED_KINDS = ("ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding", "ClusterTriggerAuthentication", "Secret")


def tenants_selector(limit: t.Optional[t.Sequence[str]]) -> str:
    """The LIST selector of a run: what the collection owns, only the named tenants' objects with limit_tenants.

    A limited run (onboard/offboard one tenant) then reads what that tenant has, not the whole tenancy; the
    cross-tenant checks (namespace claims, capacity) work on the inventory and the nodes, not on these LISTs.
    """
    if limit is None:
        return OWNED_SELECTOR
    return "%s,%s in (%s)" % (OWNED_SELECTOR, TENANT_LABEL, ",".join(sorted(set(limit))))


def owned_by_tenants(obj: t.Mapping[str, t.Any]) -> bool:
    """Whether ``obj`` carries the labels of OWNED_SELECTOR (written by the tenants module)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and labels.get(COMPONENT_LABEL) == builders.COMPONENT_VALUE


class TenantsScope(PruneScope):
    """Prune scope: objects of the tenants component, optionally only those of some tenants.

    Where each namespaced kind is looked for: the one Secret this module writes (gpuaas-prometheus) lives in the
    KEDA namespace, so Secrets are read there only (``keda_namespace``), never cluster-wide: the shipped
    least-privilege account may read Secrets only there, and no run should pull every Secret of the cluster to
    prune one. A Secret left in a former KEDA namespace is then no longer pruned (that account could not delete it
    there either). LocalQueues, RoleBindings and ScaledObjects stay one label-selected LIST across namespaces: the
    shipped role may list them cluster-wide (tenant namespace names come from the inventory, they cannot be pinned),
    one request per kind instead of one per namespace, and a removed tenant's objects are found wherever they are,
    also in a namespace that lost its tenant label or is no longer listed anywhere.
    """

    def __init__(self, kinds: t.Sequence[t.Tuple[str, str]], tenants: t.Optional[t.Sequence[str]] = None,
                 declared: t.Optional[t.Iterable[str]] = None, keda_namespace: t.Optional[str] = None) -> None:
        """``declared``: safe mode — only objects of these tenants may be pruned; the others are ``kept``."""
        super().__init__(kinds, labels={COMPONENT_LABEL: builders.COMPONENT_VALUE},
                         require_tenant_label=False,
                         kind_namespaces={"Secret": [keda_namespace] if keda_namespace else []})
        self.only = set(tenants) if tenants is not None else None
        self.declared = set(declared) if declared is not None else None
        self.kept: t.List[t.Mapping[str, t.Any]] = []

    def matches(self, obj: t.Mapping[str, t.Any]) -> bool:
        if not super().matches(obj):
            return False
        tenant = ((obj.get("metadata") or {}).get("labels") or {}).get(TENANT_LABEL)
        if self.only is not None:
            return tenant in self.only
        if self.declared is not None and tenant not in self.declared:
            self.kept.append(obj)  # not the inventory's to remove (safe mode): reported as drift if not desired
            return False
        return True


def served_kinds(client: t.Any, kueue_av: str, limit: t.Optional[t.Sequence[str]],
                 delete_namespaces: bool) -> t.List[t.Tuple[str, str]]:
    """The managed kinds the cluster serves that a run may prune (Namespaces only with delete_namespaces)."""
    kinds = []
    for av, kind in builders.MANAGED_KINDS:
        if kind == "Namespace" and not delete_namespaces:
            continue
        if av.startswith("kueue.x-k8s.io/"):
            av = kueue_av
        elif not client.served(av):
            continue
        if limit is not None and kind in SHARED_KINDS:
            continue
        kinds.append((av, kind))
    return kinds
