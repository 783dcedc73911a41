#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: platform_health_info
short_description: Health of the GPU platform - GPU Operator, GPU nodes, Kueue queues and KEDA ScaledObjects
version_added: "0.1.0"
description:
  - "C(gpu_operator): every C(nvidia.com/v1) ClusterPolicy reports C(status.state: ready) (skipped when the API is not
    served or no ClusterPolicy exists)."
  - "C(gpu_nodes): every GPU node (a GPU feature-discovery label such as C(nvidia.com/gpu.product), or GPU capacity)
    offers allocatable C(nvidia.com/gpu) or MIG C(nvidia.com/mig-*) resources."
  - "C(kueue): every ClusterQueue (v1beta2, else v1beta1) has condition C(Active=True) and references only
    existing ResourceFlavors."
  - "C(keda): every C(keda.sh/v1alpha1) ScaledObject has condition C(Ready=True) (skipped when KEDA is not installed)."
  - Each result says what is wrong and how to fix it. The module never fails because
    of an unhealthy platform (the C(gpuaas.platform.validate) role decides); it fails only when it cannot read.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  checks:
    description: Which checks to run.
    type: list
    elements: str
    choices: [gpu_operator, gpu_nodes, kueue, keda]
    default: [gpu_operator, gpu_nodes, kueue, keda]
  gpu_node_labels:
    description: Node labels that mark a GPU node (any of them, with a value other than C(false)).
    type: list
    elements: str
    default: [nvidia.com/gpu.present, nvidia.com/gpu.product, nvidia.com/gpu.count, nvidia.com/mig.config]
seealso:
  - module: gpuaas.platform.platform_info
    description: Which platform and operators the cluster has.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
"""

EXAMPLES = r"""
- name: Check the platform
  gpuaas.platform.platform_health_info:
  register: health

- name: Fail on any unhealthy part
  ansible.builtin.fail:
    msg: "{{ health.failed_checks | map(attribute='message') | list }}"
  when: not health.ok
"""

RETURN = r"""
ok:
  description: Whether every check passed.
  returned: always
  type: bool
checks:
  description: One result per object checked (C(check), C(object), C(ok), C(message), C(hint)).
  returned: always
  type: list
  elements: dict
  sample: [{"check": "kueue", "object": "ClusterQueue/nlp", "ok": false, "hint": "declare the flavor in gpuaas_flavors ...",
            "message": "ClusterQueue nlp references missing ResourceFlavor h200; is not active: FlavorNotFound"}]
failed_checks:
  description: The results that did not pass.
  returned: always
  type: list
  elements: dict
problems:
  description: One line per failed check, the message followed by how to fix it.
  returned: always
  type: list
  elements: str
summary:
  description: Per check, how many objects were checked and failed.
  returned: always
  type: dict
  sample: {"kueue": {"checked": 3, "failed": 0, "ok": true}}
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import health

KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")


def list_if_served(client: t.Any, api_version: str, kind: str) -> t.Optional[t.List[t.Dict[str, t.Any]]]:
    """Every object of a kind, or None when the cluster does not serve it."""
    try:
        res = client.resource(api_version, kind)
    except GpuaasError:
        return None
    try:
        return res.list()
    except ApiException as exc:
        raise translate_api_exception(exc, "list", "%s %s" % (api_version, kind))


def run_checks(client: t.Any, checks: t.Sequence[str], gpu_node_labels: t.Sequence[str]) -> t.Dict[str, t.Any]:
    results: t.List[t.Dict[str, t.Any]] = []
    if "gpu_operator" in checks:
        results += health.gpu_operator_checks(list_if_served(client, "nvidia.com/v1", "ClusterPolicy"))
    if "gpu_nodes" in checks:
        results += health.gpu_node_checks(list_if_served(client, "v1", "Node") or [], gpu_node_labels)
    if "kueue" in checks:
        queues = flavors = None
        for version in KUEUE_VERSIONS:
            queues = list_if_served(client, version, "ClusterQueue")
            if queues is not None:
                flavors = list_if_served(client, version, "ResourceFlavor")
                break
        results += health.kueue_checks(queues, flavors)
    if "keda" in checks:
        results += health.keda_checks(list_if_served(client, "keda.sh/v1alpha1", "ScaledObject"))
    failed = [r for r in results if not r["ok"]]
    problems = ["%s%s" % (r["message"], " - fix: %s" % r["hint"] if r.get("hint") else "") for r in failed]
    return {"changed": False, "ok": not failed, "checks": results, "failed_checks": failed, "problems": problems,
            "summary": health.summarize(results)}


def main() -> None:
    spec: t.Dict[str, t.Any] = dict(
        checks={"type": "list", "elements": "str", "choices": ["gpu_operator", "gpu_nodes", "kueue", "keda"],
                "default": ["gpu_operator", "gpu_nodes", "kueue", "keda"]},
        gpu_node_labels={"type": "list", "elements": "str", "default": list(health.GPU_NODE_LABELS)},
    )
    module = GpuaasModule(argument_spec=spec, supports_check_mode=True)
    module.run(lambda m: run_checks(get_client(m), m.params["checks"], m.params["gpu_node_labels"]))


if __name__ == "__main__":
    main()
