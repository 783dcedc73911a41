# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_openshift_ai``: how the tenancy meets OpenShift AI (issue 23).

Two things, both opt-in through this section:

* **HardwareProfiles** (``hardware_profiles: true``): one OpenShift AI ``HardwareProfile`` per tenant, GPU flavor
  (and allowed priority class), with ``scheduling.type: Queue`` on the tenant's LocalQueue, so that the dashboard
  offers data scientists exactly what their tenant's Kueue quota can admit. The plan (names, namespaces, counts) is
  computed and checked here, before anything is written; ``manifests/openshift_ai.py`` only renders it.
* **Trusted controllers** (``trusted_controllers``, default true): OpenShift AI's controllers in
  ``applications_namespace`` are added to the admission policy's workload controllers (the runner does it, and only
  for the frameworks Kueue manages: ``manifests/kueue_integrations.CONTROLLER_FRAMEWORKS``).

Where the profiles live (``profiles_scope``): ``project`` (default) puts them in each tenant namespace. OpenShift
AI's HardwareProfile webhook looks a workload's profile up in the workload's own namespace unless the workload names
another one (opendatahub-io/opendatahub-operator ``internal/webhook/hardwareprofile/mutating.go``), and the dashboard
lists a project's profiles beside the global ones: a tenant's profiles are seen in the tenant's projects only.
``global`` puts them in ``applications_namespace`` (where OpenShift AI keeps its global profiles, for releases
without project-scoped profiles): every project then sees every tenant's profiles, named ``gpuaas-<tenant>-...``.
Either way ``kueue.localQueueName`` is resolved in the workload's namespace, so a profile can only ever route a
workload to a LocalQueue of the workload's own tenant: profiles are a convenience, Kueue's quota is the guarantee.

The counts: ``maxCount`` is what one workload of the tenant can get of that flavor — the nominal quota plus the
borrowing limit, or, in a cohort without a borrowing limit, plus what the other tenants of the cohort tree can lend
(their lending limit, else their nominal quota) and the cohorts' own quotas (all of an ancestor's, at most the lending
limit of another's); ``minCount`` and ``defaultCount`` are 1 GPU. CPU and memory
identifiers are added when the flavor's quota lists them (min and default from this section, max as above).
"""

from __future__ import annotations

import re
import typing as t
from decimal import Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.names import DNS1123_SUBDOMAIN
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import (
    Cohort,
    HardwareProfilePlan,
    OpenShiftAI,
    ProfileIdentifier,
    Tenant,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator

OPENSHIFT_AI_KEYS = ("hardware_profiles", "profiles_scope", "applications_namespace", "trusted_controllers", "cpu",
                     "memory")
COUNT_KEYS = ("min", "default")
PROFILE_SCOPES = ("project", "global")
# The defaults (records.OpenShiftAI): CPU and memory identifiers shaped like OpenShift AI's own default-profile.
DEFAULT_APPLICATIONS_NAMESPACE = OpenShiftAI.applications_namespace
PROFILE_PREFIX = "gpuaas"
MAX_NAME = 253
_BINARY = (("Ei", 2 ** 60), ("Pi", 2 ** 50), ("Ti", 2 ** 40), ("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10))


def parse_openshift_ai(check: Validator, value: t.Any) -> OpenShiftAI:
    """The section's settings (``configured`` tells whether the inventory has the section at all)."""
    path = "gpuaas_openshift_ai"
    data = check.mapping(path, value, OPENSHIFT_AI_KEYS)
    out = OpenShiftAI(configured=bool(data))
    if not data:
        return out
    out.hardware_profiles = check.boolean(path + ".hardware_profiles", data.get("hardware_profiles", False), False)
    out.trusted_controllers = check.boolean(path + ".trusted_controllers", data.get("trusted_controllers", True), True)
    out.profiles_scope = check.enum(path + ".profiles_scope", data.get("profiles_scope", "project"),
                                    PROFILE_SCOPES) or "project"
    if data.get("applications_namespace") is not None:
        out.applications_namespace = (check.label_name(path + ".applications_namespace",
                                                       data.get("applications_namespace"))
                                      or DEFAULT_APPLICATIONS_NAMESPACE)
    out.cpu = _counts(check, path + ".cpu", data.get("cpu"), out.cpu)
    out.memory = _counts(check, path + ".memory", data.get("memory"), out.memory)
    return out


def _counts(check: Validator, path: str, value: t.Any, default: t.Mapping[str, str]) -> t.Dict[str, str]:
    """``{min, default}`` of a CPU or memory identifier as quantity text; ``min`` must not exceed ``default``."""
    data = check.mapping(path, value, COUNT_KEYS) or {}
    out = dict(default)
    for key in COUNT_KEYS:
        if data.get(key) is None:
            continue
        try:
            number = parse_quantity(data[key])
        except ValueError as exc:
            check.err("%s.%s" % (path, key), str(exc))
            continue
        if number <= 0:
            check.err("%s.%s" % (path, key), "must be above 0, got %s" % data[key])
            continue
        out[key] = str(data[key]).strip()
    if parse_quantity(out["min"]) > parse_quantity(out["default"]):
        check.err(path, "min %s is above default %s" % (out["min"], out["default"]))
    return out


def profile_count(value: Decimal, resource: str) -> t.Union[int, str]:
    """A count as the HardwareProfile's int-or-string field takes it: whole numbers as ints, memory in the largest
    binary unit that divides it exactly, fractional CPU in millicores."""
    if resource == "memory":
        for suffix, factor in _BINARY:
            if value >= factor and value % factor == 0:
                return "%d%s" % (value // factor, suffix)
        return int(value) if value == value.to_integral_value() else str(value)
    if value == value.to_integral_value():
        return int(value)
    return "%dm" % int(value * 1000)


def _cohort_root(name: t.Optional[str], cohorts: t.Mapping[str, Cohort]) -> t.Optional[str]:
    seen: t.Set[str] = set()
    while name is not None and name in cohorts and cohorts[name].parent and name not in seen:
        seen.add(name)
        name = cohorts[name].parent
    return name


def max_count(tenant: Tenant, flavor: str, resource: str, tenants: t.Sequence[Tenant],
              cohorts: t.Mapping[str, Cohort]) -> Decimal:
    """The most of ``resource`` in ``flavor`` one workload of ``tenant`` can be admitted with (see the module doc)."""
    quota = next(q for q in tenant.quotas if q.flavor == flavor)
    total = parse_quantity(quota.resources[resource])
    if resource in quota.borrowing_limit:
        return total + parse_quantity(quota.borrowing_limit[resource])
    if not tenant.cohort:
        return total
    root = _cohort_root(tenant.cohort, cohorts)
    for other in tenants:
        if other is tenant or not other.present or not other.cohort or _cohort_root(other.cohort, cohorts) != root:
            continue
        for theirs in other.quotas:
            if theirs.flavor == flavor and resource in theirs.resources:
                total += parse_quantity(theirs.lending_limit.get(resource, theirs.resources[resource]))
    # cohorts' own quota (department budgets) in the tree: all of an ancestor's, a lending limit caps the others'
    ancestors: t.Set[str] = set()
    name: t.Optional[str] = tenant.cohort
    while name is not None and name not in ancestors:
        ancestors.add(name)
        name = cohorts[name].parent if name in cohorts else None
    for cohort in cohorts.values():
        if _cohort_root(cohort.name, cohorts) != root:
            continue
        for theirs in cohort.quotas:
            if theirs.flavor == flavor and resource in theirs.resources:
                nominal = parse_quantity(theirs.resources[resource])
                if cohort.name not in ancestors and resource in theirs.lending_limit:
                    nominal = min(nominal, parse_quantity(theirs.lending_limit[resource]))
                total += nominal
    return total


def _name_part(text: str) -> str:
    """A resource name's last segment as a name part (``nvidia.com/mig-1g.5gb`` -> ``mig-1g.5gb``)."""
    return re.sub(r"[^a-z0-9.-]+", "-", text.rsplit("/", 1)[-1].lower()).strip("-.") or "gpu"


def plan_hardware_profiles(check: Validator, settings: OpenShiftAI, tenants: t.Sequence[Tenant],
                           cohorts: t.Sequence[Cohort]) -> t.List[HardwareProfilePlan]:
    """Every HardwareProfile the inventory asks for, checked (counts, names, queues) before anything is written."""
    cohort_index = {c.name: c for c in cohorts}
    out: t.List[HardwareProfilePlan] = []
    for index, tenant in enumerate(tenants):
        wanted = settings.hardware_profiles if tenant.hardware_profiles is None else tenant.hardware_profiles
        if not tenant.present or not wanted:
            continue
        path = "gpuaas_tenants[%d]" % index
        queue = _global_queue(check, path, tenant) if settings.profiles_scope == "global" else None
        if settings.profiles_scope == "global" and queue is None:
            continue
        priorities: t.List[t.Optional[str]] = list(tenant.allowed_priorities or []) or [None]
        for quota in tenant.quotas:
            gpus = [r for r in quota.resources if is_accelerator(r)]
            identifiers = _cpu_memory(check, path, tenant, quota.flavor, settings, tenants, cohort_index)
            for resource in gpus:
                top = max_count(tenant, quota.flavor, resource, tenants, cohort_index)
                if top < 1:
                    check.warn("%s (%s): flavor %s offers no whole %s to one workload (quota %s, nothing to borrow): "
                               "no HardwareProfile for it"
                               % (path, tenant.name, quota.flavor, resource, quota.resources[resource]))
                    continue
                gpu = ProfileIdentifier(resource, "GPU" if resource == "nvidia.com/gpu" else resource, "Accelerator",
                                        1, 1, profile_count(top, resource))
                base = quota.flavor if len(gpus) == 1 else "%s-%s" % (quota.flavor, _name_part(resource))
                for priority in priorities:
                    out.extend(_plans(check, path, tenant, settings, base, quota.flavor, priority, queue,
                                      [gpu] + identifiers))
    return out


def _global_queue(check: Validator, path: str, tenant: Tenant) -> t.Optional[str]:
    """The one LocalQueue name every namespace of the tenant has (a global profile names a single queue)."""
    if tenant.default_queue:
        return "default"
    for queue in tenant.queues:
        if set(queue.namespaces) == set(tenant.namespaces):
            return queue.name
    check.err(path + ".queues", "profiles_scope global names one LocalQueue for all of tenant %r's namespaces: "
                                "keep default_queue or add a queue listed in every namespace (or use "
                                "profiles_scope: project)" % tenant.name)
    return None


def _cpu_memory(check: Validator, path: str, tenant: Tenant, flavor: str, settings: OpenShiftAI,
                tenants: t.Sequence[Tenant], cohorts: t.Mapping[str, Cohort]) -> t.List[ProfileIdentifier]:
    quota = next(q for q in tenant.quotas if q.flavor == flavor)
    out: t.List[ProfileIdentifier] = []
    for resource, counts, display, kind in (("cpu", settings.cpu, "CPU", "CPU"),
                                            ("memory", settings.memory, "Memory", "Memory")):
        if resource not in quota.resources:
            continue
        top = max_count(tenant, flavor, resource, tenants, cohorts)
        if parse_quantity(counts["default"]) > top:
            check.err(path + ".quotas", "tenant %r can get at most %s of %s in flavor %s, below the HardwareProfile "
                                        "default gpuaas_openshift_ai.%s.default %s: lower the default or raise the "
                                        "quota (or set hardware_profiles: false on the tenant)"
                      % (tenant.name, profile_count(top, resource), resource, flavor, resource, counts["default"]))
            continue
        out.append(ProfileIdentifier(resource, display, kind, profile_count(parse_quantity(counts["min"]), resource),
                                     profile_count(parse_quantity(counts["default"]), resource),
                                     profile_count(top, resource)))
    return out


def _plans(check: Validator, path: str, tenant: Tenant, settings: OpenShiftAI, base: str, flavor: str,
           priority: t.Optional[str], global_queue: t.Optional[str],
           identifiers: t.List[ProfileIdentifier]) -> t.List[HardwareProfilePlan]:
    parts = [PROFILE_PREFIX] + ([tenant.name] if global_queue else []) + [base] + ([priority] if priority else [])
    name = "-".join(parts)
    if len(name) > MAX_NAME or not DNS1123_SUBDOMAIN.match(name):
        check.err(path, "HardwareProfile name %r is not a DNS-1123 subdomain of at most %d characters; use shorter "
                        "flavor or priority names" % (name, MAX_NAME))
        return []
    display = "%s GPU%s (tenant %s)" % (flavor, ", priority %s" % priority if priority else "", tenant.name)
    if global_queue:
        return [HardwareProfilePlan(name, settings.applications_namespace, tenant.name, flavor, global_queue,
                                    priority, identifiers, display)]
    return [HardwareProfilePlan(name, ns, tenant.name, flavor, t.cast(str, tenant.suggested_queue(ns)), priority,
                                identifiers, display)
            for ns in tenant.namespaces]
