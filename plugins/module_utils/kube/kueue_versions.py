# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kueue API version selection and v1beta2 -> v1beta1 conversion.

Builders always produce ``kueue.x-k8s.io/v1beta2`` objects. When a cluster only
serves ``v1beta1`` (Kueue <= v0.15, and Red Hat builds based on them) the objects
are converted just before they are applied, following the upstream conversion
functions in ``apis/kueue/v1beta1/*_conversion.go``:

* ClusterQueue ``spec.cohortName`` -> ``spec.cohort``;
* ClusterQueue ``spec.admissionChecksStrategy`` -> ``spec.admissionChecks`` (plain list of
  names) when no rule restricts ``onFlavors``; otherwise the strategy is kept (v1beta1 has it too);
* ClusterQueue ``spec.flavorFungibility`` ``MayStopSearch`` -> ``Borrow`` (whenCanBorrow) /
  ``Preempt`` (whenCanPreempt), the names every v1beta1 release accepts;
* Cohort: Kueue <= v0.10 serves Cohort only as ``v1alpha1`` with ``spec.parent`` (and no fairSharing);
  ``cohort_api_version`` finds out, and ``convert_for_version(obj, "v1alpha1")`` converts a Cohort for it.

``convert_from_version`` does the reverse (v1beta1 live object -> v1beta2 shape) so that
``kueue_info`` and the engine's diffs read the same words on every cluster.
"""

from __future__ import annotations

import copy
import typing as t

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")

_FUNGIBILITY_DOWN = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
_FUNGIBILITY_OLD = {"Borrow", "Preempt"}


def kueue_api_version(client: t.Any) -> str:
    """'v1beta2' when the cluster serves it, else 'v1beta1'; GpuaasError when Kueue is not served at all."""
    for version in KUEUE_VERSIONS:
        if client.served("%s/%s" % (KUEUE_GROUP, version)):
            return version
    # Let the client raise its "is Kueue installed?" error.
    client.resource("%s/v1beta2" % KUEUE_GROUP, "ClusterQueue")
    return "v1beta2"  # pragma: no cover - resource() raised


def is_kueue(obj: t.Mapping[str, t.Any]) -> bool:
    return str(obj.get("apiVersion", "")).startswith(KUEUE_GROUP + "/")


def cohort_api_version(client: t.Any, version: str) -> str:
    """Version serving Cohort next to ClusterQueue ``version``: the same, or 'v1alpha1' on Kueue <= v0.10."""
    if version == "v1beta1":
        try:
            client.resource("%s/v1beta1" % KUEUE_GROUP, "Cohort")
        except Exception:  # noqa: BLE001 - GpuaasError "not served"
            try:
                client.resource("%s/v1alpha1" % KUEUE_GROUP, "Cohort")
                return "v1alpha1"
            except Exception:  # noqa: BLE001
                pass
    return version


def cohort_parent_field(client: t.Any, version: str) -> str:
    """Name of the Cohort parent field for the served version ('parentName' or, on the oldest releases, 'parent').

    Reads the CRD's OpenAPI schema when the caller may read CRDs; defaults to 'parentName'.
    """
    if version != "v1beta1":
        return "parentName"
    try:
        crd = client.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition").get("cohorts.%s" % KUEUE_GROUP)
    except Exception:  # noqa: BLE001 - no permission to read CRDs: keep the modern name
        return "parentName"
    for ver in ((crd or {}).get("spec") or {}).get("versions") or []:
        if ver.get("name") != version:
            continue
        props = (((((ver.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {})
                  .get("spec") or {}).get("properties") or {})
        if "parent" in props and "parentName" not in props:
            return "parent"
    return "parentName"


def cohort_quota_unsupported(client: t.Any, version: str) -> t.Optional[str]:
    """Why the cluster cannot hold a Cohort's ``spec.resourceGroups`` (shared quota), or None when it can.

    Every Cohort API Kueue has served holds them (v1alpha1 from v0.9, v1beta1, v1beta2); before v0.9 there is no
    Cohort kind at all (a cohort is only a name on ClusterQueues). A served schema without the field (a vendor
    build) would prune it silently, so the CRD is read when the caller may (else the served kind is trusted).
    """
    cohort_version = cohort_api_version(client, version)
    try:
        client.resource("%s/%s" % (KUEUE_GROUP, cohort_version), "Cohort")
    except Exception:  # noqa: BLE001 - GpuaasError "not served"
        return ("the cluster serves no Kueue Cohort API (%s/%s Cohort); Kueue before v0.9 knows a cohort only as a "
                "name on ClusterQueues, which cannot hold quota" % (KUEUE_GROUP, cohort_version))
    try:
        crd = client.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition").get("cohorts.%s" % KUEUE_GROUP)
    except Exception:  # noqa: BLE001 - no permission to read CRDs: the served kind is trusted
        return None
    for ver in ((crd or {}).get("spec") or {}).get("versions") or []:
        if ver.get("name") != cohort_version:
            continue
        props = (((((ver.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {})
                  .get("spec") or {}).get("properties") or {})
        if props and "resourceGroups" not in props:
            return ("the cluster's Cohort API %s/%s has no spec.resourceGroups in its schema: the API server would "
                    "drop the quota without an error" % (KUEUE_GROUP, cohort_version))
    return None


def convert_for_version(obj: t.Mapping[str, t.Any], version: str,
                        cohort_parent_field: str = "parentName") -> t.Dict[str, t.Any]:
    """A copy of the v1beta2-shaped Kueue ``obj`` for API ``version`` (non-Kueue objects are returned unchanged)."""
    out = copy.deepcopy(dict(obj))
    if not is_kueue(out) or version == "v1beta2":
        return out
    if version == "v1alpha1" and out.get("kind") == "Cohort":
        out["apiVersion"] = "%s/v1alpha1" % KUEUE_GROUP
        spec = out.get("spec")
        if isinstance(spec, dict):
            if "parentName" in spec:
                spec["parent"] = spec.pop("parentName")
            spec.pop("fairSharing", None)
        return out
    if version != "v1beta1":
        raise ValueError("unsupported Kueue API version %r" % version)
    out["apiVersion"] = "%s/%s" % (KUEUE_GROUP, version)
    kind = out.get("kind")
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    if kind == "ClusterQueue":
        if "cohortName" in spec:
            spec["cohort"] = spec.pop("cohortName")
        strategy = spec.get("admissionChecksStrategy")
        if isinstance(strategy, dict):
            rules = strategy.get("admissionChecks") or []
            if all(not r.get("onFlavors") for r in rules):
                spec.pop("admissionChecksStrategy")
                if rules:
                    spec["admissionChecks"] = [r["name"] for r in rules]
        fung = spec.get("flavorFungibility")
        if isinstance(fung, dict):
            for field, old in _FUNGIBILITY_DOWN.items():
                if fung.get(field) == "MayStopSearch":
                    fung[field] = old
    elif kind == "Cohort":
        if cohort_parent_field == "parent" and "parentName" in spec:
            spec["parent"] = spec.pop("parentName")
    return out


def convert_from_version(obj: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """A copy of a live Kueue object in v1beta2 shape (v1beta2 objects are returned unchanged)."""
    out = copy.deepcopy(dict(obj))
    if not is_kueue(out) or not str(out.get("apiVersion")).endswith(("/v1beta1", "/v1alpha1")):
        return out
    out["apiVersion"] = "%s/v1beta2" % KUEUE_GROUP
    kind = out.get("kind")
    status = out.get("status")
    if kind == "LocalQueue" and isinstance(status, dict) and "flavorUsage" in status:
        status["flavorsUsage"] = status.pop("flavorUsage")
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    if kind == "ClusterQueue":
        if "cohort" in spec:
            spec["cohortName"] = spec.pop("cohort")
        checks = spec.pop("admissionChecks", None)
        if checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
        fung = spec.get("flavorFungibility")
        if isinstance(fung, dict):
            for field in _FUNGIBILITY_DOWN:
                if fung.get(field) in _FUNGIBILITY_OLD:
                    fung[field] = "MayStopSearch"
    elif kind == "Cohort":
        if "parent" in spec:
            spec["parentName"] = spec.pop("parent")
    return out
