# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The primitives every inventory section parser is written on.

A ``Validator`` collects *every* problem with its path (``gpuaas_tenants[3].quotas[0].flavor``) and every warning,
instead of stopping at the first: the user fixes the whole inventory in one pass. Its field checks report a
problem and return ``None`` (or an empty value), so a parser goes on reading the rest of the entry.
"""

from __future__ import annotations

import difflib
import re
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import (
    MAX_LABEL,
    MAX_SUBDOMAIN,
    is_label_key,
    is_label_value,
    is_name,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity, quantity_text

SUBDOMAIN_TEXT = "a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"
LABEL_TEXT = "a DNS-1123 label (lower-case letters, digits and '-', starting and ending alphanumeric)"


class InventoryError(ValidationError):
    """The inventory has problems; ``problems`` lists every one with its path."""


def problem_count(count: int) -> str:
    """``"1 problem"``, ``"3 problems"``: the count in the first line of an ``InventoryError``."""
    return "%d problem%s" % (count, "" if count == 1 else "s")


class Validator:
    """Field checks that record problems (``errors``) and notes (``warnings``) under the path of the field."""

    def __init__(self) -> None:
        self.errors: t.List[str] = []
        self.warnings: t.List[str] = []

    def err(self, path: str, message: str) -> None:
        self.errors.append("%s: %s" % (path, message))

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    # -- containers --------------------------------------------------------------------------------------
    def keys(self, path: str, value: t.Mapping[str, t.Any], allowed: t.Sequence[str]) -> None:
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = " (did you mean '%s'?)" % close[0] if close else " (allowed: %s)" % ", ".join(allowed)
                self.err("%s.%s" % (path, key), "unknown key%s" % hint)

    def mapping(self, path: str, value: t.Any,
                allowed: t.Optional[t.Sequence[str]] = None) -> t.Optional[t.Mapping[str, t.Any]]:
        """``value`` as a mapping (``{}`` when unset); ``None`` (and a problem) when it is something else."""
        if value is None:
            return {}
        if not isinstance(value, t.Mapping):
            self.err(path, "must be a mapping, got %s" % type(value).__name__)
            return None
        if allowed is not None:
            self.keys(path, value, allowed)
        return value

    def sequence(self, path: str, value: t.Any) -> t.List[t.Any]:
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not isinstance(value, t.Sequence):
            self.err(path, "must be a list, got %s" % type(value).__name__)
            return []
        return list(value)

    def items(self, path: str, value: t.Any, allowed: t.Optional[t.Sequence[str]] = None,
              ) -> t.Iterator[t.Tuple[int, str, t.Mapping[str, t.Any]]]:
        """``(index, path, mapping)`` of each entry of the list ``value``; entries that are no mapping are reported
        and skipped."""
        for index, item in enumerate(self.sequence(path, value)):
            item_path = "%s[%d]" % (path, index)
            data = self.mapping(item_path, item, allowed)
            if data is not None:
                yield index, item_path, data

    def named_items(self, path: str, value: t.Any, allowed: t.Sequence[str], what: str, label: bool = False,
                    ) -> t.Iterator[t.Tuple[int, str, t.Mapping[str, t.Any], t.Optional[str]]]:
        """``(index, path, mapping, name)`` of each entry of a list of named entries: ``name`` is checked (a DNS-1123
        label when ``label``, else a subdomain; ``None`` when invalid) and, once the list is read, each name
        given twice is reported as a duplicate ``what``."""
        names: t.List[t.Tuple[int, t.Optional[str]]] = []
        for index, item_path, data in self.items(path, value, allowed):
            check = self.label_name if label else self.name
            name = check(item_path + ".name", data.get("name"))
            names.append((index, name))
            yield index, item_path, data, name
        self.duplicates(path, names, what)

    def duplicates(self, path: str, names: t.Sequence[t.Tuple[int, t.Optional[str]]], what: str) -> None:
        seen: t.Dict[str, int] = {}
        for index, name in names:
            if name is None:
                continue
            if name in seen:
                self.err("%s[%d].name" % (path, index), "duplicate %s %r (also at %s[%d])" % (what, name, path, seen[name]))
            else:
                seen[name] = index

    def unknown_ref(self, path: str, value: str, known: t.Iterable[str], what: str) -> None:
        """``value`` names no ``what`` of ``known``: report it with the closest known name and the whole list."""
        known = sorted(known)
        close = difflib.get_close_matches(value, known, n=1)
        suggestion = " (did you mean %r?)" % close[0] if close else ""
        listing = ", ".join(known) if known else "none defined"
        self.err(path, "unknown %s %r%s; defined: %s" % (what, value, suggestion, listing))

    # -- scalars -----------------------------------------------------------------------------------------
    def name(self, path: str, value: t.Any, label: bool = False) -> t.Optional[str]:
        """An object name (``names.is_name``); with ``label`` a DNS-1123 label (a namespace)."""
        if value is None or value == "":
            self.err(path, "is required")
            return None
        if not isinstance(value, str):
            self.err(path, "must be a string, got %r" % (value,))
            return None
        if not is_name(value, label):
            self.err(path, "%r is not %s of at most %d characters"
                     % (value, LABEL_TEXT if label else SUBDOMAIN_TEXT, MAX_LABEL if label else MAX_SUBDOMAIN))
            return None
        return value

    def label_name(self, path: str, value: t.Any) -> t.Optional[str]:
        return self.name(path, value, label=True)

    def weight(self, path: str, value: t.Any) -> t.Optional[str]:
        """A non-negative quantity (a fair-sharing weight) as its canonical text; ``None`` when unset or invalid."""
        if value is None:
            return None
        try:
            number = parse_quantity(value)
        except ValueError as exc:
            self.err(path, str(exc))
            return None
        if number < 0:
            self.err(path, "must not be negative, got %s" % value)
            return None
        return quantity_text(value)

    def integer(self, path: str, value: t.Any, minimum: t.Optional[int] = None,
                maximum: t.Optional[int] = None) -> t.Optional[int]:
        """An int (or the text of one) within the bounds; ``None`` when invalid."""
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and re.match(r"^-?[0-9]+$", value.strip()):
                value = int(value)
            else:
                self.err(path, "must be an integer, got %r" % (value,))
                return None
        if minimum is not None and value < minimum:
            self.err(path, "must be at least %d, got %d" % (minimum, value))
            return None
        if maximum is not None and value > maximum:
            self.err(path, "must be at most %d, got %d" % (maximum, value))
            return None
        return value

    def optional_integer(self, path: str, value: t.Any, minimum: t.Optional[int] = None) -> t.Optional[int]:
        """``integer`` for a field whose absence means "use the default": ``None`` when unset."""
        if value is None:
            return None
        return self.integer(path, value, minimum)

    def boolean(self, path: str, value: t.Any, default: bool) -> bool:
        """A YAML boolean; anything else is a problem and reads as ``default``."""
        if not isinstance(value, bool):
            self.err(path, "must be true or false, got %r" % (value,))
            return default
        return value

    def enum(self, path: str, value: t.Any, allowed: t.Sequence[str]) -> t.Optional[str]:
        if value is None:
            return None
        if value not in allowed:
            self.err(path, "%r is not one of %s" % (value, ", ".join(allowed)))
            return None
        return value

    def string_map(self, path: str, value: t.Any, what: str) -> t.Dict[str, str]:
        """A label map (``{qualified name: label value}``) as text; invalid entries are reported and left out."""
        data = self.mapping(path, value)
        out: t.Dict[str, str] = {}
        for key, val in (data or {}).items():
            if not is_label_key(key):
                self.err("%s.%s" % (path, key), "%r is not a valid %s key" % (key, what))
                continue
            text = "" if val is None else str(val)
            if isinstance(val, bool):
                text = "true" if val else "false"
            if not is_label_value(text):
                self.err("%s.%s" % (path, key), "%r is not a valid label value" % (val,))
                continue
            out[key] = text
        return out
