# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired objects of a MultiKueue fleet (issue 27), written by hand from Kueue v0.19.2's CRDs
(kueue.x-k8s.io_admissionchecks / _multikueueconfigs / _multikueueclusters, version v1beta2) and upstream's worker
role (site/static/examples/multikueue/create-multikueue-kubeconfig.sh at v0.19.2)."""

from __future__ import annotations

import base64
import json
import os
import glob

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import multikueue

OWNED = {"app.kubernetes.io/managed-by": "gpuaas.platform", "gpuaas.io/component": "multikueue"}
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()

INVENTORY = {
    "gpuaas_flavors": [{"name": "a100", "node_labels": {"gpu": "a100"}}],
    "gpuaas_cohorts": [{"name": "research"}],
    "gpuaas_tenants": [
        {"name": "vision", "namespaces": ["vision", "vision-dev"], "cohort": "research",
         "quotas": [{"flavor": "a100", "resources": {"nvidia.com/gpu": 12}, "borrowing_limit": {"nvidia.com/gpu": 4}}]},
    ],
    "gpuaas_clusters": {
        "manager": {"name": "hub", "auth": {"context": "hub"}},
        "workers": [
            {"name": "east", "auth": {"context": "east"}, "flavors": [{"name": "a100", "capacity": {"nvidia.com/gpu": 16}}]},
            {"name": "west", "auth": {"context": "west"}, "kueue_namespace": "kueue",
             "flavors": [{"name": "a100", "capacity": {"nvidia.com/gpu": 8}}]},
        ],
    },
}


@pytest.fixture(name="model")
def _model():
    return TenantModel.from_inventory(INVENTORY)


def _find(objs, kind, name, namespace=None):
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name
             and o["metadata"].get("namespace") == namespace]
    assert len(found) == 1, (kind, name, namespace, len(found))
    return found[0]


# -- the manager -------------------------------------------------------------------------------------------

def test_the_admission_check_points_at_the_fleet_config():
    assert multikueue.admission_check() == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "gpuaas-multikueue", "labels": OWNED},
        "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                 "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "gpuaas-multikueue"}}}


def test_manager_objects(model):
    kubeconfig = multikueue.worker_kubeconfig(model.fleet.worker("east"), "https://10.0.0.5:6443", CA, "tok-east")
    objs = multikueue.manager_objects(model, {"east": kubeconfig})
    assert _find(objs, "MultiKueueConfig", "gpuaas-multikueue") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
        "metadata": {"name": "gpuaas-multikueue", "labels": OWNED}, "spec": {"clusters": ["east", "west"]}}
    assert _find(objs, "MultiKueueCluster", "west") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
        "metadata": {"name": "west", "labels": OWNED},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "gpuaas-multikueue-west"}}}}
    # the Secret goes to the MANAGER's Kueue namespace; west has no kubeconfig yet -> no Secret for it
    secret = _find(objs, "Secret", "gpuaas-multikueue-east", "kueue-system")
    assert secret["type"] == "Opaque" and list(secret["data"]) == ["kubeconfig"]
    assert json.loads(base64.b64decode(secret["data"]["kubeconfig"])) == kubeconfig
    assert not [o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == "gpuaas-multikueue-west"]
    # the tenant's ClusterQueue: the declared (fleet) quota and limits, plus the admission check
    cq = _find(objs, "ClusterQueue", "vision")
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "gpuaas-multikueue"}]}
    assert cq["spec"]["cohortName"] == "research"
    assert cq["spec"]["resourceGroups"] == [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "12", "borrowingLimit": "4"}]}]}]
    # tenants submit on the manager: their namespaces and LocalQueues are there
    assert _find(objs, "LocalQueue", "default", "vision-dev")["spec"]["clusterQueue"] == "vision"


def test_the_worker_kubeconfig_has_token_and_ca_inline():
    east = TenantModel.from_inventory(INVENTORY).fleet.worker("east")
    assert multikueue.worker_kubeconfig(east, "https://east.example:6443", CA, "tok") == {
        "apiVersion": "v1", "kind": "Config", "current-context": "east", "preferences": {},
        "clusters": [{"name": "east", "cluster": {"server": "https://east.example:6443",
                                                  "certificate-authority-data": CA}}],
        "contexts": [{"name": "east", "context": {"cluster": "east", "user": "east-gpuaas-multikueue"}}],
        "users": [{"name": "east-gpuaas-multikueue", "user": {"token": "tok"}}]}


@pytest.mark.parametrize("server, ca, token, reason", [
    ("http://east:6443", CA, "tok", "server 'http://east:6443' is not an https:// URL"),
    ("https://East_Cluster:6443", CA, "tok", "server host 'east_cluster' is neither an IP address nor a DNS-1123 subdomain"),
    ("https://east:6443", "", "tok", "no CA data"),
    ("https://east:6443", "not base64!", "tok", "the CA data is not base64"),
    ("https://east:6443", CA, "", "no ServiceAccount token"),
])
def test_a_kubeconfig_kueue_would_refuse_is_refused_before_it_is_written(server, ca, token, reason):
    east = TenantModel.from_inventory(INVENTORY).fleet.worker("east")
    with pytest.raises(GpuaasError) as err:
        multikueue.worker_kubeconfig(east, server, ca, token)
    assert reason in str(err.value)
    assert "cannot build the MultiKueue kubeconfig of worker 'east'" in str(err.value)


def test_the_same_token_gives_the_same_secret_bytes():
    east = TenantModel.from_inventory(INVENTORY).fleet.worker("east")
    first = multikueue.kubeconfig_secret(east, "kueue-system", multikueue.worker_kubeconfig(east, "https://e:1", CA, "t"))
    again = multikueue.kubeconfig_secret(east, "kueue-system", multikueue.worker_kubeconfig(east, "https://e:1", CA, "t"))
    assert first == again


# -- a worker ----------------------------------------------------------------------------------------------

def test_worker_objects_carry_the_share_and_no_admission_check(model):
    east = multikueue.worker_objects(model, model.fleet.worker("east"))
    west = multikueue.worker_objects(model, model.fleet.worker("west"))
    # 12 GPUs over 16 : 8 -> 8 + 4; the borrowing limit stays on the manager
    for objs, share in ((east, "8"), (west, "4")):
        cq = _find(objs, "ClusterQueue", "vision")
        assert cq["spec"]["resourceGroups"] == [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": share}]}]}]
        assert cq["spec"]["cohortName"] == "research"
        assert "admissionChecksStrategy" not in cq["spec"]
        # the namespaces and LocalQueues mirror the manager's (MultiKueue creates the remote Workload there)
        assert _find(objs, "LocalQueue", "default", "vision")["spec"]["clusterQueue"] == "vision"
        assert not [o for o in objs if o["kind"] in ("AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster")]
    # the model itself is not changed by building a worker's view
    assert model.tenant("vision").quotas[0].resources == {"nvidia.com/gpu": "12"}


def test_worker_credentials_are_least_privilege(model):
    west = model.fleet.worker("west")
    objs = multikueue.worker_credentials(west, ["vision", "vision-dev"])
    subject = [{"kind": "ServiceAccount", "name": "gpuaas-multikueue", "namespace": "kueue"}]
    assert _find(objs, "ServiceAccount", "gpuaas-multikueue", "kueue")["metadata"]["labels"] == OWNED
    token = _find(objs, "Secret", "gpuaas-multikueue-token", "kueue")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "gpuaas-multikueue"}
    assert _find(objs, "ClusterRole", "gpuaas-multikueue-reader")["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    ]
    assert _find(objs, "ClusterRoleBinding", "gpuaas-multikueue-reader")["subjects"] == subject
    assert _find(objs, "ClusterRole", "gpuaas-multikueue-writer")["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["create", "delete", "update", "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]},
    ]
    # writes are bound only in the tenants' namespaces: never a ClusterRoleBinding to the writer role
    bindings = [(o["kind"], o["metadata"].get("namespace")) for o in objs if o["kind"].endswith("Binding")
                and o["roleRef"]["name"] == "gpuaas-multikueue-writer"]
    assert bindings == [("RoleBinding", "vision"), ("RoleBinding", "vision-dev")]
    assert not [o for o in objs if o.get("roleRef", {}).get("name") in ("cluster-admin", "admin", "edit")]


def test_ray_clusters_may_be_scaled_and_deployments_cannot_be_dispatched(model):
    west = model.fleet.worker("west")
    rules = _find(multikueue.worker_credentials(west, [], ["ray.io/raycluster"]), "ClusterRole",
                  "gpuaas-multikueue-writer")["rules"]
    assert rules[-1] == {"apiGroups": ["ray.io"], "resources": ["rayclusters"],
                         "verbs": ["create", "delete", "update", "patch"]}
    with pytest.raises(GpuaasError) as err:
        multikueue.worker_credentials(west, [], ["deployment"])
    assert "MultiKueue cannot dispatch deployment" in str(err.value)


def test_a_model_without_fleet_is_refused():
    inv = dict(INVENTORY)
    del inv["gpuaas_clusters"]
    with pytest.raises(GpuaasError):
        multikueue.manager_objects(TenantModel.from_inventory(inv))


# -- the CRDs the lab serves (Kueue v0.19.2), when the lab cache is there --------------------------------------

# the lab's copy, else the Kueue module in the Go module cache (the lab build downloads it)
_CRD_CANDIDATES = sorted(glob.glob(os.path.expanduser("~/.cache/gpuaas-lab/crds-*/share/crds/base"))) + [
    os.path.join(os.environ.get("GOMODCACHE") or os.path.expanduser("~/go/pkg/mod"),
                 "sigs.k8s.io/kueue@v0.19.2/config/components/crd/bases")]
CRD_DIRS = [d for d in _CRD_CANDIDATES if glob.glob(os.path.join(d, "kueue.x-k8s.io_multikueueclusters.yaml"))]


def _strict(schema):
    """The CRD schema as JSON Schema that refuses unknown fields (the API server would prune them silently) and
    with Go's inline regex flag moved where Python's re accepts it."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if isinstance(out.get("pattern"), str) and out["pattern"].startswith("^(?i)"):
        out["pattern"] = "(?i)^" + out["pattern"][5:]
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@pytest.mark.skipif(not CRD_DIRS, reason="the lab's Kueue CRDs are not built (lab/build); the integration test applies "
                                         "the objects to the real API server")
def test_the_fleet_objects_validate_against_kueues_crds(model):
    import jsonschema  # pylint: disable=import-outside-toplevel
    import yaml  # pylint: disable=import-outside-toplevel

    schemas = {}
    for path in glob.glob(os.path.join(CRD_DIRS[0], "kueue.x-k8s.io_*.yaml")):
        with open(path) as handle:
            crd = yaml.safe_load(handle)
        for version in crd["spec"]["versions"]:
            if version["name"] == "v1beta2":
                schemas[crd["spec"]["names"]["kind"]] = _strict(version["schema"]["openAPIV3Schema"])
    kubeconfig = multikueue.worker_kubeconfig(model.fleet.worker("east"), "https://10.0.0.5:6443", CA, "t")
    objs = multikueue.manager_objects(model, {"east": kubeconfig})
    objs += multikueue.worker_objects(model, model.fleet.worker("west"))
    checked = set()
    for obj in objs:
        if obj["apiVersion"] == "kueue.x-k8s.io/v1beta2":
            jsonschema.validate(obj["spec"] if "spec" in obj else {}, schemas[obj["kind"]]["properties"].get(
                "spec", {"type": "object"}))
            checked.add(obj["kind"])
    assert {"AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster", "ClusterQueue"} <= checked


def test_the_worker_token_secret_is_applied_after_its_service_account(model):
    """Kubernetes' token controller deletes a ServiceAccount token Secret whose ServiceAccount does not exist yet: the
    engine applies tier by tier, concurrently inside a tier, so the Secret must be in a later tier (found on the lab:
    the token Secret written beside its ServiceAccount was deleted 0.1 s later)."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kinds import tier_of

    objs = multikueue.worker_objects(model, model.fleet.worker("east"))
    token = [o for o in objs if o["kind"] == "Secret"
             and o.get("type") == "kubernetes.io/service-account-token"]
    account = [o for o in objs if o["kind"] == "ServiceAccount"]
    assert len(token) == 1 and len(account) == 1
    assert token[0]["metadata"]["annotations"]["kubernetes.io/service-account.name"] == account[0]["metadata"]["name"]
    assert tier_of("Secret") > tier_of("ServiceAccount")
