# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What marks an object as the collection's own, defined once.

Every object the collection writes is applied by one server-side-apply field manager and carries
``app.kubernetes.io/managed-by: gpuaas.platform``; tenant objects also carry ``gpuaas.io/tenant``. Prune and
delete only ever consider objects with these labels.
"""

from __future__ import annotations

import typing as t

FIELD_MANAGER = "gpuaas.platform"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpuaas.platform"
TENANT_LABEL = "gpuaas.io/tenant"
COMPONENT_LABEL = "gpuaas.io/component"
OWNED_SELECTOR = "%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE)


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
