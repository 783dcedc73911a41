# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped automation ClusterRoles (roles/automation_rbac/files) against the code they are for: every kind the
tenants and monitoring modules manage is covered, every rule states its reason, and the day-2 roles hold nothing
dangerous (Secrets cluster-wide, escalate, bind beyond admin/edit, wildcards). What the API server makes of them is
proven on the lab by tests/integration/test_least_privilege.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.tenancy import MANAGED_KINDS
from ansible_collections.gpuaas.platform.plugins.modules.monitoring_objects import KINDS as MONITORING_KINDS

FILES = Path(__file__).resolve().parents[2] / "roles" / "automation_rbac" / "files"
DAY2 = ["gpuaas-automation-tenants", "gpuaas-automation-tenants-delete-namespaces", "gpuaas-automation-validate",
        "gpuaas-automation-observability", "gpuaas-automation-namespace-secrets", "gpuaas-automation-tenants-lock",
        "gpuaas-automation-node-pool-scaledown", "gpuaas-automation-ray-idle-reclaim"]
APPLY_VERBS = {"get", "list", "create", "patch", "delete"}


def cluster_roles() -> dict:
    roles = {}
    for path in sorted(FILES.glob("*.yml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["kind"] == "ClusterRole", path
            roles[doc["metadata"]["name"]] = doc
    return roles


def verbs_for(role: dict, group: str, resource: str, name: str | None = None) -> set:
    out: set = set()
    for rule in role["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            names = rule.get("resourceNames")
            if names is None or (name is not None and name in names):
                out |= set(rule["verbs"])
    return out


def plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def test_every_rule_has_its_reason_in_a_comment():
    for path in sorted(FILES.glob("*.yml")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith("- apiGroups:"):
                above = lines[i - 1].strip()
                # a rule follows its comment, or continues the rule group right above it (same reason)
                assert above.startswith("#") or above.startswith("verbs:"), "%s:%d has no reason" % (path.name, i + 1)


def test_tenants_role_covers_every_kind_the_tenants_module_manages():
    roles = cluster_roles()
    tenants = roles["gpuaas-automation-tenants"]
    fixed_names = {"ValidatingAdmissionPolicy": "gpuaas-require-kueue-queue",
                   "ValidatingAdmissionPolicyBinding": "gpuaas-require-kueue-queue",
                   "ClusterTriggerAuthentication": "gpuaas-prometheus"}
    for api_version, kind in MANAGED_KINDS:
        group, resource = group_of(api_version), plural(kind)
        if kind == "Secret":  # only per namespace, through a RoleBinding
            assert not verbs_for(tenants, group, resource)
            assert APPLY_VERBS <= verbs_for(roles["gpuaas-automation-namespace-secrets"], group, resource)
            continue
        granted = verbs_for(tenants, group, resource, fixed_names.get(kind))
        wanted = APPLY_VERBS - ({"delete"} if kind == "Namespace" else set())
        assert wanted <= granted, "%s: missing %s" % (kind, sorted(wanted - granted))
    assert verbs_for(roles["gpuaas-automation-tenants-delete-namespaces"], "", "namespaces") == {"delete"}


def test_tenants_role_covers_the_kueue_kinds_the_node_pools_run_manages():
    """The tenants role's run has the node pools step; it lists (and with ProvisioningRequest pools writes) the
    flavors' AdmissionChecks and ProvisioningRequestConfigs on every full run."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.node_pools_step import (
        MANAGED_KINDS as POOL_KINDS)
    tenants = cluster_roles()["gpuaas-automation-tenants"]
    kueue = [(av, kind) for av, kind in POOL_KINDS if av.startswith("kueue.x-k8s.io/")]
    assert {kind for _av, kind in kueue} == {"AdmissionCheck", "ProvisioningRequestConfig"}
    for api_version, kind in kueue:
        granted = verbs_for(tenants, group_of(api_version), plural(kind))
        assert APPLY_VERBS <= granted, "%s: missing %s" % (kind, sorted(APPLY_VERBS - granted))


def test_observability_role_covers_every_kind_the_monitoring_module_manages():
    role = cluster_roles()["gpuaas-automation-observability"]
    names = {"ServiceMonitor": "gpuaas-kueue", "PodMonitor": "gpuaas-dcgm-exporter",
             "PrometheusRule": "gpuaas-gpu-alerts", "ConfigMap": "gpuaas-grafana-dashboards",
             "GrafanaDashboard": "gpuaas-gpu-utilization"}
    for kind, api_version in MONITORING_KINDS.items():
        granted = verbs_for(role, group_of(api_version), plural(kind), names[kind])
        assert APPLY_VERBS <= granted, "%s: missing %s" % (kind, sorted(APPLY_VERBS - granted))


def test_observability_role_may_merge_only_openshifts_two_monitoring_configmaps():
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.monitoring import (
        OPENSHIFT_MONITORING_CONFIGS)
    role = cluster_roles()["gpuaas-automation-observability"]
    for _namespace, name in OPENSHIFT_MONITORING_CONFIGS:
        granted = verbs_for(role, "", "configmaps", name)
        assert {"get", "patch"} <= granted and "delete" not in granted, (name, granted)  # merged, never deleted
    assert "patch" not in verbs_for(role, "", "configmaps", "some-other-configmap")


@pytest.mark.parametrize("name", DAY2)
def test_day2_roles_hold_nothing_dangerous(name):
    role = cluster_roles()[name]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"], rule
        assert "escalate" not in rule["verbs"] and "impersonate" not in rule["verbs"], rule
        if "bind" in rule["verbs"]:
            assert rule.get("resourceNames") == ["admin", "edit"], rule
        for resource in rule["resources"]:
            assert not resource.startswith(("pods", "nodes/proxy", "serviceaccounts/token")) or rule["verbs"] == ["list"], rule
    if name != "gpuaas-automation-namespace-secrets":
        assert not verbs_for(role, "", "secrets"), "%s grants Secrets cluster-wide" % name


def test_validate_role_is_read_only():
    role = cluster_roles()["gpuaas-automation-validate"]
    assert {v for rule in role["rules"] for v in rule["verbs"]} == {"list"}


def test_node_pool_scaledown_role_cordons_and_reads_but_deletes_and_creates_nothing():
    """What plugins/modules/node_pool_scaledown.py calls cluster-wide: GET/PATCH a node (cordon, uncordon), LIST pods
    (on a node, Pending ones). Its MachineSet/Machine rights are a per-namespace Role the role task makes, pinned to
    the pools' targets; the fence (lab test: test_least_privilege.py) narrows the patches to scaling down."""
    role = cluster_roles()["gpuaas-automation-node-pool-scaledown"]
    assert verbs_for(role, "", "nodes", "any-node") == {"get", "patch"}
    assert verbs_for(role, "", "pods") == {"list"}
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("", "nodes"), ("", "pods")}, granted


def test_ray_idle_reclaim_role_reads_and_patches_rayclusters_and_notebooks_and_lists_pods_only():
    """What plugins/module_utils/reconcile/ray_reclaim_runner.py calls: GET a RayCluster or Notebook, LIST its GPU
    pods, PATCH (server-side apply) it. Bound per namespace by the role task; the fences (lab tests:
    test_ray_idle_reclaim.py, test_notebook_idle_reclaim.py) narrow the patch to the worker groups' replicas, a
    Notebook's stop annotation and the reclaim record."""
    role = cluster_roles()["gpuaas-automation-ray-idle-reclaim"]
    assert verbs_for(role, "ray.io", "rayclusters") == {"get", "patch"}
    assert verbs_for(role, "kubeflow.org", "notebooks") == {"get", "patch"}
    assert verbs_for(role, "", "pods") == {"list"}
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("ray.io", "rayclusters"), ("kubeflow.org", "notebooks"), ("", "pods")}, granted
