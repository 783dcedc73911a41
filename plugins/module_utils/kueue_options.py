# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Argument specs the Kueue object modules share; documented once in the ``gpuaas.platform.kueue_quota`` fragment."""

from __future__ import annotations

import typing as t

QUOTA_RESOURCE_SPEC: t.Dict[str, t.Dict[str, t.Any]] = {
    "name": {"type": "str", "required": True},
    "nominal_quota": {"type": "raw", "required": True},
    "borrowing_limit": {"type": "raw"},
    "lending_limit": {"type": "raw"},
}

QUOTA_FLAVOR_SPEC: t.Dict[str, t.Dict[str, t.Any]] = {
    "name": {"type": "str", "required": True},
    "resources": {"type": "list", "elements": "dict", "required": True, "options": QUOTA_RESOURCE_SPEC},
}

# The resource_groups option of cluster_queue and cohort (a Cohort's shared quota has a ClusterQueue's shape).
RESOURCE_GROUPS_OPTION: t.Dict[str, t.Any] = {
    "type": "list", "elements": "dict", "default": [],
    "options": {
        "covered_resources": {"type": "list", "elements": "str"},
        "flavors": {"type": "list", "elements": "dict", "required": True, "options": QUOTA_FLAVOR_SPEC},
    },
}


def drop_none(value: t.Any) -> t.Any:
    """Module parameters without the suboptions left unset (Ansible fills them with None; builders expect absence)."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value
