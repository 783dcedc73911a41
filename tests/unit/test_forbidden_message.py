# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A missing permission names the verb, the resource, its API group, the scope and the account, and says what to
grant (issue 17). The API server's texts below are the ones kube-apiserver 1.35 returned on the lab
(tests/integration/test_least_privilege.py)."""

from __future__ import annotations

import json

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import translate_api_exception


class _Exc(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.status = 403
        self.reason = "Forbidden"
        self.body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                                "message": message})


SA = "system:serviceaccount:gpuaas-lp:gpuaas-lp-validate"


def test_cluster_scoped_denial_names_verb_resource_group_and_the_command_to_check():
    err = translate_api_exception(_Exc('localqueues.kueue.x-k8s.io is forbidden: User "%s" cannot list resource '
                                       '"localqueues" in API group "kueue.x-k8s.io" at the cluster scope' % SA),
                                  "list", "LocalQueue")
    assert 'cannot list resource "localqueues"' in err.message
    assert err.hint.startswith("grant list on localqueues (API group kueue.x-k8s.io) cluster-wide to %s" % SA)
    assert "kubectl auth can-i list localqueues.kueue.x-k8s.io --as=%s" % SA in err.hint
    assert "roles/automation_rbac" in err.hint and "cluster-admin" not in err.hint
    assert (err.details["verb"], err.details["resource"], err.details["api_group"]) == (
        "list", "localqueues", "kueue.x-k8s.io")
    assert err.details["namespace"] is None and err.details["user"] == SA


def test_namespaced_denial_of_the_core_group_names_the_namespace():
    err = translate_api_exception(_Exc('secrets is forbidden: User "%s" cannot list resource "secrets" in API group '
                                       '"" in the namespace "kube-system"' % SA), "list", "v1 Secret")
    assert "grant list on secrets in namespace kube-system to %s" % SA in err.hint
    assert "kubectl auth can-i list secrets -n kube-system --as=%s" % SA in err.hint
    assert err.details["namespace"] == "kube-system" and err.details["api_group"] == ""


def test_escalation_refusal_explains_bind():
    err = translate_api_exception(_Exc('clusterrolebindings.rbac.authorization.k8s.io "x" is forbidden: user "%s" '
                                       '(groups=["system:serviceaccounts"]) is attempting to grant RBAC permissions '
                                       'not currently held:\n{APIGroups:["*"], Resources:["*"], Verbs:["*"]}' % SA),
                                  "apply", "ClusterRoleBinding x")
    assert "bind verb" in err.hint and "admin and edit only" in err.hint


def test_admission_policy_denial_keeps_its_own_hint():
    err = translate_api_exception(_Exc('rolebindings.rbac.authorization.k8s.io "x" is forbidden: '
                                       'ValidatingAdmissionPolicy \'gpuaas-automation-fence\' with binding '
                                       '\'gpuaas-automation-fence\' denied request: only in tenant namespaces'),
                                  "apply", "RoleBinding kube-system/x")
    assert err.hint == "an admission policy denied it; the message above says why"
