# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The supported cluster and OLM operator versions of docs/compatibility.md, as data (issue 23).

The table in docs/compatibility.md states these figures and tests/unit/test_compatibility.py checks the two agree;
platform_info reports what is outside them and the roles' preflights stop on it before their first write. The Red
Hat build of Kueue's range lives with its operand schemas (manifests/kueue_integrations.py OPENSHIFT_OPERAND_LIMITS).
"""

from __future__ import annotations

import re
import typing as t

# The admission policies are admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies, GA in Kubernetes 1.30;
# OpenShift 4.N ships Kubernetes 1.(N+13), so 4.17 is the first OpenShift that serves them.
KUBERNETES_MINIMUM: t.Tuple[int, int] = (1, 30)
OPENSHIFT_MINIMUM: t.Tuple[int, int] = (4, 17)

DOC = "docs/compatibility.md"


class OlmOperator(t.NamedTuple):
    """An operator the collection installs through OLM on OpenShift and the oldest version it supports."""
    title: str  # the docs/compatibility.md row
    minimum: t.Tuple[int, int]
    channel_variable: str
    starting_csv_variable: str
    default_channel: str  # what the fix hint suggests (the role's default)


# Why each floor:
# - Custom Metrics Autoscaler: its versions follow the KEDA release they are built from (CSV
#   custom-metrics-autoscaler.v2.14.1-...); the collection's ScaledObjects set spec.initialCooldownPeriod (idle
#   scale-to-zero), first documented in KEDA 2.14 (kedacore/keda-docs content/docs/2.14/reference/scaledobject-spec.md).
#   Its only channel, stable, carries no version: only a starting CSV can be checked.
# - NVIDIA GPU Operator: the OLM path is tested with the newest bundle of the lab's module
#   (lab/versions.env GPU_OPERATOR_VERSION, a 2024-04 main-branch commit): CSV gpu-operator-certified.v23.9.2, with
#   that commit's ClusterPolicy schema; older bundles are not tested. Channels v23.9, v24.9, ... carry the version,
#   stable does not.
# - Node Feature Discovery (Red Hat's): versioned with OpenShift (CSV nfd.4.17.0-..., channels 4.16 and older, then
#   stable), so it follows the OpenShift floor.
OLM_OPERATORS: t.Dict[str, OlmOperator] = {
    "custom_metrics_autoscaler": OlmOperator(
        "Custom Metrics Autoscaler", (2, 14), "gpuaas_keda_olm_channel", "gpuaas_keda_olm_starting_csv", "stable"),
    "gpu_operator": OlmOperator(
        "NVIDIA GPU Operator", (23, 9), "gpuaas_gpu_operator_olm_channel", "gpuaas_gpu_operator_olm_starting_csv",
        "stable"),
    "nfd": OlmOperator(
        "Node Feature Discovery", OPENSHIFT_MINIMUM, "gpuaas_nfd_olm_channel", "gpuaas_nfd_olm_starting_csv", "stable"),
}

# a version in a starting CSV name (gpu-operator-certified.v24.9.2, nfd.4.17.0-202410251436) or a channel (v25.3, 4.16)
_CSV_VERSION = re.compile(r"\.v?(\d+)\.(\d+)")
_CHANNEL_VERSION = re.compile(r"^(?:stable-)?v?(\d+)\.(\d+)$")


def minor_of(version: t.Optional[str]) -> t.Optional[t.Tuple[int, int]]:
    """(major, minor) of a version string (v1.30.4+k3s1, 4.17.0-rc.1), None when it holds none."""
    match = re.match(r"^v?(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def dotted(minor: t.Tuple[int, int]) -> str:
    return "%d.%d" % minor


def unsupported_cluster(kubernetes_version: t.Optional[str], openshift_version: t.Optional[str]) -> t.List[str]:
    """Why the cluster's Kubernetes or OpenShift version is not supported; [] when it is or cannot be read."""
    problems = []
    found = minor_of(openshift_version)
    if found and found < OPENSHIFT_MINIMUM:
        problems.append(
            "OpenShift %s is not supported: supported OpenShift %s and later (%s); the collection's admission "
            "policies need admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy. Upgrade the cluster"
            % (openshift_version, dotted(OPENSHIFT_MINIMUM), DOC))
    found = minor_of(kubernetes_version)
    if found and found < KUBERNETES_MINIMUM and not problems:
        problems.append(
            "Kubernetes %s is not supported: supported Kubernetes %s and later (%s); the collection's admission "
            "policies need admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy. Upgrade the cluster"
            % (kubernetes_version, dotted(KUBERNETES_MINIMUM), DOC))
    return problems


def unsupported_olm_operator(name: str, channel: t.Optional[str] = None,
                             starting_csv: t.Optional[str] = None) -> t.Optional[str]:
    """Why the operator ``name`` (a key of OLM_OPERATORS) the starting CSV or channel installs is older than the
    supported floor; None when it is supported or neither names a version (a channel such as ``stable`` follows the
    catalog). The starting CSV wins: it is what OLM installs."""
    operator = OLM_OPERATORS[name]
    for variable, text, pattern in ((operator.starting_csv_variable, starting_csv, _CSV_VERSION),
                                    (operator.channel_variable, channel, _CHANNEL_VERSION)):
        match = pattern.search(text or "")
        if not match:
            continue
        found = (int(match.group(1)), int(match.group(2)))
        if found >= operator.minimum:
            return None
        return ("%s %s installs the %s %s, which this collection does not support: supported %s %s and later (%s); "
                "set %s to %s%s"
                % (variable, text, operator.title, dotted(found), operator.title, dotted(operator.minimum), DOC,
                   operator.channel_variable, operator.default_channel,
                   " and clear %s" % operator.starting_csv_variable if variable == operator.starting_csv_variable
                   else ""))
    return None
