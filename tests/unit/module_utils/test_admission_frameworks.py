# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Issue 22 item 3: trusted operators are trusted only for the frameworks Kueue manages.

Written as the identity that would break the guarantee: the KubeRay operator's service account on a cluster where
Kueue does not manage Ray (a labelled RayCluster would otherwise get GPU pods outside every quota).
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import admission
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations as ki
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.tenancy_runner import TenancyRunner
from ansible_collections.gpuaas.platform.plugins.modules.tenants import TENANTS_ARGUMENT_SPEC

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "playbooks", "inventory", "lab", "group_vars", "all",
                       "tenants.yml")
KUBERAY = "system:serviceaccount:ray-system:kuberay-operator"
# Kueue on this cluster: the builtin kinds and JobSet, no Ray.
WITHOUT_RAY = ["batch/job", "pod", "deployment", "statefulset", "jobset.x-k8s.io/jobset"]


def _variables(policy):
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def _policy(frameworks):
    settings = admission.AdmissionSettings(kueue_frameworks=frameworks)
    policy, _binding = admission.admission_policy(settings, frameworks=settings.integrations())
    return policy


def test_kuberay_operator_is_not_trusted_when_kueue_does_not_manage_ray():
    by_controller = _variables(_policy(WITHOUT_RAY))["byController"]
    assert KUBERAY not in by_controller
    # the operators of managed frameworks stay trusted (JobSet, and the Job controller that runs its Jobs)
    assert "system:serviceaccount:jobset-system:jobset-controller-manager" in by_controller
    assert "system:serviceaccount:kube-system:job-controller" in by_controller
    # an identity the mapping does not know (an admin's own operator) is trusted whatever Kueue manages
    assert ki.trusted_controllers(["system:serviceaccount:x:own-operator", KUBERAY], WITHOUT_RAY) == [
        "system:serviceaccount:x:own-operator"]
    # and the KubeRay operator is trusted again as soon as one Ray framework is managed
    assert KUBERAY in _variables(_policy(WITHOUT_RAY + ["ray.io/raycluster"]))["byController"]


def test_every_default_controller_is_tied_to_frameworks_kueue_knows():
    for identity in admission.DEFAULT_WORKLOAD_CONTROLLERS:
        assert identity in ki.CONTROLLER_FRAMEWORKS, identity
        assert not ki.unknown(ki.CONTROLLER_FRAMEWORKS[identity]), identity


def test_queue_label_rule_does_not_list_ray_kinds():
    is_framework = _variables(_policy(WITHOUT_RAY))["isFramework"]
    assert is_framework == "variables.gk in ['jobset.x-k8s.io/JobSet']"
    assert "ray.io" not in is_framework


def test_raycluster_gpu_templates_are_refused_with_what_to_do():
    policy = _policy(WITHOUT_RAY)
    variables = _variables(policy)
    assert "'ray.io/RayCluster'" in variables["isUnmanaged"] and "'jobset.x-k8s.io/JobSet'" not in variables["isUnmanaged"]
    # a bare GPU Job would otherwise be run by a trusted Job controller outside Kueue: batch/job is managed here
    assert "'batch/Job'" not in variables["isUnmanaged"]
    # the RayCluster's head and worker pod templates are read for GPUs
    ray_specs = variables["unmanagedPodSpecs"]
    assert "variables.gk == 'ray.io/RayCluster' ? (has(object.spec) && has(object.spec.headGroupSpec)" in ray_specs
    assert "object.spec.workerGroupSpecs.map(g, g.template.spec)" in ray_specs
    assert "object.spec.rayClusterSpec.headGroupSpec.template.spec" in ray_specs  # RayJob
    assert variables["unmanagedWantsGpu"].startswith("variables.unmanagedPodSpecs.exists(s, ")
    assert "nvidia.com/" in variables["unmanagedWantsGpu"]
    rule = policy["spec"]["validations"][-1]
    assert rule["expression"] == ("!variables.isTenant || !variables.isUnmanaged || !variables.unmanagedWantsGpu || "
                                  "variables.byController")
    # the kuberay operator is not byController here: its own RayClusters are refused as well
    assert KUBERAY not in variables["byController"]
    message = rule["messageExpression"]
    assert "Kueue does not manage ' + request.kind.kind" in message
    assert "enable its framework in gpuaas_kueue_integrations" in message
    assert "Kueue manages: Job, Pod, Deployment, StatefulSet, JobSet" in message
    assert "run the work as a kind Kueue manages with the label kueue.x-k8s.io/queue-name" in message
    matched = {(g, r) for rule_ in policy["spec"]["matchConstraints"]["resourceRules"]
               for g in rule_["apiGroups"] for r in rule_["resources"]}
    assert ("ray.io", "rayclusters") in matched


def test_default_is_every_framework_and_adds_no_rule():
    default, _binding = admission.admission_policy()
    explicit = _policy(ki.known_frameworks())
    assert default == explicit
    assert "isUnmanaged" not in _variables(default)
    assert len(default["spec"]["validations"]) == 11
    assert admission.AdmissionSettings().integrations() is ki.INTEGRATIONS


def test_unmanaged_batch_job_with_gpus_is_refused_when_only_pods_are_managed():
    variables = _variables(_policy(["pod"]))
    assert "'batch/Job'" in variables["isUnmanaged"]
    assert "system:serviceaccount:kube-system:job-controller" not in variables["byController"]


def _model():
    with open(EXAMPLE) as handle:
        inv = yaml.safe_load(handle)
    return TenantModel.from_inventory(inv, None)


def _runner(client=None, **params):
    base = {k: v.get("default") for k, v in TENANTS_ARGUMENT_SPEC.items()}
    base.update(params)
    return TenancyRunner(client=client, params=base)


def test_tenants_module_option_drives_the_policy():
    assert "kueue_frameworks" in TENANTS_ARGUMENT_SPEC
    desired = _runner(kueue_frameworks=WITHOUT_RAY).desired_objects(_model(), "kubernetes", None, None)
    policy = [o for o in desired if o["kind"] == "ValidatingAdmissionPolicy"][0]
    assert KUBERAY not in _variables(policy)["byController"]
    # left unset: byte-identical to the policy of earlier releases
    default = _runner().desired_objects(_model(), "kubernetes", None, None)
    assert default == tenancy.desired_objects(_model(), "kubernetes", None, None, "keda")


def test_unknown_framework_is_refused_with_the_known_names():
    with pytest.raises(GpuaasError) as err:
        _runner(kueue_frameworks=["ray.io/raycluster", "ray.io/raycluters"]).admission_settings()
    assert "ray.io/raycluters" in str(err.value)
    assert "ray.io/raycluster" in err.value.hint


class _Cluster:
    """Serves the kinds of every known framework but Ray's (Kueue's auto list then has no Ray)."""

    def resource(self, api_version, kind):
        if api_version.startswith("ray.io/"):
            raise GpuaasError("%s %s is not served by the cluster" % (api_version, kind))
        return object()


def test_auto_resolves_by_the_served_kinds_as_the_kueue_role_does():
    runner = _runner(_Cluster(), kueue_frameworks=["auto"])
    settings = runner.admission_settings("kubernetes")
    assert "ray.io/raycluster" not in settings.kueue_frameworks
    assert "jobset.x-k8s.io/jobset" in settings.kueue_frameworks
    policy = admission.admission_policy(settings, frameworks=settings.integrations())[0]
    assert KUBERAY not in _variables(policy)["byController"]
    assert "'ray.io/RayCluster'" in _variables(policy)["isUnmanaged"]
    # on OpenShift, auto leaves out what the Red Hat operand cannot carry (as the kueue role does); the default
    # operator 1.4's enum has RayService (1.3's had not: kueue_integrations.OPENSHIFT_OPERAND_LIMITS)
    everything = _runner(type("Everything", (), {"resource": lambda self, av, kind: object()})(), kueue_frameworks=["auto"])
    assert "ray.io/rayservice" in everything.admission_settings("openshift").kueue_frameworks
    assert "ray.io/rayservice" in everything.admission_settings("kubernetes").kueue_frameworks


def test_pods_are_checked_for_gpus_even_when_kueue_does_not_manage_them():
    # without the pod framework a bare GPU Pod (not gated by Kueue) must still be seen, so that rule 4 refuses it
    pod_specs = _variables(_policy(["batch/job"]))["podSpecs"]
    assert pod_specs.startswith("variables.gk == '/Pod' ? [object.spec] : ")
