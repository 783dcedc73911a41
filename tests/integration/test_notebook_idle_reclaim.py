# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idle stop of a Kubeflow / OpenShift AI Notebook (workbench; issue 23) on the lab's REAL Kueue v0.19.2 and
Prometheus (GPU utilization from the simulated DCGM exporter, 0 % unless a pod says otherwise), with the notebook
controller SIMULATOR (lab/simulators/notebook_controller_simulator.py: the Notebook's StatefulSet, replicas 1 or 0
under kubeflow-resource-stopped, written back on every reconcile as upstream does). The stop is the committed
playbook playbooks/ray_idle_reclaim.yml (module gpuaas.platform.ray_idle_reclaim), run here by hand where AWX would
run it on a schedule.

One scenario, in order (the tests share it):

  tenants (one cohort)  nb-a: 1 GPU, reclaim Any; alice's Notebook `alice` (1 GPU, queue label on the Notebook),
                        opted in (window 10 s, cooldown 60 s)
                        nb-b: 0 GPUs of its own (borrows); its Notebook `theirs`, opted in by its own entry, stopped
                        by its user from the start with a wake value set
  1. the Notebook's StatefulSet is made by the SIMULATOR with the Notebook's labels, Kueue admits it, its pod runs on
     a KWOK GPU node; a KEDA-style scale of that StatefulSet to 0 is set back to 1 by the controller (why the
     collection does not use KEDA for notebooks)
  2. idle for the window -> the run sets kubeflow-resource-stopped: StatefulSet at 0, pod gone, nb-a's GPU usage 0;
     nb-b's 1-GPU Job is admitted on the freed GPU (borrowed); `theirs` (stopped by its user) is not started
  3. alice sets gpuaas.io/wake -> the run removes the stop annotation, the StatefulSet is back at 1 and Kueue
     admits it again by reclaiming nb-b's Job (InCohortReclamation)
  4. as alice: she cannot stop or wake nb-b's Notebook (RBAC)
  5. as the least-privilege account roles/automation_rbac makes for the schedule: the stop patch the module builds
     passes the fence, a spec, label or other annotation change is refused, and so is removing the stop annotation
     of a workbench its user stopped
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from conftest import kube_get as get, kube_items as items, kube_resource as res, wait_until
from conftest import grant_tenant_users, idle_reclaim_account, lender_borrower_inventory, limited_tenancy
from conftest import require_component
from conftest import condition as cond, cq_gpu_usage, idle_reclaim_run, kwok_job, lab_kubectl as kubectl
from conftest import request_as_token as as_token

KUEUE = "kueue.x-k8s.io/v1beta2"
NOTEBOOK = "kubeflow.org/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
STOP = "kubeflow-resource-stopped"  # the notebook controller's annotation (upstream culler.go STOP_ANNOTATION)
STATE = "gpuaas.io/idle-reclaim"
WAKE = "gpuaas.io/wake"
H100 = "NVIDIA-H100-80GB-HBM3"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
WINDOW, COOLDOWN, SCRAPE = 10, 60, 5  # the lab's Prometheus scrapes every 5 s (lab/lab.sh)

S = uuid.uuid4().hex[:5]
T_A, T_B = "nb-a-" + S, "nb-b-" + S
NS_A, NS_B = T_A, T_B
FLAVOR, COHORT = "nb-h100-" + S, "nb-co-" + S
ALICE, THEIRS = "alice", "theirs"


def entry(name: str) -> dict:
    return {"name": name, "target": {"kind": "Notebook", "name": name},
            "idle_scale_to_zero": {"after_seconds": WINDOW, "utilization_threshold": 1}, "cooldown_period": COOLDOWN}


INVENTORY = lender_borrower_inventory(FLAVOR, COHORT, T_A, T_B, {"nvidia.com/gpu": 1, "cpu": 8, "memory": "16Gi"},
                                      [entry(ALICE)], [entry(THEIRS)])


def notebook(name: str, namespace: str, annotations: dict | None = None) -> dict:
    """A workbench as the OpenShift AI dashboard makes one: the queue label on the Notebook, 1 GPU."""
    limits = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    return {"apiVersion": NOTEBOOK, "kind": "Notebook",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"},
                         "annotations": dict(annotations or {})},
            "spec": {"template": {"spec": {
                "terminationGracePeriodSeconds": 0, "tolerations": [TOLERATION],
                "containers": [{"name": name, "image": "registry.invalid/lab/jupyter:1",
                                "resources": {"requests": dict(limits), "limits": limits}}]}}}}


def annotations(kube, name: str = ALICE, namespace: str = NS_A) -> dict:
    return (get(kube, NOTEBOOK, "Notebook", name, namespace) or {})["metadata"].get("annotations") or {}


def sts_replicas(kube, name: str = ALICE, namespace: str = NS_A) -> int | None:
    return ((get(kube, "apps/v1", "StatefulSet", name, namespace) or {}).get("spec") or {}).get("replicas")


def running_pod(kube, name: str = ALICE, namespace: str = NS_A) -> dict | None:
    """The workbench's pod, Running and bound (its gate lifted by Kueue)."""
    pod = get(kube, "v1", "Pod", name + "-0", namespace)
    if not pod or pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
        return None
    return pod if pod["spec"].get("nodeName") and not pod["spec"].get("schedulingGates") else None


def gpu_usage(kube, cq: str) -> int:
    return cq_gpu_usage(kube, KUEUE, cq)


def reclaim(run_playbook, lab) -> dict:
    """One scheduled run of the committed playbook; the module's per-object result by name."""
    return idle_reclaim_run(run_playbook, lab, INVENTORY, SCRAPE, [T_A, T_B])


@pytest.fixture(scope="module")
def scenario(lab, kube, run_playbook):
    require_component(lab, "kueue")
    if get(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "notebooks.kubeflow.org") is None:
        pytest.fail("the lab serves no Notebook CRD (lab/crds/kubeflow): make lab-down, then make lab-up")
    state: dict = {"t0": time.monotonic()}
    try:
        with limited_tenancy(lab, kube, run_playbook, INVENTORY):
            # alice (group nlp-team) may write Notebooks in her namespace only; Kubeflow and OpenShift AI grant this
            # through their own aggregated roles, which the lab does not install: a cluster admin grants it
            grant_tenant_users(lab, NS_A, "notebook-user", "kubeflow.org", "notebooks", field_manager="itnb")
            out = kubectl(lab, "create", "-o", "json", "-f", "-", context=lab.tenant_context,
                          stdin=json.dumps(notebook(ALICE, NS_A)))
            assert out.returncode == 0, out.stderr
            state["uid"] = json.loads(out.stdout)["metadata"]["uid"]
            # nb-b's workbench, stopped by its user from the start (the dashboard's Stop), a wake value already set
            out = kubectl(lab, "create", "-o", "json", "-f", "-", stdin=json.dumps(notebook(
                THEIRS, NS_B, {STOP: "2026-12-03T09:00:00Z", WAKE: "please"})))
            assert out.returncode == 0, out.stderr
            wait_until(lambda: running_pod(kube), 90, "alice's workbench pod admitted and Running")
            yield state
    finally:
        print("notebook idle reclaim scenario: %.1f s" % (time.monotonic() - state["t0"]))


def test_the_workbench_runs_through_kueue_and_its_controller_reverts_a_keda_style_scale(scenario, lab, kube):
    sts = get(kube, "apps/v1", "StatefulSet", ALICE, NS_A)
    # the controller's StatefulSet: named after the Notebook, owned by it, the Notebook's queue label on it and its pods
    assert [(o["kind"], o["uid"], o.get("controller")) for o in sts["metadata"]["ownerReferences"]] == \
        [("Notebook", scenario["uid"], True)]
    assert sts["metadata"]["labels"][QUEUE_LABEL] == "default"
    assert sts["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] == "default"
    pod = running_pod(kube)
    node = get(kube, "v1", "Node", pod["spec"]["nodeName"])
    assert node["metadata"]["labels"].get("nvidia.com/gpu.product") == H100, pod["spec"]["nodeName"]
    [workload] = [w for w in items(kube, KUEUE, "Workload", NS_A) if cond(w, "Admitted").get("status") == "True"]
    assert gpu_usage(kube, T_A) == 1
    scenario["workload"] = workload["metadata"]["uid"]
    # what KEDA would do to the StatefulSet (its /scale subresource): accepted by the API server and Kueue ...
    out = kubectl(lab, "-n", NS_A, "scale", "statefulset", ALICE, "--replicas=0")
    assert out.returncode == 0, out.stderr
    # ... and set back by the notebook controller at its next reconcile (upstream CopyStatefulSetFields)
    wait_until(lambda: sts_replicas(kube) == 1 and get(kube, "apps/v1", "StatefulSet", ALICE, NS_A)["metadata"][
        "generation"] >= sts["metadata"]["generation"] + 2, 15, "the notebook controller to set the replicas back to 1")
    wait_until(lambda: running_pod(kube), 60, "the workbench pod Running again")


def test_an_idle_workbench_is_stopped_and_its_gpu_is_borrowed(scenario, lab, kube, run_playbook):
    first = reclaim(run_playbook, lab)
    for _attempt in range(2):  # the pod came back in the previous test: it must run (and be scraped) for a whole window
        if first[ALICE]["action"] == "reclaim":
            break
        assert "less than the idle window" in first[ALICE]["reason"] or "no GPU utilization" in first[ALICE]["reason"], first
        time.sleep(WINDOW / 2)
        first = reclaim(run_playbook, lab)
    assert first[ALICE]["action"] == "reclaim" and first[ALICE]["kind"] == "Notebook", first
    # nb-b's workbench was stopped by its user: the wake value on it does not make the collection start it
    assert first[THEIRS]["action"] == "keep" and "stopped by its user" in first[THEIRS]["reason"], first[THEIRS]
    assert annotations(kube, THEIRS, NS_B)[STOP] == "2026-12-03T09:00:00Z"
    ann = annotations(kube)
    assert ann[STOP] and json.loads(ann[STATE]) == {"stopped": ann[STOP]}
    wait_until(lambda: sts_replicas(kube) == 0, 15, "the notebook controller to scale the StatefulSet to 0")
    wait_until(lambda: get(kube, "v1", "Pod", ALICE + "-0", NS_A) is None, 60, "the workbench pod to be gone")
    wait_until(lambda: gpu_usage(kube, T_A) == 0, 30, "nb-a's GPU usage to drop to 0")
    # the StatefulSet stays at 0 (the controller now wants 0 as well)
    time.sleep(2)
    assert sts_replicas(kube) == 0
    borrow = kwok_job({"nvidia.com/gpu": "1"}, name="borrow", tolerations=[TOLERATION], grace_seconds=0)
    res(kube, "batch/v1", "Job").create(body=borrow, namespace=NS_B)
    wait_until(lambda: gpu_usage(kube, T_B) == 1, 60, "nb-b's Job admitted on the freed GPU (borrowed)")


def test_the_tenants_wake_starts_the_workbench_and_kueue_takes_the_gpu_back(scenario, lab, kube, run_playbook):
    out = kubectl(lab, "-n", NS_A, "annotate", "notebook", ALICE, "%s=%d" % (WAKE, time.time()), "--overwrite",
                  context=lab.tenant_context)
    assert out.returncode == 0, out.stderr
    start = time.monotonic()
    woke = reclaim(run_playbook, lab)
    assert woke[ALICE]["action"] == "wake" and woke[ALICE]["changed"], woke[ALICE]
    assert woke[THEIRS]["action"] == "keep" and STOP in annotations(kube, THEIRS, NS_B)
    assert STOP not in annotations(kube)
    wait_until(lambda: sts_replicas(kube) == 1, 15, "the notebook controller to scale the StatefulSet to 1")
    wait_until(lambda: running_pod(kube), 60, "the workbench pod admitted and Running again")
    print("wake (annotation -> run -> workbench Running): %.1f s" % (time.monotonic() - start))
    preempted = [cond(w, "Preempted").get("reason") for w in items(kube, KUEUE, "Workload", NS_B)
                 if cond(w, "Preempted").get("status") == "True"]
    assert preempted == ["InCohortReclamation"], preempted
    assert gpu_usage(kube, T_A) == 1
    # in cooldown: an immediate run does not stop it again although its GPU is idle
    assert reclaim(run_playbook, lab)[ALICE]["action"] == "keep"


def test_a_tenant_user_cannot_stop_or_wake_another_tenants_workbench(scenario, lab, kube):
    before = get(kube, NOTEBOOK, "Notebook", THEIRS, NS_B)
    for args in (("annotate", "notebook", THEIRS, "%s=again" % WAKE, "--overwrite"),
                 ("annotate", "notebook", THEIRS, STOP + "-"),
                 ("patch", "notebook", THEIRS, "--type=merge", "-p", json.dumps({"metadata": {"annotations": {
                     STATE: json.dumps({"stopped": "2026-12-03T09:00:00Z"})}}}))):
        out = kubectl(lab, "-n", NS_B, *args, context=lab.tenant_context)
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (args, out.stdout, out.stderr)
    after = get(kube, NOTEBOOK, "Notebook", THEIRS, NS_B)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


RECLAIM_SA, RECLAIM_SA_NS = "nb-reclaim-" + S, "nb-sa-" + S
FENCE = "gpuaas-automation-notebook-reclaim-fence"


def test_the_reclaim_account_may_change_only_the_stop_annotation_and_its_record(scenario, lab, kube, run_playbook):
    """As the least-privilege account roles/automation_rbac makes for the AWX schedule: the stop and start patches
    the module builds pass the fence, anything else on a Notebook is refused, and it cannot start a workbench its
    user stopped."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import notebook_reclaim  # the built collection

    with idle_reclaim_account(lab, run_playbook, INVENTORY, RECLAIM_SA, RECLAIM_SA_NS) as token:
        live = get(kube, NOTEBOOK, "Notebook", ALICE, NS_A)
        path = "/apis/kubeflow.org/v1/namespaces/%s/notebooks/%s" % (NS_A, ALICE)
        apply = path + "?fieldManager=gpuaas.platform&force=true&dryRun=All"
        stop = notebook_reclaim.stop_patch(live, time.time())
        status, body = as_token(lab, token, "PATCH", apply, stop)
        assert status == 200 and STOP in json.loads(body)["metadata"]["annotations"], body
        spec = json.loads(json.dumps(stop))
        spec["spec"] = json.loads(json.dumps(live["spec"]))
        spec["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.invalid/evil:1"
        label = json.loads(json.dumps(stop))
        label["metadata"]["labels"] = {QUEUE_LABEL: "other"}
        wake = json.loads(json.dumps(stop))
        wake["metadata"]["annotations"][WAKE] = "by-the-account"
        for name, attempt, message in (("image", spec, "may not change a Notebook's spec"),
                                       ("queue label", label, "may not change a Notebook's labels"),
                                       ("wake annotation", wake, "only the annotations kubeflow-resource-stopped")):
            status, body = as_token(lab, token, "PATCH", apply, attempt)
            assert status in (403, 422) and FENCE in body and message in body, (name, status, body)
        # nb-b's workbench, stopped by its user: removing her stop annotation is refused (merge patch, as kubectl)
        theirs = "/apis/kubeflow.org/v1/namespaces/%s/notebooks/%s?dryRun=All" % (NS_B, THEIRS)
        status, body = as_token(lab, token, "PATCH", theirs, {"metadata": {"annotations": {STOP: None}}},
                                "application/merge-patch+json")
        assert status in (403, 422) and "may start only a Notebook it stopped" in body, (status, body)
        # RBAC: no delete, nothing outside the opted-in namespaces
        assert as_token(lab, token, "DELETE", path + "?dryRun=All")[0] == 403
        assert as_token(lab, token, "GET", "/apis/kubeflow.org/v1/namespaces/default/notebooks")[0] == 403
        assert get(kube, NOTEBOOK, "Notebook", ALICE, NS_A)["metadata"]["annotations"] == live["metadata"]["annotations"]
