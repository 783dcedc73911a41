# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation against the lab: real Prometheus scraping the simulated DCGM exporter, real apiserver.

Pods with known GPU counts and annotated utilizations are created once for the module; after they have been
scraped for longer than the measurement window, gpu_utilization_info and playbooks/validate.yml must report the
exact numbers (busy tenant, idle GPU, unallocated GPUs, GPU-hours, quota) and fail or pass on thresholds.
Other engineers' tests share the lab, so assertions are about this module's own tenants, namespaces and GPUs.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from test_lab import wait_until  # noqa: F401  pylint: disable=import-error
from conftest import create_namespace, local_play, promql

REPO = Path(__file__).resolve().parents[2]
ID = uuid.uuid4().hex[:5]
BUSY_NS, IDLE_NS, OTHER_NS = "itv-busy-%s" % ID, "itv-idle-%s" % ID, "itv-other-%s" % ID
BUSY_TENANT, IDLE_TENANT = "itvbusy%s" % ID, "itvidle%s" % ID
FLAVOR = "itv-h100-%s" % ID
WINDOW, STEP, IDLE_FOR = 30, 5, 20
TENANTS = [
    {"name": BUSY_TENANT, "namespaces": [BUSY_NS]},
    {"name": IDLE_TENANT, "namespaces": [IDLE_NS]},
]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def gpu_pod(name: str, namespace: str, gpus: int, util: str, fb_mib: str, node: str = "gpu-h100-1") -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {"lab.gpuaas.io/gpu-util": util, "lab.gpuaas.io/fb-used-mib": fb_mib}},
        "spec": {"nodeName": node, "tolerations": [GPU_TOLERATION],
                 "containers": [{"name": "main", "image": "registry.invalid/cuda:latest",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
    }


@pytest.fixture(scope="module")
def gpu_workloads(kube, lab):
    """busy: 2 GPUs at 85 % (40000 MiB each); idle: 1 GPU at 0 %; other (no tenant): 1 GPU at 30 %.
    Also a ResourceFlavor + a ClusterQueue named like the busy tenant with 4 GPUs nominal quota."""
    ns_api = kube.resources.get(api_version="v1", kind="Namespace")
    pod_api = kube.resources.get(api_version="v1", kind="Pod")
    # gpuaas.io/platform: bare GPU pods pinned to a node give exactly known GPUs to measure; the tenants' admission
    # policy refuses GPU pods outside Kueue in every other namespace (issue 11). The tenant mapping comes from TENANTS.
    for ns in (BUSY_NS, IDLE_NS, OTHER_NS):
        create_namespace(kube, ns, {"gpuaas.io/platform": "lab-test"})
    pods = [gpu_pod("train-0", BUSY_NS, 2, "85", "40000"), gpu_pod("notebook-0", IDLE_NS, 1, "0", "1000"),
            gpu_pod("etl-0", OTHER_NS, 1, "30", "2000")]
    for pod in pods:
        pod_api.create(body=pod, namespace=pod["metadata"]["namespace"])
    kueue_version = "kueue.x-k8s.io/%s" % lab.kueue_api
    rf_api = kube.resources.get(api_version=kueue_version, kind="ResourceFlavor")
    cq_api = kube.resources.get(api_version=kueue_version, kind="ClusterQueue")
    rf_api.create(body={"apiVersion": kueue_version, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}})
    cq_api.create(body={"apiVersion": kueue_version, "kind": "ClusterQueue", "metadata": {"name": BUSY_TENANT},
                        "spec": {"namespaceSelector": {}, "resourceGroups": [{
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [{"name": FLAVOR, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}})
    # every GPU of the three pods scraped with its pod labels ...
    wait_until(lambda: len(promql(lab, 'DCGM_FI_DEV_GPU_UTIL{namespace=~"%s|%s|%s"}' % (BUSY_NS, IDLE_NS, OTHER_NS))) == 4,
               90, "the simulated DCGM exporter to report the test pods' 4 GPUs")
    # ... for longer than the window, so every sample of the window belongs to them
    first = time.time()
    time.sleep(WINDOW + 2 * STEP)
    yield {"since": first}
    for pod in pods:
        pod_api.delete(name=pod["metadata"]["name"], namespace=pod["metadata"]["namespace"], grace_period_seconds=0)
    cq_api.delete(name=BUSY_TENANT)
    rf_api.delete(name=FLAVOR)
    for ns in (BUSY_NS, IDLE_NS, OTHER_NS):
        ns_api.delete(name=ns)


def utilization_task(**options) -> str:
    args = {"tenants": TENANTS, "window": "%ds" % WINDOW, "step": "%ds" % STEP, "idle_for": "%ds" % IDLE_FOR,
            "time": str(int(time.time()) - STEP)}
    args.update(options)
    return local_play("""
  tasks:
    - name: measure
      gpuaas.platform.gpu_utilization_info: %s
""") % json.dumps(args)


def test_gpu_utilization_exact_numbers(gpu_workloads, run_playbook):
    run = run_playbook(utilization_task(min_utilization=50, max_idle_gpus=0))
    assert run.rc == 0, run.explain()
    result = run.task_results("measure")[0]
    report = result["report"]
    assert report["label_variant"] == "namespace/pod"
    assert report["window"]["seconds"] == WINDOW and report["window"]["step"] == STEP
    tenants = {x["tenant"]: x for x in report["tenants"]}

    busy = tenants[BUSY_TENANT]
    assert (busy["gpus"], busy["idle_gpus"], busy["avg_utilization"], busy["p95_utilization"]) == (2, 0, 85.0, 85.0)
    assert busy["memory_used_mib"] == 80000.0
    assert busy["gpu_hours"] == round(2 * WINDOW / 3600, 4)            # 2 GPUs x 30 s
    assert busy["busy_gpu_hours"] == round(2 * WINDOW * 0.85 / 3600, 4)
    assert busy["pods"] == ["%s/train-0" % BUSY_NS]

    idle = tenants[IDLE_TENANT]
    assert (idle["gpus"], idle["idle_gpus"], idle["avg_utilization"], idle["p95_utilization"]) == (1, 1, 0.0, 0.0)
    assert idle["gpu_hours"] == round(WINDOW / 3600, 4)

    other = next(n for n in report["namespaces"] if n["namespace"] == OTHER_NS)
    assert (other["tenant"], other["gpus"], other["avg_utilization"]) == ("(no tenant)", 1, 30.0)

    mine = [g for g in report["gpus"] if g["namespace"] in (BUSY_NS, IDLE_NS, OTHER_NS)]
    assert len(mine) == 4 and {g["node"] for g in mine} == {"gpu-h100-1"}
    assert {g["model"] for g in mine} == {"NVIDIA H100 80GB HBM3"}
    assert all(g["uuid"].startswith("GPU-") for g in mine)
    notebook = next(g for g in mine if g["pod"] == "notebook-0")
    assert notebook["state"] == "idle" and notebook["idle_seconds"] >= IDLE_FOR and notebook["tenant"] == IDLE_TENANT
    assert sorted(g["state"] for g in mine) == ["busy", "busy", "busy", "idle"]

    # unallocated: every reported GPU held by no pod now; the lab has 16 H100 + 7 MIG slices
    cluster = report["cluster"]
    assert cluster["gpus"] == 23
    assert cluster["unallocated_gpus"] == cluster["gpus"] - cluster["allocated_gpus"]
    unallocated = {(g["node"], g["gpu"], g["mig_profile"]) for g in report["unallocated_gpus"]}
    assert not unallocated & {(g["node"], g["gpu"], g["mig_profile"]) for g in mine}
    assert cluster["unallocated_gpus"] <= 23 - 4

    # thresholds: the idle tenant fails min_utilization, the busy one passes; the idle GPU is named
    violations = {(v["check"], v["tenant"]): v for v in result["violations"]}
    assert ("min_utilization", IDLE_TENANT) in violations and ("min_utilization", BUSY_TENANT) not in violations
    message = violations[("min_utilization", IDLE_TENANT)]["message"]
    assert message.startswith("tenant %s: average GPU utilization 0%% over the last 30s is below the minimum 50%%" % IDLE_TENANT)
    assert "gpu-h100-1 GPU %s (%s/notebook-0) 0%%" % (notebook["gpu"], IDLE_NS) in message, message
    idle_violation = violations[("max_idle_gpus", None)]
    assert "held by %s/notebook-0 of tenant %s" % (IDLE_NS, IDLE_TENANT) in idle_violation["message"]
    assert report["result"] == "failed"

    # quota of the busy tenant's ClusterQueue (Kueue metrics or the ClusterQueue object)
    assert report["kueue_source"] in ("prometheus", "cluster")
    quota = [q for q in busy["quota"] if q["flavor"] == FLAVOR]
    assert quota and quota[0]["nominal"] == 4.0 and quota[0]["usage"] == 0.0
    recs = {(r["tenant"], r["kind"]) for r in result["recommendations"]}
    assert (None, "insufficient_data") in recs and (IDLE_TENANT, "idle_gpus") in recs


def test_validate_playbook_fails_on_thresholds_and_writes_report(gpu_workloads, run_playbook, tmp_path, lab):
    extra = {"gpuaas_tenants": TENANTS, "gpuaas_validate_window": "%ds" % WINDOW, "gpuaas_validate_step": "%ds" % STEP,
             "gpuaas_validate_idle_for": "%ds" % IDLE_FOR, "gpuaas_validate_health_checks": ["gpu_nodes"],
             "gpuaas_validate_min_utilization": 50, "gpuaas_validate_max_idle_gpus": None,
             "gpuaas_validate_report_path": str(tmp_path / "report")}
    # the lab inventory names the default lab's Prometheus; follow the lab under test (LAB_PORT_OFFSET)
    extra["gpuaas_prometheus"] = {"url": lab.prometheus_url}
    run = run_playbook(REPO / "playbooks" / "validate.yml", extra_vars=extra, inventory=REPO / "playbooks" / "inventory" / "lab")
    assert run.rc != 0, run.explain()
    failure = run.task_results("Fail when the platform is unhealthy")[0]
    text = "\n".join(failure["msg"])
    assert "GPU platform validation failed (1 problem(s)):" in text
    assert "tenant %s: average GPU utilization 0%%" % IDLE_TENANT in text and "notebook-0" in text
    assert BUSY_TENANT not in text

    table = run.task_results("Show GPU utilization per tenant")[0]["msg"]
    header = table[0].split()
    # one line per tenant and flavor with a GPU quota; a tenant without quota gets one line with flavor "-"
    assert header[:6] == ["TENANT", "FLAVOR", "GPUS", "IDLE", "AVG%", "P95%"]
    busy_rows = [line.split() for line in table if line.startswith(BUSY_TENANT + " ")]
    assert len(busy_rows) == 1 and busy_rows[0][:8] == [BUSY_TENANT, FLAVOR, "2", "0", "85", "85", "80000", "0.0167"]
    assert busy_rows[0][8] == "0/4"
    assert any(line.startswith(IDLE_TENANT + " ") and line.split()[1:5] == ["-", "1", "1", "0"] for line in table)

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["result"] == "failed"
    assert {h["object"] for h in report["health"]} >= {"Node/gpu-h100-0", "Node/gpu-h100-1", "Node/gpu-a100-mig-0"}
    assert all(h["ok"] for h in report["health"])
    markdown = (tmp_path / "report.md").read_text()
    assert markdown.startswith("# GPU platform validation report")
    assert "| %s | %s | 2 | 0 | 85 | 85 | 80000 | 0.0167 | 0/4 | 0 |" % (BUSY_TENANT, FLAVOR) in markdown
    assert "## Idle allocated GPUs" in markdown and "%s/notebook-0" % IDLE_NS in markdown


def test_validate_playbook_passes_thresholds_the_lab_meets(gpu_workloads, run_playbook, tmp_path, lab):
    extra = {"gpuaas_tenants": [TENANTS[0]], "gpuaas_validate_window": "%ds" % WINDOW,
             "gpuaas_validate_step": "%ds" % STEP, "gpuaas_validate_idle_for": "%ds" % IDLE_FOR,
             "gpuaas_validate_health_checks": ["gpu_nodes"], "gpuaas_validate_min_utilization": 80,
             "gpuaas_validate_max_idle_gpus": None, "gpuaas_validate_report_path": str(tmp_path / "ok")}
    # the lab inventory names the default lab's Prometheus; follow the lab under test (LAB_PORT_OFFSET)
    extra["gpuaas_prometheus"] = {"url": lab.prometheus_url}
    run = run_playbook(REPO / "playbooks" / "validate.yml", extra_vars=extra, inventory=REPO / "playbooks" / "inventory" / "lab")
    assert run.rc == 0, run.explain()
    report = json.loads((tmp_path / "ok.json").read_text())
    assert report["result"] == "passed" and report["violations"] == []
    assert next(x for x in report["tenants"] if x["tenant"] == BUSY_TENANT)["avg_utilization"] == 85.0


def test_warn_mode_does_not_fail(gpu_workloads, run_playbook, tmp_path, lab):
    extra = {"gpuaas_tenants": TENANTS, "gpuaas_validate_window": "%ds" % WINDOW, "gpuaas_validate_step": "%ds" % STEP,
             "gpuaas_validate_idle_for": "%ds" % IDLE_FOR, "gpuaas_validate_health_checks": [],
             "gpuaas_validate_min_utilization": 50, "gpuaas_validate_max_idle_gpus": None,
             "gpuaas_validate_on_failure": "warn",
             "gpuaas_validate_report_path": ""}
    # the lab inventory names the default lab's Prometheus; follow the lab under test (LAB_PORT_OFFSET)
    extra["gpuaas_prometheus"] = {"url": lab.prometheus_url}
    run = run_playbook(REPO / "playbooks" / "validate.yml", extra_vars=extra, inventory=REPO / "playbooks" / "inventory" / "lab")
    assert run.rc == 0, run.explain()
    warning = run.task_results("Warn when the platform is unhealthy")[0]["msg"]
    assert warning[0] == "WARNING - GPU platform validation found 1 problem(s):"
    assert warning[1].startswith("tenant %s:" % IDLE_TENANT)
