#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kueue_integrations_info
short_description: The Kueue job frameworks to enable on this cluster (the workload kinds whose APIs are served)
version_added: "0.2.0"
description:
  - Resolves the Kueue C(integrations.frameworks) list the C(gpuaas.platform.kueue) role renders. The list of
    workload kinds is defined once in the collection (C(module_utils/manifests/kueue_integrations.py)) and is the
    same list the tenants admission policy C(gpuaas-require-kueue-queue) is generated from.
  - With O(frameworks=auto) every known framework whose API the cluster serves is returned (Kubernetes kinds
    always; C(RayJob), C(JobSet), C(TrainJob), C(LeaderWorkerSet), C(AppWrapper), ... when their CRD is served).
  - An explicit list is checked against the known names and returned in the collection's order; frameworks whose
    API is not served are kept (Kueue waits for their CRD) and listed in RV(not_served).
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  frameworks:
    description:
      - C(auto) (a string, or a list holding only C(auto)) for every served framework, or a list of upstream
        Kueue framework names (C(batch/job), C(pod), C(deployment), C(statefulset), C(ray.io/rayjob), ...).
    type: raw
    default: auto
  openshift_channel:
    description:
      - The OLM channel of the Red Hat build of Kueue (C(stable-v1.4)); with O(openshift_starting_csv) it says which
        operator version's operand schema applies (1.3 - no C(RayService), at most 14 frameworks; 1.4 and later -
        C(RayService) too, at most 18). Unset - 1.4, the collection's default channel.
    type: str
  openshift_starting_csv:
    description: The starting CSV of the Red Hat build of Kueue (C(kueue-operator.v1.3.1)); wins over O(openshift_channel).
    type: str
seealso:
  - module: gpuaas.platform.kueue_info
    description: The Kueue objects of the cluster.
  - module: gpuaas.platform.tenants
    description: Generates the admission policy gpuaas-require-kueue-queue from the same list of kinds.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
"""

EXAMPLES = r"""
- name: Which frameworks can Kueue manage here
  gpuaas.platform.kueue_integrations_info:
  register: kueue_frameworks

- name: Show them
  ansible.builtin.debug:
    msg: "{{ kueue_frameworks.frameworks }} (OpenShift operand names {{ kueue_frameworks.openshift_frameworks }})"
"""

RETURN = r"""
frameworks:
  description: Upstream Kueue framework names to enable, in the collection's order.
  returned: always
  type: list
  elements: str
  sample: [batch/job, pod, deployment, statefulset, jobset.x-k8s.io/jobset, ray.io/rayjob]
openshift_frameworks:
  description:
    - The same frameworks in the names of Red Hat's Kueue operand (C(spec.config.integrations.frameworks)), without
      those its enum cannot express (see RV(openshift_not_expressible)).
  returned: always
  type: list
  elements: str
  sample: [BatchJob, Pod, Deployment, StatefulSet, JobSet, RayJob]
openshift_operator_version:
  description: The Red Hat build of Kueue version whose operand schema RV(openshift_frameworks) follows.
  returned: always
  type: str
  sample: "1.4"
openshift_not_expressible:
  description:
    - Frameworks of RV(frameworks) that the Red Hat build of Kueue cannot manage (not in its operand's enum, e.g.
      C(ray.io/rayservice)). Left out of RV(openshift_frameworks) when chosen by C(auto).
  returned: always
  type: list
  elements: str
  sample: [ray.io/rayservice]
openshift_problems:
  description:
    - Why the Red Hat C(Kueue) operand cannot be written as asked (a framework outside its enum asked for by name,
      more than 14 frameworks), or why the operator version O(openshift_channel) or O(openshift_starting_csv) installs
      is not supported (outside the range of docs/compatibility.md). The C(kueue) role stops with these on
      OpenShift before it writes anything.
  returned: always
  type: list
  elements: str
  sample: []
not_served:
  description: Frameworks (asked for, or known with O(frameworks=auto)) whose API the cluster does not serve.
  returned: always
  type: list
  elements: str
  sample: [workload.codeflare.dev/appwrapper]
known:
  description: Every framework name the collection knows.
  returned: always
  type: list
  elements: str
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import get_client
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations as ki
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule


def served(client: t.Any, integration: ki.Integration) -> bool:
    if integration.builtin:
        return True
    try:
        client.resource(integration.api_version, integration.kind)
        return True
    except GpuaasError:
        return False


def resolve(client: t.Any, frameworks: t.Any, channel: t.Optional[str] = None,
            starting_csv: t.Optional[str] = None) -> t.Dict[str, t.Any]:
    auto = frameworks in (None, "auto", ["auto"])
    if not auto:
        if isinstance(frameworks, str) or not isinstance(frameworks, list):
            raise ValidationError("frameworks: expected 'auto' or a list of Kueue framework names, got %r"
                                  % (frameworks,), hint="known: %s" % ", ".join(ki.known_frameworks()))
        bad = ki.unknown(frameworks)
        if bad:
            raise ValidationError("frameworks: unknown Kueue framework(s) %s" % ", ".join(bad),
                                  hint="known: %s" % ", ".join(ki.known_frameworks()))
    wanted = set(ki.known_frameworks() if auto else frameworks)
    candidates = [i for i in ki.INTEGRATIONS if i.framework in wanted]
    not_served = [i.framework for i in candidates if not served(client, i)]
    chosen = [i.framework for i in candidates if not (auto and i.framework in not_served)]
    version = ki.openshift_operator_version(channel, starting_csv)
    operand = ki.openshift_operand(chosen, auto, version)
    unsupported = ki.unsupported_openshift_operator(channel, starting_csv)
    problems = ([unsupported] if unsupported else []) + operand["problems"]
    return {"frameworks": chosen, "openshift_frameworks": operand["frameworks"], "openshift_operator_version": version,
            "openshift_not_expressible": operand["not_expressible"], "openshift_problems": problems,
            "not_served": not_served, "known": ki.known_frameworks()}


def main() -> None:
    module = GpuaasModule(argument_spec={"frameworks": {"type": "raw", "default": "auto"},
                                         "openshift_channel": {"type": "str"},
                                         "openshift_starting_csv": {"type": "str"}}, supports_check_mode=True)
    module.run(lambda m: dict(resolve(get_client(m), m.params["frameworks"], m.params["openshift_channel"],
                                      m.params["openshift_starting_csv"]), changed=False))


if __name__ == "__main__":
    main()
