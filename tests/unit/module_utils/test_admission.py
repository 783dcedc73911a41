# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The admission policy is generated from data: frameworks, platform credentials, identities (issue 21)."""

from __future__ import annotations

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations as ki
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy


def _variables(policy):
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_tenancy_re_exports_the_admission_names():
    for name in ("AdmissionSettings", "admission_policy", "POLICY_NAME", "QUEUE_LABEL", "DEFAULT_QUEUE",
                 "ALLOWED_PRIORITIES_ANNOTATION", "ADOPTION_WORKLOAD_KINDS", "workloads_refused_on_update"):
        assert getattr(tenancy, name) is getattr(admission, name), name
    assert admission.QUEUE_LABEL is ki.QUEUE_LABEL


def test_only_the_given_frameworks_are_matched_and_labelled():
    frameworks = [ki.BY_FRAMEWORK["batch/job"], ki.BY_FRAMEWORK["pod"], ki.BY_FRAMEWORK["ray.io/rayjob"]]
    policy, _binding = admission.admission_policy(frameworks=frameworks)
    matched = {(g, r) for rule in policy["spec"]["matchConstraints"]["resourceRules"]
               for g in rule["apiGroups"] for r in rule["resources"]}
    # every known kind is matched: those Kueue does not manage for rule 12 (issue 22 item 3)
    assert ("ray.io", "rayjobs") in matched and ("jobset.x-k8s.io", "jobsets") in matched
    assert ("apps", "replicasets") in matched  # the extra template kinds stay: a way around the Deployment check
    assert _variables(policy)["isFramework"] == "variables.gk in ['ray.io/RayJob']"
    pod_specs = _variables(policy)["podSpecs"]
    assert "'batch/Job'" in pod_specs and "'apps/Deployment'" not in pod_specs and "'apps/ReplicaSet'" in pod_specs


def test_every_platform_credential_is_pinned():
    credentials = ["gpuaas-prometheus", "gpuaas-prometheus-node-pools"]
    policy, _binding = admission.admission_policy(None, "http://prom:9090", platform_credentials=credentials)
    uses = _variables(policy)["usesPlatformAuth"]
    assert "tr.authenticationRef.name in ['gpuaas-prometheus', 'gpuaas-prometheus-node-pools']" in uses
    pinned = policy["spec"]["validations"][-1]
    assert "tr.authenticationRef.name in ['gpuaas-prometheus', 'gpuaas-prometheus-node-pools']" in pinned["expression"]
    # the refusal names the credential the object used (one message for any of them)
    assert "variables.platformAuthName" in pinned["messageExpression"]
    assert ".filter(tr, " in _variables(policy)["platformAuthName"]
    # issue 22 item 2: by default both credentials the collection creates are pinned, the node pools' included
    default_policy, _binding = admission.admission_policy(None, "http://prom:9090")
    assert "['gpuaas-prometheus', 'gpuaas-prometheus-node-pools']" in _variables(default_policy)["usesPlatformAuth"]


def test_policy_objects_carry_the_labels_given():
    labels = tenancy.labels_for()
    policy, binding = admission.admission_policy(labels=labels)
    assert policy["metadata"] == binding["metadata"] == {"name": admission.POLICY_NAME, "labels": labels}
    assert policy["metadata"]["labels"] is not labels
