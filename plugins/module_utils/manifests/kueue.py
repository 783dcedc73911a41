# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Typed Kueue records -> Kueue ``v1beta2`` manifests.

Pure functions (no I/O) that do not validate: their input was checked by a parser (the single-object modules'
options by ``inventory/kueue_objects.py``, the inventory by its section parsers; ``manifests/tenancy.py`` builds
the records from the ``TenantModel``). Values left at None are omitted from the manifest (the API default applies).
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_objects import option
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import (
    ClusterQueueSpec,
    CohortSpec,
    LocalQueueSpec,
    ObjectMeta,
    Preemption,
    PriorityClassSpec,
    ResourceFlavorSpec,
    ResourceGroup,
)

API_VERSION = "kueue.x-k8s.io/v1beta2"


def _fields(*pairs: t.Tuple[str, t.Any]) -> t.Dict[str, t.Any]:
    """The fields whose value is not None, in order: a field left out takes the API's default."""
    return {key: value for key, value in pairs if value is not None}


def _metadata(meta: ObjectMeta) -> t.Dict[str, t.Any]:
    return _fields(("name", meta.name), ("namespace", meta.namespace or None), ("labels", dict(meta.labels) or None),
                   ("annotations", dict(meta.annotations) or None))


def _object(kind: str, meta: ObjectMeta, spec: t.Dict[str, t.Any]) -> t.Dict[str, t.Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": _metadata(meta), "spec": spec}


def _fair_sharing(weight: t.Optional[str]) -> t.Optional[t.Dict[str, t.Any]]:
    return None if weight is None else {"weight": weight}


def resource_groups(groups: t.Sequence[ResourceGroup]) -> t.List[t.Dict[str, t.Any]]:
    """``spec.resourceGroups`` (each flavor's resources in the order of ``coveredResources``, as the API requires)."""
    return [{"coveredResources": list(group.covered_resources), "flavors": [
        {"name": flavor.name, "resources": [
            _fields(("name", res.name), ("nominalQuota", res.nominal_quota), ("borrowingLimit", res.borrowing_limit),
                    ("lendingLimit", res.lending_limit)) for res in flavor.resources]}
        for flavor in group.flavors]} for group in groups]


def _taint(taint: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    value = taint.get("value")
    return _fields(("key", taint.get("key")), ("effect", taint.get("effect")),
                   ("value", None if value is None else str(value)))


def _toleration(toleration: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    value = toleration.get("value")
    seconds = option(toleration, "toleration_seconds")
    return _fields(("key", toleration.get("key")), ("operator", toleration.get("operator")),
                   ("effect", toleration.get("effect")), ("value", None if value is None else str(value)),
                   ("tolerationSeconds", None if seconds is None else int(seconds)))


def resource_flavor(rf: ResourceFlavorSpec) -> t.Dict[str, t.Any]:
    """A ResourceFlavor: which nodes (labels), their taints, and the tolerations added to admitted pods."""
    flavor = rf.flavor
    return _object("ResourceFlavor", rf.meta, _fields(
        ("nodeLabels", dict(flavor.node_labels) or None),
        ("nodeTaints", [_taint(taint) for taint in flavor.node_taints] or None),
        ("tolerations", [_toleration(toleration) for toleration in flavor.tolerations] or None),
        ("topologyName", flavor.topology_name or None)))


def cohort(co: CohortSpec) -> t.Dict[str, t.Any]:
    """A Cohort: a node of the borrowing tree, optionally with shared quota and a parent."""
    return _object("Cohort", co.meta, _fields(
        ("parentName", co.parent or None), ("resourceGroups", resource_groups(co.resource_groups) or None),
        ("fairSharing", _fair_sharing(co.fair_sharing_weight))))


def _preemption(pre: Preemption) -> t.Dict[str, t.Any]:
    borrow = None
    if pre.borrow_within_cohort_set or pre.borrow_policy:
        borrow = _fields(("policy", pre.borrow_policy or None), ("maxPriorityThreshold", pre.borrow_max_priority_threshold))
    return _fields(("reclaimWithinCohort", pre.reclaim_within_cohort or None),
                   ("withinClusterQueue", pre.within_cluster_queue or None), ("borrowWithinCohort", borrow))


def cluster_queue(cq: ClusterQueueSpec) -> t.Dict[str, t.Any]:
    """A ClusterQueue with quotas per flavor and resource (``spec.resourceGroups`` always written, empty too).

    ``namespace_selector`` None leaves it unset, which in Kueue means *no* namespace may submit.
    """
    fung = cq.flavor_fungibility
    checks = [_fields(("name", check.name), ("onFlavors", list(check.on_flavors) or None))
              for check in cq.admission_checks]
    return _object("ClusterQueue", cq.meta, _fields(
        ("cohortName", cq.cohort or None),
        ("resourceGroups", resource_groups(cq.resource_groups)),
        ("namespaceSelector", cq.namespace_selector),
        ("queueingStrategy", cq.queueing_strategy or None),
        ("preemption", None if cq.preemption is None else _preemption(cq.preemption)),
        ("fairSharing", _fair_sharing(cq.fair_sharing_weight)),
        ("stopPolicy", cq.stop_policy or None),
        ("flavorFungibility", None if fung is None else _fields(
            ("whenCanBorrow", fung.when_can_borrow), ("whenCanPreempt", fung.when_can_preempt),
            ("preference", fung.preference))),
        ("admissionChecksStrategy", {"admissionChecks": checks} if checks else None)))


def local_queue(lq: LocalQueueSpec) -> t.Dict[str, t.Any]:
    """A LocalQueue pointing at its ClusterQueue."""
    return _object("LocalQueue", lq.meta, _fields(
        ("clusterQueue", lq.cluster_queue), ("stopPolicy", lq.stop_policy or None),
        ("fairSharing", _fair_sharing(lq.fair_sharing_weight))))


def workload_priority_class(pc: PriorityClassSpec) -> t.Dict[str, t.Any]:
    """A WorkloadPriorityClass (jobs pick it with label kueue.x-k8s.io/priority-class)."""
    return _fields(("apiVersion", API_VERSION), ("kind", "WorkloadPriorityClass"), ("metadata", _metadata(pc.meta)),
                   ("value", pc.priority.value), ("description", pc.priority.description or None))
