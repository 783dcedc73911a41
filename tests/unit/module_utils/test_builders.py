# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import base64
import os

import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "playbooks", "inventory", "lab", "group_vars", "all", "tenants.yml")


def model(**changes):
    with open(EXAMPLE) as handle:
        inv = yaml.safe_load(handle)
    inv.update(changes)
    return TenantModel.from_inventory(inv)


def index(objs):
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}


def test_every_object_is_owned_and_unique():
    objs = builders.desired_objects(model())
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys))
    for obj in objs:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpuaas.platform"
        assert labels["gpuaas.io/component"] == "tenants"
    kinds = {(o["apiVersion"], o["kind"]) for o in objs}
    assert kinds <= set(builders.MANAGED_KINDS)


def test_object_counts_for_example():
    objs = index(builders.desired_objects(model()))
    kinds = {}
    for kind, _ns, _name in objs:
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {
        "ResourceFlavor": 3, "Cohort": 2, "WorkloadPriorityClass": 2, "Namespace": 5, "ClusterQueue": 3,
        "LocalQueue": 6,  # 5 default + nlp-train/interactive
        "RoleBinding": 10, "ClusterRole": 4, "ClusterRoleBinding": 3,
        "ValidatingAdmissionPolicy": 2, "ValidatingAdmissionPolicyBinding": 2, "ScaledObject": 1,  # + gpuaas-namespace-labels
    }


def test_cluster_queue_shape():
    objs = index(builders.desired_objects(model()))
    cq = objs[("ClusterQueue", None, "nlp")]
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert cq["metadata"]["labels"]["gpuaas.io/tenant"] == "nlp"
    spec = cq["spec"]
    assert spec["cohortName"] == "research"
    assert spec["namespaceSelector"] == {"matchLabels": {"gpuaas.io/tenant": "nlp"}}
    assert spec["fairSharing"] == {"weight": "1"}
    assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert "stopPolicy" not in spec
    # h100 {gpu,cpu,memory} and cpu {cpu,memory} share resources: one group, cpu flavor gets gpu 0.
    assert len(spec["resourceGroups"]) == 1
    group = spec["resourceGroups"][0]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    h100, cpu = group["flavors"]
    assert h100["name"] == "h100" and cpu["name"] == "cpu"
    assert h100["resources"][0] == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8",
                                    "lendingLimit": "4"}
    assert h100["resources"][2] == {"name": "memory", "nominalQuota": "1Ti"}
    assert cpu["resources"][0] == {"name": "nvidia.com/gpu", "nominalQuota": "0"}
    for flavor in group["flavors"]:
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


def test_disjoint_resources_make_separate_groups():
    inv_model = model(gpuaas_tenants=[{"name": "t1", "namespaces": ["t1"], "quotas": [
        {"flavor": "h100", "resources": {"nvidia.com/gpu": 1}},
        {"flavor": "cpu", "resources": {"cpu": 4, "memory": "8Gi"}},
    ]}])
    cq = index(builders.desired_objects(inv_model))[("ClusterQueue", None, "t1")]
    assert [g["coveredResources"] for g in cq["spec"]["resourceGroups"]] == [["nvidia.com/gpu"], ["cpu", "memory"]]
    assert "cohortName" not in cq["spec"]


def test_draining_cluster_queue():
    cq = builders.cluster_queue(model().tenant("vision"), draining=True)
    assert cq["spec"]["stopPolicy"] == "HoldAndDrain"


def test_namespaces_local_queues_and_rbac():
    objs = index(builders.desired_objects(model()))
    ns = objs[("Namespace", None, "nlp-train")]
    assert ns["metadata"]["labels"]["gpuaas.io/tenant"] == "nlp"
    assert "kueue.openshift.io/managed" not in ns["metadata"]["labels"]
    assert ns["metadata"]["labels"]["gpuaas.io/suggested-queue"] == "default"
    assert objs[("LocalQueue", "nlp-serve", "default")]["spec"] == {"clusterQueue": "nlp"}
    assert objs[("LocalQueue", "nlp-train", "interactive")]["spec"] == {"clusterQueue": "nlp"}
    assert ("LocalQueue", "nlp-serve", "interactive") not in objs
    users = objs[("RoleBinding", "nlp-train", "gpuaas-users")]
    assert users["roleRef"]["name"] == "edit"
    assert users["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "nlp-team"}]
    assert objs[("RoleBinding", "nlp-train", "gpuaas-admins")]["roleRef"]["name"] == "admin"


def test_openshift_namespace_label():
    objs = index(builders.desired_objects(model(), platform="openshift"))
    assert objs[("Namespace", None, "vision-dev")]["metadata"]["labels"]["kueue.openshift.io/managed"] == "true"


def test_tenants_can_never_write_cluster_queues():
    objs = builders.desired_objects(model())
    for obj in objs:
        for rule in obj.get("rules") or []:
            if "clusterqueues" in rule["resources"]:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}
                assert rule.get("resourceNames") in (["nlp"], ["vision"], ["analytics"])
    reader = index(objs)[("ClusterRole", None, builders.QUEUE_READER_ROLE)]
    assert reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert "gpuaas.io/tenant" not in reader["metadata"]["labels"]


def test_admission_policy_binding_spares_only_the_platform_namespaces():
    settings = builders.AdmissionSettings(platform_namespaces=["gpu-operator", "monitoring"])
    policy, binding = builders.admission_policy(settings)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == "gpuaas-require-kueue-queue"
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["gpu-operator", "monitoring"]},
        {"key": "gpuaas.io/platform", "operator": "DoesNotExist"}]}
    defaults = builders.admission_policy()[1]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert {"gpu-operator", "nvidia-gpu-operator", "kube-system", "kueue-system"} <= set(defaults["values"])


def _variables(policy):
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_admission_policy_is_generated_from_the_kueue_integrations():
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations as ki

    policy, _binding = builders.admission_policy()
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    matched = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    for integration in ki.INTEGRATIONS:  # every kind Kueue can gate is checked, with its plural in its group
        assert (integration.group, integration.resource) in matched, integration.framework
    for rule in rules:
        assert set(rule["operations"]) == {"CREATE", "UPDATE"}  # Pods on UPDATE too (queue label, gate)
    assert ("", "replicasets") not in matched and ("apps", "replicasets") in matched
    assert ("kueue.x-k8s.io", "workloads") in matched and ("keda.sh", "scaledobjects") in matched
    framework_kinds = _variables(policy)["isFramework"]
    for integration in ki.crd_kinds():
        assert "'%s/%s'" % (integration.group, integration.kind) in framework_kinds
    assert "'/Pod'" not in framework_kinds and "'batch/Job'" not in framework_kinds


def test_admission_policy_trusts_identities_never_owner_references():
    settings = builders.AdmissionSettings(workload_controllers=["system:serviceaccount:kube-system:job-controller"],
                                          kueue_users=["system:serviceaccount:kueue-system:kueue-controller-manager"])
    policy, _binding = builders.admission_policy(settings)
    expressions = [v["expression"] for v in policy["spec"]["variables"] + policy["spec"]["validations"]]
    assert not [e for e in expressions if "ownerReferences" in e]
    variables = _variables(policy)
    assert variables["byController"] == \
        "request.userInfo.username in ['system:serviceaccount:kube-system:job-controller']"
    assert variables["byKueue"] == \
        "request.userInfo.username in ['system:serviceaccount:kueue-system:kueue-controller-manager']"
    assert "'kueue.x-k8s.io/admission'" in variables["gated"]


def test_admission_policy_gpu_detection_covers_devices_mig_and_dra():
    wants = _variables(builders.admission_policy()[0])["wantsGpu"]
    for prefix in ("nvidia.com/", "amd.com/", "gpu.intel.com/"):
        assert "k.startsWith('%s')" % prefix in wants
    assert "s.resourceClaims" in wants and "c.resources.claims" in wants
    assert "s.initContainers" in wants


def test_every_refusal_says_what_to_do_instead():
    policy, _binding = builders.admission_policy(None, "http://prom:9090")
    messages = [v["messageExpression"] for v in policy["spec"]["validations"]]
    assert len(messages) == 11
    hints = ("kubectl get namespaces -l gpuaas.io/tenant", "add the label kueue.x-k8s.io/queue-name: ' + variables.suggestedQueue",
             "Create a Job", "create it again with the queue you want", "wait for admission",
             "gpuaas_tenants[].allowed_priorities", "Set the label kueue.x-k8s.io/priority-class",
             "gpuaas_tenants[].autoscaling", "set serverAddress to it")
    for hint in hints:
        assert any(hint in m for m in messages), hint
    for validation in policy["spec"]["validations"]:
        assert validation["reason"] == "Forbidden" and validation["message"]


def test_platform_credential_is_pinned_to_the_inventory_server_and_identity():
    settings = builders.AdmissionSettings(automation_users=["system:serviceaccount:aap:gpuaas-tenants"],
                                          automation_groups=[])
    policy, _binding = builders.admission_policy(settings, "https://thanos.example:9091")
    validations = policy["spec"]["validations"]
    assert "tr.metadata.serverAddress == 'https://thanos.example:9091'" in validations[-1]["expression"]
    assert _variables(policy)["byAutomation"].startswith(
        "request.userInfo.username in ['system:serviceaccount:aap:gpuaas-tenants']")
    assert "tr.authenticationRef.kind == 'ClusterTriggerAuthentication'" in _variables(policy)["usesPlatformAuth"]


def test_allowed_priorities_land_on_the_tenant_namespaces():
    inv = yaml.safe_load(open(EXAMPLE))
    names = [p["name"] for p in inv["gpuaas_priorities"]]
    inv["gpuaas_tenants"][0]["allowed_priorities"] = names[:1]
    objs = index(builders.desired_objects(TenantModel.from_inventory(inv)))
    first = inv["gpuaas_tenants"][0]
    other = inv["gpuaas_tenants"][1]
    annotation = "gpuaas.io/allowed-priorities"
    for ns in first["namespaces"]:
        assert objs[("Namespace", None, ns)]["metadata"]["annotations"] == {annotation: names[0]}
    assert "allowed_priorities" not in other
    for ns in other["namespaces"]:  # the default: the class the example marks open_to_tenants, not production
        assert objs[("Namespace", None, ns)]["metadata"]["annotations"] == {annotation: "batch"}


def test_scaled_object_idle_scale_to_zero():
    objs = index(builders.desired_objects(model()))
    so = objs[("ScaledObject", "nlp-serve", "vllm")]
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}
    assert spec["minReplicaCount"] == 0 and spec["maxReplicaCount"] == 2
    assert spec["initialCooldownPeriod"] == 900
    trig = spec["triggers"][0]
    assert trig["type"] == "prometheus"
    assert trig["metadata"]["serverAddress"] == "http://127.0.0.1:9090"
    # the Deployment's own pods (name grammar), not the prefix vllm-.* that also matched vllm-canary (issue 12)
    assert 'DCGM_FI_DEV_GPU_UTIL{namespace="nlp-serve",pod=~"vllm-[bcdfghjklmnpqrstvwxz2456789]{1,10}-' in trig["metadata"]["query"]
    assert 'vllm-.*' not in trig["metadata"]["query"]
    assert 'exported_namespace="nlp-serve"' in trig["metadata"]["query"]
    assert trig["metadata"]["activationThreshold"] == "1"
    assert "authenticationRef" not in trig
    assert not [k for k in objs if k[0] in ("Secret", "ClusterTriggerAuthentication")]


def test_prometheus_token_goes_to_cluster_trigger_authentication():
    objs = index(builders.desired_objects(model(), prometheus_token="s3cret\n", prometheus_ca="PEM",
                                          keda_namespace="keda"))
    secret = objs[("Secret", "keda", "gpuaas-prometheus")]
    assert base64.b64decode(secret["data"]["bearerToken"]) == b"s3cret"
    auth = objs[("ClusterTriggerAuthentication", None, "gpuaas-prometheus")]
    assert {r["parameter"] for r in auth["spec"]["secretTargetRef"]} == {"bearerToken", "ca"}
    trig = objs[("ScaledObject", "nlp-serve", "vllm")]["spec"]["triggers"][0]
    assert trig["authenticationRef"] == {"name": "gpuaas-prometheus", "kind": "ClusterTriggerAuthentication"}
    assert trig["metadata"]["authModes"] == "bearer"


def test_absent_tenant_builds_nothing():
    inv = yaml.safe_load(open(EXAMPLE))
    inv["gpuaas_tenants"][1]["state"] = "absent"
    objs = index(builders.desired_objects(TenantModel.from_inventory(inv)))
    assert not [k for k in objs if k[2] == "vision" or (k[1] or "").startswith("vision")]
    assert ("ClusterQueue", None, "nlp") in objs


def test_no_tenants_no_policy():
    objs = builders.desired_objects(TenantModel.from_inventory({"gpuaas_flavors": [{"name": "x"}]}))
    assert [o["kind"] for o in objs] == ["ResourceFlavor"]


def test_tenant_without_default_queue():
    inv = yaml.safe_load(open(EXAMPLE))
    inv["gpuaas_tenants"][2]["default_queue"] = False
    inv["gpuaas_tenants"][2]["queues"] = [{"name": "training"}]
    objs = index(builders.desired_objects(TenantModel.from_inventory(inv)))
    assert ("LocalQueue", "analytics", "default") not in objs
    assert objs[("LocalQueue", "analytics", "training")]["spec"] == {"clusterQueue": "analytics"}
    ns = objs[("Namespace", None, "analytics")]
    assert ns["metadata"]["labels"]["gpuaas.io/suggested-queue"] == "training"
