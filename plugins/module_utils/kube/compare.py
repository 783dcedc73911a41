# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Comparing desired and live objects on the fields one field manager owns (``metadata.managedFields``).

Pure functions: a field dropped from the desired state is detected (server-side apply would remove it), and
fields other managers or CRD defaulting set never show as drift."""

from __future__ import annotations

import copy
import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.quantity import quantity_value
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import FIELD_MANAGER


def scalar_equal(desired: t.Any, live: t.Any) -> bool:
    """Equality of two scalars, treating quantities canonically ("1Ti" == "1099511627776", "8" == 8)."""
    if desired == live and type(desired) is type(live):
        return True
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    if isinstance(desired, (int, float)) and isinstance(live, (int, float)):
        return desired == live
    qd, ql = quantity_value(desired), quantity_value(live)
    if qd is None or ql is None:
        return False
    return qd == ql


# -- managedFields helpers ------------------------------------------------------------------------------

def owned_fields(obj: t.Mapping[str, t.Any], manager: str = FIELD_MANAGER,
                 api_version: t.Optional[str] = None) -> t.Optional[t.Dict[str, t.Any]]:
    """The fieldsV1 set applied by ``manager`` (merged over its Apply entries), or None when it owns nothing.

    When ``api_version`` is given, entries recorded for another API version make the result None
    (their field names may differ; the next apply re-records them).
    """
    merged: t.Optional[t.Dict[str, t.Any]] = None
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") != manager or entry.get("operation") != "Apply":
            continue
        if entry.get("subresource"):
            continue
        if api_version and entry.get("apiVersion") not in (None, api_version):
            return None
        merged = _merge_fields(merged or {}, entry.get("fieldsV1") or {})
    return merged


def _merge_fields(a: t.Dict[str, t.Any], b: t.Dict[str, t.Any]) -> t.Dict[str, t.Any]:
    out = dict(a)
    for key, sub in b.items():
        out[key] = _merge_fields(out.get(key) or {}, sub or {}) if key in out else sub
    return out


def _match_key(element: t.Any, keyobj: t.Mapping[str, t.Any]) -> bool:
    if not isinstance(element, dict):
        return False
    return all(k in element and scalar_equal(v, element[k]) for k, v in keyobj.items())


def _has_list_keys(fields: t.Optional[t.Mapping[str, t.Any]]) -> bool:
    return bool(fields) and any(k[:2] in ("k:", "v:", "i:") for k in fields)  # type: ignore[union-attr]


def fields_covered(fields: t.Mapping[str, t.Any], value: t.Any) -> bool:
    """Whether every path of the fieldset ``fields`` exists in ``value`` (desired object).

    False means the desired object no longer sets a field this manager owns: applying it would remove
    that field, so the object has changed.
    """
    for key, sub in fields.items():
        if key == ".":
            continue
        prefix, rest = key[:2], key[2:]
        if prefix == "f:":
            if not isinstance(value, dict) or rest not in value:
                return False
            if sub and not fields_covered(sub, value[rest]):
                return False
        elif prefix == "k:":
            if not isinstance(value, list):
                return False
            try:
                keyobj = json.loads(rest)
            except ValueError:
                return False
            match = next((e for e in value if _match_key(e, keyobj)), None)
            if match is None:
                return False
            if sub and not fields_covered(sub, match):
                return False
        elif prefix == "v:":
            if not isinstance(value, list):
                return False
            try:
                val = json.loads(rest)
            except ValueError:
                return False
            if not any(scalar_equal(val, e) or val == e for e in value):
                return False
        elif prefix == "i:":
            if not isinstance(value, list):
                return False
            idx = int(rest)
            if idx >= len(value):
                return False
            if sub and not fields_covered(sub, value[idx]):
                return False
    return True


def project(obj: t.Any, fields: t.Optional[t.Mapping[str, t.Any]]) -> t.Any:
    """The part of ``obj`` described by the fieldset ``fields`` (a whole value when ``fields`` is empty)."""
    if not fields:
        return copy.deepcopy(obj)
    if isinstance(obj, dict):
        out: t.Dict[str, t.Any] = {}
        for key, sub in fields.items():
            if key.startswith("f:") and key[2:] in obj:
                out[key[2:]] = project(obj[key[2:]], sub)
        return out
    if isinstance(obj, list):
        items = []
        for key, sub in fields.items():
            if key.startswith("k:"):
                try:
                    keyobj = json.loads(key[2:])
                except ValueError:
                    continue
                for element in obj:
                    if _match_key(element, keyobj):
                        items.append(project(element, {k: v for k, v in (sub or {}).items() if k != "."} or {}))
                        break
            elif key.startswith("v:"):
                try:
                    items.append(json.loads(key[2:]))
                except ValueError:
                    continue
            elif key.startswith("i:") and int(key[2:]) < len(obj):
                items.append(project(obj[int(key[2:])], sub))
        return items
    return copy.deepcopy(obj)


def project_like(obj: t.Any, shape: t.Any) -> t.Any:
    """The part of ``obj`` at the keys ``shape`` (a partial object) has; lists and scalars whole (a diff's view)."""
    if isinstance(shape, dict) and isinstance(obj, dict):
        return {k: project_like(obj[k], v) for k, v in shape.items() if k in obj}
    return copy.deepcopy(obj)


def is_subset(desired: t.Any, live: t.Any, fields: t.Optional[t.Mapping[str, t.Any]] = None) -> bool:
    """Recursive "desired ⊆ live" with canonical quantities.

    Lists are compared element by element with equal length, except associative lists (the owned
    fieldset lists them by key), where every desired element must match a distinct live element and
    other managers' extra elements are allowed.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        for key, value in desired.items():
            if key not in live:
                return False
            sub = (fields or {}).get("f:%s" % key) if fields else None
            if not is_subset(value, live[key], sub):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list):
            return False
        if _has_list_keys(fields):
            used: t.Set[int] = set()
            for element in desired:
                found = False
                for idx, candidate in enumerate(live):
                    if idx not in used and is_subset(element, candidate):
                        used.add(idx)
                        found = True
                        break
                if not found:
                    return False
            return True
        if len(desired) != len(live):
            return False
        return all(is_subset(d, lv) for d, lv in zip(desired, live))
    return scalar_equal(desired, live)


def strip_none(value: t.Any) -> t.Any:
    """Drop None values recursively (None means "not set" in our builders)."""
    if isinstance(value, dict):
        return {k: strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_none(v) for v in value if v is not None]
    return value
