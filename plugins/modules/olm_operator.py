#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: olm_operator
short_description: Install or remove an operator through OLM (Namespace, OperatorGroup, Subscription, CSV)
version_added: "0.1.0"
description:
  - Installs an operator on a cluster with Operator Lifecycle Manager (OpenShift, or OLM on Kubernetes).
  - Creates the Namespace and an OperatorGroup (or reuses the one the namespace has, for example one made by an
    OperatorHub install from the console), then the Subscription (package, channel, catalog source, optional pinned
    O(starting_csv), O(subscription_config)), and waits until the operator's ClusterServiceVersion reaches phase
    C(Succeeded).
  - A Subscription OLM cannot resolve (a package or channel the catalog does not have, condition
    C(ResolutionFailed=True)) stops the module once the condition has held for O(resolution_grace) seconds, with
    OLM's message and the command that lists the package's channels, instead of waiting the whole O(wait_timeout).
  - With O(operand), applies the operator's custom resource (ClusterPolicy, NodeFeatureDiscovery, Kueue,
    KedaController ...) once the CSV succeeded. An operand that exists without the collection's ownership label
    (made by someone else) is never force-applied; only O(operand.spec) is merged into it by server-side apply
    without forcing conflicts, so a field another manager set to another value stops the module with the list of
    those fields, their managers and how to adopt the operand (O(operand.adopt)); nothing is written then.
  - With O(install_plan_approval=Manual), approves exactly the expected InstallPlan (the one installing the
    pinned O(starting_csv), or the first install the Subscription resolved) and never an unrequested upgrade.
  - With O(state=absent), removes the Subscription, the installed ClusterServiceVersion and the
    OperatorGroup created by this module (the Namespace is kept unless O(delete_namespace=true)); an OperatorGroup
    or Namespace that does not carry the collection's label is never deleted. Operands are not removed.
  - Idempotent; compares only the fields it sets.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  state:
    description: Whether the operator is installed.
    type: str
    choices: [present, absent]
    default: present
  package:
    description: The OLM package name in the catalog (for example C(gpu-operator-certified)).
    type: str
    required: true
  name:
    description: Name of the Subscription. Defaults to O(package).
    type: str
  namespace:
    description: Namespace of the operator (Subscription, OperatorGroup, CSV).
    type: str
    required: true
  create_namespace:
    description: Create the namespace when it is missing.
    type: bool
    default: true
  namespace_labels:
    description:
      - Extra labels for the namespace (for example C(openshift.io/cluster-monitoring=true), which NVIDIA's OpenShift
        procedure sets on the GPU Operator namespace).
      - On a namespace the collection did not create (no ownership label), only these labels are applied, without
        the ownership label and without forcing; a label someone else set to another value stops the module.
    type: dict
    default: {}
  channel:
    description: Subscription channel. The catalog's default channel when omitted.
    type: str
  source:
    description: CatalogSource name.
    type: str
    default: redhat-operators
  source_namespace:
    description: Namespace of the CatalogSource.
    type: str
    default: openshift-marketplace
  starting_csv:
    description:
      - Pin the ClusterServiceVersion to install (for example C(gpu-operator-certified.v25.3.0)).
      - With Manual approval only an InstallPlan installing exactly this CSV is approved.
    type: str
  install_plan_approval:
    description: Subscription InstallPlan approval.
    type: str
    choices: [Automatic, Manual]
    default: Automatic
  subscription_config:
    description:
      - Subscription C(spec.config) for the operator pod (C(env), C(envFrom), C(nodeSelector), C(tolerations),
        C(resources), C(volumes), C(volumeMounts), C(selector), C(nodeAffinity), C(podAffinity),
        C(podAntiAffinity)); another key is refused before anything is written.
    type: dict
  operator_group:
    description:
      - What to do about the namespace's OperatorGroup (OLM allows one per namespace, of any name).
      - C(auto) reuses the one the namespace has (for example the console's C(<namespace>-xxxxx)), or creates
        O(operator_group_name) when there is none; C(create) manages O(operator_group_name) and refuses when another
        exists; C(reuse) requires an existing one; C(none) never reads or writes OperatorGroups.
      - A boolean is accepted, C(true) meaning C(auto) and C(false) meaning C(none).
      - A reused OperatorGroup is never changed or deleted; a warning says when its target namespaces differ from
        O(target_namespaces).
    type: raw
    default: auto
  operator_group_name:
    description: Name of the OperatorGroup the module creates. Defaults to O(namespace).
    type: str
  target_namespaces:
    description:
      - OperatorGroup target namespaces. Empty means all namespaces (AllNamespaces install mode).
      - Use C([namespace]) for operators supporting only OwnNamespace (the GPU Operator, NFD).
    type: list
    elements: str
    default: []
  wait:
    description: Wait for the ClusterServiceVersion to reach C(Succeeded) (and, with O(state=absent), for removal).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait.
    type: int
    default: 600
  resolution_grace:
    description:
      - Seconds a C(ResolutionFailed=True) condition on the Subscription must hold before the module stops (OLM
        clears it within seconds when the catalog or the Subscription is fixed; a condition left from a previous
        channel is not taken for the new one's).
    type: int
    default: 30
  operand:
    description:
      - The operator's custom resource to apply once its CSV succeeded (in check mode a dry run when its API is
        served, else reported as skipped).
      - Absent, or carrying the collection's label C(app.kubernetes.io/managed-by=gpuaas.platform) (it created it) -
        the CSV's C(alm-examples) entry of O(operand.kind) with O(operand.spec) merged over it is force-applied by
        the collection's field manager.
      - Present without that label - only O(operand.spec) is applied, without the label and without forcing
        conflicts (other fields keep their values and owners); a field another field manager holds with another
        value stops the module with the field list, unless O(operand.adopt).
    type: dict
    suboptions:
      api_version:
        description: API version of the operand (for example C(nvidia.com/v1)).
        type: str
        required: true
      kind:
        description: Kind of the operand (for example C(ClusterPolicy)).
        type: str
        required: true
      name:
        description: Name of the operand.
        type: str
        required: true
      namespace:
        description: Namespace of a namespaced operand.
        type: str
      spec:
        description: The collection's settings (merged over the example spec when the collection owns the operand).
        type: dict
        default: {}
      from_example:
        description:
          - Start from the CSV's C(alm-examples) entry of O(operand.kind) when creating or owning the operand.
          - "Fields the example sets to C(null) are left out (the Custom Metrics Autoscaler's example has
            C(serviceAccount: null), which its own CRD refuses)."
        type: bool
        default: true
      example_omit:
        description:
          - Top-level C(spec) fields of the example to leave out, for bundles whose example carries a field their own
            CRD does not declare (the NFD bundles of OpenShift 4.17-4.21 and C(customConfig)).
        type: list
        elements: str
        default: []
      adopt:
        description:
          - Take over an operand made by someone else, label it as the collection's and force-apply the example with
            O(operand.spec) over it (fields another manager set are reset).
        type: bool
        default: false
      adopt_variable:
        description: The variable the error's hint names for O(operand.adopt) (the roles pass theirs).
        type: str
  delete_namespace:
    description: With O(state=absent), also delete the namespace when this module created it.
    type: bool
    default: false
notes:
  - An InstallPlan left unapproved (an upgrade under Manual approval) is reported in RV(pending_install_plan).
  - docs/install.md (brownfield OperatorHub installs) explains why an operand made by someone else is merged
    without forcing rather than refused outright.
attributes:
  check_mode:
    description: Sends server-side dry-run requests only; nothing is written and nothing is waited for.
    support: full
  diff_mode:
    description: The Namespace, OperatorGroup and Subscription fields this module sets, before and after.
    support: full
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
"""

EXAMPLES = r"""
- name: Install the NVIDIA GPU Operator from the certified catalog, pinned and manually approved
  gpuaas.platform.olm_operator:
    package: gpu-operator-certified
    namespace: nvidia-gpu-operator
    channel: v25.3
    source: certified-operators
    starting_csv: gpu-operator-certified.v25.3.0
    install_plan_approval: Manual
    target_namespaces: [nvidia-gpu-operator]
  register: gpu_op

- name: Show the ClusterPolicy sample the operator ships
  ansible.builtin.debug:
    msg: "{{ gpu_op.alm_examples | selectattr('kind', 'equalto', 'ClusterPolicy') | first }}"

- name: GPU Operator over an OperatorHub install from the console (its OperatorGroup reused, ClusterPolicy merged)
  gpuaas.platform.olm_operator:
    package: gpu-operator-certified
    namespace: nvidia-gpu-operator
    channel: v25.3
    source: certified-operators
    operator_group: auto
    target_namespaces: [nvidia-gpu-operator]
    namespace_labels:
      openshift.io/cluster-monitoring: "true"
    subscription_config:
      nodeSelector:
        node-role.kubernetes.io/infra: ""
      tolerations:
        - {key: node-role.kubernetes.io/infra, operator: Exists, effect: NoSchedule}
    operand:
      api_version: nvidia.com/v1
      kind: ClusterPolicy
      name: gpu-cluster-policy
      spec:
        dcgmExporter:
          enabled: true

- name: Remove the Custom Metrics Autoscaler operator
  gpuaas.platform.olm_operator:
    package: openshift-custom-metrics-autoscaler-operator
    namespace: openshift-keda
    state: absent
"""

RETURN = r"""
subscription:
  description: The Subscription after the run (in check mode, the dry-run result).
  returned: state is present
  type: dict
csv:
  description: Name and phase of the operator's ClusterServiceVersion.
  returned: state is present
  type: dict
  sample: {"name": "gpu-operator-certified.v25.3.0", "phase": "Succeeded", "version": "25.3.0"}
install_plan:
  description: The InstallPlan of the Subscription and what was done with it.
  returned: state is present and an InstallPlan exists
  type: dict
  sample: {"name": "install-abcde", "approved": true, "action": "approve", "reason": "first install of x.v1"}
pending_install_plan:
  description: Name and reason of an InstallPlan left unapproved on purpose.
  returned: when an InstallPlan was held
  type: dict
alm_examples:
  description: The CSV's C(alm-examples) (sample operands), parsed.
  returned: state is present and the CSV exists
  type: list
  elements: dict
operator_group:
  description: The namespace's OperatorGroup and what was done with it (C(apply), C(reuse) or C(skip)).
  returned: state is present
  type: dict
  sample: {"name": "nvidia-gpu-operator-7xk2p", "action": "reuse"}
operand:
  description:
    - The operand and how it was applied; C(mode) is C(create), C(owned), C(adopt) or C(merge) (someone else's,
      only O(operand.spec) applied without forcing); C(action) is C(created), C(updated), C(unchanged) or C(skipped).
  returned: state is present and operand is given
  type: dict
  sample: {"kind": "ClusterPolicy", "name": "gpu-cluster-policy", "mode": "merge", "action": "unchanged"}
actions:
  description: What was changed, one line per object.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.olm_runner import OLM_OPERATOR_ARGUMENT_SPEC, run


def main() -> None:
    module = GpuaasModule(argument_spec=OLM_OPERATOR_ARGUMENT_SPEC, supports_check_mode=True)
    module.run(run)


if __name__ == "__main__":
    main()
