# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenShift AI coexistence on the OpenShift-flavoured variant lab (issue 23).

The variant lab serves OpenShift AI's HardwareProfile CRD with the upstream schema (lab/crds/openshift-ai, written from
opendatahub-operator v3.0.0: identifiers, the Queue/Node CEL rules). The OpenShift AI example inventory
(playbooks/inventory/examples/openshift-ai) is converged there with its names suffixed (the lab is shared), and:
the HardwareProfiles point at the tenants' LocalQueues and allowed priority classes, the second run changes nothing,
the API server's schema accepts them and refuses broken ones, offboarding a tenant prunes its profiles, and a GPU
pod created as an OpenShift AI controller is admitted only when Kueue manages that controller's framework.
No OpenShift AI controller runs here: nothing reads the profiles (the dashboard and its webhook are not simulated).
"""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "playbooks" / "inventory" / "examples" / "openshift-ai"
TENANTS_PLAYBOOK = REPO / "playbooks" / "tenants.yml"
TASK = "Reconcile the GPU tenancy"
ID = uuid.uuid4().hex[:5]
HWP_V = "infrastructure.opendatahub.io/v1"
APPS = "redhat-ods-applications"


def suffixed(name: str) -> str:
    return "%s-%s" % (name, ID)


def suffixed_inventory() -> dict:
    """The example's tenancy with every name suffixed (flavors, cohort, priorities, tenants, namespaces)."""
    inv = yaml.safe_load((EXAMPLE_DIR / "group_vars" / "all" / "tenants.yml").read_text())
    for flavor in inv["gpuaas_flavors"]:
        flavor["name"] = suffixed(flavor["name"])
    for cohort in inv["gpuaas_cohorts"]:
        cohort["name"] = suffixed(cohort["name"])
    for prio in inv["gpuaas_priorities"]:
        prio["name"] = suffixed(prio["name"])
    for tenant in inv["gpuaas_tenants"]:
        tenant["name"] = suffixed(tenant["name"])
        tenant["namespaces"] = [suffixed(ns) for ns in tenant["namespaces"]]
        tenant["cohort"] = suffixed(tenant["cohort"])
        for quota in tenant["quotas"]:
            quota["flavor"] = suffixed(quota["flavor"])
        if "allowed_priorities" in tenant:
            tenant["allowed_priorities"] = [suffixed(p) for p in tenant["allowed_priorities"]]
    # Kueue manages Jobs and Ray here, not the Kubeflow training jobs: OpenShift AI's KubeRay operator is trusted,
    # its training operator is not
    inv["gpuaas_kueue_integrations"] = ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]
    return inv


def kubectl(lab, *args: str, stdin: str | None = None):
    cmd = [str(lab.dir / "bin" / "kubectl"), "--kubeconfig", lab.kubeconfig, "--context", "lab-admin"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=False, timeout=120, input=stdin)


def profiles(variant_kube, namespaces):
    api = variant_kube.resources.get(api_version=HWP_V, kind="HardwareProfile")
    out = {}
    for ns in namespaces:
        for item in api.get(namespace=ns).to_dict()["items"]:
            out[(ns, item["metadata"]["name"])] = item
    return out


@pytest.fixture(scope="module")
def converged(variant_run_playbook, variant_kube, variant_lab):
    inv = suffixed_inventory()
    run = variant_run_playbook(TENANTS_PLAYBOOK, inventory=EXAMPLE_DIR, extra_vars=inv)
    yield inv, run
    gone = copy.deepcopy(inv)
    for tenant in gone["gpuaas_tenants"]:
        tenant["state"] = "absent"
    variant_run_playbook(TENANTS_PLAYBOOK, inventory=EXAMPLE_DIR,
                         extra_vars=dict(gone, gpuaas_delete_namespaces=True))
    for kind, names in (("ResourceFlavor", [f["name"] for f in inv["gpuaas_flavors"]]),
                        ("Cohort", [c["name"] for c in inv["gpuaas_cohorts"]]),
                        ("WorkloadPriorityClass", [p["name"] for p in inv["gpuaas_priorities"]])):
        kubectl(variant_lab, "delete", "%s.kueue.x-k8s.io" % kind.lower(), *names, "--ignore-not-found")


def test_example_converges_with_profiles_on_the_tenants_local_queues(converged, variant_kube, variant_run_playbook,
                                                                     variant_lab):
    inv, run = converged
    assert run.rc == 0, run.explain()
    llm, ds, fraud = inv["gpuaas_tenants"]
    found = profiles(variant_kube, llm["namespaces"] + ds["namespaces"] + fraud["namespaces"])
    batch, production = suffixed("batch"), suffixed("production")
    h100, mig = suffixed("h100"), suffixed("a100-mig-1g")
    # by hand from the example: llm-finetune has 2 namespaces x 2 allowed priorities, data-science 1 x none,
    # fraud-ml has hardware_profiles: false
    assert sorted(found) == sorted(
        [(ns, "gpuaas-%s-%s" % (h100, prio)) for ns in llm["namespaces"] for prio in (batch, production)]
        + [(ds["namespaces"][0], "gpuaas-%s" % mig)])
    kueue_api = "kueue.x-k8s.io/%s" % variant_lab.kueue_api
    lq_api = variant_kube.resources.get(api_version=kueue_api, kind="LocalQueue")
    wpc = {p["metadata"]["name"] for p in variant_kube.resources.get(
        api_version=kueue_api, kind="WorkloadPriorityClass").get().to_dict()["items"]}
    for (ns, name), obj in found.items():
        kueue = obj["spec"]["scheduling"]["kueue"]
        assert obj["spec"]["scheduling"]["type"] == "Queue" and "node" not in obj["spec"]["scheduling"]
        queue = lq_api.get(name=kueue["localQueueName"], namespace=ns).to_dict()
        owner = next(t for t in inv["gpuaas_tenants"] if ns in t["namespaces"])
        assert queue["spec"]["clusterQueue"] == owner["name"]
        assert obj["metadata"]["labels"]["gpuaas.io/tenant"] == owner["name"]
        if "priorityClass" in kueue:
            assert kueue["priorityClass"] in wpc and kueue["priorityClass"] in owner["allowed_priorities"]
    gpu = found[(llm["namespaces"][0], "gpuaas-%s-%s" % (h100, batch))]["spec"]["identifiers"][0]
    # 8 own H100 + borrowing_limit 4
    assert (gpu["identifier"], gpu["minCount"], gpu["defaultCount"], gpu["maxCount"]) == ("nvidia.com/gpu", 1, 1, 12)

    again = variant_run_playbook(TENANTS_PLAYBOOK, inventory=EXAMPLE_DIR, extra_vars=inv)
    assert again.rc == 0, again.explain()
    result = again.task_results(TASK)[0]
    assert result["changed"] is False, result.get("summary")
    assert result["summary"]["created"] == result["summary"]["updated"] == result["summary"]["deleted"] == 0


def test_api_server_enforces_the_upstream_schema(converged, variant_lab):
    inv = converged[0]
    ns = inv["gpuaas_tenants"][1]["namespaces"][0]

    def create(spec):
        body = {"apiVersion": HWP_V, "kind": "HardwareProfile", "metadata": {"name": "probe", "namespace": ns},
                "spec": spec}
        return kubectl(variant_lab, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(body))

    ident = [{"displayName": "GPU", "identifier": "nvidia.com/gpu", "minCount": 1, "defaultCount": 1}]
    good = create({"identifiers": ident, "scheduling": {"type": "Queue", "kueue": {"localQueueName": "default"}}})
    assert good.returncode == 0, good.stderr
    queue_with_node = create({"identifiers": ident, "scheduling": {
        "type": "Queue", "kueue": {"localQueueName": "default"}, "node": {"nodeSelector": {"a": "b"}}}})
    assert queue_with_node.returncode != 0 and "the 'node' field must not be set" in queue_with_node.stderr
    queue_without_queue = create({"identifiers": ident, "scheduling": {"type": "Queue"}})
    assert queue_without_queue.returncode != 0 and "kueue.localQueueName" in queue_without_queue.stderr
    bad_type = create({"identifiers": [dict(ident[0], resourceType="GPU")]})
    assert bad_type.returncode != 0 and "resourceType" in bad_type.stderr
    no_default = create({"identifiers": [{"displayName": "GPU", "identifier": "nvidia.com/gpu", "minCount": 1}]})
    assert no_default.returncode != 0 and "defaultCount" in no_default.stderr


def test_gpu_pod_of_an_openshift_ai_controller_is_admitted_only_for_a_managed_framework(converged, variant_lab):
    inv = converged[0]
    ns = inv["gpuaas_tenants"][0]["namespaces"][0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": ns},
           "spec": {"containers": [{"name": "w", "image": "registry.example/ray:2",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}

    def as_controller(service_account):
        return kubectl(variant_lab, "create", "--dry-run=server", "-o", "json", "-f", "-",
                       "--as=system:serviceaccount:%s:%s" % (APPS, service_account), "--as-group=system:masters",
                       stdin=json.dumps(pod))

    # KubeRay runs RayJob/RayCluster, which Kueue manages here: its pods are those of admitted Ray workloads
    def kuberay_admitted():
        out = as_controller("kuberay-operator")
        return out if out.returncode == 0 else None

    wait_until(kuberay_admitted, 30, "the KubeRay operator's pod to be admitted")
    # the training operator runs Kubeflow jobs, which Kueue does not manage here: refused like anyone's
    training = as_controller("kubeflow-training-operator")
    user = kubectl(variant_lab, "create", "--dry-run=server", "-o", "json", "-f", "-", "--as=someone",
                   "--as-group=system:masters", stdin=json.dumps(pod))
    # The variant's real Kueue runs the lab operand's frameworks: when they include Pod, Kueue's webhook takes any other
    # GPU pod (the training operator's, a user's) into the namespace's default LocalQueue and gates it: it never runs
    # outside Kueue. Without Pod, the collection's policy refuses it (the KubeRay operator alone is trusted).
    running = yaml.safe_load((variant_lab.dir / "kueue" / "config.yaml").read_text())
    for creator in (training, user):
        if "pod" in running["integrations"]["frameworks"]:
            assert creator.returncode == 0, creator.stderr
            gates = [g["name"] for g in json.loads(creator.stdout)["spec"].get("schedulingGates") or []]
            assert "kueue.x-k8s.io/admission" in gates, creator.stdout
        else:
            assert creator.returncode != 0 and "must go through Kueue" in creator.stderr, creator.stderr


def test_offboarding_a_tenant_prunes_its_profiles_only(converged, variant_kube, variant_run_playbook):
    inv = copy.deepcopy(converged[0])
    llm, ds, _fraud = inv["gpuaas_tenants"]
    llm["state"] = "absent"
    run = variant_run_playbook(TENANTS_PLAYBOOK, inventory=EXAMPLE_DIR, extra_vars=inv)
    assert run.rc == 0, run.explain()
    deleted = [(d.get("namespace"), d["name"]) for d in run.task_results(TASK)[0]["deleted"]
               if d["kind"] == "HardwareProfile"]
    assert len(deleted) == 4 and {ns for ns, _name in deleted} == set(llm["namespaces"])
    assert sorted(profiles(variant_kube, llm["namespaces"] + ds["namespaces"])) == [
        (ds["namespaces"][0], "gpuaas-%s" % suffixed("a100-mig-1g"))]
