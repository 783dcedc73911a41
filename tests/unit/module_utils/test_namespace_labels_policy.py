# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The policy gpuaas-namespace-labels as built (issue 22 item 1). What the API server makes of it — refusals as a
namespace-as-a-service bot, the automation still onboarding — is proven on the lab (test_isolation.py, rows 17-18 of
docs/security.md)."""

from __future__ import annotations

import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission, tenancy
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel

from .test_tenancy_output_unchanged import ROOT


def _variables(policy):
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_create_and_update_of_every_namespace_are_matched():
    policy, binding = admission.namespace_labels_policy()
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [""] and set(rule["operations"]) == {"CREATE", "UPDATE"}
    assert set(rule["resources"]) == {"namespaces", "namespaces/status", "namespaces/finalize"}
    # no namespace selector: for a Namespace it would be matched against the labels the requester writes
    assert binding["spec"] == {"policyName": admission.NAMESPACE_POLICY_NAME, "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"


def test_both_labels_are_governed_on_add_change_and_removal():
    changed = _variables(admission.namespace_labels_policy()[0])["changed"]
    assert changed.startswith("['gpuaas.io/platform', 'gpuaas.io/tenant'].filter(k, ")
    # present in one of old/new only (added, removed), or in both with another value (changed)
    assert "(k in variables.labels) != (k in variables.oldLabels)" in changed
    assert "variables.labels[k] != variables.oldLabels[k]" in changed
    (validation,) = admission.namespace_labels_policy()[0]["spec"]["validations"]
    assert validation["expression"] == "size(variables.changed) == 0 || variables.byAutomation"


def test_trust_is_the_inventorys_automation_and_the_rbac_grant_never_the_object():
    settings = admission.AdmissionSettings(automation_users=["system:serviceaccount:aap:gpuaas-tenants", "x'y"],
                                           automation_groups=["platform-admins"])
    policy = admission.namespace_labels_policy(settings)[0]
    trusted = _variables(policy)["byAutomation"]
    assert "request.userInfo.username in ['system:serviceaccount:aap:gpuaas-tenants', 'x\\'y']" in trusted
    assert "g in ['platform-admins']" in trusted
    assert "authorizer.group('gpuaas.io').resource('namespacelabels').check('update').allowed()" in trusted
    assert "object." not in trusted and "oldObject" not in trusted
    message = policy["spec"]["validations"][0]["messageExpression"]
    assert "x\\'y" in message and "x'y" not in message.replace("x\\'y", "")  # escaped for CEL's string
    default = admission.namespace_labels_policy()[0]["spec"]["validations"][0]["messageExpression"]
    assert "members of system:masters" in default and "gpuaas_tenants_adopt: Namespace/' + object.metadata.name" in default


def test_the_shipped_tenants_role_holds_the_grant_and_may_write_the_policy():
    with open("%s/roles/automation_rbac/files/gpuaas-automation-tenants.yml" % ROOT) as handle:
        role = yaml.safe_load(handle)
    group, resource, verb = admission.NAMESPACE_LABELS_GRANT
    assert any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in role["rules"])
    writes = [r for r in role["rules"] if "validatingadmissionpolicies" in r["resources"] and "patch" in r["verbs"]]
    assert admission.NAMESPACE_POLICY_NAME in writes[0]["resourceNames"]


def test_the_tenancy_run_builds_it_with_the_first_policy():
    with open("%s/playbooks/inventory/lab/group_vars/all/tenants.yml" % ROOT) as handle:
        model = TenantModel.from_inventory(yaml.safe_load(handle))
    names = [(o["kind"], o["metadata"]["name"]) for o in tenancy.desired_objects(model)
             if o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert names == [("ValidatingAdmissionPolicy", admission.POLICY_NAME),
                     ("ValidatingAdmissionPolicyBinding", admission.POLICY_NAME),
                     ("ValidatingAdmissionPolicy", admission.NAMESPACE_POLICY_NAME),
                     ("ValidatingAdmissionPolicyBinding", admission.NAMESPACE_POLICY_NAME)]
