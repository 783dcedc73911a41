# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The inverse of the tenancy builders: live Kueue objects in, the ``gpuaas_*`` inventory that builds them out.

Brownfield (issue 17): ``import_inventory`` turns an existing Kueue setup (ResourceFlavors, Cohorts, ClusterQueues,
LocalQueues, WorkloadPriorityClasses, plus the namespaces and the collection's RoleBindings that go with them) into
``gpuaas_flavors``, ``gpuaas_cohorts``, ``gpuaas_priorities`` and ``gpuaas_tenants`` in the contract of
``inventory/model.py``:

* one tenant per ClusterQueue (named like it, as ``tenancy.cluster_queue`` names the queue like the tenant), whose
  namespaces are those of the LocalQueues pointing at it; LocalQueue ``default`` in every namespace means
  ``default_queue: true``, other LocalQueues become ``queues``;
* a Cohort's shared quota (``spec.resourceGroups``) becomes its ``quotas``, read like a ClusterQueue's;
* what the inventory cannot express (a ClusterQueue's namespace selector, stop policy,
  flavor fungibility or admission checks, a LocalQueue's fair sharing ...) is a warning, never silently dropped;
* values equal to Kueue's defaults (``kueue_values.CLUSTER_QUEUE_DEFAULTS``) are left out, so importing what the
  collection built gives back the inventory it was built from (lists in name order);
* the result is checked by building it again (``tenancy`` builders) and comparing with the live specs: every
  object the first run would change is a warning too.

Pure: no I/O (the ``kueue_import`` module reads the cluster).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.compare import is_subset, owned_fields
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import convert_from_version
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    COMPONENT_LABEL,
    FIELD_MANAGER,
    MANAGED_BY_LABEL,
    TENANT_LABEL,
    adoption_name,
    is_owned,
    written_by,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import CLUSTER_QUEUE_DEFAULTS, LOCAL_QUEUE_DEFAULTS
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import DNS1123_LABEL
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import (
    SYSTEM_NAMESPACE_PREFIXES,
    SYSTEM_NAMESPACES,
    InventoryError,
    Priority,
    TenantModel,
    default_priorities,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import parse_quantity, quantity_text
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy

# The kinds the import reads, in the order it reports them.
IMPORTED_KUEUE_KINDS = ("ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue")

# ClusterQueue spec fields the inventory expresses (tenancy.cluster_queue); every other field is a warning.
_CQ_FIELDS = ("cohortName", "resourceGroups", "namespaceSelector", "queueingStrategy", "preemption", "fairSharing",
              "stopPolicy", "flavorFungibility")
_FLAVOR_FIELDS = ("nodeLabels", "nodeTaints", "tolerations", "topologyName")
_COHORT_FIELDS = ("parentName", "fairSharing", "resourceGroups")
_LQ_FIELDS = ("clusterQueue",)
# Namespace labels the tenancy builders set themselves (not tenants[].labels).
_BUILT_NAMESPACE_LABELS = (MANAGED_BY_LABEL, COMPONENT_LABEL, TENANT_LABEL, tenancy.SUGGESTED_QUEUE_LABEL,
                           tenancy.OPENSHIFT_KUEUE_LABEL, "kubernetes.io/metadata.name")
_ROLE_BINDINGS = {"gpuaas-admins": "admins", "gpuaas-users": "users"}


@dataclass
class KueueImport:
    """The imported inventory, what it cannot express, and what a tenants run would have to adopt."""
    inventory: t.Dict[str, t.List[t.Dict[str, t.Any]]]
    warnings: t.List[str] = field(default_factory=list)
    # Kind/name (Kind/namespace/name) of the existing objects the inventory builds that the collection does not own
    adopt: t.List[str] = field(default_factory=list)


def _name(obj: t.Mapping[str, t.Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: t.Mapping[str, t.Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _spec(obj: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    return dict(obj.get("spec") or {})


def _weight(spec: t.Mapping[str, t.Any]) -> t.Optional[str]:
    weight = (spec.get("fairSharing") or {}).get("weight")
    return None if weight is None else quantity_text(weight)


def _managers(obj: t.Mapping[str, t.Any]) -> str:
    names = sorted({str(e.get("manager")) for e in (obj.get("metadata") or {}).get("managedFields") or [] if e.get("manager")})
    return ", ".join(names) or "unknown"


class _Importer:
    def __init__(self, objects: t.Mapping[str, t.Sequence[t.Mapping[str, t.Any]]]) -> None:
        self.objects = {kind: sorted((convert_from_version(o) for o in objects.get(kind) or []),
                                     key=lambda o: (_namespace(o), _name(o)))
                        for kind in IMPORTED_KUEUE_KINDS + ("Namespace", "RoleBinding", "ScaledObject")}
        self.warnings: t.List[str] = []

    def unexpressed(self, obj: t.Mapping[str, t.Any], fields: t.Iterable[str], what: str) -> None:
        """Warn about spec fields the inventory has no key for (they stay as they are, not managed)."""
        for key in fields:
            self.warnings.append(
                "%s %s: spec.%s cannot be expressed in the inventory; it is not imported and stays as it is on the "
                "cluster, owned by %s, not managed by the collection" % (obj.get("kind"), what, key, _managers(obj)))

    # -- shared objects ------------------------------------------------------------------------------------------
    def flavors(self, named_by_queues: t.Iterable[str]) -> t.List[t.Dict[str, t.Any]]:
        out = []
        for obj in self.objects["ResourceFlavor"]:
            spec = _spec(obj)
            entry: t.Dict[str, t.Any] = {"name": _name(obj)}
            if spec.get("nodeLabels"):
                entry["node_labels"] = dict(spec["nodeLabels"])
            if spec.get("nodeTaints"):
                entry["node_taints"] = [{k: v for k, v in taint.items() if k in ("key", "value", "effect")}
                                        for taint in spec["nodeTaints"]]
            if spec.get("tolerations"):
                entry["tolerations"] = [dict(tol) for tol in spec["tolerations"]]
            if spec.get("topologyName"):
                entry["topology_name"] = spec["topologyName"]
            self.unexpressed(obj, sorted(k for k in spec if k not in _FLAVOR_FIELDS), _name(obj))
            out.append(entry)
        known = {f["name"] for f in out}
        for name in sorted(set(named_by_queues) - known):
            self.warnings.append(
                "ResourceFlavor %s is named by a ClusterQueue but does not exist: the inventory lists it without node "
                "labels, so the first run creates it matching every node; give it node_labels (or remove the quota) "
                "before running the tenants playbook" % name)
            out.append({"name": name})
        return sorted(out, key=lambda f: f["name"])

    def cohorts(self, named_by_queues: t.Iterable[str]) -> t.List[t.Dict[str, t.Any]]:
        out: t.Dict[str, t.Dict[str, t.Any]] = {}
        for obj in self.objects["Cohort"]:
            spec = _spec(obj)
            entry: t.Dict[str, t.Any] = {"name": _name(obj)}
            if spec.get("parentName"):
                entry["parent"] = spec["parentName"]
            weight = _weight(spec)
            if weight is not None:
                entry["fair_sharing_weight"] = weight
            quotas = self.quotas(spec.get("resourceGroups") or [])
            if quotas:
                entry["quotas"] = quotas
            self.unexpressed(obj, sorted(k for k in spec if k not in _COHORT_FIELDS), _name(obj))
            out[entry["name"]] = entry
        # Kueue lets a ClusterQueue or a Cohort name a cohort that has no object; the inventory needs one.
        implicit = set(named_by_queues) | {c["parent"] for c in out.values() if c.get("parent")}
        for name in sorted(implicit - set(out)):
            self.warnings.append("cohort %s has no Cohort object (Kueue's implicit cohort): the inventory lists it, so "
                                 "the first run creates a Cohort %s without quota or parent" % (name, name))
            out[name] = {"name": name}
        return [out[n] for n in sorted(out)]

    def priorities(self) -> t.List[t.Dict[str, t.Any]]:
        out = []
        for obj in self.objects["WorkloadPriorityClass"]:
            entry: t.Dict[str, t.Any] = {"name": _name(obj), "value": int(obj.get("value") or 0)}
            if obj.get("description"):
                entry["description"] = obj["description"]
            out.append(entry)
        return out

    # -- tenants -------------------------------------------------------------------------------------------------
    def queues_by_cluster_queue(self, cluster_queues: t.Set[str]) -> t.Dict[str, t.Dict[str, t.List[str]]]:
        """{ClusterQueue: {namespace: [LocalQueue names]}}; a namespace belongs to one ClusterQueue (the first)."""
        owner: t.Dict[str, str] = {}
        out: t.Dict[str, t.Dict[str, t.List[str]]] = {}
        for lq in self.objects["LocalQueue"]:
            name, ns, spec = _name(lq), _namespace(lq), _spec(lq)
            cq = spec.get("clusterQueue")
            where = "%s/%s" % (ns, name)
            self.unexpressed(lq, sorted(k for k in spec if k not in _LQ_FIELDS and spec[k] != LOCAL_QUEUE_DEFAULTS.get(k)), where)
            if cq not in cluster_queues:
                self.warnings.append("LocalQueue %s points at ClusterQueue %s, which is not imported: the LocalQueue "
                                     "is left out" % (where, cq))
                continue
            if ns in SYSTEM_NAMESPACES or ns.startswith(SYSTEM_NAMESPACE_PREFIXES):
                self.warnings.append("LocalQueue %s is in the system namespace %s, which a tenant cannot own: the "
                                     "LocalQueue is left out (it stays as it is)" % (where, ns))
                continue
            if owner.setdefault(ns, cq) != cq:
                self.warnings.append(
                    "LocalQueue %s points at ClusterQueue %s, but namespace %s already belongs to tenant %s (a "
                    "namespace has one tenant in the inventory): the LocalQueue is left out" % (where, cq, ns, owner[ns]))
                continue
            out.setdefault(cq, {}).setdefault(ns, []).append(name)
        return out

    def tenant(self, cq: t.Mapping[str, t.Any], namespaces: t.Mapping[str, t.List[str]],
               priorities: t.Sequence[str]) -> t.Optional[t.Dict[str, t.Any]]:
        name, spec = _name(cq), _spec(cq)
        if not DNS1123_LABEL.match(name) or len(name) > 63:
            self.warnings.append("ClusterQueue %s: the name is not a valid tenant name (a DNS-1123 label of at most 63 "
                                 "characters): not imported" % name)
            return None
        if not namespaces:
            self.warnings.append("ClusterQueue %s has no LocalQueue in a namespace a tenant can own: a tenant needs a "
                                 "namespace, so it is not imported (add a LocalQueue, or write the tenant by hand)" % name)
            return None
        tenant: t.Dict[str, t.Any] = {"name": name, "namespaces": sorted(namespaces)}
        if spec.get("cohortName"):
            tenant["cohort"] = spec["cohortName"]
        weight = _weight(spec)
        if weight is not None:
            tenant["fair_sharing_weight"] = weight
        if spec.get("queueingStrategy") not in (None, CLUSTER_QUEUE_DEFAULTS["queueingStrategy"]):
            tenant["queueing_strategy"] = spec["queueingStrategy"]
        tenant["quotas"] = self.quotas(spec.get("resourceGroups") or [])
        preemption = self.preemption(spec.get("preemption") or {})
        if preemption:
            tenant["preemption"] = preemption
        self.cluster_queue_extras(cq, spec)
        with_default = [ns for ns, queues in namespaces.items() if tenancy.DEFAULT_QUEUE in queues]
        tenant["default_queue"] = bool(with_default)
        if with_default and len(with_default) < len(namespaces):
            self.warnings.append(
                "tenant %s: LocalQueue %s exists in %s but not in %s; the inventory (default_queue: true) creates it "
                "there too" % (name, tenancy.DEFAULT_QUEUE, ", ".join(sorted(with_default)),
                               ", ".join(sorted(set(namespaces) - set(with_default)))))
        extra: t.Dict[str, t.List[str]] = {}
        for ns in sorted(namespaces):
            for queue in namespaces[ns]:
                if queue != tenancy.DEFAULT_QUEUE:
                    extra.setdefault(queue, []).append(ns)
        if extra:
            # Omitting namespaces means every namespace of the tenant (inventory/model.py).
            tenant["queues"] = [{"name": q} if extra[q] == tenant["namespaces"] else {"name": q, "namespaces": extra[q]}
                                for q in sorted(extra)]
        self.namespace_settings(tenant, priorities)
        if tenant["default_queue"]:
            del tenant["default_queue"]  # the model's default
        return tenant

    def quotas(self, groups: t.Sequence[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
        """One quota per flavor, in the ClusterQueue's order (Kueue tries flavors in that order)."""
        out = []
        for group in groups:
            for flavor in group.get("flavors") or []:
                quota: t.Dict[str, t.Any] = {"flavor": flavor.get("name"), "resources": {}}
                for res in flavor.get("resources") or []:
                    quota["resources"][res["name"]] = quantity_text(res.get("nominalQuota", "0"))
                    for key, inv_key in (("borrowingLimit", "borrowing_limit"), ("lendingLimit", "lending_limit")):
                        if res.get(key) is not None:
                            quota.setdefault(inv_key, {})[res["name"]] = quantity_text(res[key])
                out.append(quota)
        return self.drop_filler_zeros(out)

    @staticmethod
    def drop_filler_zeros(quotas: t.List[t.Dict[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
        """Leave out the 0 quotas ``tenancy.resource_groups`` adds itself (a resource of the group a flavor lacks).

        Kept when leaving it out would build other resource groups (the resource would no longer connect the
        flavor to its group) or when it has a limit.
        """
        def groups_of(candidate: t.List[t.Dict[str, t.Any]]) -> t.Any:
            model = TenantModel.from_inventory({
                "gpuaas_flavors": [{"name": q["flavor"]} for q in candidate],
                "gpuaas_cohorts": [{"name": "c"}],
                "gpuaas_tenants": [{"name": "t", "namespaces": ["t"], "cohort": "c", "quotas": candidate}]})
            return tenancy.resource_groups(model.tenants[0])

        try:
            expected = groups_of(quotas)
        except (InventoryError, ValueError, KeyError):
            return quotas  # not a valid quota list: left for the whole-inventory validation to report
        out = []
        for quota in quotas:
            limited = set(quota.get("borrowing_limit") or {}) | set(quota.get("lending_limit") or {})
            slim = dict(quota, resources={r: v for r, v in quota["resources"].items()
                                          if r in limited or parse_quantity(v) != 0})
            out.append(slim if slim["resources"] else quota)
        try:
            return out if groups_of(out) == expected else quotas
        except (InventoryError, ValueError, KeyError):
            return quotas

    @staticmethod
    def preemption(live: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
        defaults = CLUSTER_QUEUE_DEFAULTS["preemption"]
        out: t.Dict[str, t.Any] = {}
        for key, inv_key in (("reclaimWithinCohort", "reclaim_within_cohort"), ("withinClusterQueue", "within_cluster_queue")):
            if live.get(key) not in (None, defaults[key]):
                out[inv_key] = live[key]
        borrow = live.get("borrowWithinCohort") or {}
        if borrow.get("policy") not in (None, defaults["borrowWithinCohort"]["policy"]):
            out["borrow_within_cohort"] = {"policy": borrow["policy"]}
            if borrow.get("maxPriorityThreshold") is not None:
                out["borrow_within_cohort"]["max_priority_threshold"] = int(borrow["maxPriorityThreshold"])
        return out

    def cluster_queue_extras(self, cq: t.Mapping[str, t.Any], spec: t.Mapping[str, t.Any]) -> None:
        name = _name(cq)
        selector = spec.get("namespaceSelector")
        wanted = {"matchLabels": {TENANT_LABEL: name}}
        if selector != wanted:
            self.warnings.append(
                "ClusterQueue %s admits workloads of the namespaces selected by %s; the inventory's ClusterQueue admits "
                "those labelled %s=%s, which the tenants run puts on the tenant's namespaces: the first run changes "
                "spec.namespaceSelector" % (name, selector if selector is not None else "nothing (no selector)",
                                            TENANT_LABEL, name))
        if spec.get("stopPolicy") not in (None, CLUSTER_QUEUE_DEFAULTS["stopPolicy"]):
            self.unexpressed(cq, ["stopPolicy"], name)
        fungibility = spec.get("flavorFungibility")
        if fungibility and fungibility != CLUSTER_QUEUE_DEFAULTS["flavorFungibility"]:
            self.unexpressed(cq, ["flavorFungibility"], name)
        self.unexpressed(cq, sorted(k for k in spec if k not in _CQ_FIELDS and spec[k] != CLUSTER_QUEUE_DEFAULTS.get(k)), name)

    def namespace_settings(self, tenant: t.Dict[str, t.Any], priorities: t.Sequence[str]) -> None:
        """labels, allowed_priorities and access of a tenant, from what the collection wrote on its namespaces.

        ``priorities`` are the classes the imported inventory gives a tenant without ``allowed_priorities``."""
        by_name = {_name(ns): ns for ns in self.objects["Namespace"]}
        labels: t.Optional[t.Dict[str, str]] = None
        allowed: t.Optional[str] = None
        for ns_name in tenant["namespaces"]:
            ns = by_name.get(ns_name)
            if ns is None or not is_owned(ns):
                continue
            meta = ns.get("metadata") or {}
            ours = set(((owned_fields(ns, FIELD_MANAGER) or {}).get("f:metadata") or {}).get("f:labels") or {})
            mine = {k: v for k, v in (meta.get("labels") or {}).items()
                    if "f:%s" % k in ours and k not in _BUILT_NAMESPACE_LABELS}
            labels = mine if labels is None else {k: v for k, v in labels.items() if mine.get(k) == v}
            allowed = (meta.get("annotations") or {}).get(tenancy.ALLOWED_PRIORITIES_ANNOTATION, allowed)
        if labels:
            tenant["labels"] = labels
        if allowed is not None:
            # explicit unless it is the default the inventory gives (a namespace built before issue 22 item 7
            # carries every class: the list keeps it so)
            if [p for p in allowed.split(",") if p] != list(priorities):
                tenant["allowed_priorities"] = [p for p in allowed.split(",") if p]
        elif len(priorities) < len(self.objects["WorkloadPriorityClass"]):
            self.warnings.append(
                "tenant %s: nothing limits the priority classes of its namespaces today; the inventory's default lets "
                "it use only %s (the lowest class: no class is marked open_to_tenants on import), so its workloads "
                "labelled with a higher class are refused after the first run. Name the classes it needs in its "
                "allowed_priorities, or mark classes open_to_tenants in gpuaas_priorities"
                % (tenant["name"], ", ".join(priorities) or "none"))
        access: t.Dict[str, t.List[str]] = {}
        for rb in self.objects["RoleBinding"]:
            role = _ROLE_BINDINGS.get(_name(rb))
            if role is None or _namespace(rb) not in tenant["namespaces"] or not is_owned(rb) or role in access:
                continue
            access[role] = [s["name"] if s.get("kind") == "Group" else "user:%s" % s["name"] for s in rb.get("subjects") or []]
        if access:
            tenant["access"] = {k: access[k] for k in ("admins", "users") if k in access}
        scaled = [so for so in self.objects["ScaledObject"] if _namespace(so) in tenant["namespaces"] and is_owned(so)
                  and ((so.get("metadata") or {}).get("labels") or {}).get(TENANT_LABEL) == tenant["name"]]
        if scaled:
            self.warnings.append(
                "tenant %s has %d ScaledObject%s made by the collection (%s): the import does not read autoscaling; copy "
                "tenants[].autoscaling from the inventory that made them, or a run with this inventory removes them"
                % (tenant["name"], len(scaled), "" if len(scaled) == 1 else "s",
                   ", ".join("%s/%s" % (_namespace(s), _name(s)) for s in scaled)))

    # -- adoption and check ----------------------------------------------------------------------------------------
    def adopt(self, inventory: t.Mapping[str, t.Any]) -> t.List[str]:
        """What a tenants run with ``inventory`` would have to adopt: existing built objects the collection does not own."""
        tenants_of_ns = {ns: x["name"] for x in inventory["gpuaas_tenants"] for ns in x["namespaces"]}
        out = []
        for kind in IMPORTED_KUEUE_KINDS + ("Namespace",):
            for obj in self.objects[kind]:
                if is_owned(obj) or written_by(obj):
                    continue
                if kind == "Namespace":
                    owner = tenants_of_ns.get(_name(obj))
                    if owner is None or ((obj.get("metadata") or {}).get("labels") or {}).get(TENANT_LABEL) == owner:
                        continue  # not a tenant namespace, or already handed over by its tenant label
                out.append(adoption_name(kind, _name(obj), _namespace(obj) or None))
        return out

    def check(self, inventory: t.Mapping[str, t.Any]) -> None:
        """Build ``inventory`` again and warn about every imported object whose spec the first run would change."""
        model = TenantModel.from_inventory(inventory)
        built = tenancy.shared_objects(model)
        for tenant in model.present_tenants:
            built.append(tenancy.cluster_queue(tenant))
            for ns in tenant.namespaces:
                if tenant.default_queue:
                    built.append(tenancy.local_queue(tenancy.DEFAULT_QUEUE, ns, tenant.name, tenant.name))
            for queue in tenant.queues:
                built.extend(tenancy.local_queue(queue.name, ns, tenant.name, tenant.name) for ns in queue.namespaces)
        live = {(o.get("kind"), _namespace(o), _name(o)): o for kind in IMPORTED_KUEUE_KINDS for o in self.objects[kind]}
        for obj in built:
            key = (obj["kind"], _namespace(obj), _name(obj))
            current = live.get(key)
            if current is None or obj["kind"] not in IMPORTED_KUEUE_KINDS:
                continue
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
            # An empty spec may be absent on the live object (a ResourceFlavor without any setting).
            if not is_subset(body, {k: current.get(k, {} if isinstance(v, dict) else None) for k, v in body.items()}):
                self.warnings.append("%s %s: the imported inventory builds a different spec; the first tenants run "
                                     "changes it (run it with --check --diff to see how)"
                                     % (obj["kind"], "/".join(p for p in key[1:] if p)))


def import_inventory(objects: t.Mapping[str, t.Sequence[t.Mapping[str, t.Any]]]) -> KueueImport:
    """The ``gpuaas_*`` inventory of the live ``objects`` ({kind: [objects]}, any served Kueue version).

    Kinds read: ``IMPORTED_KUEUE_KINDS``, plus Namespaces (adoption, tenants[].labels, allowed_priorities),
    the collection's RoleBindings (access) and ScaledObjects (reported only).
    """
    imp = _Importer(objects)
    cluster_queues = imp.objects["ClusterQueue"]
    by_cq = imp.queues_by_cluster_queue({_name(cq) for cq in cluster_queues})
    priorities = imp.priorities()
    # what a tenant without allowed_priorities gets (no class is marked open_to_tenants on import)
    defaults = default_priorities([Priority(p["name"], p["value"]) for p in priorities])
    tenants = []
    for cq in cluster_queues:
        tenant = imp.tenant(cq, by_cq.get(_name(cq), {}), defaults)
        if tenant is not None:
            tenants.append(tenant)
    cohorts = imp.cohorts({x["cohort"] for x in tenants if x.get("cohort")})
    flavors = imp.flavors({q["flavor"] for x in tenants + cohorts for q in x.get("quotas") or []})
    inventory = {"gpuaas_flavors": flavors, "gpuaas_cohorts": cohorts, "gpuaas_priorities": priorities,
                 "gpuaas_tenants": tenants}
    imp.check(inventory)
    return KueueImport(inventory, imp.warnings, imp.adopt(inventory))
