# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes name grammars, defined once for the inventory model and the Kueue manifest builders."""

from __future__ import annotations

import re
import typing as t

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes qualified name (resource names, label keys): optional DNS prefix + "/" + name.
QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# The name part of a label key (after the optional "prefix/").
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# The lengths the API server allows: an object name (a DNS-1123 subdomain) 253 characters; a DNS-1123 label (a
# namespace), the name part of a label key and a label value 63.
MAX_SUBDOMAIN = 253
MAX_LABEL = 63


def is_name(value: t.Any, label: bool = False) -> bool:
    """A Kubernetes object name: a DNS-1123 subdomain of at most 253 characters, or with ``label`` (a namespace) a
    DNS-1123 label of at most 63. The one name rule of the inventory parsers and the Kueue builders."""
    pattern, limit = (DNS1123_LABEL, MAX_LABEL) if label else (DNS1123_SUBDOMAIN, MAX_SUBDOMAIN)
    return isinstance(value, str) and len(value) <= limit and bool(pattern.match(value))


def is_label_key_prefix(prefix: str) -> bool:
    """The part of a label key before ``/``: a DNS subdomain of at most 253 characters."""
    return len(prefix) <= MAX_SUBDOMAIN and bool(DNS1123_SUBDOMAIN.match(prefix))


def is_label_key_name(name: str) -> bool:
    """The part of a label key after the optional ``prefix/``: alphanumerics, '-', '_', '.'; at most 63 characters."""
    return len(name) <= MAX_LABEL and bool(LABEL_NAME.match(name))


def is_label_key(key: t.Any) -> bool:
    """A label key (``[prefix/]name``), as the API server checks it. The one label key rule of the inventory parsers
    and the Kueue builders."""
    if not isinstance(key, str) or not key:
        return False
    prefix, sep, name = key.rpartition("/")
    return (not sep or is_label_key_prefix(prefix)) and is_label_key_name(name)


def is_label_value(value: t.Any) -> bool:
    """A label value: empty, or alphanumerics, '-', '_', '.' starting and ending alphanumeric; at most 63 characters."""
    return isinstance(value, str) and len(value) <= MAX_LABEL and bool(LABEL_VALUE.match(value))
