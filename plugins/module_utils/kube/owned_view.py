# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the apply engine decides and shows per object, seen through one field manager's owned fields: the action
(created / updated / unchanged) and the before/after views of a diff (the owned fields plus the object's identity).

Pure functions over compare.py; the engine (kube/engine.py) calls them with its field manager."""

from __future__ import annotations

import copy
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.compare import (
    fields_covered,
    is_subset,
    owned_fields,
    project,
)


def classify(desired: t.Mapping[str, t.Any], live: t.Optional[t.Mapping[str, t.Any]], field_manager: str) -> str:
    """'created', 'updated' or 'unchanged' for ``desired`` against ``live`` (owned fields only)."""
    if live is None:
        return "created"
    fields = owned_fields(live, field_manager, desired.get("apiVersion"))
    if fields is None:
        return "updated"  # we do not own it (yet): apply to take ownership
    if not is_subset(desired, live, fields):
        return "updated"
    if not fields_covered(fields, desired):
        return "updated"  # a field we set before is no longer desired: SSA removes it
    return "unchanged"


def before_view(live: t.Optional[t.Mapping[str, t.Any]], field_manager: str) -> t.Dict[str, t.Any]:
    """The diff's before: the fields ``field_manager`` owns in ``live`` ({} for an object that does not exist)."""
    if live is None:
        return {}
    fields = owned_fields(live, field_manager)
    view = project(live, fields) if fields else {}
    return with_identity(view, live)


def after_view(obj: t.Mapping[str, t.Any], fallback: t.Mapping[str, t.Any], field_manager: str) -> t.Dict[str, t.Any]:
    """The diff's after: the owned fields of the applied ``obj``, or ``fallback`` (the desired object) when the
    answer carries no managedFields (a fake, or an old API server)."""
    fields = owned_fields(obj, field_manager)
    view = project(obj, fields) if fields else copy.deepcopy(dict(fallback))
    return with_identity(view, obj)


def with_identity(view: t.Dict[str, t.Any], obj: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """``view`` with the apiVersion, kind, name and namespace of ``obj``, so that every diff names its object."""
    meta = obj.get("metadata") or {}
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind")}
    out.update(view)
    vmeta = dict(out.get("metadata") or {})
    vmeta["name"] = meta.get("name")
    if meta.get("namespace"):
        vmeta["namespace"] = meta["namespace"]
    out["metadata"] = vmeta
    return out
