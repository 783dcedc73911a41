# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""OLM (Operator Lifecycle Manager) helpers: desired objects, InstallPlan decisions, CSV status, Subscription
resolution failures, the OperatorGroup to use in a namespace (brownfield: one made by the console) and the
operand to apply over an existing one.

Pure functions, no I/O: the olm_operator module does the API calls.
"""

from __future__ import annotations

import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    is_owned,
)

OLM_V1ALPHA1 = "operators.coreos.com/v1alpha1"
OLM_V1 = "operators.coreos.com/v1"

# Subscription condition types (operator-framework/api pkg/operators/v1alpha1/subscription_types.go). OLM's catalog
# operator sets ResolutionFailed=True with reason ConstraintsNotSatisfiable (terminal: a package, channel or CSV the
# catalog does not have) or ErrorPreventedResolution (e.g. a catalog that cannot be reached), on every Subscription
# of the namespace (operator-lifecycle-manager pkg/controller/operators/catalog/operator.go, syncResolvingNamespace).
RESOLUTION_FAILED = "ResolutionFailed"
CATALOG_SOURCES_UNHEALTHY = "CatalogSourcesUnhealthy"

# Every field of a Subscription's spec.config (operator-framework/api SubscriptionConfig).
SUBSCRIPTION_CONFIG_FIELDS = ("selector", "nodeSelector", "tolerations", "resources", "envFrom", "env", "volumes",
                              "volumeMounts", "nodeAffinity", "podAffinity", "podAntiAffinity")

# operator_group option: what to do about the namespace's OperatorGroup.
OPERATOR_GROUP_MODES = ("auto", "create", "reuse", "none")


def owned_labels() -> t.Dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE}


def namespace_object(name: str, labels: t.Optional[t.Dict[str, str]] = None) -> t.Dict[str, t.Any]:
    meta_labels = owned_labels()
    meta_labels.update(labels or {})
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": meta_labels}}


def operator_group_object(name: str, namespace: str,
                          target_namespaces: t.Optional[t.List[str]]) -> t.Dict[str, t.Any]:
    """OperatorGroup; ``target_namespaces`` None or [] = AllNamespaces install mode."""
    spec: t.Dict[str, t.Any] = {}
    if target_namespaces:
        spec["targetNamespaces"] = list(target_namespaces)
    return {"apiVersion": OLM_V1, "kind": "OperatorGroup",
            "metadata": {"name": name, "namespace": namespace, "labels": owned_labels()},
            "spec": spec}


def subscription_object(name: str, namespace: str, package: str, channel: t.Optional[str], source: str,
                        source_namespace: str, starting_csv: t.Optional[str], approval: str,
                        config: t.Optional[t.Dict[str, t.Any]] = None) -> t.Dict[str, t.Any]:
    spec: t.Dict[str, t.Any] = {"name": package, "source": source, "sourceNamespace": source_namespace,
                                "installPlanApproval": approval}
    if channel:
        spec["channel"] = channel
    if starting_csv:
        spec["startingCSV"] = starting_csv
    if config:
        spec["config"] = config
    return {"apiVersion": OLM_V1ALPHA1, "kind": "Subscription",
            "metadata": {"name": name, "namespace": namespace, "labels": owned_labels()},
            "spec": spec}


def subset_differs(desired: t.Any, live: t.Any) -> bool:
    """True when a field set in ``desired`` is missing or different in ``live``.

    Only the fields we set are compared, so defaults the API server adds never count as drift.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return desired != {} or live is not None
        return any(subset_differs(value, live.get(key)) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return True
        return any(subset_differs(d, l) for d, l in zip(desired, live))
    return desired != live


def object_differs(desired: t.Dict[str, t.Any], live: t.Optional[t.Dict[str, t.Any]]) -> bool:
    """Whether applying ``desired`` would change ``live`` (only the labels and spec fields we set count)."""
    if live is None:
        return True
    if desired.get("kind") == "OperatorGroup":
        # AllNamespaces mode is the absence of targetNamespaces: compare it explicitly.
        want = (desired.get("spec") or {}).get("targetNamespaces") or []
        if sorted(want) != sorted((live.get("spec") or {}).get("targetNamespaces") or []):
            return True
    if subset_differs(desired.get("metadata", {}).get("labels") or {}, (live.get("metadata") or {}).get("labels") or {}) \
            and desired.get("metadata", {}).get("labels"):
        return True
    return subset_differs(desired.get("spec", {}), live.get("spec") or {}) if "spec" in desired else False


def expected_csv(starting_csv: t.Optional[str], subscription: t.Optional[t.Dict[str, t.Any]]) -> t.Optional[str]:
    """The CSV the Subscription is expected to install: the pinned one, else what OLM resolved."""
    if starting_csv:
        return starting_csv
    status = (subscription or {}).get("status") or {}
    return status.get("installedCSV") or status.get("currentCSV")


def plan_decision(plan: t.Dict[str, t.Any], subscription: t.Dict[str, t.Any],
                  starting_csv: t.Optional[str]) -> t.Tuple[str, str]:
    """What to do with the Subscription's InstallPlan under Manual approval.

    Returns (action, reason); action is ``approve`` (exactly the expected install), ``none`` (already
    approved) or ``hold`` (leave pending: it installs something else, or it is an upgrade of an already
    installed CSV that nobody asked for).
    """
    spec = plan.get("spec") or {}
    names = list(spec.get("clusterServiceVersionNames") or [])
    if spec.get("approved"):
        return "none", "InstallPlan %s is already approved" % plan["metadata"]["name"]
    status = subscription.get("status") or {}
    installed = status.get("installedCSV")
    if starting_csv:
        if names == [starting_csv]:
            if installed and installed != starting_csv:
                return "hold", ("InstallPlan %s would install %s while %s is installed: a downgrade or "
                                "reinstall is not approved automatically" % (plan["metadata"]["name"], starting_csv,
                                                                             installed))
            return "approve", "InstallPlan %s installs exactly the pinned %s" % (plan["metadata"]["name"], starting_csv)
        return "hold", ("InstallPlan %s installs %s, not the pinned %s; it is left unapproved"
                        % (plan["metadata"]["name"], ", ".join(names) or "nothing", starting_csv))
    if installed:
        return "hold", ("InstallPlan %s upgrades %s to %s; upgrades under Manual approval are left for an "
                        "administrator (or pin starting_csv to the new version)"
                        % (plan["metadata"]["name"], installed, ", ".join(names)))
    current = status.get("currentCSV")
    if current and names != [current]:
        return "hold", ("InstallPlan %s installs %s, not the Subscription's resolved %s"
                        % (plan["metadata"]["name"], ", ".join(names), current))
    return "approve", "first install of %s" % (", ".join(names))


def csv_phase(csv: t.Optional[t.Dict[str, t.Any]]) -> t.Optional[str]:
    return ((csv or {}).get("status") or {}).get("phase")


def alm_examples(csv: t.Optional[t.Dict[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
    """The CSV's ``alm-examples`` annotation parsed (the operator's sample operands)."""
    raw = (((csv or {}).get("metadata") or {}).get("annotations") or {}).get("alm-examples")
    if not raw:
        return []
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise GpuaasError("the alm-examples annotation of CSV %s is not valid JSON: %s"
                          % (csv["metadata"]["name"], exc),  # type: ignore[index]
                          hint="give the operand spec in the inventory instead of relying on alm-examples")
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def csv_failure(csv: t.Dict[str, t.Any]) -> t.Optional[str]:
    status = csv.get("status") or {}
    if status.get("phase") == "Failed":
        return "CSV %s failed: %s %s" % (csv["metadata"]["name"], status.get("reason", ""), status.get("message", ""))
    return None


# ---- Subscription spec.config -----------------------------------------------------------------------------------
def subscription_config_problems(config: t.Optional[t.Mapping[str, t.Any]]) -> t.List[str]:
    """Every key of ``config`` that a Subscription's spec.config does not have (OLM would reject the object)."""
    return ["subscription_config.%s is not a Subscription spec.config field (one of %s)"
            % (key, ", ".join(SUBSCRIPTION_CONFIG_FIELDS))
            for key in sorted(config or {}) if key not in SUBSCRIPTION_CONFIG_FIELDS]


# ---- resolution ---------------------------------------------------------------------------------------------------
def subscription_condition(subscription: t.Optional[t.Mapping[str, t.Any]], condition_type: str
                           ) -> t.Optional[t.Dict[str, t.Any]]:
    """The Subscription's condition of ``condition_type`` when its status is True, else None."""
    for cond in ((subscription or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == condition_type and cond.get("status") == "True":
            return dict(cond)
    return None


def packagemanifest_command(package: str, source_namespace: str) -> str:
    """The command that lists a package's channels (and its default channel) in the cluster's catalogs."""
    return ("oc get packagemanifest %s -n %s -o jsonpath='{.status.defaultChannel}{\" \"}{.status.channels[*].name}'"
            % (package, source_namespace))


def resolution_error(package: str, channel: t.Optional[str], source: str, source_namespace: str, namespace: str,
                     subscription_name: str, condition: t.Mapping[str, t.Any], waited: float,
                     channels: t.Optional[t.Sequence[str]] = None, default_channel: t.Optional[str] = None,
                     unhealthy: t.Optional[t.Mapping[str, t.Any]] = None) -> GpuaasError:
    """The error for a Subscription OLM cannot resolve: what was asked, OLM's own words, how to find a valid channel."""
    message = ("OLM cannot resolve Subscription %s/%s (package %s, channel %s, catalog source %s/%s): %s %s: %s"
               % (namespace, subscription_name, package, channel or "<the catalog's default>", source_namespace,
                  source, condition.get("type"), condition.get("reason") or "", condition.get("message") or ""))
    problems = []
    if channels:
        problems.append("the catalog's channels of %s: %s%s" % (
            package, ", ".join(channels), " (default %s)" % default_channel if default_channel else ""))
    if unhealthy:
        problems.append("%s: %s %s" % (CATALOG_SOURCES_UNHEALTHY, unhealthy.get("reason") or "",
                                       unhealthy.get("message") or ""))
    hint = ("list the package's channels with: %s -- then set the channel (role variable gpuaas_*_olm_channel) to one "
            "of them, or the package/catalog source if the package is not there (oc get packagemanifests -n %s); "
            "stopped after the condition held for %.0f s instead of waiting the whole wait_timeout"
            % (packagemanifest_command(package, source_namespace), source_namespace, waited))
    return GpuaasError(message, hint=hint, problems=problems,
                       details={"reason": RESOLUTION_FAILED, "condition": dict(condition), "package": package,
                                "channel": channel, "source": source, "source_namespace": source_namespace})


# ---- the namespace's OperatorGroup --------------------------------------------------------------------------------
def operator_group_mode(value: t.Any) -> str:
    """The ``operator_group`` option normalised to one of OPERATOR_GROUP_MODES (booleans: true = auto, false = none)."""
    if isinstance(value, bool):
        return "auto" if value else "none"
    text = str(value if value is not None else "auto").strip().lower()
    aliases = {"true": "auto", "yes": "auto", "false": "none", "no": "none", "": "auto"}
    text = aliases.get(text, text)
    if text not in OPERATOR_GROUP_MODES:
        raise GpuaasError("operator_group: %r is not one of %s (or a boolean)" % (value, ", ".join(OPERATOR_GROUP_MODES)),
                          hint="auto reuses the namespace's OperatorGroup (e.g. one the console made) or creates one; "
                               "create insists on its own; reuse requires an existing one; none never touches them")
    return text


def operator_group_plan(mode: str, name: str, namespace: str, target_namespaces: t.Sequence[str],
                        existing: t.Sequence[t.Mapping[str, t.Any]]) -> t.Dict[str, t.Any]:
    """What to do about the OperatorGroup of ``namespace``, given the ones that exist there.

    Returns {"action": "apply"|"reuse"|"skip", "name", "warnings"}; raises GpuaasError when OLM could not install
    (more than one OperatorGroup) or the mode cannot be honoured. OLM allows one OperatorGroup per namespace, of any
    name: an OperatorHub install from the console makes one named after the namespace plus a random suffix.
    """
    if mode == "none":
        return {"action": "skip", "name": None, "warnings": []}
    names = sorted(g["metadata"]["name"] for g in existing)
    if len(names) > 1:
        raise GpuaasError(
            "namespace %s has %d OperatorGroups (%s); OLM installs nothing in a namespace with more than one"
            % (namespace, len(names), ", ".join(names)),
            hint="delete all but one (oc -n %s delete operatorgroup <name>), then re-run" % namespace)
    if not names:
        if mode == "reuse":
            raise GpuaasError("namespace %s has no OperatorGroup to reuse (operator_group: reuse)" % namespace,
                              hint="create one, or set operator_group: auto to let the module create %s" % name)
        return {"action": "apply", "name": name, "warnings": []}
    live = existing[0]
    if names[0] == name and is_owned(live) and mode in ("auto", "create"):
        return {"action": "apply", "name": name, "warnings": []}
    if mode == "create":
        raise GpuaasError(
            "namespace %s already has OperatorGroup %s, not managed by gpuaas.platform; OLM refuses a second one "
            "(operator_group: create)" % (namespace, names[0]),
            hint="set operator_group: auto or reuse to install with the existing OperatorGroup (role variable "
                 "gpuaas_*_olm_operator_group), or delete it first")
    warnings = []
    have = sorted((live.get("spec") or {}).get("targetNamespaces") or [])
    if sorted(target_namespaces or []) != have:
        warnings.append(
            "reusing OperatorGroup %s/%s, whose target namespaces (%s) differ from the requested (%s); it is left "
            "as it is: if the operator does not support that install mode its CSV fails with UnsupportedOperatorGroup"
            % (namespace, names[0], ", ".join(have) or "all namespaces",
               ", ".join(sorted(target_namespaces or [])) or "all namespaces"))
    return {"action": "reuse", "name": names[0], "warnings": warnings}


# ---- operands -----------------------------------------------------------------------------------------------------
def merge_spec(base: t.Any, override: t.Any) -> t.Any:
    """``override`` merged over ``base`` recursively (maps merge, anything else is replaced), as Ansible's
    ``combine(recursive=True)``; neither argument is modified."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base.items())
        for key, value in override.items():
            out[key] = merge_spec(base.get(key), value) if key in base else value
        return json.loads(json.dumps(out))
    return json.loads(json.dumps(override))


def operand_example(examples: t.Sequence[t.Mapping[str, t.Any]], kind: str,
                    omit: t.Iterable[str] = ()) -> t.Dict[str, t.Any]:
    """The first alm-examples entry of ``kind`` (the operator's sample operand), or {}; without the top-level spec
    fields in ``omit`` and those the example sets to null.

    Real bundles ship examples their own CRDs refuse: the Custom Metrics Autoscaler's KedaController says
    ``"serviceAccount": null`` (an object field, not nullable: 422), the NFD bundles of OpenShift 4.17-4.21 carry
    ``spec.customConfig``, which their CRD does not declare (openshift/cluster-nfd-operator 7fd45586 removed it).
    Server-side apply refuses the whole object for either, so such fields never reach the cluster.
    """
    example = dict(next((e for e in examples if e.get("kind") == kind), {}))
    if isinstance(example.get("spec"), dict):
        dropped = set(omit)
        example["spec"] = {k: v for k, v in example["spec"].items() if v is not None and k not in dropped}
    return example


def operand_mode(live: t.Optional[t.Mapping[str, t.Any]], adopt: bool) -> str:
    """How to apply an operand: ``create`` (absent), ``owned`` (carries the collection's label), ``adopt`` (someone
    else's, adopt requested: labelled and force-applied) or ``merge`` (someone else's: only the collection's settings,
    applied without forcing conflicts and without the ownership label, so a field another manager set to another value
    stops the run instead of being reset)."""
    if live is None:
        return "create"
    if is_owned(live):
        return "owned"
    return "adopt" if adopt else "merge"


def operand_object(api_version: str, kind: str, name: str, namespace: t.Optional[str], spec: t.Mapping[str, t.Any],
                   example: t.Mapping[str, t.Any], mode: str) -> t.Dict[str, t.Any]:
    """The operand to apply: in ``merge`` mode only ``spec`` (the collection's settings, no ownership label); else the
    CSV's example spec with ``spec`` merged over it and the managed-by label."""
    meta: t.Dict[str, t.Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if mode == "merge":
        body = dict(spec)
    else:
        meta["labels"] = owned_labels()
        body = merge_spec(example.get("spec") or {}, dict(spec))
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": body}


def operand_conflict_error(ref: str, adopt_variable: t.Optional[str], conflicts: t.Sequence[str],
                           message: str) -> GpuaasError:
    """A refused merge over an operand the collection does not own: the fields another manager set to other values."""
    how = ("set %s: true (module option operand.adopt)" % adopt_variable) if adopt_variable else "set operand.adopt: true"
    return GpuaasError(
        "%s exists and is not managed by gpuaas.platform (no label %s=%s); applying the collection's settings would "
        "change %d field%s that another field manager set, so nothing was written: %s"
        % (ref, MANAGED_BY_LABEL, MANAGED_BY_VALUE, len(conflicts), "" if len(conflicts) == 1 else "s", message),
        hint="keep the existing values by giving the same ones in the inventory (the role's overrides variable), or "
             "let the collection adopt the operand: %s -- it then labels it, applies the operator's example with the "
             "inventory's settings over it and resets the fields listed" % how,
        problems=list(conflicts), details={"reason": "OperandNotOwned", "object": ref, "conflicts": list(conflicts)})
