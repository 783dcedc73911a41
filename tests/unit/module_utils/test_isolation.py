# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 11: the one list of Kueue integrations, allowed_priorities/default_priority in the inventory contract,
the kueue role's rendering of the list (kueue_integrations_info)."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import kueue_integrations as ki
from ansible_collections.gpuaas.platform.plugins.modules import kueue_integrations_info as info

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "playbooks", "inventory", "lab", "group_vars", "all", "tenants.yml")

# What issue 11 asks Kueue to gate by default (upstream Kueue framework names).
REQUIRED = {"batch/job", "pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset",
            "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/pytorchjob", "ray.io/rayjob",
            "ray.io/raycluster", "workload.codeflare.dev/appwrapper"}


def inventory(**tenant_changes):
    with open(EXAMPLE) as handle:
        inv = yaml.safe_load(handle)
    inv["gpuaas_tenants"][0].update(tenant_changes)
    return inv


def test_the_list_covers_the_workload_kinds_users_run():
    assert REQUIRED <= set(ki.known_frameworks())
    assert len(set(ki.known_frameworks())) == len(ki.INTEGRATIONS)


def test_auto_enables_builtin_kinds_and_only_served_crds():
    assert ki.auto_frameworks([]) == ["batch/job", "pod", "deployment", "statefulset"]
    served = ["rayjobs.ray.io", "jobsets.jobset.x-k8s.io", "unrelated.example.com"]
    assert ki.auto_frameworks(served) == ["batch/job", "pod", "deployment", "statefulset",
                                          "jobset.x-k8s.io/jobset", "ray.io/rayjob"]


def test_openshift_operand_names():
    assert ki.openshift_names(["batch/job", "ray.io/rayjob", "leaderworkerset.x-k8s.io/leaderworkerset"]) == \
        ["BatchJob", "RayJob", "LeaderWorkerSet"]


# The enum of openshift/kueue-operator manifests/kueue.openshift.io_kueues.yaml (spec.config.integrations.frameworks),
# written from that file (release-1.3, maxItems 14; release-1.4 adds RayService and SparkApplication, maxItems 18),
# not from the collection's table.
RED_HAT_KUEUE_1_4_EXTRA = {"RayService", "SparkApplication"}
RED_HAT_KUEUE_FRAMEWORKS_ENUM = {"BatchJob", "RayJob", "RayCluster", "JobSet", "MPIJob", "PaddleJob", "PyTorchJob",
                                 "TFJob", "TrainJob", "XGBoostJob", "JaxJob", "AppWrapper", "Pod", "Deployment",
                                 "StatefulSet", "LeaderWorkerSet"}


def test_openshift_operand_stays_inside_the_red_hat_enum_and_cap():
    """Operator 1.3 (the stricter operand): no RayService, at most 14 frameworks."""
    every = ki.known_frameworks()
    assert set(ki.openshift_names(every, "1.3")) <= RED_HAT_KUEUE_FRAMEWORKS_ENUM
    # auto on a cluster serving every CRD: RayService cannot be expressed (left out, reported) and 16 > 14
    auto = ki.openshift_operand(every, auto=True, version="1.3")
    assert auto["not_expressible"] == ["ray.io/rayservice"] and "RayService" not in auto["frameworks"]
    assert len(auto["problems"]) == 1 and "at most 14" in auto["problems"][0]
    # asked for by name: an error naming it, and the way out (operator 1.4)
    named = ki.openshift_operand(["batch/job", "ray.io/rayservice"], auto=False, version="1.3")
    assert named["frameworks"] == ["BatchJob"] and len(named["problems"]) == 1
    assert "ray.io/rayservice cannot be managed by the Red Hat build of Kueue 1.3" in named["problems"][0]
    assert "stable-v1.4" in named["problems"][0]
    # 14 is accepted
    fourteen = [f for f in every if f != "ray.io/rayservice"][:14]
    assert ki.openshift_operand(fourteen, auto=False, version="1.3")["problems"] == []


def test_openshift_operand_of_operator_1_4_takes_rayservice_and_18():
    """Operator 1.4 (the collection's default channel stable-v1.4): RayService in the enum, at most 18."""
    every = ki.known_frameworks()
    assert set(ki.openshift_names(every)) <= RED_HAT_KUEUE_FRAMEWORKS_ENUM | RED_HAT_KUEUE_1_4_EXTRA
    operand = ki.openshift_operand(every, auto=False)
    assert operand["problems"] == [] and operand["not_expressible"] == [] and "RayService" in operand["frameworks"]
    assert len(every) == 17  # the collection knows 17 frameworks: under 1.4's cap of 18, over 1.3's 14


def test_openshift_operator_version_from_channel_and_csv():
    assert ki.openshift_operator_version() == "1.4"
    assert ki.openshift_operator_version("stable-v1.3") == "1.3"
    assert ki.openshift_operator_version("stable-v1.4") == "1.4"
    assert ki.openshift_operator_version("stable-v1.5") == "1.4"  # newer: 1.4's rules (the newest the lab knows)
    assert ki.openshift_operator_version("stable-v1.2") == "1.3"
    assert ki.openshift_operator_version("stable-v1.4", "kueue-operator.v1.3.1") == "1.3"  # the CSV wins
    assert ki.openshift_operator_version("stable") == "1.4"


class FakeClient:
    """Discovery of a cluster serving only the given api_version/kind pairs (besides Kubernetes' own)."""

    def __init__(self, served):
        self.served_kinds = set(served)

    def resource(self, api_version, kind):
        if (api_version, kind) not in self.served_kinds:
            raise GpuaasError("%s %s is not served" % (api_version, kind))
        return object()


def test_module_auto_and_explicit_lists():
    client = FakeClient({("ray.io/v1", "RayCluster"), ("workload.codeflare.dev/v1beta2", "AppWrapper")})
    auto = info.resolve(client, "auto")
    assert auto["frameworks"] == ["batch/job", "pod", "deployment", "statefulset", "ray.io/raycluster",
                                  "workload.codeflare.dev/appwrapper"]
    assert auto["openshift_frameworks"] == ["BatchJob", "Pod", "Deployment", "StatefulSet", "RayCluster", "AppWrapper"]
    assert auto["openshift_problems"] == [] and auto["openshift_not_expressible"] == []
    assert "ray.io/rayjob" in auto["not_served"] and "pod" not in auto["not_served"]
    explicit = info.resolve(client, ["ray.io/rayjob", "batch/job"])
    assert explicit["frameworks"] == ["batch/job", "ray.io/rayjob"]  # kept (Kueue waits for the CRD), reported
    assert explicit["not_served"] == ["ray.io/rayjob"]
    with pytest.raises(ValidationError, match="unknown Kueue framework"):
        info.resolve(client, ["batch/job", "ray.io/rayjobs"])


def test_allowed_priorities_are_checked_against_gpuaas_priorities():
    model = TenantModel.from_inventory(inventory(allowed_priorities=["batch"]))
    assert model.tenants[0].allowed_priorities == ["batch"]
    assert TenantModel.from_inventory(inventory()).tenants[1].allowed_priorities is None  # as written: unset
    assert TenantModel.from_inventory(inventory(allowed_priorities=[])).tenants[0].allowed_priorities == []
    with pytest.raises(InventoryError) as err:
        TenantModel.from_inventory(inventory(allowed_priorities=["bach"]))
    assert "gpuaas_tenants[0].allowed_priorities[0]" in str(err.value.problems)
    assert "did you mean 'batch'" in str(err.value.problems)


def test_default_priority_is_refused_with_the_reason():
    with pytest.raises(InventoryError) as err:
        TenantModel.from_inventory(inventory(default_priority="batch"))
    text = str(err.value.problems)
    assert "gpuaas_tenants[0].default_priority" in text and "was removed" in text
    assert "kueue.x-k8s.io/priority-class" in text


def test_admission_settings_from_options_replace_only_given_lists():
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy

    settings = tenancy.AdmissionSettings.from_options({"kueue_users": ["lab:kueue"], "platform_namespaces": None})
    assert settings.kueue_users == ["lab:kueue"]
    assert settings.platform_namespaces == list(tenancy.DEFAULT_PLATFORM_NAMESPACES)
    assert settings.workload_controllers == list(tenancy.DEFAULT_WORKLOAD_CONTROLLERS)
    assert tenancy.AdmissionSettings.from_options(None).automation_groups == ["system:masters"]


def _lab_script(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location("lab_" + name.replace("/", "_"), os.path.join(ROOT, "lab", "components", name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lab_kueue_overlays_only_plumbing():
    config = _lab_script("kueue/config.py")
    role = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "health": {"healthProbeBindAddress": ":8081"}, "metrics": {"bindAddress": ":8443",
                                                                       "enableClusterQueueResources": True},
            "webhook": {"port": 9443}, "leaderElection": {"leaderElect": True, "resourceName": "x"},
            "internalCertManagement": {"enable": True, "webhookServiceName": "s"},
            "manageJobsWithoutQueueName": True, "managedJobsNamespaceSelector": {"matchLabels": {"a": "b"}},
            "integrations": {"frameworks": ["batch/job", "pod"]}, "fairSharing": {"preemptionStrategies": ["X"]}}
    import copy
    out = config.apply(copy.deepcopy(role), config.overlays(8681, 8680, 10043, "/certs"))
    for key in ("manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "integrations", "fairSharing"):
        assert out[key] == role[key]
    assert out["metrics"] == {"bindAddress": "127.0.0.1:8680", "enableClusterQueueResources": True}
    assert out["webhook"] == {"port": 10043, "host": "127.0.0.1", "certDir": "/certs"}
    assert out["leaderElection"] == {"leaderElect": False, "resourceName": "x"}
    assert out["featureGates"] == {"VisibilityOnDemand": False}
    # every overlay is documented in docs/lab.md
    lab_md = open(os.path.join(ROOT, "docs", "lab.md")).read()
    for path, _value, _why in config.overlays(1, 2, 3, "/c"):
        assert "`%s`" % path in lab_md or "`%s`" % path.rsplit(".", 1)[-1] in lab_md, path


def test_lab_keda_takes_the_role_settings_from_the_operator_deployment():
    settings = _lab_script("keda/settings.py")
    deployment = {"metadata": {"namespace": "gpuaas-keda"}, "spec": {"template": {"spec": {"containers": [
        {"name": "keda-operator", "env": [{"name": "WATCH_NAMESPACE", "value": "a,b"},
                                          {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {}}}]}]}}}}
    assert settings.settings(deployment) == {"WATCH_NAMESPACE": "a,b", "KEDA_NAMESPACE": "gpuaas-keda"}
