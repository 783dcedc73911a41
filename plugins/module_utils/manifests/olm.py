# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""OLM (Operator Lifecycle Manager) helpers: desired objects, InstallPlan decisions, CSV status.

Pure functions, no I/O: the olm_operator module does the API calls.
"""

from __future__ import annotations

import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE

OLM_V1ALPHA1 = "operators.coreos.com/v1alpha1"
OLM_V1 = "operators.coreos.com/v1"


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
