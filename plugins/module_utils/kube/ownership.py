# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What marks an object as the collection's own, defined once.

Every object the collection writes is applied by one server-side-apply field manager and carries
``app.kubernetes.io/managed-by: gpuaas.platform``; tenant objects also carry ``gpuaas.io/tenant``. Prune and
delete only ever consider objects with these labels.

An object of the same name that does not carry the managed-by label belongs to someone else (a hand-made
ClusterQueue, a namespace of another team). Reconciles that guard ownership (``ApplyEngine(guard_ownership=True)``)
refuse to take it over unless it is named in the adopt list (``Kind/name``, ``Kind/namespace/name`` or ``*``), or
an admin already handed it over by giving it the tenant label of the tenant that wants it.
"""

from __future__ import annotations

import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError

FIELD_MANAGER = "gpuaas.platform"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpuaas.platform"
TENANT_LABEL = "gpuaas.io/tenant"
COMPONENT_LABEL = "gpuaas.io/component"
OWNED_SELECTOR = "%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE)
# The adopt-list entry that adopts every object of the same name.
ADOPT_ALL = "*"


def add_ownership(labels: t.Dict[str, str], tenant: t.Optional[str] = None,
                  component: t.Optional[str] = None) -> t.Dict[str, str]:
    """Set the ownership labels on ``labels`` (in place; returned for chaining). An existing tenant label wins."""
    labels[MANAGED_BY_LABEL] = MANAGED_BY_VALUE
    if component:
        labels[COMPONENT_LABEL] = component
    if tenant and TENANT_LABEL not in labels:
        labels[TENANT_LABEL] = tenant
    return labels


def is_owned(obj: t.Mapping[str, t.Any]) -> bool:
    """True when ``obj`` carries the managed-by label of this collection."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


def tenant_of(obj: t.Mapping[str, t.Any]) -> t.Optional[str]:
    """The tenant label of ``obj``, or None."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(TENANT_LABEL)


def adoption_name(kind: str, name: str, namespace: t.Optional[str] = None) -> str:
    """How an adopt list names an object: ``Kind/name`` (cluster-scoped) or ``Kind/namespace/name``."""
    return "%s/%s/%s" % (kind, namespace, name) if namespace else "%s/%s" % (kind, name)


def adopt_requested(adopt: t.Iterable[str], kind: str, name: str, namespace: t.Optional[str] = None) -> bool:
    """True when ``adopt`` names the object (kind case-insensitive) or is ``*``."""
    wanted = adoption_name(kind, name, namespace).lower()
    return any(entry == ADOPT_ALL or entry.strip().lower() == wanted for entry in adopt)


def field_managers(obj: t.Mapping[str, t.Any]) -> t.List[str]:
    """The field managers of ``obj`` (``metadata.managedFields``), each once, as ``manager (operation)``.

    A manager of a subresource only (a controller writing ``status``) is marked so: ``kueue (Update, status)``.
    """
    out: t.List[str] = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        label = "%s (%s%s)" % (entry.get("manager") or "unknown", entry.get("operation") or "Update",
                               ", %s" % entry["subresource"] if entry.get("subresource") else "")
        if label not in out:
            out.append(label)
    return out


def written_by(obj: t.Mapping[str, t.Any], field_manager: str = FIELD_MANAGER) -> bool:
    """True when ``field_manager`` owns fields of ``obj`` (it wrote the object, even if its label was removed)."""
    return any(entry.get("manager") == field_manager for entry in (obj.get("metadata") or {}).get("managedFields") or [])


def refuse_or_adopt(desired: t.Sequence[t.Tuple[t.Any, t.Mapping[str, t.Any]]],
                    live: t.Mapping[t.Tuple[str, str, str], t.Mapping[str, t.Any]], adopt: t.Sequence[str],
                    absent: t.Container[t.Tuple[str, str, str]] = (), field_manager: str = FIELD_MANAGER
                    ) -> t.List[t.Dict[str, t.Any]]:
    """The ownership guard: the objects to adopt, or a GpuaasError naming every existing object of a desired name
    that the collection does not own (``desired``: (ObjectRef, object) pairs; ``absent``: keys deleted earlier in
    the run, treated as absent)."""
    adopted: t.List[t.Dict[str, t.Any]] = []
    refused: t.List[t.Dict[str, t.Any]] = []
    for ref, obj in desired:
        current = live.get(ref.key)
        if current is None or ref.key in absent or is_owned(current) or written_by(current, field_manager):
            continue
        entry = ref.to_dict()
        entry["managers"] = field_managers(current)
        wanted_tenant = (obj["metadata"].get("labels") or {}).get(TENANT_LABEL)
        live_tenant = ((current.get("metadata") or {}).get("labels") or {}).get(TENANT_LABEL)
        if adopt_requested(adopt, ref.kind, ref.name, ref.namespace):
            entry["reason"] = "adopt list"
            adopted.append(entry)
        elif wanted_tenant and live_tenant == wanted_tenant:
            # An admin labelled it for this very tenant (the documented hand-over of an existing namespace).
            entry["reason"] = "labelled %s=%s" % (TENANT_LABEL, live_tenant)
            adopted.append(entry)
        else:
            refused.append(entry)
    if refused:
        names = [adoption_name(r["kind"], r["name"], r.get("namespace")) for r in refused]
        one = len(refused) == 1
        raise GpuaasError(
            "refusing to take over %d existing object%s that gpuaas.platform does not manage (no label %s=%s), "
            "nothing was applied: %s" % (len(refused), "" if one else "s", MANAGED_BY_LABEL, MANAGED_BY_VALUE,
                                         ", ".join(names)),
            hint="to let the collection take %s over (label %s, then manage and prune %s like its own), list %s "
                 "in gpuaas_tenants_adopt (module option adopt), for example gpuaas_tenants_adopt: %s, or ['*'] "
                 "for every such object; otherwise rename the inventory's object or remove the existing one"
                 % ("it" if one else "them", "it" if one else "them", "it" if one else "them",
                    "it" if one else "them", json.dumps(names)),
            problems=["%s is not managed by gpuaas.platform; field managers: %s"
                      % (name, ", ".join(r["managers"]) or "none recorded") for name, r in zip(names, refused)],
            details={"reason": "NotOwned", "not_owned": refused, "adoptable": adopted})
    return adopted
