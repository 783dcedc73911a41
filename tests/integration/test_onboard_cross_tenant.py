# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Onboarding one tenant still checks it against every inventory tenant, and survives a full reconcile (issue 15).

``playbooks/onboard_tenant.yml`` reconciles only the survey's tenant and, to cost one tenant's time at 500
tenants, no longer runs the tenants role's argument spec over the inventory's list: the module gets the whole list
and its cross-tenant checks must still refuse, before anything is written, a namespace another inventory tenant
claims and GPU quotas that only exceed the flavor's nodes together with the inventory's tenants. A tenant onboarded
that way and not yet added to Git is kept by the next full ``tenants.yml`` run (safe mode) and reported as drift.
Core lab only (no Kueue controller needed): ``source .lab/env`` (or any LAB_DIR), then pytest this file.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "playbooks" / "inventory" / "lab"
ONBOARD = REPO / "playbooks" / "onboard_tenant.yml"
OFFBOARD = REPO / "playbooks" / "offboard_tenant.yml"
TENANTS = REPO / "playbooks" / "tenants.yml"
MODULE_TASK = "Reconcile the GPU tenancy with the inventory"


def _module_result(run) -> dict:
    for play in run.report.get("plays", []):
        for task in play.get("tasks", []):
            if MODULE_TASK in task["task"]["name"]:
                return task["hosts"]["localhost"]
    raise AssertionError("the tenants module did not run:\n" + run.explain())


def _inventory_h100_gpus() -> Decimal:
    tenants = yaml.safe_load((INVENTORY / "group_vars" / "all" / "tenants.yml").read_text())["gpuaas_tenants"]
    return sum((Decimal(str(q["resources"].get("nvidia.com/gpu", 0))) for x in tenants if x.get("state", "present") == "present"
                for q in x.get("quotas", []) if q["flavor"] == "h100"), Decimal(0))


def test_onboarding_a_namespace_another_tenant_claims_is_refused_before_any_write(run_playbook, audit_writes):
    answers = {"tenant_name": "claimer", "tenant_namespaces": "claimer-dev,nlp-train", "tenant_flavor": "h100", "tenant_gpus": 0}
    with audit_writes() as audit:
        run = run_playbook(ONBOARD, answers, inventory=INVENTORY)
    assert run.rc != 0, run.explain()
    msg = " ".join(_module_result(run)["msg"].split())
    assert "namespace 'nlp-train' is already claimed by gpuaas_tenants[0] (nlp)" in msg, msg
    assert audit.events == [], audit.describe()


def test_onboarding_checks_gpu_capacity_with_the_inventorys_tenants(run_playbook, audit_writes):
    probe = run_playbook(ONBOARD, {"tenant_name": "capper", "tenant_flavor": "h100", "tenant_gpus": 0}, check=True, inventory=INVENTORY)
    assert probe.rc == 0, probe.explain()
    capacity = Decimal(_module_result(probe)["capacity"]["h100"]["nvidia.com/gpu"])
    free = capacity - _inventory_h100_gpus()
    assert free >= 0, "the lab inventory itself over-commits h100 (%s of %s)" % (_inventory_h100_gpus(), capacity)

    # one GPU more than the inventory's tenants leave free: refused, naming them, nothing written
    with audit_writes() as audit:
        run = run_playbook(ONBOARD, {"tenant_name": "capper", "tenant_flavor": "h100", "tenant_gpus": int(free) + 1},
                           inventory=INVENTORY)
    assert run.rc != 0, run.explain()
    msg = " ".join(_module_result(run)["msg"].split())
    assert "quotas ask for %s nvidia.com/gpu on flavor 'h100'" % (capacity + 1) in msg, msg
    assert "nlp=8" in msg and "capper=%d" % (int(free) + 1) in msg, msg
    assert audit.events == [], audit.describe()

    # exactly what is free fits (check mode: nothing written)
    fits = run_playbook(ONBOARD, {"tenant_name": "capper", "tenant_flavor": "h100", "tenant_gpus": int(free)}, check=True,
                        inventory=INVENTORY)
    assert fits.rc == 0, fits.explain()


def test_a_survey_onboarded_tenant_survives_the_next_full_reconcile_as_drift(run_playbook, kube, lab):
    name = "survey-kept"
    onboard = run_playbook(ONBOARD, {"tenant_name": name, "tenant_flavor": "h100", "tenant_gpus": 0,
                                     "tenant_users_group": "survey-team"}, inventory=INVENTORY)
    assert onboard.rc == 0, onboard.explain()
    cqs = kube.resources.get(api_version="kueue.x-k8s.io/%s" % lab.kueue_api, kind="ClusterQueue")
    try:
        full = run_playbook(TENANTS, inventory=INVENTORY)  # the reconcile job template: the inventory does not list it
        assert full.rc == 0, full.explain()
        result = _module_result(full)
        assert name in result["drift"]["unmanaged_tenants"], result["drift"]
        assert name not in result["offboarded"] and not [d for d in result["deleted"] if d["name"] == name]
        assert any(name in w and "gpuaas_tenants_prune" in w for w in result.get("warnings", [])), result.get("warnings")
        assert cqs.get(name=name).metadata.name == name
    finally:
        gone = run_playbook(OFFBOARD, {"tenant_name": name, "delete_namespaces": True, "drain_timeout": 60}, inventory=INVENTORY)
        assert gone.rc == 0, gone.explain()
