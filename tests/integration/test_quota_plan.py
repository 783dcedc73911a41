# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quota plan on the lab (issue 26): playbooks/quota_plan.yml on the lab's Prometheus (real Kueue, the
SIMULATED DCGM exporter) and on a trace file, reporting per tenant for the current and the proposed inventory, and
writing nothing to the cluster (the API server's audit log, read by ``audit_writes``, has no write request of the
run — not even a dry run).

Scenario (own names): one cohort, one H100 flavor, capacity 4 GPUs;
* capped:  nominal 1 GPU, borrowing limit 0, three 1-GPU Jobs -> 1 running, 2 pending all the time;
* lender:  nominal 3 GPUs, no Job.
Proposal: the capped tenant without its borrowing limit. Expected, worked out from the scenario over a window of
W = WINDOW - STEP seconds of points (every job seen from the first point to the last, so each lasts W):
* current:  the capped tenant runs one job at a time: served 1 x W GPU-seconds inside the window, waits 0, W, 2W
  (p50 W, p95 2W: the pending ones start one after the other), borrowed 0, the lender lends 0;
* proposed: it borrows 2 GPUs from the lender: served 3 x W, waits 0, borrowed 2 x W = lent by the lender.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import yaml

from test_lab import promql, wait_until  # noqa: F401  pylint: disable=import-error
from test_fair_sharing_scenarios import require_kueue  # noqa: F401  pylint: disable=import-error
from conftest import kwok_job, site_inventory

REPO = Path(__file__).resolve().parents[2]
ID = uuid.uuid4().hex[:4]
FLAVOR, COHORT = "qp-h100-%s" % ID, "qp-pool-%s" % ID
CAPPED, LENDER = "qpcapped%s" % ID, "qplender%s" % ID
NS = {CAPPED: "qp-capped-%s" % ID, LENDER: "qp-lender-%s" % ID}
WINDOW, STEP = 60, 5
W_HOURS = (WINDOW - STEP) / 3600.0
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"


def tenants(borrowing_limit: bool = True) -> list:
    capped = {"flavor": FLAVOR, "resources": {GPU: 1}}
    if borrowing_limit:
        capped["borrowing_limit"] = {GPU: 0}
    return [{"name": CAPPED, "namespaces": [NS[CAPPED]], "cohort": COHORT, "quotas": [capped]},
            {"name": LENDER, "namespaces": [NS[LENDER]], "cohort": COHORT,
             "quotas": [{"flavor": FLAVOR, "resources": {GPU: 3}}]}]


def inventory(tenant_list=None) -> dict:
    return {
        "gpuaas_flavors": [{"name": FLAVOR, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]}],
        "gpuaas_cohorts": [{"name": COHORT}],
        "gpuaas_priorities": [],
        "gpuaas_tenants": tenants() if tenant_list is None else tenant_list,
        "gpuaas_tenants_check_capacity": False,
        "gpuaas_tenants_lock": False,
    }


def submit(kube, count: int) -> None:
    jobs = kube.resources.get(api_version="batch/v1", kind="Job")
    for i in range(count):
        jobs.create(namespace=NS[CAPPED], body=kwok_job({GPU: "1"}, name="work-%d" % i, image="registry.invalid/cuda:1",
                                                        annotations={"lab.gpuaas.io/gpu-util": "80"}))


def steady(lab) -> bool:
    def now(metric):
        rows = promql(lab, 'max(%s{cluster_queue="%s",replica_role!="follower"})' % (metric, CAPPED))
        return float(rows[0]["value"][1]) if rows else None
    return ((now("kueue_cluster_queue_resource_usage"), now("kueue_cluster_queue_resource_pending")) == (1.0, 2.0)
            and len(promql(lab, 'DCGM_FI_DEV_GPU_UTIL{namespace="%s"}' % NS[CAPPED])) == 1)


def plan_vars(lab, proposed_file: Path, **extra) -> dict:
    out = {"gpuaas_quota_plan_proposed_file": str(proposed_file), "gpuaas_quota_plan_capacity": {FLAVOR: 4},
           "gpuaas_prometheus": {"url": lab.prometheus_url}}
    out.update(extra)
    return out


@pytest.fixture(scope="module")
def scenario(lab, kube, run_playbook, tmp_path_factory):
    require_kueue(lab, kube)
    if lab.kueue_api != "v1beta2":
        pytest.skip("needs the v1beta2 Kueue controller")
    site = tmp_path_factory.mktemp("qp-site")
    hosts = site_inventory(site, inventory())
    proposed = site / "proposed.yml"
    proposed.write_text(yaml.safe_dump({"gpuaas_tenants_override": tenants(borrowing_limit=False)}))
    run = run_playbook(REPO / "playbooks" / "tenants.yml", inventory=hosts)
    assert run.rc == 0, run.explain()
    try:
        submit(kube, 3)
        wait_until(lambda: steady(lab), 120, "Kueue to admit 1 of 3 Jobs (2 pending) and DCGM to show it")
        time.sleep(WINDOW + 2 * STEP)  # every point of the window sees the steady state
        yield {"site": site, "hosts": hosts, "proposed": proposed, "end": int(time.time()) - STEP}
    finally:
        jobs = kube.resources.get(api_version="batch/v1", kind="Job")
        try:
            jobs.delete(namespace=NS[CAPPED], body={"propagationPolicy": "Background"},
                        label_selector="kueue.x-k8s.io/queue-name=default")
        except Exception:  # pylint: disable=broad-except
            pass
        gone = inventory([{"name": n, "namespaces": [NS[n]], "state": "absent"} for n in NS])
        gone["gpuaas_delete_namespaces"] = True
        gone["gpuaas_drain_timeout"] = 60
        run_playbook(REPO / "playbooks" / "tenants.yml", inventory=site_inventory(tmp_path_factory.mktemp("qp-gone"), gone))
        for kind, name in (("Cohort", COHORT), ("ResourceFlavor", FLAVOR)):
            try:
                kube.resources.get(api_version=KUEUE, kind=kind).delete(name=name)
            except Exception:  # pylint: disable=broad-except
                pass


def figures(run, variant):
    return run.task_results("Replay the demand")[0]["plan"]["variants"][variant]["tenants"]


def test_plan_on_the_lab_prometheus_writes_nothing_and_predicts_the_borrowing(scenario, lab, run_playbook, audit_writes):
    report = scenario["site"] / "plan"
    extra = plan_vars(lab, scenario["proposed"], gpuaas_quota_plan_window="%ds" % WINDOW,
                      gpuaas_quota_plan_step="%ds" % STEP, gpuaas_quota_plan_time=str(scenario["end"]),
                      gpuaas_quota_plan_report_path=str(report))
    with audit_writes() as writes:
        run = run_playbook(REPO / "playbooks" / "quota_plan.yml", extra_vars=extra, inventory=scenario["hosts"])
    assert run.rc == 0, run.explain()
    assert writes.events == [] and writes.dry_run_events == [], writes.describe()
    result = run.task_results("Replay the demand")[0]
    assert result["changed"] is False
    assert result["demand"]["source"] == "prometheus"
    # one pod seen (1 GPU) + the 2 GPUs pending at the end of the window
    assert (result["demand"]["jobs"], result["demand"]["notes"]["pending_jobs_added"]) == (3, 2)
    current, proposed = figures(run, "current"), figures(run, "proposed")

    def approx(value):
        return pytest.approx(value, abs=1.5e-3)   # figures are rounded to 1e-3 h
    assert current[CAPPED]["served_gpu_hours"] == approx(1 * W_HOURS)
    assert current[CAPPED]["wait_p50_minutes"] == pytest.approx(W_HOURS * 60, abs=0.01)
    assert current[CAPPED]["wait_p95_minutes"] == pytest.approx(2 * W_HOURS * 60, abs=0.01)
    assert (current[CAPPED]["borrowed_gpu_hours"], current[LENDER]["lent_gpu_hours"]) == (0.0, 0.0)
    assert proposed[CAPPED]["served_gpu_hours"] == approx(3 * W_HOURS)
    assert proposed[CAPPED]["wait_p95_minutes"] == 0.0
    assert proposed[CAPPED]["borrowed_gpu_hours"] == approx(2 * W_HOURS)
    assert proposed[LENDER]["lent_gpu_hours"] == approx(2 * W_HOURS)
    assert (current[LENDER]["jobs"], proposed[LENDER]["served_gpu_hours"]) == (0, 0.0)
    # the files on the controller: the same figures
    saved = json.loads(Path(str(report) + ".json").read_text())
    assert saved["plan"]["variants"]["proposed"]["tenants"][CAPPED] == proposed[CAPPED]
    assert "| %s | proposed |" % CAPPED in Path(str(report) + ".md").read_text()
    assert "<svg" in Path(str(report) + ".html").read_text()


def test_plan_on_a_trace_file_in_check_mode_writes_nothing(scenario, lab, run_playbook, audit_writes, tmp_path):
    # two 1-GPU jobs of 10 minutes at t=0 and one at t=5 for the capped tenant; one job of an unknown tenant
    trace = {"params": {"horizon": 30}, "jobs": [
        {"id": "a", "tenant": CAPPED, "pool": FLAVOR, "size": 1, "submit": 0, "duration": 10},
        {"id": "b", "tenant": CAPPED, "pool": FLAVOR, "size": 1, "submit": 0, "duration": 10},
        {"id": "c", "tenant": CAPPED, "pool": FLAVOR, "size": 1, "submit": 5, "duration": 10},
        {"id": "d", "tenant": "somebody-else", "pool": FLAVOR, "size": 1, "submit": 0, "duration": 10}]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    with audit_writes() as writes:
        run = run_playbook(REPO / "playbooks" / "quota_plan.yml", check=True, inventory=scenario["hosts"],
                           extra_vars=plan_vars(lab, scenario["proposed"], gpuaas_quota_plan_trace=str(path)))
    assert run.rc == 0, run.explain()
    assert writes.events == [] and writes.dry_run_events == [], writes.describe()
    result = run.task_results("Replay the demand")[0]
    assert (result["demand"]["source"], result["plan"]["jobs_outside_tenancy"]) == ("trace", 1)
    current, proposed = figures(run, "current"), figures(run, "proposed")
    # current: one at a time -> b waits 10, c waits 15 (starts at 20); p50 of [0, 10, 15] = 10, p95 = 15
    assert (current[CAPPED]["wait_p50_minutes"], current[CAPPED]["wait_p95_minutes"]) == (10.0, 15.0)
    assert current[CAPPED]["served_gpu_hours"] == round(30 / 60, 3)
    # proposed: no borrowing limit, every job starts when submitted
    assert (proposed[CAPPED]["wait_p50_minutes"], proposed[CAPPED]["wait_p95_minutes"]) == (0.0, 0.0)
    # borrowed (lent by the lender): 1 GPU above the nominal 1 over 0..5, 2 over 5..10, none after -> 15 GPU-minutes
    assert proposed[CAPPED]["borrowed_gpu_hours"] == round(15 / 60, 3) == proposed[LENDER]["lent_gpu_hours"]
