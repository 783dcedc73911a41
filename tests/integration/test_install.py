# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/install.yml against the real lab (issue 6).

- platform detection (read-only);
- the Helm path with the real upstream charts from local chart directories (no network), second run
  changed=0, check mode writes nothing, uninstall;
- the uninstall guard with a really busy ClusterQueue (the lab's real Kueue admits the Job);
- the OLM path (gpuaas_platform forced to openshift) with the lab's OLM and GPU Operator simulators;
- on the OpenShift-flavoured variant lab: a channel the catalog lacks stops the module within the resolution grace
  (OLM SIMULATOR's ResolutionFailed), and an install over an OperatorHub (console) GPU Operator reuses its
  OperatorGroup, merges into its ClusterPolicy without resetting hand-tuned fields, stops with the field list when the
  inventory disagrees (nothing written), and adopts on request.

Everything is created under the prefix ``itest-install`` and removed at the end. The charts are installed
next to the lab's own Kueue/KEDA with the lab post-renderer, which drops the charts' CRDs, webhook
configurations and APIServices: their pods only run on fake nodes and must never intercept anyone's requests.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from conftest import local_play, wait_until

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "playbooks" / "install.yml"
POST_RENDERER = REPO / "tests" / "integration" / "files" / "install" / "lab_post_renderer.sh"
PREFIX = "itest-install"
OLM = "operators.coreos.com/v1alpha1"
SIM_LABEL = "lab.gpuaas.io/simulated-by"


# ---------------------------------------------------------------------------------------------- helpers
def lab_env(lab) -> dict:
    env = dict(os.environ)
    path = "%s:%s:%s" % (lab.dir / "bin", REPO / ".venv" / "bin", os.environ.get("PATH", ""))
    env.update({"KUBECONFIG": lab.kubeconfig, "PATH": path})
    return env


def charts_dir(lab) -> Path:
    """The lab's upstream charts (lab/build/charts.sh output); built into a temp dir when the lab has none."""
    candidates = [lab.dir / "charts"] + [Path(p) for p in sorted(
        glob.glob(os.path.expanduser("~/.cache/gpuaas-lab/charts-*/share/charts")), key=os.path.getmtime, reverse=True)]
    for cand in candidates:
        if all((cand / name / "Chart.yaml").exists() for name in ("gpu-operator", "kueue", "keda")):
            return cand
    out = Path(tempfile.mkdtemp(prefix="gpuaas-charts-"))
    env = dict(os.environ, OUT=str(out))
    for line in (REPO / "lab" / "versions.env").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            env[key] = value
    subprocess.run(["bash", str(REPO / "lab" / "build" / "charts.sh")], check=True, env=env, capture_output=True)
    return out / "share" / "charts"


def olm_bundles(charts: Path) -> Path:
    return charts.resolve().parent / "olm-bundles"


def helm_releases(lab) -> dict:
    out = subprocess.run(["helm", "list", "-A", "-o", "json"], capture_output=True, text=True, env=lab_env(lab),
                         check=True)
    return {r["name"]: r for r in json.loads(out.stdout or "[]")}


def get(kube, api_version, kind, name, namespace=None):
    try:
        return kube.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=namespace).to_dict()
    except (NotFoundError, ResourceNotFoundError):
        return None


def items(kube, api_version, kind, namespace=None, label_selector=None):
    try:
        res = kube.resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        return []
    return res.get(namespace=namespace, label_selector=label_selector).to_dict()["items"]


def delete_namespaces(kube, names):
    ns_api = kube.resources.get(api_version="v1", kind="Namespace")
    for name in names:
        try:
            ns_api.delete(name=name)
        except NotFoundError:
            pass


def release_hooks_left(kube, release_prefix):
    """Cluster-wide admission/aggregation objects that belong to one of our releases (must be none)."""
    left = []
    for api_version, kind in (("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
                              ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
                              ("apiregistration.k8s.io/v1", "APIService")):
        for obj in items(kube, api_version, kind):
            annotations = obj["metadata"].get("annotations") or {}
            if str(annotations.get("meta.helm.sh/release-name", "")).startswith(release_prefix):
                left.append("%s %s" % (kind, obj["metadata"]["name"]))
    return left


def our_writes(window) -> list:
    """Writes in an audit window that this module's playbook runs could have made.

    Other engineers' tests write to the shared lab at the same time as the lab admin; keep the events on
    our prefixed objects, the fixed cluster-scoped names the install roles manage, nodes, and anything Helm did.
    """
    fixed = {("clusterpolicies", "cluster-policy"), ("kueues", "cluster"), ("clusterpolicies", POLICY)}
    out = []
    for ev in window.events:
        ref = ev.get("objectRef") or {}
        if (str(ref.get("namespace", "")).startswith(PREFIX) or str(ref.get("name", "")).startswith(PREFIX)
                or (ref.get("resource"), ref.get("name")) in fixed or ref.get("resource") == "nodes"
                or str(ev.get("userAgent", "")).lower().startswith("helm")):
            out.append(ev)
    return out


def describe(events) -> str:
    return "\n".join("%s %s by %s (%s)" % (e["verb"], e["requestURI"], e["user"].get("username"), e.get("userAgent"))
                     for e in events)


class Simulator:
    """A lab simulator run in loop mode for the duration of a test (stopped by its own pid).

    It uses the lab's tools identity when there is one (its writes are the lab's, not the code under test's).
    """

    def __init__(self, lab, script, *args):
        tools = lab.dir / "lab-tools.kubeconfig"
        self.log = tempfile.NamedTemporaryFile(prefix="itest-install-%s-" % script, suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "python"), str(REPO / "lab" / "simulators" / script),
             "--kubeconfig", str(tools) if tools.exists() else lab.kubeconfig, "--interval", "1", *args],
            stdout=self.log, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        self.log.flush()
        with open(self.log.name, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-40:])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        os.unlink(self.log.name)


# ---------------------------------------------------------------------------------------------- detection
def test_platform_detection_matches_the_lab(lab, run_playbook):
    run = run_playbook(local_play("""
  tasks:
    - name: Detect
      gpuaas.platform.platform_info:
      register: info
    - name: Detect forced
      gpuaas.platform.platform_info:
        platform: openshift
"""))
    assert run.rc == 0, run.explain()
    info = run.task_results("Detect")[0]
    assert info["detected_platform"] == ("openshift" if lab.flavor == "openshift" else "kubernetes")
    assert info["platform"] == info["detected_platform"]
    assert info["kubernetes_version"].startswith("v1.35")
    assert info["olm"] is True and info["prometheus_operator"] is True
    assert info["gpu_operator"] is True and info["keda"] is True
    assert info["kueue_api_version"] == lab.kueue_api
    assert info["changed"] is False
    forced = run.task_results("Detect forced")[0]
    assert forced["platform"] == "openshift" and forced["detected_platform"] == info["detected_platform"]


# ---------------------------------------------------------------------------------------------- Helm path
HELM_NS = {"gpu": PREFIX + "-gpu-operator", "kueue": PREFIX + "-kueue", "keda": PREFIX + "-keda"}
TS_FLAVOR = PREFIX + "-h100"
TS_NODE = "gpu-h100-1"
DP_LABEL = "nvidia.com/device-plugin.config"


def helm_vars(lab, charts: Path, **extra) -> dict:
    values = {
        "gpuaas_platform": "kubernetes",
        "gpuaas_install_wait_timeout": 240,
        "gpuaas_charts_dir": str(charts),
        "gpuaas_helm_post_renderer": str(POST_RENDERER),
        "gpuaas_force_uninstall": True,  # other tests may hold admitted workloads meanwhile
        # one shared lab node, labelled for the test and unlabelled in cleanup
        "gpuaas_flavors": [{"name": TS_FLAVOR, "node_labels": {
            "kubernetes.io/hostname": TS_NODE, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}],
        "gpuaas_gpu_operator_namespace": HELM_NS["gpu"],
        "gpuaas_gpu_operator_helm_release": PREFIX + "-gpu-operator",
        "gpuaas_gpu_operator_driver_enabled": False,
        "gpuaas_gpu_operator_mig_strategy": "mixed",
        "gpuaas_gpu_operator_time_slicing": [{"flavor": TS_FLAVOR, "replicas": 2}],
        "gpuaas_gpu_operator_nfd_enabled": False,
        "gpuaas_kueue_namespace": HELM_NS["kueue"],
        "gpuaas_kueue_helm_release": PREFIX + "-kueue",
        "gpuaas_kueue_integrations": ["batch/job", "ray.io/rayjob"],
        "gpuaas_keda_namespace": HELM_NS["keda"],
        "gpuaas_keda_helm_release": PREFIX + "-keda",
        "gpuaas_keda_watch_namespaces": [PREFIX + "-serve"],
        # the chart names its cluster-scoped RBAC after operator.name: unique names, no clash with another KEDA
        "gpuaas_keda_helm_values": {"crds": {"install": False}, "webhooks": {"enabled": False},
                                    "operator": {"name": PREFIX + "-keda-operator"},
                                    "metricsServer": {"name": PREFIX + "-keda-metrics-apiserver"}},
    }
    values.update(extra)
    return values


@pytest.fixture
def helm_cleanup(lab, kube):
    yield
    env = lab_env(lab)
    for name, ns in ((PREFIX + "-gpu-operator", HELM_NS["gpu"]), (PREFIX + "-kueue", HELM_NS["kueue"]),
                     (PREFIX + "-keda", HELM_NS["keda"])):
        subprocess.run(["helm", "uninstall", name, "-n", ns, "--wait", "--timeout", "120s"], env=env,
                       capture_output=True, check=False)
    delete_namespaces(kube, list(HELM_NS.values()) + [PREFIX + "-serve"])
    node = get(kube, "v1", "Node", TS_NODE)
    if node and (node["metadata"].get("labels") or {}).get(DP_LABEL) == TS_FLAVOR:
        kube.resources.get(api_version="v1", kind="Node").patch(
            name=TS_NODE, body={"metadata": {"labels": {DP_LABEL: None}}}, content_type="application/merge-patch+json")
    assert release_hooks_left(kube, PREFIX) == []


def test_helm_path_from_local_charts(lab, kube, run_playbook, audit_writes, helm_cleanup):
    charts = charts_dir(lab)
    # The GPU Operator chart's ClusterPolicy is always named cluster-policy (cluster-scoped): another
    # GPU Operator release on the lab (e.g. from `make demo`) makes a second one impossible.
    existing = get(kube, "nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    assert existing is None, ("ClusterPolicy cluster-policy already exists (release %s): this test needs a lab "
                              "without another GPU Operator Helm release" % (existing["metadata"].get(
                                  "annotations") or {}).get("meta.helm.sh/release-name"))
    sim = Simulator(lab, "gpu_operator_simulator.py")
    try:
        first = run_playbook(INSTALL, extra_vars=helm_vars(lab, charts), timeout=900)
        assert first.rc == 0, first.explain()
        assert first.changed > 0
        second = run_playbook(INSTALL, extra_vars=helm_vars(lab, charts), timeout=900)
        assert second.rc == 0, second.explain()
        assert second.changed == 0, second.explain()
        with audit_writes() as window:
            check = run_playbook(INSTALL, extra_vars=helm_vars(lab, charts), check=True, timeout=900)
        assert check.rc == 0, check.explain()
        assert our_writes(window) == [], describe(our_writes(window))
    finally:
        sim.stop()

    releases = helm_releases(lab)
    for name in (PREFIX + "-gpu-operator", PREFIX + "-kueue", PREFIX + "-keda"):
        assert releases[name]["status"] == "deployed", releases.get(name)
    # the charts' cluster-wide hooks were never created
    assert release_hooks_left(kube, PREFIX) == []

    # GPU Operator: the chart's ClusterPolicy carries the inventory settings and is ready (simulator)
    policy = get(kube, "nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    assert policy["spec"]["driver"]["enabled"] is False
    assert policy["spec"]["mig"]["strategy"] == "mixed"
    assert policy["spec"]["devicePlugin"]["config"]["name"] == "gpuaas-device-plugin-config"
    assert policy["status"]["state"] == "ready"
    plugin_cm = get(kube, "v1", "ConfigMap", "gpuaas-device-plugin-config", HELM_NS["gpu"])
    h100 = yaml.safe_load(plugin_cm["data"][TS_FLAVOR])
    assert h100["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert h100["flags"]["migStrategy"] == "mixed"
    # only the flavor's node points at its device plugin configuration
    labelled = [n["metadata"]["name"] for n in items(kube, "v1", "Node")
                if (n["metadata"].get("labels") or {}).get(DP_LABEL) == TS_FLAVOR]
    assert labelled == [TS_NODE]

    # Kueue: the generated Configuration
    cms = [c for c in items(kube, "v1", "ConfigMap", HELM_NS["kueue"])
           if "controller_manager_config.yaml" in (c.get("data") or {})]
    assert len(cms) == 1, [c["metadata"]["name"] for c in cms]
    config = yaml.safe_load(cms[0]["data"]["controller_manager_config.yaml"])
    assert config["integrations"]["frameworks"] == ["batch/job", "ray.io/rayjob"]
    assert config["fairSharing"]["preemptionStrategies"]
    assert config["metrics"]["enableClusterQueueResources"] is True
    deployments = {d["metadata"]["name"]: d for d in items(kube, "apps/v1", "Deployment", HELM_NS["kueue"])}
    assert any(d["status"].get("availableReplicas") for d in deployments.values()), list(deployments)

    # KEDA: watches only the inventory's namespaces
    keda_op = get(kube, "apps/v1", "Deployment", PREFIX + "-keda-operator", HELM_NS["keda"])
    assert keda_op is not None, [d["metadata"]["name"] for d in items(kube, "apps/v1", "Deployment", HELM_NS["keda"])]
    assert keda_op["status"].get("availableReplicas") == 1
    env = {e["name"]: e.get("value") for e in keda_op["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["WATCH_NAMESPACE"] == PREFIX + "-serve"

    # uninstall: releases, ClusterPolicy and the device plugin ConfigMap are gone
    gone = run_playbook(INSTALL, extra_vars=helm_vars(lab, charts, gpuaas_install_state="absent"), timeout=900)
    assert gone.rc == 0, gone.explain()
    releases = helm_releases(lab)
    assert not [n for n in releases if n.startswith(PREFIX)], list(releases)
    assert get(kube, "nvidia.com/v1", "ClusterPolicy", "cluster-policy") is None
    assert get(kube, "v1", "ConfigMap", "gpuaas-device-plugin-config", HELM_NS["gpu"]) is None


# ---------------------------------------------------------------------------------------------- uninstall guard
BUSY_NS = PREFIX + "-busy"


@pytest.fixture
def busy_cluster_queue(lab, kube):
    kv = "kueue.x-k8s.io/%s" % lab.kueue_api
    created = []

    def create(api_version, kind, body):
        res = kube.resources.get(api_version=api_version, kind=kind)
        res.create(body=body, namespace=body["metadata"].get("namespace"))
        created.append((api_version, kind, body["metadata"]["name"], body["metadata"].get("namespace")))

    # gpuaas.io/tenant: Kueue, as the collection configures it, manages jobs only in tenant namespaces (issue 11)
    create("v1", "Namespace", {"metadata": {"name": BUSY_NS, "labels": {"gpuaas.io/tenant": BUSY_NS}}})
    create(kv, "ResourceFlavor", {"apiVersion": kv, "kind": "ResourceFlavor", "metadata": {"name": BUSY_NS}})
    cq_spec = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": BUSY_NS}},
               "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                   {"name": BUSY_NS, "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}
    create(kv, "ClusterQueue", {"apiVersion": kv, "kind": "ClusterQueue", "metadata": {"name": BUSY_NS},
                                "spec": cq_spec})
    create(kv, "LocalQueue", {"apiVersion": kv, "kind": "LocalQueue",
                              "metadata": {"name": "lq", "namespace": BUSY_NS}, "spec": {"clusterQueue": BUSY_NS}})
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "busy", "namespace": BUSY_NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"suspend": True, "template": {
               "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "900s"}},
               "spec": {"restartPolicy": "Never", "containers": [
                   {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}}}
    create("batch/v1", "Job", job)
    deadline = time.time() + 90
    cq = None
    while time.time() < deadline:
        cq = get(kube, kv, "ClusterQueue", BUSY_NS)
        if (cq.get("status") or {}).get("admittedWorkloads", 0) >= 1:
            break
        time.sleep(1)
    assert (cq.get("status") or {}).get("admittedWorkloads", 0) >= 1, cq.get("status")
    yield BUSY_NS
    for api_version, kind, name, ns in reversed(created):
        res = kube.resources.get(api_version=api_version, kind=kind)
        try:
            res.delete(name=name, namespace=ns, body={"propagationPolicy": "Background"})
        except NotFoundError:
            pass


def test_uninstall_refuses_while_workloads_are_admitted(lab, run_playbook, audit_writes, busy_cluster_queue):
    extra = {"gpuaas_platform": "kubernetes", "gpuaas_install_state": "absent",
             "gpuaas_kueue_namespace": PREFIX + "-kueue", "gpuaas_kueue_helm_release": PREFIX + "-kueue"}
    with audit_writes() as window:
        run = run_playbook(INSTALL, extra_vars=extra)
    assert run.rc != 0, run.explain()
    assert "still hold admitted workloads" in run.stdout and busy_cluster_queue in run.stdout, run.explain()
    assert our_writes(window) == [], describe(our_writes(window))  # refused before removing anything


# ---------------------------------------------------------------------------------------------- OLM path
OLM_NS = {"nfd": PREFIX + "-olm-nfd", "gpu": PREFIX + "-olm-gpu", "kueue": PREFIX + "-olm-kueue",
          "cert": PREFIX + "-olm-cert-manager", "keda": PREFIX + "-olm-keda"}
POLICY = PREFIX + "-gpu-cluster-policy"


def olm_vars(starting_csv: str, **extra) -> dict:
    values = {
        "gpuaas_platform": "openshift",
        "gpuaas_install_wait_timeout": 120,
        "gpuaas_force_uninstall": True,
        "gpuaas_nfd_namespace": OLM_NS["nfd"],
        "gpuaas_gpu_operator_namespace": OLM_NS["gpu"],
        "gpuaas_gpu_operator_cluster_policy_name": POLICY,
        "gpuaas_gpu_operator_olm_starting_csv": starting_csv,
        "gpuaas_gpu_operator_olm_install_plan_approval": "Manual",
        "gpuaas_gpu_operator_driver_enabled": False,
        "gpuaas_gpu_operator_cluster_policy_overrides": {"dcgm": {"enabled": False}},
        "gpuaas_kueue_namespace": OLM_NS["kueue"],
        "gpuaas_kueue_integrations": ["batch/job", "kubeflow.org/pytorchjob"],
        "gpuaas_cert_manager_namespace": OLM_NS["cert"],
        "gpuaas_keda_namespace": OLM_NS["keda"],
        "gpuaas_keda_watch_namespaces": [PREFIX + "-serve"],
    }
    values.update(extra)
    return values


def test_olm_path_with_the_lab_simulators(lab, kube, run_playbook, audit_writes):
    charts = charts_dir(lab)
    bundle = next(iter(glob.glob(str(olm_bundles(charts) / "gpu-operator-certified" / "*.yaml"))))
    with open(bundle, encoding="utf-8") as handle:
        starting_csv = yaml.safe_load(handle)["metadata"]["name"]
    crds_before = {c["metadata"]["name"]
                   for c in items(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", label_selector=SIM_LABEL)}
    sims = [Simulator(lab, "olm_simulator.py", "--bundle-dir", str(olm_bundles(charts))),
            Simulator(lab, "gpu_operator_simulator.py")]
    try:
        first = run_playbook(INSTALL, extra_vars=olm_vars(starting_csv), timeout=900)
        assert first.rc == 0, first.explain() + "\n--- simulators ---\n" + "".join(sim.tail() for sim in sims)
        second = run_playbook(INSTALL, extra_vars=olm_vars(starting_csv), timeout=900)
        assert second.rc == 0, second.explain()
        assert second.changed == 0, second.explain()
        with audit_writes() as window:
            check = run_playbook(INSTALL, extra_vars=olm_vars(starting_csv), check=True, timeout=900)
        assert check.rc == 0, check.explain()
        assert our_writes(window) == [], describe(our_writes(window))

        # the GPU Operator: Manual approval of exactly the pinned CSV, which succeeded
        sub = get(kube, OLM, "Subscription", "gpu-operator-certified", OLM_NS["gpu"])
        assert sub["spec"]["startingCSV"] == starting_csv and sub["spec"]["installPlanApproval"] == "Manual"
        assert sub["spec"]["source"] == "certified-operators"
        plan = get(kube, OLM, "InstallPlan", sub["status"]["installPlanRef"]["name"], OLM_NS["gpu"])
        assert plan["spec"]["approved"] is True and plan["spec"]["clusterServiceVersionNames"] == [starting_csv]
        assert get(kube, OLM, "ClusterServiceVersion", starting_csv, OLM_NS["gpu"])["status"]["phase"] == "Succeeded"
        og = get(kube, "operators.coreos.com/v1", "OperatorGroup", OLM_NS["gpu"], OLM_NS["gpu"])
        assert og["spec"]["targetNamespaces"] == [OLM_NS["gpu"]]
        # ClusterPolicy = the bundle's alm-examples + inventory settings + overrides
        policy = get(kube, "nvidia.com/v1", "ClusterPolicy", POLICY)
        with open(bundle, encoding="utf-8") as handle:
            example = next(e for e in json.loads(yaml.safe_load(handle)["metadata"]["annotations"]["alm-examples"])
                           if e["kind"] == "ClusterPolicy")
        assert policy["spec"]["operator"]["defaultRuntime"] == example["spec"]["operator"]["defaultRuntime"]
        assert policy["spec"]["driver"]["enabled"] is False
        assert policy["spec"]["dcgm"]["enabled"] is False
        assert policy["status"]["state"] == "ready"
        nfd = get(kube, "nfd.openshift.io/v1", "NodeFeatureDiscovery", "nfd-instance", OLM_NS["nfd"])
        assert any(c["type"] == "Available" and c["status"] == "True" for c in nfd["status"]["conditions"])
        # Kueue (with its cert-manager prerequisite) and KEDA
        assert get(kube, OLM, "Subscription", "openshift-cert-manager-operator", OLM_NS["cert"]) is not None
        kueue = get(kube, "kueue.openshift.io/v1", "Kueue", "cluster")
        assert kueue["spec"]["config"]["integrations"]["frameworks"] == ["BatchJob", "PyTorchJob"]
        assert kueue["spec"]["config"]["preemption"]["preemptionPolicy"] == "FairSharing"
        keda = get(kube, "keda.sh/v1alpha1", "KedaController", "keda", OLM_NS["keda"])
        assert keda["spec"]["watchNamespace"] == PREFIX + "-serve"

        gone = run_playbook(INSTALL, extra_vars=olm_vars(starting_csv, gpuaas_install_state="absent"), timeout=900)
        assert gone.rc == 0, gone.explain()
        for key, package in (("gpu", "gpu-operator-certified"), ("nfd", "nfd"), ("kueue", "kueue-operator"),
                             ("keda", "openshift-custom-metrics-autoscaler-operator")):
            assert get(kube, OLM, "Subscription", package, OLM_NS[key]) is None, package
            assert items(kube, OLM, "ClusterServiceVersion", OLM_NS[key]) == [], package
        assert get(kube, "nvidia.com/v1", "ClusterPolicy", POLICY) is None
        assert get(kube, "kueue.openshift.io/v1", "Kueue", "cluster") is None
        assert get(kube, "keda.sh/v1alpha1", "KedaController", "keda", OLM_NS["keda"]) is None
    finally:
        for sim in sims:
            sim.stop()
        for api_version, kind, name, ns in (("nvidia.com/v1", "ClusterPolicy", POLICY, None),
                                            ("kueue.openshift.io/v1", "Kueue", "cluster", None)):
            try:
                kube.resources.get(api_version=api_version, kind=kind).delete(name=name, namespace=ns)
            except (NotFoundError, ResourceNotFoundError):
                pass
        delete_namespaces(kube, list(OLM_NS.values()) + [PREFIX + "-serve"])
        crd_api = kube.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        for crd in items(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", label_selector=SIM_LABEL):
            if crd["metadata"]["name"] not in crds_before:
                crd_api.delete(name=crd["metadata"]["name"])


# ---------------------------------------------------------------------------------------------- OLM on the OpenShift
# flavoured lab (variant): a wrong channel, and an install over an OperatorHub (console) install
BF_NS = PREFIX + "-bf-gpu"
BF_CONSOLE_OG = BF_NS + "-x7k2p"           # the console names the OperatorGroup <namespace>-<random>
BF_POLICY = PREFIX + "-bf-cluster-policy"
CONSOLE = "Mozilla"                        # the field manager of writes made from the OpenShift console
CHANNEL_NS = PREFIX + "-olm-channel"


def gpu_bundle(lab) -> dict:
    path = next(iter(glob.glob(str(olm_bundles(charts_dir(lab)) / "gpu-operator-certified" / "*.yaml"))))
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def sim_crds(kube) -> set:
    return {c["metadata"]["name"]
            for c in items(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", label_selector=SIM_LABEL)}


def cleanup_olm(kube, namespaces, crds_before, cluster_policies=()):
    for name in cluster_policies:
        try:
            kube.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").delete(name=name)
        except (NotFoundError, ResourceNotFoundError):
            pass
    delete_namespaces(kube, namespaces)
    crd_api = kube.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for name in sim_crds(kube) - crds_before:
        crd_api.delete(name=name)


def successful_writes(window, resource=None) -> list:
    """Write requests the API server accepted (a refused server-side apply is logged with its 409)."""
    return [e for e in our_writes(window) if (e.get("responseStatus") or {}).get("code", 200) < 400
            and (resource is None or (e.get("objectRef") or {}).get("resource") == resource)]


CHANNEL_PLAY = local_play("""
  tasks:
    - name: Subscribe
      gpuaas.platform.olm_operator:
        package: gpu-operator-certified
        namespace: %s
        channel: "{{ channel }}"
        source: certified-operators
        target_namespaces: [%s]
        wait_timeout: 600
""") % (CHANNEL_NS, CHANNEL_NS)


def test_olm_unknown_channel_fails_fast(variant_lab, variant_kube, variant_run_playbook):
    """A channel the catalog lacks: OLM (SIMULATOR) sets ResolutionFailed; the module stops in well under 90 s with
    wait_timeout 600, naming package, channel, catalog source, OLM's message and how to list the channels. Fixing the
    channel then installs (the condition is gone)."""
    crds_before = sim_crds(variant_kube)
    sim = Simulator(variant_lab, "olm_simulator.py", "--bundle-dir", str(olm_bundles(charts_dir(variant_lab))))
    try:
        start = time.monotonic()
        run = variant_run_playbook(CHANNEL_PLAY, extra_vars={"channel": "v0.0-no-such-channel"}, timeout=700)
        elapsed = time.monotonic() - start
        print("unknown channel: the playbook failed after %.1f s (wait_timeout 600)" % elapsed)
        assert run.rc != 0, run.explain()
        assert elapsed < 90, "took %.1f s" % elapsed
        msg = run.task_results("Subscribe")[0]["msg"]
        for word in ("package gpu-operator-certified", "channel v0.0-no-such-channel",
                     "catalog source openshift-marketplace/certified-operators", "ResolutionFailed",
                     "ConstraintsNotSatisfiable", "no operators found in channel v0.0-no-such-channel of package "
                     "gpu-operator-certified", "oc get packagemanifest gpu-operator-certified -n openshift-marketplace"):
            assert word in msg, (word, msg)
        sub = get(variant_kube, OLM, "Subscription", "gpu-operator-certified", CHANNEL_NS)
        assert "installPlanRef" not in (sub.get("status") or {}), sub.get("status")

        fixed = variant_run_playbook(CHANNEL_PLAY, extra_vars={"channel": "stable"}, timeout=700)
        assert fixed.rc == 0, fixed.explain() + sim.tail()
        result = fixed.task_results("Subscribe")[0]
        assert result["csv"]["phase"] == "Succeeded"
        sub = get(variant_kube, OLM, "Subscription", "gpu-operator-certified", CHANNEL_NS)
        assert not [c for c in sub["status"].get("conditions") or [] if c["type"] == "ResolutionFailed"]
    finally:
        sim.stop()
        cleanup_olm(variant_kube, [CHANNEL_NS], crds_before)


def gpu_role_vars(**extra) -> dict:
    values = {
        "gpuaas_platform": "openshift",
        "gpuaas_install_wait_timeout": 120,
        "gpuaas_gpu_operator_namespace": BF_NS,
        "gpuaas_gpu_operator_cluster_policy_name": BF_POLICY,
        "gpuaas_gpu_operator_nfd_enabled": False,
        "gpuaas_gpu_operator_driver_enabled": False,
        "gpuaas_gpu_operator_service_monitor_enabled": False,
    }
    values.update(extra)
    return values


GPU_ROLE_PLAY = local_play("""
  roles:
    - role: gpuaas.platform.gpu_operator
""")


def test_install_over_an_operatorhub_gpu_operator(variant_lab, variant_kube, variant_run_playbook,
                                                  variant_audit_writes):
    """The GPU Operator installed from the console: its OperatorGroup (another name), its Subscription, and a
    ClusterPolicy made from the sample with hand-tuned fields, none labelled by the collection. The role completes
    without resetting a hand-tuned field (merge without forcing), re-runs with changed=0, stops with the field list
    and the adopt variable when the inventory disagrees with a field the console set (nothing written), and adopts on
    request."""
    kube = variant_kube
    bundle = gpu_bundle(variant_lab)
    example = next(e for e in json.loads(bundle["metadata"]["annotations"]["alm-examples"])
                   if e["kind"] == "ClusterPolicy")
    crds_before = sim_crds(kube)
    sim = Simulator(variant_lab, "olm_simulator.py", "--bundle-dir", str(olm_bundles(charts_dir(variant_lab))))
    policies = kube.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    try:
        # -- what the console leaves behind ------------------------------------------------------------------
        kube.resources.get(api_version="v1", kind="Namespace").create(
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BF_NS}}, field_manager=CONSOLE)
        kube.resources.get(api_version="operators.coreos.com/v1", kind="OperatorGroup").create(
            namespace=BF_NS, field_manager=CONSOLE, body={
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": BF_CONSOLE_OG, "namespace": BF_NS}, "spec": {"targetNamespaces": [BF_NS]}})
        kube.resources.get(api_version=OLM, kind="Subscription").create(namespace=BF_NS, field_manager=CONSOLE, body={
            "apiVersion": OLM, "kind": "Subscription", "metadata": {"name": "gpu-operator-certified", "namespace": BF_NS},
            "spec": {"name": "gpu-operator-certified", "channel": "stable", "source": "certified-operators",
                     "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Automatic"}})
        wait_until(lambda: (get(kube, OLM, "Subscription", "gpu-operator-certified", BF_NS).get("status") or {})
                   .get("installedCSV"), 60, "the console's Subscription to be installed (OLM SIMULATOR)")
        # the console's form starts from the sample; the admin tuned two fields the collection does not set, and set
        # the ones it does to the values the inventory below asks for
        spec = json.loads(json.dumps(example["spec"]))
        tuned_runtime = "containerd" if spec["operator"].get("defaultRuntime") != "containerd" else "docker"
        spec["operator"]["defaultRuntime"] = tuned_runtime
        spec.setdefault("daemonsets", {})["priorityClassName"] = "hand-tuned-priority"
        spec["driver"]["enabled"] = False
        spec["toolkit"]["enabled"] = True
        spec.setdefault("mig", {})["strategy"] = "single"
        spec["dcgmExporter"]["enabled"] = True
        spec["dcgmExporter"].setdefault("serviceMonitor", {})["enabled"] = False
        policies.create(field_manager=CONSOLE, body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                                     "metadata": {"name": BF_POLICY}, "spec": spec})

        # -- the install completes without resetting the tuned fields ------------------------------------------
        first = variant_run_playbook(GPU_ROLE_PLAY, extra_vars=gpu_role_vars(), timeout=600)
        assert first.rc == 0, first.explain() + sim.tail()
        result = first.task_results("NVIDIA GPU Operator (OLM)")[0]
        assert result["operator_group"] == {"name": BF_CONSOLE_OG, "action": "reuse"}, result
        assert result["operand"]["mode"] == "merge", result["operand"]
        policy = get(kube, "nvidia.com/v1", "ClusterPolicy", BF_POLICY)
        assert policy["spec"]["operator"]["defaultRuntime"] == tuned_runtime
        assert policy["spec"]["daemonsets"]["priorityClassName"] == "hand-tuned-priority"
        assert "app.kubernetes.io/managed-by" not in (policy["metadata"].get("labels") or {})
        assert [g["metadata"]["name"] for g in items(kube, "operators.coreos.com/v1", "OperatorGroup", BF_NS)] == [
            BF_CONSOLE_OG]
        ns_labels = get(kube, "v1", "Namespace", BF_NS)["metadata"].get("labels") or {}
        assert ns_labels.get("openshift.io/cluster-monitoring") == "true"
        assert "app.kubernetes.io/managed-by" not in ns_labels
        assert policy["status"]["state"] == "ready"

        # -- idempotent --------------------------------------------------------------------------------------
        second = variant_run_playbook(GPU_ROLE_PLAY, extra_vars=gpu_role_vars(), timeout=600)
        assert second.rc == 0, second.explain()
        assert second.changed == 0, second.explain()

        # -- the admin turns the driver on from the console; the inventory says off: stop, write nothing -------
        policies.patch(name=BF_POLICY, body={"spec": {"driver": {"enabled": True}}}, field_manager=CONSOLE,
                       content_type="application/merge-patch+json")
        with variant_audit_writes() as window:
            refused = variant_run_playbook(GPU_ROLE_PLAY, extra_vars=gpu_role_vars(), timeout=600)
        assert refused.rc != 0, refused.explain()
        failed = refused.task_results("NVIDIA GPU Operator (OLM)")[0]
        assert ".spec.driver.enabled" in " ".join(failed.get("problems") or []), failed
        assert CONSOLE in " ".join(failed["problems"]), failed
        assert "gpuaas_gpu_operator_cluster_policy_adopt: true" in failed["msg"], failed["msg"]
        assert successful_writes(window, "clusterpolicies") == [], describe(successful_writes(window))
        assert get(kube, "nvidia.com/v1", "ClusterPolicy", BF_POLICY)["spec"]["driver"]["enabled"] is True

        # -- adopt on request: labelled, the inventory wins, the sample's runtime is back ----------------------
        adopted = variant_run_playbook(GPU_ROLE_PLAY, timeout=600, extra_vars=gpu_role_vars(
            gpuaas_gpu_operator_cluster_policy_adopt=True))
        assert adopted.rc == 0, adopted.explain()
        policy = get(kube, "nvidia.com/v1", "ClusterPolicy", BF_POLICY)
        assert policy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuaas.platform"
        assert policy["spec"]["driver"]["enabled"] is False
        assert policy["spec"]["operator"]["defaultRuntime"] == example["spec"]["operator"]["defaultRuntime"]
        again = variant_run_playbook(GPU_ROLE_PLAY, timeout=600, extra_vars=gpu_role_vars(
            gpuaas_gpu_operator_cluster_policy_adopt=True))
        assert again.rc == 0 and again.changed == 0, again.explain()
    finally:
        sim.stop()
        cleanup_olm(kube, [BF_NS], crds_before, [BF_POLICY])
