#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: platform_info
short_description: Detect the cluster platform (OpenShift or Kubernetes) and the operators already present
version_added: "0.1.0"
description:
  - Detects OpenShift by API discovery of C(config.openshift.io/v1) C(ClusterVersion) and reads the OpenShift
    version from the C(version) ClusterVersion; otherwise the platform is Kubernetes.
  - Reports the Kubernetes version and whether OLM, the Prometheus Operator, cert-manager, OpenShift AI
    (C(DataScienceCluster)), Kueue, KEDA and the NVIDIA GPU Operator APIs are served.
  - Reports in RV(unsupported) a cluster older than the supported Kubernetes or OpenShift version, and OLM
    operators (O(operators)) whose channel or starting CSV installs a version older than the supported one - the
    versions of the collection's compatibility table (C(docs/compatibility.md)). The roles stop on these before their
    first write.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  platform:
    description:
      - C(auto) detects the platform. C(openshift) or C(kubernetes) force the RV(platform) result (for example
        to use the OLM path on a Kubernetes cluster running OLM); RV(detected_platform) still reports what was found.
    type: str
    choices: [auto, openshift, kubernetes]
    default: auto
  operators:
    description:
      - OLM operators to check against the supported versions, with the channel and starting CSV the inventory sets.
        A channel without a version (C(stable)) cannot be checked; a starting CSV wins over the channel.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Which operator.
        type: str
        required: true
        choices: [custom_metrics_autoscaler, gpu_operator, nfd]
      channel:
        description: The Subscription channel (C(v24.9), C(stable)).
        type: str
      starting_csv:
        description: The Subscription starting CSV (C(gpu-operator-certified.v24.9.2)).
        type: str
seealso:
  - module: gpuaas.platform.olm_operator
    description: Installs operators through OLM, the path for RV(platform=openshift).
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
"""

EXAMPLES = r"""
- name: Detect the platform
  gpuaas.platform.platform_info:
  register: info

- name: Use the OLM path on OpenShift
  ansible.builtin.debug:
    msg: "OpenShift {{ info.openshift_version }} with OLM"
  when: info.platform == 'openshift' and info.olm

- name: Refuse an unsupported cluster or GPU Operator channel before writing anything
  gpuaas.platform.platform_info:
    operators:
      - name: gpu_operator
        channel: v24.9
  register: checked
  failed_when: checked.unsupported | length > 0
"""

RETURN = r"""
platform:
  description: The platform to install for (the forced value, or the detected one with O(platform=auto)).
  returned: always
  type: str
  sample: openshift
detected_platform:
  description: The platform found by API discovery.
  returned: always
  type: str
  sample: kubernetes
kubernetes_version:
  description: The API server's C(gitVersion).
  returned: always
  type: str
  sample: v1.35.4
openshift_version:
  description: The OpenShift version from ClusterVersion C(version) (desired, else latest completed history entry).
  returned: always
  type: str
  sample: "4.20.3"
olm:
  description: Whether the OLM API (C(operators.coreos.com/v1alpha1) Subscription) is served.
  returned: always
  type: bool
prometheus_operator:
  description: Whether C(monitoring.coreos.com/v1) ServiceMonitor is served.
  returned: always
  type: bool
cert_manager:
  description: Whether C(cert-manager.io/v1) is served (cert-manager, or the cert-manager Operator for Red Hat OpenShift).
  returned: always
  type: bool
openshift_ai:
  description: Whether OpenShift AI / Open Data Hub is present, its DataScienceCluster API version and object names.
  returned: always
  type: dict
  sample: {"present": true, "api_version": "datasciencecluster.opendatahub.io/v1", "datascienceclusters": ["default-dsc"]}
kueue_api_version:
  description: The Kueue API version served (C(v1beta2) preferred), or null.
  returned: always
  type: str
keda:
  description: Whether C(keda.sh/v1alpha1) ScaledObject is served.
  returned: always
  type: bool
gpu_operator:
  description: Whether C(nvidia.com/v1) ClusterPolicy is served.
  returned: always
  type: bool
unsupported:
  description:
    - Why the cluster or an operator of O(operators) is not supported, one message each (the version found, the
      supported ones, C(docs/compatibility.md) and the fix); empty when everything is supported.
  returned: always
  type: list
  elements: str
  sample: ["OpenShift 4.16.9 is not supported: supported OpenShift 4.17 and later (docs/compatibility.md); ..."]
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.compatibility import (
    OLM_OPERATORS,
    unsupported_cluster,
    unsupported_olm_operator,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule

DSC_VERSIONS = ("datasciencecluster.opendatahub.io/v2", "datasciencecluster.opendatahub.io/v1")


def serves_kind(client: t.Any, api_version: str, kind: str) -> bool:
    """Whether ``api_version`` is served and has ``kind``."""
    try:
        client.resource(api_version, kind)
        return True
    except GpuaasError:
        return False


def openshift_version(cluster_version: t.Optional[t.Dict[str, t.Any]]) -> t.Optional[str]:
    """Version of a ClusterVersion: status.desired.version, else the newest Completed history entry."""
    status = (cluster_version or {}).get("status") or {}
    desired = (status.get("desired") or {}).get("version")
    if desired:
        return desired
    for entry in status.get("history") or []:
        if entry.get("state") == "Completed" and entry.get("version"):
            return entry["version"]
    return None


def detect(client: t.Any, forced: str = "auto") -> t.Dict[str, t.Any]:
    info: t.Dict[str, t.Any] = {}
    try:
        version = client.request("GET", "/version")
    except ApiException as exc:
        raise translate_api_exception(exc, "read", "/version")
    info["kubernetes_version"] = version.get("gitVersion")
    is_openshift = serves_kind(client, "config.openshift.io/v1", "ClusterVersion")
    info["detected_platform"] = "openshift" if is_openshift else "kubernetes"
    info["platform"] = info["detected_platform"] if forced == "auto" else forced
    info["openshift_version"] = None
    if is_openshift:
        try:
            cv = client.resource("config.openshift.io/v1", "ClusterVersion").get("version")
        except ApiException as exc:
            raise translate_api_exception(exc, "read", "ClusterVersion version")
        info["openshift_version"] = openshift_version(cv)
    info["olm"] = serves_kind(client, "operators.coreos.com/v1alpha1", "Subscription")
    info["prometheus_operator"] = serves_kind(client, "monitoring.coreos.com/v1", "ServiceMonitor")
    info["cert_manager"] = serves_kind(client, "cert-manager.io/v1", "Certificate")
    info["keda"] = serves_kind(client, "keda.sh/v1alpha1", "ScaledObject")
    info["gpu_operator"] = serves_kind(client, "nvidia.com/v1", "ClusterPolicy")
    info["kueue_api_version"] = None
    for version_name in ("v1beta2", "v1beta1"):
        if serves_kind(client, "kueue.x-k8s.io/%s" % version_name, "ClusterQueue"):
            info["kueue_api_version"] = version_name
            break
    ai: t.Dict[str, t.Any] = {"present": False, "api_version": None, "datascienceclusters": []}
    for api_version in DSC_VERSIONS:
        if serves_kind(client, api_version, "DataScienceCluster"):
            ai["present"] = True
            ai["api_version"] = api_version
            try:
                items = client.resource(api_version, "DataScienceCluster").list()
            except ApiException as exc:
                raise translate_api_exception(exc, "list", "DataScienceClusters")
            ai["datascienceclusters"] = sorted(i["metadata"]["name"] for i in items)
            break
    info["openshift_ai"] = ai
    return info


def unsupported(info: t.Mapping[str, t.Any], operators: t.Sequence[t.Mapping[str, t.Any]] = ()) -> t.List[str]:
    """Messages for what ``info`` (detect's result) and ``operators`` hold outside the supported versions."""
    problems = unsupported_cluster(info.get("kubernetes_version"), info.get("openshift_version"))
    for operator in operators:
        message = unsupported_olm_operator(operator["name"], operator.get("channel"), operator.get("starting_csv"))
        if message:
            problems.append(message)
    return problems


def run(module: t.Any) -> t.Dict[str, t.Any]:
    info = detect(get_client(module), module.params["platform"])
    info["unsupported"] = unsupported(info, module.params["operators"])
    return dict(info, changed=False)


def main() -> None:
    module = GpuaasModule(
        argument_spec={
            "platform": {"type": "str", "choices": ["auto", "openshift", "kubernetes"], "default": "auto"},
            "operators": {"type": "list", "elements": "dict", "default": [], "options": {
                "name": {"type": "str", "required": True, "choices": sorted(OLM_OPERATORS)},
                "channel": {"type": "str"},
                "starting_csv": {"type": "str"},
            }},
        },
        supports_check_mode=True)
    module.run(run)


if __name__ == "__main__":
    main()
