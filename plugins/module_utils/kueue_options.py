# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the single-object Kueue modules share: argument specs (documented once in the ``gpuaas.platform.kueue_quota``
fragment) and their options -> object path: the option parser (``inventory/kueue_objects.py``, every problem at once)
then the builder (``manifests/kueue.py``, no validation)."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory import kueue_objects
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue

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


def resource_flavor(name: str, **options: t.Any) -> t.Dict[str, t.Any]:
    """A ResourceFlavor from the resource_flavor module's options (``kueue_objects.parse_resource_flavor``)."""
    return kueue.resource_flavor(kueue_objects.parse_resource_flavor(name, **options))


def cohort(name: str, **options: t.Any) -> t.Dict[str, t.Any]:
    """A Cohort from the cohort module's options (``kueue_objects.parse_cohort``)."""
    return kueue.cohort(kueue_objects.parse_cohort(name, **options))


def cluster_queue(name: str, **options: t.Any) -> t.Dict[str, t.Any]:
    """A ClusterQueue from the cluster_queue module's options (``kueue_objects.parse_cluster_queue``)."""
    return kueue.cluster_queue(kueue_objects.parse_cluster_queue(name, **options))


def local_queue(name: str, namespace: str, **options: t.Any) -> t.Dict[str, t.Any]:
    """A LocalQueue from the local_queue module's options (``kueue_objects.parse_local_queue``)."""
    return kueue.local_queue(kueue_objects.parse_local_queue(name, namespace, **options))


def workload_priority_class(name: str, value: t.Any, **options: t.Any) -> t.Dict[str, t.Any]:
    """A WorkloadPriorityClass from the module's options (``kueue_objects.parse_workload_priority_class``)."""
    return kueue.workload_priority_class(kueue_objects.parse_workload_priority_class(name, value, **options))
