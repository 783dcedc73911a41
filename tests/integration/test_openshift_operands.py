# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The OpenShift operands against their real schemas, on the OpenShift-flavoured variant lab (issue 23).

The lab's OLM SIMULATOR (lab/simulators/olm_simulator.py) installs each operator's operand CRD from lab/crds/ (the
upstream schema of that operator version). These tests prove the lab can say no, and that the collection does not
make it:

- as the admin, straight to the API server: a Kueue operand with a framework outside the Red Hat enum, with more
  frameworks than the cap, or not named ``cluster`` is refused (operator 1.3: RayService refused, cap 14; operator
  1.4, the collection's default channel: RayService accepted, SparkApplication too, cap 18);
- the collection (playbooks/install.yml) refuses such a Kueue setting before its first write;
- the operands the install roles write on OpenShift (Kueue, KedaController, NodeFeatureDiscovery, ClusterPolicy)
  are accepted by those schemas and converge (second run changed=0).
"""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

REPO = Path(__file__).resolve().parents[2]
SIMULATOR = REPO / "lab" / "simulators" / "olm_simulator.py"
INSTALL = REPO / "playbooks" / "install.yml"
OLM = "operators.coreos.com/v1alpha1"
SIM_LABEL = "lab.gpuaas.io/simulated-by=olm-simulator"
KUEUE = "kueue.openshift.io/v1"
ID = uuid.uuid4().hex[:5]
PREFIX = "itest-osop-%s" % ID

# The frameworks enums of openshift/kueue-operator manifests/kueue.openshift.io_kueues.yaml, written from that file:
# release-1.3 (kueue-operator.v1.3.1) and release-1.4 (kueue-operator.v1.4.1).
ENUM_1_3 = ["BatchJob", "RayJob", "RayCluster", "JobSet", "MPIJob", "PaddleJob", "PyTorchJob", "TFJob", "TrainJob",
            "XGBoostJob", "JaxJob", "AppWrapper", "Pod", "Deployment", "StatefulSet", "LeaderWorkerSet"]
ENUM_1_4 = ["BatchJob", "RayJob", "RayCluster", "RayService", "JobSet", "MPIJob", "PaddleJob", "PyTorchJob", "TFJob",
            "TrainJob", "XGBoostJob", "JaxJob", "AppWrapper", "Pod", "Deployment", "StatefulSet", "LeaderWorkerSet",
            "SparkApplication"]


# ---------------------------------------------------------------------------------------------- helpers
def get(kube, api_version, kind, name, namespace=None):
    try:
        return kube.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=namespace).to_dict()
    except (NotFoundError, ResourceNotFoundError):
        return None


def delete(kube, api_version, kind, name, namespace=None):
    try:
        kube.resources.get(api_version=api_version, kind=kind).delete(name=name, namespace=namespace)
    except (NotFoundError, ResourceNotFoundError):
        pass


def simulator_cmd(lab, *args) -> list:
    tools = lab.dir / "lab-tools.kubeconfig"
    return [str(REPO / ".venv" / "bin" / "python"), str(SIMULATOR),
            "--kubeconfig", str(tools) if tools.exists() else lab.kubeconfig, *args]


def simulated_crds(kube) -> set:
    crds = kube.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    return {c["metadata"]["name"] for c in crds.get(label_selector=SIM_LABEL).to_dict()["items"]}


def remove_simulated_crds(kube, keep: set) -> None:
    for name in simulated_crds(kube) - keep:
        delete(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", name)


def subscribe(kube, lab, package: str, namespace: str, starting_csv: str | None = None, *sim_args: str) -> None:
    """A Subscription as an admin would write it, then one OLM SIMULATOR pass (InstallPlan, CSV, operand CRDs)."""
    ns_api = kube.resources.get(api_version="v1", kind="Namespace")
    if get(kube, "v1", "Namespace", namespace) is None:
        ns_api.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    # the channel of the simulated catalog (lab/simulators/olm_simulator.py KNOWN_PACKAGES); another is ResolutionFailed
    channel = "stable"
    if package == "kueue-operator":
        channel = "stable-v1.3" if (starting_csv or "").startswith("kueue-operator.v1.3") else "stable-v1.4"
    spec = {"name": package, "channel": channel, "source": "redhat-operators",
            "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Automatic"}
    if starting_csv:
        spec["startingCSV"] = starting_csv
    kube.resources.get(api_version=OLM, kind="Subscription").create(body={
        "apiVersion": OLM, "kind": "Subscription", "metadata": {"name": package, "namespace": namespace}, "spec": spec})
    sim = subprocess.run(simulator_cmd(lab, "--once", *sim_args), timeout=180, capture_output=True, text=True, check=False)
    assert sim.returncode == 0, sim.stdout + sim.stderr


def unsubscribe(kube, package: str, namespace: str) -> None:
    delete(kube, OLM, "Subscription", package, namespace)
    for kind in ("ClusterServiceVersion", "InstallPlan"):
        res = kube.resources.get(api_version=OLM, kind=kind)
        for obj in res.get(namespace=namespace).to_dict()["items"]:
            delete(kube, OLM, kind, obj["metadata"]["name"], namespace)


def kueue_operand(frameworks, name="cluster") -> dict:
    return {"apiVersion": KUEUE, "kind": "Kueue", "metadata": {"name": name},
            "spec": {"managementState": "Managed", "config": {"integrations": {"frameworks": frameworks}}}}


def apply_as_admin(kube, body) -> str | None:
    """Server-side apply ``body`` as the test (the lab admin); None when accepted (then removed again), else the
    API server's refusal message."""
    res = kube.resources.get(api_version=body["apiVersion"], kind=body["kind"])
    try:
        res.server_side_apply(body=body, field_manager="itest-osop")
    except ApiException as exc:
        # 422: schema/CEL validation; 500 "failed to create typed patch object": server-side apply itself refuses a
        # list that breaks its x-kubernetes-list-type (duplicates in a set) before validation runs
        assert exc.status == 422 or (exc.status == 500 and "typed patch" in exc.body), (exc.status, exc.body)
        return json.loads(exc.body)["message"]
    delete(kube, body["apiVersion"], body["kind"], body["metadata"]["name"])
    return None


def crd_schema(kube, name: str) -> dict:
    crd = get(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    assert crd is not None, "CRD %s not installed by the OLM simulator" % name
    return crd


# ---------------------------------------------------------------------------------------------- the lab says no
@pytest.fixture
def kueue_operator(variant_kube, variant_lab):
    """Install kueue-operator through the OLM simulator at the version the test asks for; removed afterwards."""
    before = simulated_crds(variant_kube)
    namespace = "%s-kueue-%s" % (PREFIX, uuid.uuid4().hex[:4])  # one per test: the last one may still be terminating
    # the variant lab's own operand (its Kueue's, written by the collection at lab-up) would merge with the tests' (a
    # set under server-side apply): removed first; the lab's Kueue keeps its last Configuration (docs/lab.md)
    delete(variant_kube, KUEUE, "Kueue", "cluster")

    def _install(starting_csv=None):
        unsubscribe(variant_kube, "kueue-operator", namespace)
        subscribe(variant_kube, variant_lab, "kueue-operator", namespace, starting_csv)
        return crd_schema(variant_kube, "kueues.kueue.openshift.io")

    yield _install
    delete(variant_kube, KUEUE, "Kueue", "cluster")
    unsubscribe(variant_kube, "kueue-operator", namespace)
    delete(variant_kube, "v1", "Namespace", namespace)
    remove_simulated_crds(variant_kube, before)


def test_kueue_1_3_operand_schema_refuses_rayservice_and_more_than_14(variant_kube, kueue_operator):
    crd = kueue_operator("kueue-operator.v1.3.1")
    assert crd["metadata"]["annotations"]["lab.gpuaas.io/crd-source"] == "kueues.kueue.openshift.io@1.3.yaml"
    assert "x-kubernetes-preserve-unknown-fields" not in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    refused = apply_as_admin(variant_kube, kueue_operand(["BatchJob", "RayService"]))
    assert refused and 'Unsupported value: "RayService"' in refused, refused
    refused = apply_as_admin(variant_kube, kueue_operand(ENUM_1_3[:15]))
    assert refused and "must have at most 14 items" in refused, refused
    refused = apply_as_admin(variant_kube, kueue_operand(["BatchJob", "SparkApplication"]))
    assert refused and 'Unsupported value: "SparkApplication"' in refused, refused
    refused = apply_as_admin(variant_kube, kueue_operand(["BatchJob"], name="not-cluster"))
    assert refused and "Kueue is a singleton" in refused, refused
    # the boundary: 14 distinct names of the enum are accepted
    assert apply_as_admin(variant_kube, kueue_operand(ENUM_1_3[:14])) is None


def test_kueue_1_4_operand_schema_the_collections_default_channel(variant_kube, kueue_operator):
    crd = kueue_operator()  # no startingCSV: the newest bundle, as on channel stable-v1.4
    assert crd["metadata"]["annotations"]["lab.gpuaas.io/crd-source"] == "kueues.kueue.openshift.io.yaml"

    refused = apply_as_admin(variant_kube, kueue_operand(["BatchJob", "Notebook"]))
    assert refused and 'Unsupported value: "Notebook"' in refused, refused
    refused = apply_as_admin(variant_kube, kueue_operand(["BatchJob", "BatchJob"]))
    assert refused and 'duplicate entries for key [="BatchJob"]' in refused, refused  # a set
    refused = apply_as_admin(variant_kube, kueue_operand([]))
    assert refused and "should have at least 1 items" in refused, refused
    # 1.4 takes every name of its enum (18, its cap), RayService and SparkApplication included
    assert apply_as_admin(variant_kube, kueue_operand(ENUM_1_4)) is None


def test_the_simulator_never_replaces_the_labs_real_cluster_policy_crd(variant_kube, variant_lab):
    bundles = variant_lab.dir / "olm-bundles"
    if not (bundles / "gpu-operator-certified").is_dir():
        pytest.skip("the variant lab has no GPU Operator bundle (lab/build/charts.sh not built)")
    before = crd_schema(variant_kube, "clusterpolicies.nvidia.com")
    namespace = PREFIX + "-gpu"
    try:
        subscribe(variant_kube, variant_lab, "gpu-operator-certified", namespace, None, "--bundle-dir", str(bundles))
        csv_name = get(variant_kube, OLM, "Subscription", "gpu-operator-certified", namespace)["status"]["installedCSV"]
        csv = get(variant_kube, OLM, "ClusterServiceVersion", csv_name, namespace)
        owned = [o["name"] for o in csv["spec"]["customresourcedefinitions"]["owned"]]
        assert "clusterpolicies.nvidia.com" in owned  # the bundle does own it: the simulator had to leave it alone
        after = crd_schema(variant_kube, "clusterpolicies.nvidia.com")
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert "lab.gpuaas.io/simulated-by" not in (after["metadata"].get("labels") or {})
    finally:
        unsubscribe(variant_kube, "gpu-operator-certified", namespace)
        delete(variant_kube, "v1", "Namespace", namespace)


# ---------------------------------------------------------------------------------------------- the collection
def install_vars(**extra) -> dict:
    values = {
        "gpuaas_platform": "openshift",
        "gpuaas_install_wait_timeout": 120,
        "gpuaas_force_uninstall": True,
        "gpuaas_nfd_namespace": PREFIX + "-nfd",
        "gpuaas_gpu_operator_namespace": PREFIX + "-gpu",
        "gpuaas_gpu_operator_cluster_policy_name": PREFIX + "-policy",
        "gpuaas_gpu_operator_driver_enabled": False,
        "gpuaas_kueue_namespace": PREFIX + "-kueue",
        "gpuaas_cert_manager_namespace": PREFIX + "-cert-manager",
        "gpuaas_keda_namespace": PREFIX + "-keda",
        "gpuaas_keda_watch_namespaces": [PREFIX + "-serve"],
    }
    values.update(extra)
    return values


# The collection's upstream names for every framework the Red Hat operand knows, plus RayService (not in 1.3's enum).
EVERY_FRAMEWORK = ["batch/job", "pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset",
                   "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/pytorchjob",
                   "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/jaxjob",
                   "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice",
                   "workload.codeflare.dev/appwrapper"]


def test_install_refuses_an_operand_the_red_hat_kueue_would_refuse_before_any_write(variant_run_playbook,
                                                                                    variant_audit_writes):
    with variant_audit_writes() as window:
        # operator 1.3 (the stricter operand: no RayService, at most 14); 1.4 would take all 17
        run = variant_run_playbook(INSTALL, extra_vars=install_vars(
            gpuaas_kueue_integrations=EVERY_FRAMEWORK, gpuaas_kueue_olm_channel="stable-v1.3",
            gpuaas_kueue_olm_starting_csv="kueue-operator.v1.3.1"))
    assert run.rc != 0, run.explain()
    # both problems at once: the name outside the enum, and the count over the cap
    assert "ray.io/rayservice cannot be managed by the Red Hat build of Kueue" in run.stdout, run.explain()
    assert "takes at most 14" in run.stdout, run.explain()
    assert window.events == [], window.describe()  # not even the GPU Operator's namespace


def test_install_refuses_operators_older_than_the_compatibility_table_before_any_write(
        variant_run_playbook, variant_audit_writes):
    """GPU Operator v23.6 (a versioned channel), NFD 4.16 (a starting CSV) and Custom Metrics Autoscaler 2.13 (a
    starting CSV; its channel stable names no version): every one below docs/compatibility.md's floors; and a Kueue
    operand the Red Hat Kueue 1.3 would refuse (RayService outside its enum, 17 frameworks over its cap of 14): all
    five reported in one message by the one refusal task, nothing written. Versions written here from upstream's
    names, not from the code."""
    with variant_audit_writes() as window:
        run = variant_run_playbook(INSTALL, extra_vars=install_vars(
            gpuaas_gpu_operator_olm_channel="v23.6",
            gpuaas_nfd_olm_starting_csv="nfd.4.16.0-202409181642",
            gpuaas_keda_olm_starting_csv="custom-metrics-autoscaler.v2.13.1-427",
            gpuaas_kueue_integrations=EVERY_FRAMEWORK, gpuaas_kueue_olm_channel="stable-v1.3",
            gpuaas_kueue_olm_starting_csv="kueue-operator.v1.3.1"))
    assert run.rc != 0, run.explain()
    failed = [task["task"]["name"] for play in run.report.get("plays", []) for task in play.get("tasks", [])
              if any(host.get("failed") for host in task.get("hosts", {}).values())]
    # one refusal, install.yml's: not the Kueue preflight's first (the operators' then never checked)
    assert len(failed) == 1 and "all at once" in failed[0], failed
    for refused in ("gpuaas_gpu_operator_olm_channel v23.6 installs the NVIDIA GPU Operator 23.6",
                    "gpuaas_nfd_olm_starting_csv nfd.4.16.0-202409181642 installs the Node Feature Discovery 4.16",
                    "gpuaas_keda_olm_starting_csv custom-metrics-autoscaler.v2.13.1-427 installs the Custom Metrics "
                    "Autoscaler 2.13",
                    "ray.io/rayservice cannot be managed by the Red Hat build of Kueue", "takes at most 14"):
        assert refused in run.stdout, run.explain()
    assert "(docs/compatibility.md)" in run.stdout, run.explain()
    assert window.events == [], window.describe()  # not even the GPU Operator's namespace


def test_install_writes_operands_the_real_schemas_accept(variant_kube, variant_lab, variant_run_playbook):
    """The OLM path on the OpenShift-flavoured lab: Kueue operator 1.3 (the stricter schema) with the 14 frameworks
    its cap allows, the KEDA and NFD operands from their operators' alm-examples, the GPU Operator's ClusterPolicy."""
    bundles = variant_lab.dir / "olm-bundles"
    if not (bundles / "gpu-operator-certified").is_dir():
        pytest.skip("the variant lab has no GPU Operator bundle (lab/build/charts.sh not built)")
    fourteen = [f for f in EVERY_FRAMEWORK if f != "ray.io/rayservice"][:14]
    values = install_vars(gpuaas_kueue_integrations=fourteen, gpuaas_kueue_olm_channel="stable-v1.3",
                          gpuaas_kueue_olm_starting_csv="kueue-operator.v1.3.1")
    before = simulated_crds(variant_kube)
    sim = subprocess.Popen(simulator_cmd(variant_lab, "--interval", "1", "--bundle-dir", str(bundles)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        first = variant_run_playbook(INSTALL, extra_vars=values, timeout=900)
        assert first.rc == 0, first.explain()
        second = variant_run_playbook(INSTALL, extra_vars=values, timeout=900)
        assert second.rc == 0, second.explain()
        assert second.changed == 0, second.explain()

        crd = crd_schema(variant_kube, "kueues.kueue.openshift.io")
        assert crd["metadata"]["annotations"]["lab.gpuaas.io/crd-source"] == "kueues.kueue.openshift.io@1.3.yaml"
        kueue = get(variant_kube, KUEUE, "Kueue", "cluster")
        assert len(kueue["spec"]["config"]["integrations"]["frameworks"]) == 14
        assert set(kueue["spec"]["config"]["integrations"]["frameworks"]) <= set(ENUM_1_3)
        for name, source in (("kedacontrollers.keda.sh", "kedacontrollers.keda.sh.yaml"),
                             ("nodefeaturediscoveries.nfd.openshift.io", "nodefeaturediscoveries.nfd.openshift.io.yaml")):
            assert crd_schema(variant_kube, name)["metadata"]["annotations"]["lab.gpuaas.io/crd-source"] == source
        keda = get(variant_kube, "keda.sh/v1alpha1", "KedaController", "keda", PREFIX + "-keda")
        assert keda["spec"]["watchNamespace"] == PREFIX + "-serve"
        assert keda["spec"]["operator"]["logLevel"] == "info"  # from the operator's alm-examples, kept by the schema
        nfd = get(variant_kube, "nfd.openshift.io/v1", "NodeFeatureDiscovery", "nfd-instance", PREFIX + "-nfd")
        assert nfd["spec"]["operand"]["servicePort"] == 12000
        policy = get(variant_kube, "nvidia.com/v1", "ClusterPolicy", PREFIX + "-policy")
        assert policy["spec"]["driver"]["enabled"] is False

        gone = variant_run_playbook(INSTALL, extra_vars=dict(values, gpuaas_install_state="absent"), timeout=900)
        assert gone.rc == 0, gone.explain()
        assert get(variant_kube, KUEUE, "Kueue", "cluster") is None
    finally:
        sim.terminate()
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
        delete(variant_kube, "nvidia.com/v1", "ClusterPolicy", PREFIX + "-policy")
        delete(variant_kube, KUEUE, "Kueue", "cluster")
        for suffix in ("nfd", "gpu", "kueue", "cert-manager", "keda", "serve"):
            delete(variant_kube, "v1", "Namespace", "%s-%s" % (PREFIX, suffix))
        remove_simulated_crds(variant_kube, before)


def test_lab_crd_files_name_their_upstream():
    """Every lab/crds file says which upstream file and version it follows (the docs' table relies on it)."""
    files = sorted((REPO / "lab" / "crds").glob("*.yaml"))
    assert len(files) >= 4
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "# Follows " in text.split("apiVersion:", 1)[0], path.name
        crd = yaml.safe_load(text)
        assert crd["kind"] == "CustomResourceDefinition"
        assert path.name.split("@", 1)[0].removesuffix(".yaml") == crd["metadata"]["name"], path.name
