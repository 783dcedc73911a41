# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The options of the single-object Kueue modules (resource_flavor, cohort, cluster_queue, local_queue,
workload_priority_class), parsed into the typed records the Kueue builders take (``manifests/kueue.py``).

One parser per kind; each collects *all* problems and raises one ``ValidationError`` listing them, worded with the
option names (``node_labels[gpu]``), as the user wrote them. Nested mappings accept snake_case keys
(``nominal_quota``) and the API's camelCase (``nominalQuota``) alike. Optional values left at None stay None
(the builders leave them out: the API default applies). The Kueue API rules shared with the inventory sections
come from ``kueue_rules.py``.
"""

from __future__ import annotations

import typing as t
from decimal import Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_rules import (
    MAX_FLAVORS_TOTAL,
    MAX_NODE_LABELS,
    MAX_PER_GROUP,
    MAX_RESOURCE_GROUPS,
    lends_above_nominal,
    toleration_problems,
    too_many_node_labels,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.kueue_values import (
    BORROW_POLICIES,
    FUNGIBILITY_OLD,
    FUNGIBILITY_POLICIES,
    FUNGIBILITY_PREFERENCES,
    QUEUEING_STRATEGIES,
    RECLAIM_POLICIES,
    SELECTOR_OPERATORS,
    STOP_POLICIES,
    TAINT_EFFECTS,
    WITHIN_CQ_POLICIES,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import (
    MAX_LABEL,
    MAX_SUBDOMAIN,
    is_label_key_name,
    is_label_key_prefix,
    is_label_value,
    is_name,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import normalize_quantity, quantity_value
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import (
    AdmissionCheck,
    ClusterQueueSpec,
    CohortSpec,
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueueSpec,
    ObjectMeta,
    Preemption,
    Priority,
    PriorityClassSpec,
    ResourceFlavorSpec,
    ResourceGroup,
    ResourceQuota,
)

MAX_NODE_TAINTS = 8
MAX_TOLERATIONS = 8
INT32_MAX = 2 ** 31 - 1
PREEMPTION_KEYS = {"reclaim_within_cohort", "reclaimWithinCohort", "within_cluster_queue", "withinClusterQueue",
                   "borrow_within_cohort", "borrowWithinCohort"}


# -- small helpers ------------------------------------------------------------------------------------------

def camel(snake: str) -> str:
    """``nominal_quota`` -> ``nominalQuota``."""
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def option(d: t.Mapping[str, t.Any], snake: str, default: t.Any = None) -> t.Any:
    """d[snake] or d[camelCase(snake)]."""
    if snake in d and d[snake] is not None:
        return d[snake]
    key = camel(snake)
    if key in d and d[key] is not None:
        return d[key]
    return default


def _check_quantity(problems: t.List[str], where: str, value: t.Any, allow_negative: bool = False) -> t.Optional[Decimal]:
    q = quantity_value(value)
    if q is None:
        problems.append("%s: %r is not a Kubernetes quantity (examples: 8, '500m', '64Gi', '1Ti')" % (where, value))
        return None
    if q < 0 and not allow_negative:
        problems.append("%s: %s must not be negative" % (where, value))
    return q


def _check_name(problems: t.List[str], what: str, name: t.Any, label: bool = False) -> None:
    if not isinstance(name, str) or not name:
        problems.append("%s: a name is required" % what)
    elif not is_name(name, label):
        problems.append("%s: %r is not a valid name (lower-case letters, digits, '-'%s; at most %d characters)"
                        % (what, name, "" if label else " and '.'", MAX_LABEL if label else MAX_SUBDOMAIN))


def _check_label_key(problems: t.List[str], where: str, key: t.Any) -> None:
    if not isinstance(key, str) or not key:
        problems.append("%s: label key %r is empty or not a string" % (where, key))
        return
    prefix, sep, name = key.rpartition("/")
    if sep and not is_label_key_prefix(prefix):
        problems.append("%s: label key prefix %r must be a DNS subdomain" % (where, prefix))
    if not is_label_key_name(name):
        problems.append("%s: label key %r is invalid (alphanumerics, '-', '_', '.'; at most 63 characters)" % (where, key))


def _check_label_value(problems: t.List[str], where: str, value: t.Any) -> None:
    if not is_label_value(value):
        problems.append("%s: label value %r is invalid (a string of alphanumerics, '-', '_', '.'; at most 63 "
                        "characters; quote numbers and booleans in YAML)" % (where, value))


def _check_labels(problems: t.List[str], where: str, labels: t.Mapping[str, t.Any]) -> None:
    for k, v in labels.items():
        _check_label_key(problems, where, k)
        _check_label_value(problems, "%s[%s]" % (where, k), v)


def _choice(problems: t.List[str], where: str, value: t.Any, choices: t.Sequence[str]) -> None:
    if value is not None and value not in choices:
        problems.append("%s: %r is not one of %s" % (where, value, ", ".join(choices)))


def _meta(name: str, namespace: t.Optional[str], labels: t.Optional[t.Mapping[str, str]],
          annotations: t.Optional[t.Mapping[str, t.Any]], problems: t.List[str], what: str) -> ObjectMeta:
    if labels:
        _check_labels(problems, "%s labels" % what, labels)
    return ObjectMeta(name, namespace or None, dict(labels or {}), {k: str(v) for k, v in (annotations or {}).items()})


def _raise(problems: t.List[str], what: str) -> None:
    if problems:
        raise ValidationError(
            "%s is invalid (%d problem%s)" % (what, len(problems), "" if len(problems) == 1 else "s"),
            hint="fix the options listed; see ansible-doc gpuaas.platform.<module> for each option",
            problems=problems,
        )


def _weight(problems: t.List[str], where: str, weight: t.Any) -> t.Optional[str]:
    """A fair-sharing weight as its canonical quantity text; None when unset."""
    if weight is None:
        return None
    _check_quantity(problems, "%s fair_sharing weight" % where, weight)
    return normalize_quantity(weight)


def _begin(kind: str, name: str, options: t.Dict[str, t.Any], value: t.Any = None,
           alias: str = "") -> t.Tuple[t.List[str], t.Any]:
    """The problem list of one ``kind`` object with its unknown options and its name checked, and ``value`` or, when
    unset, the option ``alias`` (``parent_name`` for ``parent`` ...)."""
    problems: t.List[str] = []
    value = value or options.pop(alias, None)
    if options:
        problems.append("unknown options: %s" % ", ".join(sorted(options)))
    _check_name(problems, "%s name" % kind, name)
    return problems, value


def _label_selector(problems: t.List[str], where: str, selector: t.Any) -> t.Dict[str, t.Any]:
    """A label selector in the API's words (matchLabels, matchExpressions)."""
    if not isinstance(selector, dict):
        problems.append("%s: must be a label selector mapping (match_labels / match_expressions), got %r"
                        % (where, selector))
        return {}
    out: t.Dict[str, t.Any] = {}
    known = {"match_labels", "matchLabels", "match_expressions", "matchExpressions"}
    unknown = sorted(set(selector) - known)
    if unknown:
        problems.append("%s: unknown keys %s (use match_labels and match_expressions)" % (where, ", ".join(unknown)))
    labels = option(selector, "match_labels")
    if labels is not None:
        if not isinstance(labels, dict):
            problems.append("%s.match_labels must be a mapping" % where)
        else:
            _check_labels(problems, "%s.match_labels" % where, labels)
            out["matchLabels"] = dict(labels)
    exprs = option(selector, "match_expressions")
    if exprs is not None:
        out_exprs = []
        for i, expr in enumerate(exprs if isinstance(exprs, list) else [exprs]):
            w = "%s.match_expressions[%d]" % (where, i)
            if not isinstance(expr, dict):
                problems.append("%s must be a mapping with key, operator and values" % w)
                continue
            key, op, values = expr.get("key"), expr.get("operator"), expr.get("values")
            _check_label_key(problems, w, key)
            _choice(problems, "%s.operator" % w, op, SELECTOR_OPERATORS)
            if op in ("In", "NotIn") and not values:
                problems.append("%s: operator %s needs a non-empty values list" % (w, op))
            if op in ("Exists", "DoesNotExist") and values:
                problems.append("%s: operator %s takes no values" % (w, op))
            item = {"key": key, "operator": op}
            if values:
                item["values"] = [str(v) for v in values]
            out_exprs.append(item)
        out["matchExpressions"] = out_exprs
    return out


# -- resource groups (ClusterQueue and Cohort) --------------------------------------------------------------

def _flavor_resources(problems: t.List[str], fw: str, fname: t.Any, resources: t.Any) -> t.List[t.Dict[str, t.Any]]:
    """A flavor's ``resources``: a list of {name, nominal_quota, ...}, or a mapping resource -> quota (or -> {...})."""
    if isinstance(resources, dict):
        items = []
        for rname, spec in resources.items():
            item = dict(spec) if isinstance(spec, dict) else {"nominal_quota": spec}
            item["name"] = rname
            items.append(item)
        return items
    if isinstance(resources, list):
        return [dict(r) if isinstance(r, dict) else {"name": r} for r in resources]
    problems.append("%s (flavor %s): resources must be a list of {name, nominal_quota, ...} or a mapping "
                    "resource -> quota" % (fw, fname))
    return []


def _resource_quota(problems: t.List[str], rw: str, rname: str, r: t.Mapping[str, t.Any], allow_limits: bool,
                    limits_reason: str, cap_lending: bool) -> t.Optional[ResourceQuota]:
    nominal = option(r, "nominal_quota", option(r, "nominal"))
    if nominal is None:
        problems.append("%s: nominal_quota is required" % rw)
        return None
    _check_quantity(problems, "%s nominal_quota" % rw, nominal)
    entry = ResourceQuota(rname, normalize_quantity(nominal))
    borrowing = option(r, "borrowing_limit")
    lending = option(r, "lending_limit")
    if borrowing is not None:
        _check_quantity(problems, "%s borrowing_limit" % rw, borrowing)
        if not allow_limits:
            problems.append("%s: borrowing_limit is set but %s" % (rw, limits_reason))
        entry.borrowing_limit = normalize_quantity(borrowing)
    if lending is not None:
        lq = _check_quantity(problems, "%s lending_limit" % rw, lending)
        if not allow_limits:
            problems.append("%s: lending_limit is set but %s" % (rw, limits_reason))
        if cap_lending and lq is not None and lends_above_nominal(lending, nominal):
            problems.append("%s: lending_limit %s is above nominal_quota %s; a queue can only lend "
                            "what it has" % (rw, lending, nominal))
        entry.lending_limit = normalize_quantity(lending)
    return entry


def parse_resource_groups(groups: t.Optional[t.Sequence[t.Mapping[str, t.Any]]], problems: t.List[str], where: str,
                          allow_limits: bool, limits_reason: str, cap_lending: bool = True) -> t.List[ResourceGroup]:
    """Check ``resource_groups`` against Kueue's rules.

    ``cap_lending``: a lending limit may not exceed the nominal quota (Kueue's rule for a ClusterQueue; a Cohort's
    lending limit bounds its whole subtree, so Kueue lets it exceed the Cohort's own nominal quota).

    Each group: ``covered_resources`` (optional: derived from the first flavor's resources) and
    ``flavors`` [{name, resources: [{name, nominal_quota, borrowing_limit, lending_limit}]}]. A flavor's
    ``resources`` may also be a mapping ``{resource: nominal}`` or ``{resource: {nominal_quota: ...}}``.
    """
    out: t.List[ResourceGroup] = []
    if not groups:
        return out
    if len(groups) > MAX_RESOURCE_GROUPS:
        problems.append("%s: %d resource groups; at most %d are allowed" % (where, len(groups), MAX_RESOURCE_GROUPS))
    seen_flavors: t.Dict[str, int] = {}
    seen_resources: t.Dict[str, int] = {}
    total_flavors = 0
    for gi, group in enumerate(groups):
        gw = "%s resource_groups[%d]" % (where, gi)
        if not isinstance(group, dict):
            problems.append("%s must be a mapping with covered_resources and flavors" % gw)
            continue
        flavors = option(group, "flavors") or []
        if not flavors:
            problems.append("%s: flavors is empty; list at least one flavor with its quotas" % gw)
        total_flavors += len(flavors)
        if len(flavors) > MAX_PER_GROUP:
            problems.append("%s: %d flavors; at most %d per group" % (gw, len(flavors), MAX_PER_GROUP))
        parsed = []
        for fi, flavor in enumerate(flavors):
            fw = "%s flavors[%d]" % (gw, fi)
            if not isinstance(flavor, dict):
                problems.append("%s must be a mapping with name and resources" % fw)
                continue
            fname = flavor.get("name")
            _check_name(problems, "%s name" % fw, fname)
            if fname in seen_flavors:
                problems.append("%s: flavor %r is already used in resource_groups[%d]; each flavor may appear in "
                                "only one resource group" % (fw, fname, seen_flavors[fname]))
            elif isinstance(fname, str):
                seen_flavors[fname] = gi
            parsed.append((fw, fname, _flavor_resources(problems, fw, fname, flavor.get("resources"))))
        covered = option(group, "covered_resources")
        if covered is None:
            covered = [r.get("name") for r in parsed[0][2]] if parsed else []
        covered = [str(c) for c in covered]
        if not covered:
            problems.append("%s: covered_resources is empty" % gw)
        if len(covered) > MAX_PER_GROUP:
            problems.append("%s: %d covered resources; at most %d" % (gw, len(covered), MAX_PER_GROUP))
        if len(set(covered)) != len(covered):
            problems.append("%s: covered_resources lists a resource twice: %s" % (gw, covered))
        for res in covered:
            if res in seen_resources and seen_resources[res] != gi:
                problems.append("%s: resource %r is already covered by resource_groups[%d]; each resource may be "
                                "covered by only one resource group" % (gw, res, seen_resources[res]))
            seen_resources.setdefault(res, gi)
        built_flavors = []
        for fw, fname, items in parsed:
            names = [r.get("name") for r in items]
            missing = [c for c in covered if c not in names]
            extra = [n for n in names if n not in covered]
            if missing:
                problems.append("%s: flavor %r has no quota for %s; every flavor of a group must list every covered "
                                "resource (use nominal_quota: 0 for none)" % (fw, fname, ", ".join(missing)))
            if extra:
                problems.append("%s: flavor %r sets %s, which the group does not cover (covered_resources: %s)"
                                % (fw, fname, ", ".join(str(e) for e in extra), ", ".join(covered)))
            if len(set(names)) != len(names):
                problems.append("%s: flavor %r lists a resource twice" % (fw, fname))
            by_name = {r.get("name"): r for r in items}
            built_resources = []
            for rname in covered:  # same order as coveredResources, as the API requires
                r = by_name.get(rname)
                if r is None:
                    continue
                entry = _resource_quota(problems, "%s flavor %s resource %s" % (gw, fname, rname), rname, r,
                                        allow_limits, limits_reason, cap_lending)
                if entry is not None:
                    built_resources.append(entry)
            built_flavors.append(FlavorQuotas(fname, built_resources))
        out.append(ResourceGroup(covered, built_flavors))
    if total_flavors > MAX_FLAVORS_TOTAL:
        problems.append("%s: %d flavors in total; at most %d" % (where, total_flavors, MAX_FLAVORS_TOTAL))
    return out


# -- ResourceFlavor ----------------------------------------------------------------------------------------

def _entries(problems: t.List[str], option_name: str, entries: t.Sequence[t.Any], limit: int, unit: str,
             shape: str) -> t.Iterator[t.Tuple[str, t.Dict[str, t.Any]]]:
    """``(where, entry)`` of each mapping of a ResourceFlavor list option (at most ``limit`` entries); entries that
    are no mapping are reported with their expected ``shape`` and skipped."""
    if len(entries) > limit:
        problems.append("%s has %d %s; at most %d" % (option_name, len(entries), unit, limit))
    for i, entry in enumerate(entries):
        where = "%s[%d]" % (option_name, i)
        if isinstance(entry, dict):
            yield where, entry
        else:
            problems.append("%s must be a mapping %s" % (where, shape))


def _taints(problems: t.List[str], node_taints: t.Sequence[t.Any]) -> t.List[t.Dict[str, t.Any]]:
    taints = []
    for w, taint in _entries(problems, "node_taints", node_taints, MAX_NODE_TAINTS, "taints",
                             "with key, value and effect"):
        _check_label_key(problems, w, taint.get("key"))
        _choice(problems, "%s.effect" % w, taint.get("effect"), TAINT_EFFECTS)
        if taint.get("effect") is None:
            problems.append("%s: effect is required (%s)" % (w, ", ".join(TAINT_EFFECTS)))
        taints.append(dict(taint))
    return taints


def _tolerations(problems: t.List[str], tolerations: t.Sequence[t.Any]) -> t.List[t.Dict[str, t.Any]]:
    tols = []
    for w, tol in _entries(problems, "tolerations", tolerations, MAX_TOLERATIONS, "entries",
                           "(key, operator, value, effect, toleration_seconds)"):
        for field, reason in toleration_problems(tol):
            problems.append("%s.%s: %s" % (w, "toleration_seconds" if field == "tolerationSeconds" else field, reason))
        tols.append(dict(tol))
    return tols


def parse_resource_flavor(name: str, node_labels: t.Optional[t.Mapping[str, str]] = None,
                          node_taints: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                          tolerations: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                          topology_name: t.Optional[str] = None, labels: t.Optional[t.Mapping[str, str]] = None,
                          annotations: t.Optional[t.Mapping[str, str]] = None) -> ResourceFlavorSpec:
    """A ResourceFlavor: which nodes (labels), their taints, and the tolerations added to admitted pods."""
    what = "ResourceFlavor %s" % name
    problems = _begin("ResourceFlavor", name, {})[0]
    flavor = Flavor(name)
    if node_labels:
        if not isinstance(node_labels, dict):
            problems.append("node_labels must be a mapping label -> value")
        else:
            if too_many_node_labels(node_labels):
                problems.append("node_labels has %d labels; Kueue allows at most %d per flavor (pick the labels that "
                                "identify the node pool, e.g. nvidia.com/gpu.product)" % (len(node_labels), MAX_NODE_LABELS))
            _check_labels(problems, "node_labels", node_labels)
            flavor.node_labels = dict(node_labels)
    if node_taints:
        flavor.node_taints = _taints(problems, node_taints)
    if tolerations:
        flavor.tolerations = _tolerations(problems, tolerations)
    if topology_name:
        _check_name(problems, "topology_name", topology_name)
        if not node_labels:
            problems.append("topology_name needs at least one node label (node_labels)")
        flavor.topology_name = topology_name
    meta = _meta(name, None, labels, annotations, problems, what)
    _raise(problems, what)
    return ResourceFlavorSpec(meta, flavor)


# -- Cohort ------------------------------------------------------------------------------------------------

def parse_cohort(name: str, parent: t.Optional[str] = None,
                 resource_groups: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                 fair_sharing_weight: t.Any = None, labels: t.Optional[t.Mapping[str, str]] = None,
                 annotations: t.Optional[t.Mapping[str, str]] = None, **kwargs: t.Any) -> CohortSpec:
    """A Cohort: a node of the borrowing tree, optionally with shared quota (resource_groups) and a parent.

    ``parent_name`` is accepted as an alias of ``parent``.
    """
    what = "Cohort %s" % name
    problems, parent = _begin("Cohort", name, kwargs, parent, "parent_name")
    if parent:
        _check_name(problems, "Cohort parent", parent)
        if parent == name:
            problems.append("Cohort %s cannot be its own parent" % name)
    groups = parse_resource_groups(resource_groups, problems, what, allow_limits=bool(parent),
                                   limits_reason="borrowing/lending limits of a Cohort apply towards its parent and "
                                                 "it has no parent (set parent)", cap_lending=False)
    weight = _weight(problems, what, fair_sharing_weight)
    meta = _meta(name, None, labels, annotations, problems, what)
    _raise(problems, what)
    return CohortSpec(meta, parent or None, groups, weight)


# -- ClusterQueue ------------------------------------------------------------------------------------------

def _preemption(problems: t.List[str], preemption: t.Mapping[str, t.Any]) -> Preemption:
    reclaim = option(preemption, "reclaim_within_cohort")
    within = option(preemption, "within_cluster_queue")
    _choice(problems, "preemption.reclaim_within_cohort", reclaim, RECLAIM_POLICIES)
    _choice(problems, "preemption.within_cluster_queue", within, WITHIN_CQ_POLICIES)
    out = Preemption(reclaim_within_cohort=reclaim or None, within_cluster_queue=within or None)
    bwc = option(preemption, "borrow_within_cohort")
    if bwc is not None:
        if not isinstance(bwc, dict):
            problems.append("preemption.borrow_within_cohort must be a mapping (policy, max_priority_threshold)")
        else:
            out.borrow_within_cohort_set = True
            policy = bwc.get("policy")
            _choice(problems, "preemption.borrow_within_cohort.policy", policy, BORROW_POLICIES)
            out.borrow_policy = policy or None
            threshold = option(bwc, "max_priority_threshold")
            if threshold is not None:
                if isinstance(threshold, bool) or not isinstance(threshold, int) or abs(threshold) > INT32_MAX:
                    problems.append("preemption.borrow_within_cohort.max_priority_threshold must be a 32-bit integer")
                out.borrow_max_priority_threshold = threshold
            if policy and policy != "Never" and (reclaim in (None, "Never")):
                problems.append("preemption: borrow_within_cohort.policy %s needs reclaim_within_cohort other than "
                                "Never (Kueue rejects reclaimWithinCohort=Never with borrowWithinCohort)" % policy)
    unknown = set(preemption) - PREEMPTION_KEYS
    if unknown:
        problems.append("preemption: unknown keys %s" % ", ".join(sorted(unknown)))
    return out


def _fungibility(problems: t.List[str], fung: t.Mapping[str, t.Any]) -> FlavorFungibility:
    out = FlavorFungibility()
    for snake in ("when_can_borrow", "when_can_preempt"):
        value = option(fung, snake)
        if value is None:
            continue
        value = FUNGIBILITY_OLD.get(value, value)
        _choice(problems, "flavor_fungibility.%s" % snake, value, FUNGIBILITY_POLICIES)
        setattr(out, snake, value)
    pref = option(fung, "preference")
    if pref is not None:
        _choice(problems, "flavor_fungibility.preference", pref, FUNGIBILITY_PREFERENCES)
        if out.when_can_borrow != "TryNextFlavor" or out.when_can_preempt != "TryNextFlavor":
            problems.append("flavor_fungibility.preference needs when_can_borrow and when_can_preempt both set to "
                            "TryNextFlavor")
        out.preference = pref
    return out


def _admission_checks(problems: t.List[str], checks: t.Sequence[t.Any],
                      groups: t.Sequence[ResourceGroup]) -> t.List[AdmissionCheck]:
    rules = []
    for i, check in enumerate(checks):
        if isinstance(check, str):
            check = {"name": check}
        if not isinstance(check, dict):
            problems.append("admission_checks[%d] must be a name or {name, on_flavors}" % i)
            continue
        _check_name(problems, "admission_checks[%d] name" % i, check.get("name"))
        rules.append(AdmissionCheck(check.get("name"), list(option(check, "on_flavors") or [])))
    flavors = {f.name for g in groups for f in g.flavors}
    for rule in rules:
        for fl in rule.on_flavors:
            if fl not in flavors:
                problems.append("admission check %s: on_flavors names %r, which is not a flavor of this queue"
                                % (rule.name, fl))
    return rules


def parse_cluster_queue(name: str, resource_groups: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
                        cohort: t.Optional[str] = None, namespace_selector: t.Optional[t.Mapping[str, t.Any]] = None,
                        queueing_strategy: t.Optional[str] = None, preemption: t.Optional[t.Mapping[str, t.Any]] = None,
                        fair_sharing_weight: t.Any = None, stop_policy: t.Optional[str] = None,
                        flavor_fungibility: t.Optional[t.Mapping[str, t.Any]] = None,
                        admission_checks: t.Optional[t.Sequence[t.Any]] = None,
                        labels: t.Optional[t.Mapping[str, str]] = None,
                        annotations: t.Optional[t.Mapping[str, str]] = None, **kwargs: t.Any) -> ClusterQueueSpec:
    """A ClusterQueue with quotas per flavor and resource.

    ``cohort_name`` is accepted as an alias of ``cohort``. ``namespace_selector``
    None leaves it unset, which in Kueue means *no* namespace may submit; pass ``{}`` for all namespaces.
    """
    what = "ClusterQueue %s" % name
    problems, cohort_name = _begin("ClusterQueue", name, kwargs, cohort, "cohort_name")
    if cohort_name:
        _check_name(problems, "cohort", cohort_name)
    spec = ClusterQueueSpec(ObjectMeta(name), cohort=cohort_name or None)
    spec.resource_groups = parse_resource_groups(
        resource_groups, problems, what, allow_limits=bool(cohort_name),
        limits_reason="the ClusterQueue has no cohort to borrow from or lend to (set cohort)")
    if namespace_selector is not None:
        spec.namespace_selector = _label_selector(problems, "namespace_selector", namespace_selector)
    _choice(problems, "queueing_strategy", queueing_strategy, QUEUEING_STRATEGIES)
    spec.queueing_strategy = queueing_strategy or None
    if preemption:
        spec.preemption = _preemption(problems, preemption)
    spec.fair_sharing_weight = _weight(problems, what, fair_sharing_weight)
    _choice(problems, "stop_policy", stop_policy, STOP_POLICIES)
    spec.stop_policy = stop_policy or None
    if flavor_fungibility:
        spec.flavor_fungibility = _fungibility(problems, flavor_fungibility)
    if admission_checks:
        spec.admission_checks = _admission_checks(problems, admission_checks, spec.resource_groups)
    spec.meta = _meta(name, None, labels, annotations, problems, what)
    _raise(problems, what)
    return spec


# -- LocalQueue and WorkloadPriorityClass ------------------------------------------------------------------

def parse_local_queue(name: str, namespace: str, cluster_queue: t.Optional[str] = None,
                      stop_policy: t.Optional[str] = None, fair_sharing_weight: t.Any = None,
                      labels: t.Optional[t.Mapping[str, str]] = None,
                      annotations: t.Optional[t.Mapping[str, str]] = None, **kwargs: t.Any) -> LocalQueueSpec:
    """A LocalQueue in ``namespace`` pointing at the ClusterQueue ``cluster_queue``."""
    what = "LocalQueue %s/%s" % (namespace, name)
    problems, cq = _begin("LocalQueue", name, kwargs, cluster_queue, "cluster_queue_name")
    _check_name(problems, "LocalQueue namespace", namespace, label=True)
    if not cq:
        problems.append("cluster_queue is required: the ClusterQueue this LocalQueue submits to")
    else:
        _check_name(problems, "cluster_queue", cq)
    _choice(problems, "stop_policy", stop_policy, STOP_POLICIES)
    weight = _weight(problems, what, fair_sharing_weight)
    meta = _meta(name, namespace, labels, annotations, problems, what)
    _raise(problems, what)
    return LocalQueueSpec(meta, t.cast(str, cq), stop_policy or None, weight)


def parse_workload_priority_class(name: str, value: t.Any, description: t.Optional[str] = None,
                                  labels: t.Optional[t.Mapping[str, str]] = None,
                                  annotations: t.Optional[t.Mapping[str, str]] = None) -> PriorityClassSpec:
    """A WorkloadPriorityClass (jobs pick it with label kueue.x-k8s.io/priority-class)."""
    what = "WorkloadPriorityClass %s" % name
    problems = _begin("WorkloadPriorityClass", name, {})[0]
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            problems.append("value %r must be an integer" % (value,))
    if isinstance(value, int) and not -INT32_MAX - 1 <= value <= INT32_MAX:
        problems.append("value %s is outside the 32-bit integer range" % value)
    if description is not None and len(description) > 2048:
        problems.append("description is longer than 2048 characters")
    meta = _meta(name, None, labels, annotations, problems, what)
    _raise(problems, what)
    return PriorityClassSpec(meta, Priority(name, value, description or None))
