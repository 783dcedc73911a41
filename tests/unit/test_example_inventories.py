# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The copy-ready example inventories (playbooks/inventory/examples/, docs/production.md) are valid as shipped:
the whole-inventory validation of the tenants module passes, every variable is one a role declares (with the type
it declares), every value carries an explanation, and no lab-only setting leaks into them. The lab inventory marks
its lab-only settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "playbooks" / "inventory" / "examples"
LAB = REPO / "playbooks" / "inventory" / "lab"
ROLES = ["platform", "gpu_operator", "kueue", "keda", "tenants", "validate", "observability", "automation_rbac"]
SITES = ["kubernetes", "openshift"]
# Examples that are an overlay of a site (the OpenShift AI tenancy, installed with examples/openshift): checked for
# what every example promises (valid, declared, explained); their own content by tests/unit/module_utils/test_openshift_ai.py,
# tests/unit/module_utils/test_cohort_quotas.py (department-budgets, installed with either site) and
# tests/unit/modules/test_fleet_runner.py (multicluster).
OVERLAYS = ["openshift-ai", "department-budgets", "multicluster"]
KEY = re.compile(r"^(gpuaas_\w+):")

# Settings that only make sense on the local lab (docs/lab.md) and must never be copied to a real cluster.
LAB_ONLY_KEYS = {"gpuaas_charts_dir", "gpuaas_helm_post_renderer"}
LAB_ONLY_TEXT = ("LAB_DIR", "lab_post_renderer", "127.0.0.1", "tests/integration")


def group_vars(site_dir: Path) -> dict:
    merged: dict = {}
    for path in sorted((site_dir / "group_vars" / "all").glob("*.yml")):
        data = yaml.safe_load(path.read_text()) or {}
        overlap = set(merged) & set(data)
        assert not overlap, "%s sets %s again" % (path, overlap)
        merged.update(data)
    return merged


def role_options(role: str) -> dict:
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("site", SITES)
def test_example_passes_the_whole_inventory_validation(site):
    inv = group_vars(EXAMPLES / site)
    try:
        model = TenantModel.from_inventory(inv)
    except InventoryError as err:  # pragma: no cover - the failure message is the point
        pytest.fail("example inventory %s is invalid:\n%s" % (site, err))
    assert len(model.present_tenants) >= 2
    assert model.prometheus.url.startswith("http")


@pytest.mark.parametrize("site", OVERLAYS)
def test_overlay_example_passes_the_whole_inventory_validation(site):
    inv = group_vars(EXAMPLES / site)
    try:
        TenantModel.from_inventory(inv)
    except InventoryError as err:  # pragma: no cover - the failure message is the point
        pytest.fail("example inventory %s is invalid:\n%s" % (site, err))
    assert "K8S_AUTH_HOST" in (EXAMPLES / site / "hosts.yml").read_text()


@pytest.mark.parametrize("site", SITES + OVERLAYS)
def test_every_example_variable_is_declared_by_a_role_with_that_type(site):
    inv = group_vars(EXAMPLES / site)
    declared: set = set()
    for role in ROLES:
        options = role_options(role)
        declared |= set(options)
        mine = {k: v for k, v in inv.items() if k in options}
        result = ArgumentSpecValidator(options).validate(mine)
        assert not result.error_messages, "%s vs roles/%s argument_specs: %s" % (site, role, result.error_messages)
    unknown = sorted(set(inv) - declared)
    assert not unknown, "%s sets variables no role reads: %s" % (site, unknown)


@pytest.mark.parametrize("site", SITES + OVERLAYS)
def test_every_example_value_is_explained_and_nothing_is_lab_only(site):
    for path in sorted((EXAMPLES / site).rglob("*.yml")):
        text = path.read_text()
        for needle in LAB_ONLY_TEXT:
            assert needle not in text, "%s contains the lab-only %r" % (path, needle)
        assert not LAB_ONLY_KEYS & set(yaml.safe_load(text) or {}), path
        # every top-level variable sits in a block (lines between blank lines) that starts with a comment
        for block in re.split(r"\n\s*\n", text):
            lines = [ln for ln in block.splitlines() if ln.strip() and ln.strip() != "---"]
            keys = [ln for ln in lines if KEY.match(ln)]
            if keys:
                assert lines[0].lstrip().startswith("#"), "%s: no explanation above %s" % (path, keys[0])


@pytest.mark.parametrize("site", SITES)
def test_example_settings_agree_across_playbooks(site):
    inv = group_vars(EXAMPLES / site)
    assert inv["gpuaas_platform"] == site
    # the keda role installs KEDA where the tenants role keeps gpuaas-prometheus: one explicit value for both
    assert inv["gpuaas_keda_namespace"] == ("openshift-keda" if site == "openshift" else "keda")
    flavors = {f["name"]: f for f in inv["gpuaas_flavors"]}
    for entry in inv.get("gpuaas_gpu_operator_time_slicing", []):
        assert flavors[entry["flavor"]].get("node_labels"), entry
    if site == "openshift":
        approvals = {k: v for k, v in inv.items() if k.endswith("_olm_install_plan_approval")}
        assert len(approvals) == 5 and set(approvals.values()) == {"Manual"}, approvals
    else:
        for name in ("gpu_operator", "kueue", "keda"):
            assert inv["gpuaas_%s_chart_version" % name], "the %s chart is not pinned" % name
    hosts = yaml.safe_load((EXAMPLES / site / "hosts.yml").read_text())
    assert hosts["all"]["hosts"]["localhost"]["ansible_connection"] == "local"
    assert "K8S_AUTH_HOST" in (EXAMPLES / site / "hosts.yml").read_text()


def test_lab_inventory_marks_its_lab_only_settings():
    """Each lab-only setting of the lab inventory sits in a block whose comment says LAB-ONLY."""
    must_mark = {"gpuaas_charts_dir", "gpuaas_helm_post_renderer", "gpuaas_gpu_operator_driver_enabled",
                 "gpuaas_gpu_operator_nfd_enabled", "gpuaas_kueue_namespace", "gpuaas_kueue_helm_release",
                 "gpuaas_keda_namespace", "gpuaas_keda_helm_release", "gpuaas_keda_helm_values", "gpuaas_prometheus",
                 "gpuaas_kueue_manager_config_overrides"}
    marked: set = set()
    for path in sorted((LAB / "group_vars" / "all").glob("*.yml")):
        for block in re.split(r"\n\s*\n", path.read_text()):
            comments = " ".join(ln for ln in block.splitlines() if ln.lstrip().startswith("#"))
            if "LAB-ONLY" in comments:
                marked |= {m.group(1) for m in map(KEY.match, block.splitlines()) if m}
    assert must_mark <= marked, "not marked LAB-ONLY: %s" % sorted(must_mark - marked)


def test_the_fleet_example_splits_each_quota_over_its_workers():
    """playbooks/inventory/examples/multicluster: the shares its comment promises (12 GPUs over 16:8 -> 8 + 4)."""
    from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.clusters import worker_quotas

    model = TenantModel.from_inventory(group_vars(EXAMPLES / "multicluster"))
    assert [w.name for w in model.fleet.workers] == ["gpu-east", "gpu-west"]
    shares = worker_quotas(model.fleet, model.tenant("vision"))
    assert [shares[w][0].resources["nvidia.com/gpu"] for w in ("gpu-east", "gpu-west")] == ["8", "4"]
