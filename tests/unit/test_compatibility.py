# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/compatibility.md is the one version statement (issues 23/24): each "supported" cell equals the fact in the code
it names, and no other page restates a minimum version (they link to it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import KUEUE_VERSIONS
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.admission import VAP_V
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.kueue_integrations import (
    DEFAULT_OPENSHIFT_OPERATOR,
    OPENSHIFT_OPERAND_LIMITS,
    unsupported_openshift_operator,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compatibility.md"
# upstream facts the table derives from: the Kubernetes minor in which the API the collection writes went GA, and
# the Kubernetes minor of each OpenShift minor (OpenShift 4.N ships Kubernetes 1.(N+13))
GA_IN = {"admissionregistration.k8s.io/v1": (1, 30)}
OPENSHIFT_KUBERNETES_OFFSET = 13


def table() -> dict[str, dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- compatibility table")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("component", "---"):
            continue
        rows[cells[0]] = {"supported": cells[1], "from": cells[2], "tested": cells[3]}
    return rows


def role_default(role: str, name: str) -> str:
    return str(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())[name])


def versions_env(name: str) -> str:
    match = re.search(r"^%s=(\S+)" % name, (ROOT / "lab" / "versions.env").read_text(), re.M)
    assert match, name
    return match.group(1)


def minor(text: str) -> tuple[int, int]:
    numbers = [int(x) for x in re.findall(r"\d+", text)[:2] + ["0"]]
    return numbers[0], numbers[1]


def test_ansible_core_floor_is_the_runtime_and_every_role():
    floor = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert floor.startswith(">=")
    stated = table()["ansible-core"]["supported"]
    assert minor(stated) == minor(floor), (stated, floor)
    for meta in sorted((ROOT / "roles").glob("*/meta/main.yml")):
        declared = str(yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"])
        assert minor(declared) == minor(floor), "%s says %s, meta/runtime.yml %s" % (meta, declared, floor)


def test_python_versions_are_the_test_matrix_entries():
    script = (ROOT / "tests" / "matrix" / "matrix.sh").read_text()
    entries = re.search(r'^MATRIX=\$\{MATRIX:-"([^"]+)"\}', script, re.M).group(1).split()
    pythons = sorted({e.split(":")[0] for e in entries}, key=minor)
    cores = sorted({e.split(":")[1] for e in entries}, key=minor)
    row = table()
    assert row["Python (controller / execution environment)"]["supported"] == ", ".join(pythons)
    assert row["ansible-core"]["tested"].startswith(", ".join(cores) + " ")
    assert minor(cores[0]) == minor(row["ansible-core"]["supported"])  # the floor is tested


def test_kubernetes_and_openshift_floors_follow_the_admission_api():
    row = table()
    k8s = GA_IN[VAP_V]
    assert row["Kubernetes"]["supported"] == ">= %d.%d" % k8s
    assert row["OpenShift"]["supported"] == ">= 4.%d" % (k8s[1] - OPENSHIFT_KUBERNETES_OFFSET)
    assert row["Kubernetes"]["tested"].startswith(versions_env("KUBERNETES_VERSION").lstrip("v") + " ")


def test_kueue_rows_are_the_served_apis_and_the_operand_limits():
    row = table()
    assert row["Kueue (upstream)"]["supported"] == "kueue.x-k8s.io " + ", ".join(KUEUE_VERSIONS)
    for name in ("KUEUE_VERSION", "KUEUE_V1BETA1_VERSION"):
        assert versions_env(name) in row["Kueue (upstream)"]["tested"], name
    channel = role_default("kueue", "gpuaas_kueue_olm_channel")
    assert channel.endswith("v" + DEFAULT_OPENSHIFT_OPERATOR)
    assert row["Red Hat build of Kueue"]["supported"] == "operator %s (channel %s by default)" % (
        ", ".join(sorted(OPENSHIFT_OPERAND_LIMITS, key=minor)), channel)


@pytest.mark.parametrize("channel,starting_csv,variable,version", [
    ("stable-v1.2", None, "gpuaas_kueue_olm_channel", "1.2"),
    ("stable-v1.5", None, "gpuaas_kueue_olm_channel", "1.5"),
    ("stable-v1.4", "kueue-operator.v1.2.1", "gpuaas_kueue_olm_starting_csv", "1.2"),  # the CSV is what installs
    ("stable-v2.0", None, "gpuaas_kueue_olm_channel", "2.0"),
])
def test_the_kueue_role_refuses_a_red_hat_kueue_outside_the_supported_range(channel, starting_csv, variable, version):
    """The preflight's message (kueue_integrations_info openshift_problems) names the table's supported operators."""
    stated = re.match(r"operator ([\d., ]+) \(", table()["Red Hat build of Kueue"]["supported"]).group(1)
    message = unsupported_openshift_operator(channel, starting_csv)
    assert message is not None
    assert message.startswith("%s %s installs the Red Hat build of Kueue %s" % (variable, starting_csv or channel, version))
    assert "supported operator %s (docs/compatibility.md)" % stated in message, message


@pytest.mark.parametrize("channel,starting_csv", [
    ("stable-v1.3", None), ("stable-v1.4", None), (None, None), ("stable", None),
    ("stable-v1.5", "kueue-operator.v1.4.1"),  # the pinned CSV is a supported one
])
def test_the_kueue_role_accepts_the_supported_red_hat_kueue(channel, starting_csv):
    assert unsupported_openshift_operator(channel, starting_csv) is None
    assert "stable-v%s" % DEFAULT_OPENSHIFT_OPERATOR == role_default("kueue", "gpuaas_kueue_olm_channel")


def test_the_kueue_preflight_stops_on_the_modules_problems_on_openshift():
    tasks = yaml.safe_load((ROOT / "roles" / "kueue" / "tasks" / "preflight.yml").read_text())
    info = next(t for t in tasks if "gpuaas.platform.kueue_integrations_info" in t)
    args = info["gpuaas.platform.kueue_integrations_info"]
    assert "gpuaas_kueue_olm_channel" in args["openshift_channel"]
    assert "gpuaas_kueue_olm_starting_csv" in args["openshift_starting_csv"]
    stop = next(t for t in tasks if "openshift_problems" in str(t.get("ansible.builtin.assert", "")))
    assert stop["when"] == "gpuaas_is_openshift | bool"


@pytest.mark.parametrize("component,role,chart,channel", [
    ("KEDA / Custom Metrics Autoscaler", "keda", "gpuaas_keda_chart_version", "gpuaas_keda_olm_channel"),
    ("NVIDIA GPU Operator", "gpu_operator", "gpuaas_gpu_operator_chart_version", "gpuaas_gpu_operator_olm_channel"),
    ("Node Feature Discovery (OpenShift)", "gpu_operator", None, "gpuaas_nfd_olm_channel"),
    ("cert-manager Operator (OpenShift, for Kueue)", "kueue", None, "gpuaas_cert_manager_olm_channel"),
])
def test_operator_channels_and_charts_are_the_roles_defaults(component, role, chart, channel):
    row = table()[component]
    assert row["supported"].endswith("channel %s" % role_default(role, channel)), row
    if chart:
        pinned = ("KEDA chart: newest unless pinned", "chart: newest unless pinned")
        assert role_default(role, chart) == "" and row["supported"].startswith(pinned)
    assert channel in row["from"] and (chart is None or chart in row["from"])


def test_kubernetes_core_and_development_floors():
    row = table()
    deps = yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"]
    assert row["kubernetes.core"]["supported"].replace(" ", "") == deps["kubernetes.core"]
    dev = (ROOT / "requirements-dev.txt").read_text()
    core = re.search(r"^ansible-core>=(\S+)", dev, re.M).group(1)
    assert "ansible-core >= %s" % core in row["developing the collection (`make test`: ansible-lint, molecule)"]["supported"]


# a minimum version of a component the table covers, written anywhere but the table
RESTATED = re.compile(r"(ansible-core|Python|Kubernetes|OpenShift|kubernetes\.core|helm`?(?: binary)?)\s*\(?\s*(>=|≥)\s*v?\d"
                      r"|requires_ansible|'ansible-core>=", re.I)


def test_no_other_page_restates_a_supported_version():
    pages = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").glob("*.md") if p != DOC)
    pages += sorted((ROOT / "roles").glob("*/README.md"))
    found = []
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if RESTATED.search(line):
                found.append("%s:%d: %s" % (page.relative_to(ROOT), number, line.strip()[:120]))
    assert not found, "state versions only in docs/compatibility.md and link to it:\n" + "\n".join(found)


def test_the_pages_that_name_requirements_link_to_the_table():
    for page in ("README.md", "docs/production.md", "docs/lifecycle.md", "docs/awx.md", "docs/install.md"):
        assert "compatibility.md" in (ROOT / page).read_text(encoding="utf-8"), page
