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


def _metadata(meta: ObjectMeta) -> t.Dict[str, t.Any]:
    out: t.Dict[str, t.Any] = {"name": meta.name}
    if meta.namespace:
        out["namespace"] = meta.namespace
    if meta.labels:
        out["labels"] = dict(meta.labels)
    if meta.annotations:
        out["annotations"] = dict(meta.annotations)
    return out


def _object(kind: str, meta: ObjectMeta, spec: t.Dict[str, t.Any]) -> t.Dict[str, t.Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": _metadata(meta), "spec": spec}


def _fair_sharing(spec: t.Dict[str, t.Any], weight: t.Optional[str]) -> None:
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}


def resource_groups(groups: t.Sequence[ResourceGroup]) -> t.List[t.Dict[str, t.Any]]:
    """``spec.resourceGroups`` (each flavor's resources in the order of ``coveredResources``, as the API requires)."""
    out = []
    for group in groups:
        flavors = []
        for flavor in group.flavors:
            resources = []
            for res in flavor.resources:
                entry: t.Dict[str, t.Any] = {"name": res.name, "nominalQuota": res.nominal_quota}
                if res.borrowing_limit is not None:
                    entry["borrowingLimit"] = res.borrowing_limit
                if res.lending_limit is not None:
                    entry["lendingLimit"] = res.lending_limit
                resources.append(entry)
            flavors.append({"name": flavor.name, "resources": resources})
        out.append({"coveredResources": list(group.covered_resources), "flavors": flavors})
    return out


def _taint(taint: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    item = {"key": taint.get("key"), "effect": taint.get("effect")}
    if taint.get("value") is not None:
        item["value"] = str(taint["value"])
    return item


def _toleration(toleration: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    item = {k: toleration[k] for k in ("key", "operator", "effect") if toleration.get(k) is not None}
    if toleration.get("value") is not None:
        item["value"] = str(toleration["value"])
    seconds = option(toleration, "toleration_seconds")
    if seconds is not None:
        item["tolerationSeconds"] = int(seconds)
    return item


def resource_flavor(rf: ResourceFlavorSpec) -> t.Dict[str, t.Any]:
    """A ResourceFlavor: which nodes (labels), their taints, and the tolerations added to admitted pods."""
    flavor = rf.flavor
    spec: t.Dict[str, t.Any] = {}
    if flavor.node_labels:
        spec["nodeLabels"] = dict(flavor.node_labels)
    if flavor.node_taints:
        spec["nodeTaints"] = [_taint(taint) for taint in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [_toleration(toleration) for toleration in flavor.tolerations]
    if flavor.topology_name:
        spec["topologyName"] = flavor.topology_name
    return _object("ResourceFlavor", rf.meta, spec)


def cohort(co: CohortSpec) -> t.Dict[str, t.Any]:
    """A Cohort: a node of the borrowing tree, optionally with shared quota and a parent."""
    spec: t.Dict[str, t.Any] = {}
    if co.parent:
        spec["parentName"] = co.parent
    if co.resource_groups:
        spec["resourceGroups"] = resource_groups(co.resource_groups)
    _fair_sharing(spec, co.fair_sharing_weight)
    return _object("Cohort", co.meta, spec)


def _preemption(pre: Preemption) -> t.Dict[str, t.Any]:
    out: t.Dict[str, t.Any] = {}
    if pre.reclaim_within_cohort:
        out["reclaimWithinCohort"] = pre.reclaim_within_cohort
    if pre.within_cluster_queue:
        out["withinClusterQueue"] = pre.within_cluster_queue
    if pre.borrow_within_cohort_set or pre.borrow_policy:
        item: t.Dict[str, t.Any] = {}
        if pre.borrow_policy:
            item["policy"] = pre.borrow_policy
        if pre.borrow_max_priority_threshold is not None:
            item["maxPriorityThreshold"] = pre.borrow_max_priority_threshold
        out["borrowWithinCohort"] = item
    return out


def cluster_queue(cq: ClusterQueueSpec) -> t.Dict[str, t.Any]:
    """A ClusterQueue with quotas per flavor and resource (``spec.resourceGroups`` always written, empty too).

    ``namespace_selector`` None leaves it unset, which in Kueue means *no* namespace may submit.
    """
    spec: t.Dict[str, t.Any] = {}
    if cq.cohort:
        spec["cohortName"] = cq.cohort
    spec["resourceGroups"] = resource_groups(cq.resource_groups)
    if cq.namespace_selector is not None:
        spec["namespaceSelector"] = cq.namespace_selector
    if cq.queueing_strategy:
        spec["queueingStrategy"] = cq.queueing_strategy
    if cq.preemption is not None:
        spec["preemption"] = _preemption(cq.preemption)
    _fair_sharing(spec, cq.fair_sharing_weight)
    if cq.stop_policy:
        spec["stopPolicy"] = cq.stop_policy
    fung = cq.flavor_fungibility
    if fung is not None:
        spec["flavorFungibility"] = {key: value for key, value in (
            ("whenCanBorrow", fung.when_can_borrow), ("whenCanPreempt", fung.when_can_preempt),
            ("preference", fung.preference)) if value is not None}
    if cq.admission_checks:
        rules = []
        for check in cq.admission_checks:
            rule: t.Dict[str, t.Any] = {"name": check.name}
            if check.on_flavors:
                rule["onFlavors"] = list(check.on_flavors)
            rules.append(rule)
        spec["admissionChecksStrategy"] = {"admissionChecks": rules}
    return _object("ClusterQueue", cq.meta, spec)


def local_queue(lq: LocalQueueSpec) -> t.Dict[str, t.Any]:
    """A LocalQueue pointing at its ClusterQueue."""
    spec: t.Dict[str, t.Any] = {"clusterQueue": lq.cluster_queue}
    if lq.stop_policy:
        spec["stopPolicy"] = lq.stop_policy
    _fair_sharing(spec, lq.fair_sharing_weight)
    return _object("LocalQueue", lq.meta, spec)


def workload_priority_class(pc: PriorityClassSpec) -> t.Dict[str, t.Any]:
    """A WorkloadPriorityClass (jobs pick it with label kueue.x-k8s.io/priority-class)."""
    obj: t.Dict[str, t.Any] = {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass",
                               "metadata": _metadata(pc.meta), "value": pc.priority.value}
    if pc.priority.description:
        obj["description"] = pc.priority.description
    return obj
