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
  - Creates the Namespace and an OperatorGroup, then the Subscription (package, channel, catalog source,
    optional pinned O(starting_csv)), and waits until the operator's ClusterServiceVersion reaches phase
    C(Succeeded).
  - With O(install_plan_approval=Manual), approves exactly the expected InstallPlan (the one installing the
    pinned O(starting_csv), or the first install the Subscription resolved) and never an unrequested upgrade.
  - With O(state=absent), removes the Subscription, the installed ClusterServiceVersion and the
    OperatorGroup created by this module (the Namespace is kept unless O(delete_namespace=true)).
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
    description: Extra labels for the namespace (for example C(openshift.io/cluster-monitoring=true)).
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
    description: Subscription C(spec.config) (env, nodeSelector, tolerations, resources for the operator pod).
    type: dict
  operator_group:
    description: Create an OperatorGroup in O(namespace) (skip when one is managed elsewhere).
    type: bool
    default: true
  operator_group_name:
    description: Name of the OperatorGroup. Defaults to O(namespace).
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
  delete_namespace:
    description: With O(state=absent), also delete the namespace when this module created it.
    type: bool
    default: false
notes:
  - An InstallPlan left unapproved (an upgrade under Manual approval) is reported in RV(pending_install_plan).
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
actions:
  description: What was changed, one line per object.
  returned: always
  type: list
  elements: str
"""

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ReconcileResult
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.olm import (
    OLM_V1,
    OLM_V1ALPHA1,
    alm_examples,
    csv_failure,
    csv_phase,
    expected_csv,
    namespace_object,
    operator_group_object,
    plan_decision,
    subscription_object,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule

POLL = 2.0


class OlmOperator:
    def __init__(self, module: GpuaasModule, client: t.Any) -> None:
        self.module = module
        self.client = client
        self.p = module.params
        self.check = module.check_mode
        self.changed = False
        self.actions: t.List[str] = []
        self.diff: t.Dict[str, t.List[str]] = {"before": [], "after": []}
        self.sub_name = self.p["name"] or self.p["package"]
        self.og_name = self.p["operator_group_name"] or self.p["namespace"]
        self.missing_namespaces: t.Set[str] = set()
        self.engine = ApplyEngine(client, check_mode=self.check)

    def res(self, api_version: str, kind: str) -> t.Any:
        return self.client.resource(api_version, kind)

    def apply(self, desired: t.List[t.Dict[str, t.Any]]) -> ReconcileResult:
        """Reconcile ``desired`` through the apply engine (one field manager, owned-field compare, dry run in
        check mode, a namespace being created first), recording actions and diffs."""
        result = self.engine.reconcile(desired)
        for r in result.results:
            if not r.changed:
                continue
            ref = "%s %s%s" % (r.ref.kind, r.ref.namespace + "/" if r.ref.namespace else "", r.ref.name)
            self.changed = True
            self.actions.append("%s %s" % (r.action, ref))
            self.diff["before"].append("%s: %s" % (ref, _short(r.before if r.action != "created" else None)))
            self.diff["after"].append("%s: %s" % (ref, _short(r.after)))
        return result

    # ---- present ------------------------------------------------------------------------------------
    def present(self) -> t.Dict[str, t.Any]:
        p = self.p
        ns = p["namespace"]
        desired: t.List[t.Dict[str, t.Any]] = []
        live_ns = self.res("v1", "Namespace").get(ns)
        if p["create_namespace"]:
            if live_ns is None or p["namespace_labels"]:
                desired.append(namespace_object(ns, p["namespace_labels"]))
            if live_ns is None and self.check:
                self.missing_namespaces.add(ns)
        elif live_ns is None:
            raise GpuaasError("namespace %s does not exist" % ns, hint="create it or set create_namespace: true")
        if p["operator_group"] and live_ns is not None:
            self.check_other_operator_groups(ns)
        if p["operator_group"]:
            desired.append(operator_group_object(self.og_name, ns, p["target_namespaces"]))
        desired.append(subscription_object(
            self.sub_name, ns, p["package"], p["channel"], p["source"], p["source_namespace"],
            p["starting_csv"], p["install_plan_approval"], p["subscription_config"]))
        applied = self.apply(desired).find("Subscription", self.sub_name, ns)
        sub = applied.object if applied is not None else None
        result: t.Dict[str, t.Any] = {}
        if self.check:
            result["subscription"] = sub
            live_sub = None if ns in self.missing_namespaces else self.res(OLM_V1ALPHA1, "Subscription").get(self.sub_name, ns)
            name = expected_csv(p["starting_csv"], live_sub)
            csv = self.res(OLM_V1ALPHA1, "ClusterServiceVersion").get(name, ns) if name and live_sub else None
            result["csv"] = {"name": name, "phase": csv_phase(csv)}
            result["alm_examples"] = alm_examples(csv)
            return result
        deadline = time.time() + p["wait_timeout"]
        csv = self.drive_install(deadline, result)
        result["subscription"] = self.res(OLM_V1ALPHA1, "Subscription").get(self.sub_name, ns)
        if csv is not None:
            spec_version = (csv.get("spec") or {}).get("version")
            result["csv"] = {"name": csv["metadata"]["name"], "phase": csv_phase(csv), "version": spec_version}
            result["alm_examples"] = alm_examples(csv)
        return result

    def check_other_operator_groups(self, ns: str) -> None:
        groups = self.res(OLM_V1, "OperatorGroup").list(namespace=ns)
        others = [g["metadata"]["name"] for g in groups if g["metadata"]["name"] != self.og_name]
        if others:
            raise GpuaasError(
                "namespace %s already has OperatorGroup %s; OLM refuses to install with more than one"
                % (ns, ", ".join(others)),
                hint="set operator_group: false to use the existing one, or operator_group_name: %s" % others[0])

    def drive_install(self, deadline: float, result: t.Dict[str, t.Any]) -> t.Optional[t.Dict[str, t.Any]]:
        """Approve the expected InstallPlan (Manual) and wait for the CSV; returns the CSV."""
        p = self.p
        ns = p["namespace"]
        subs = self.res(OLM_V1ALPHA1, "Subscription")
        plans = self.res(OLM_V1ALPHA1, "InstallPlan")
        csvs = self.res(OLM_V1ALPHA1, "ClusterServiceVersion")
        while True:
            sub = subs.get(self.sub_name, ns) or {}
            status = sub.get("status") or {}
            name = expected_csv(p["starting_csv"], sub)
            csv = csvs.get(name, ns) if name else None
            if csv is not None:
                failure = csv_failure(csv)
                if failure:
                    raise GpuaasError(failure, hint="kubectl -n %s describe csv %s; fix the cause and re-run" % (ns, name))
                if csv_phase(csv) == "Succeeded" and status.get("installedCSV") in (None, name):
                    return csv
            ref = status.get("installPlanRef") or {}
            if ref.get("name") and p["install_plan_approval"] == "Manual":
                plan = plans.get(ref["name"], ns)
                if plan is not None:
                    action, reason = plan_decision(plan, sub, p["starting_csv"])
                    result["install_plan"] = {"name": ref["name"], "approved": bool(plan["spec"].get("approved")),
                                              "action": action, "reason": reason}
                    if action == "approve":
                        self.approve(plan)
                        result["install_plan"]["approved"] = True
                    elif action == "hold":
                        result["pending_install_plan"] = {"name": ref["name"], "reason": reason}
                        installed = status.get("installedCSV")
                        if installed:
                            return csvs.get(installed, ns)
                        raise GpuaasError(reason, hint="pin starting_csv to the CSV this InstallPlan installs, or "
                                                       "approve it yourself after review")
            if not p["wait"]:
                return csv
            if time.time() > deadline:
                raise GpuaasError(
                    "timed out after %ss waiting for the operator %s in %s: Subscription state %r, CSV %s phase %r"
                    % (p["wait_timeout"], p["package"], ns, status.get("state"), name, csv_phase(csv)),
                    hint="check the catalog source %s/%s is healthy and serves package %s in channel %s "
                         "(kubectl -n %s get subscription,installplan,csv)"
                         % (p["source_namespace"], p["source"], p["package"], p["channel"], ns))
            time.sleep(POLL)

    def approve(self, plan: t.Dict[str, t.Any]) -> None:
        meta = plan["metadata"]
        plans = self.res(OLM_V1ALPHA1, "InstallPlan")
        try:
            self.client.request("PATCH", plans.path(meta["name"], meta["namespace"]),
                                body={"spec": {"approved": True}}, content_type="application/merge-patch+json")
        except ApiException as exc:
            raise translate_api_exception(exc, "approve", "InstallPlan %s/%s" % (meta["namespace"], meta["name"]))
        self.changed = True
        self.actions.append("approved InstallPlan %s/%s (%s)" % (
            meta["namespace"], meta["name"], ", ".join(plan["spec"].get("clusterServiceVersionNames") or [])))

    # ---- absent -------------------------------------------------------------------------------------
    def absent(self) -> t.Dict[str, t.Any]:
        p = self.p
        ns = p["namespace"]
        subs = self.res(OLM_V1ALPHA1, "Subscription")
        csvs = self.res(OLM_V1ALPHA1, "ClusterServiceVersion")
        sub = subs.get(self.sub_name, ns)
        csv_names = set()
        if sub is not None:
            status = sub.get("status") or {}
            for key in ("installedCSV", "currentCSV"):
                if status.get(key):
                    csv_names.add(status[key])
            self.delete(subs, self.sub_name, ns, "Subscription")
        if p["starting_csv"]:
            csv_names.add(p["starting_csv"])
        label = "%s.%s" % (p["package"], ns)
        if len(label) <= 63:  # OLM's operator label; longer names are not valid label keys
            for csv in csvs.list(namespace=ns, label_selector="operators.coreos.com/" + label):
                csv_names.add(csv["metadata"]["name"])
        for name in sorted(csv_names):
            self.delete(csvs, name, ns, "ClusterServiceVersion")
        if p["operator_group"]:
            groups = self.res(OLM_V1, "OperatorGroup")
            og = groups.get(self.og_name, ns)
            if og is not None and ((og.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE:
                self.delete(groups, self.og_name, ns, "OperatorGroup")
        if p["delete_namespace"]:
            nss = self.res("v1", "Namespace")
            live = nss.get(ns)
            if live is not None and ((live.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE:
                self.delete(nss, ns, None, "Namespace")
        if p["wait"] and not self.check:
            deadline = time.time() + p["wait_timeout"]
            while any(csvs.get(n, ns) is not None for n in csv_names) and time.time() < deadline:
                time.sleep(POLL)
        return {}

    def delete(self, res: t.Any, name: str, ns: t.Optional[str], kind: str) -> None:
        ref = "%s %s%s" % (kind, ns + "/" if ns else "", name)
        try:
            if res.get(name, ns) is None:
                return
            res.delete(name, ns, dry_run=self.check)
        except ApiException as exc:
            raise translate_api_exception(exc, "delete", ref)
        self.changed = True
        self.actions.append("deleted %s" % ref)
        self.diff["before"].append("%s: present" % ref)
        self.diff["after"].append("%s: absent" % ref)


def _short(obj: t.Optional[t.Dict[str, t.Any]]) -> str:
    if obj is None:
        return "absent"
    return repr({k: obj.get(k) for k in ("spec",) if k in obj} or {"metadata.labels": (obj.get("metadata") or {}).get("labels")})


def run(module: GpuaasModule) -> t.Dict[str, t.Any]:
    op = OlmOperator(module, get_client(module))
    result = op.present() if module.params["state"] == "present" else op.absent()
    result.update(changed=op.changed, actions=op.actions)
    if module._diff:
        result["diff"] = {"before": "\n".join(op.diff["before"]) + "\n", "after": "\n".join(op.diff["after"]) + "\n"}
    return result


def main() -> None:
    argument_spec: t.Dict[str, t.Any] = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        package=dict(type="str", required=True),
        name=dict(type="str"),
        namespace=dict(type="str", required=True),
        create_namespace=dict(type="bool", default=True),
        namespace_labels=dict(type="dict", default={}),
        channel=dict(type="str"),
        source=dict(type="str", default="redhat-operators"),
        source_namespace=dict(type="str", default="openshift-marketplace"),
        starting_csv=dict(type="str"),
        install_plan_approval=dict(type="str", choices=["Automatic", "Manual"], default="Automatic"),
        subscription_config=dict(type="dict"),
        operator_group=dict(type="bool", default=True),
        operator_group_name=dict(type="str"),
        target_namespaces=dict(type="list", elements="str", default=[]),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=600),
        delete_namespace=dict(type="bool", default=False),
    )
    module = GpuaasModule(argument_spec=argument_spec, supports_check_mode=True)
    module.run(run)


if __name__ == "__main__":
    main()
