# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/compatibility.md is the one version statement (issues 23/24): each "supported" cell equals the fact in the code
it names, and no other page restates a minimum version (they link to it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.compatibility import (
    KUBERNETES_MINIMUM,
    OLM_OPERATORS,
    OPENSHIFT_MINIMUM,
    unsupported_cluster,
    unsupported_olm_operator,
)
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


def test_the_refused_cluster_floors_are_the_tables():
    row = table()
    assert row["Kubernetes"]["supported"] == ">= %d.%d" % KUBERNETES_MINIMUM
    assert row["OpenShift"]["supported"] == ">= %d.%d" % OPENSHIFT_MINIMUM
    assert "KUBERNETES_MINIMUM" in row["Kubernetes"]["from"] and "OPENSHIFT_MINIMUM" in row["OpenShift"]["from"]


@pytest.mark.parametrize("kubernetes,openshift,refused", [
    ("v1.29.10+0e1f3a4", "4.16.9", "OpenShift 4.16.9"),
    ("v1.30.4", "4.16.0-rc.2", "OpenShift 4.16.0-rc.2"),
    ("v1.29.3", None, "Kubernetes v1.29.3"),
    ("v1.28.15+k3s1", None, "Kubernetes v1.28.15+k3s1"),
])
def test_the_platform_role_refuses_a_cluster_older_than_the_table(kubernetes, openshift, refused):
    row = table()
    product = refused.split()[0]
    floor = row[product]["supported"].replace(">= ", "")
    problems = unsupported_cluster(kubernetes, openshift)
    assert len(problems) == 1, problems  # one message per cluster, the platform it is
    assert problems[0].startswith("%s is not supported: supported %s %s and later (docs/compatibility.md)"
                                  % (refused, product, floor)), problems


@pytest.mark.parametrize("kubernetes,openshift", [
    ("v1.30.0", None), ("v1.35.4", None), ("v1.30.4+a1b2c3d", "4.17.0"), ("v1.33.5", "4.20.3"), (None, None),
])
def test_the_platform_role_accepts_the_supported_clusters(kubernetes, openshift):
    assert unsupported_cluster(kubernetes, openshift) == []


def test_the_platform_role_stops_on_platform_infos_unsupported():
    tasks = yaml.safe_load((ROOT / "roles" / "platform" / "tasks" / "main.yml").read_text())
    stop = next(t for t in tasks if "unsupported" in str(t.get("ansible.builtin.assert", "")))
    detect = next(i for i, t in enumerate(tasks) if "gpuaas.platform.platform_info" in t)
    assert tasks.index(stop) == detect + 1 or tasks.index(stop) == detect + 2  # right after detection, before all else
    assert "when" not in stop


# The docs/compatibility.md rows of the OLM operators the roles refuse below a floor, and the upstream shapes of
# their starting CSV names and versioned channels (Custom Metrics Autoscaler: stable only).
OPERATOR_ROWS = {"custom_metrics_autoscaler": ("KEDA / Custom Metrics Autoscaler", "keda"),
                 "gpu_operator": ("NVIDIA GPU Operator", "gpu_operator"),
                 "nfd": ("Node Feature Discovery (OpenShift)", "gpu_operator")}
CSV = {"custom_metrics_autoscaler": "custom-metrics-autoscaler.v%d.%d.1-467",
       "gpu_operator": "gpu-operator-certified.v%d.%d.2", "nfd": "nfd.%d.%d.0-202410251436"}
CHANNEL = {"gpu_operator": "v%d.%d", "nfd": "%d.%d"}


def stated_floor(name: str) -> tuple[int, int]:
    match = re.search(r"(\d+)\.(\d+) and later", table()[OPERATOR_ROWS[name][0]]["supported"])
    assert match, table()[OPERATOR_ROWS[name][0]]
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize("name", sorted(OPERATOR_ROWS))
def test_the_operator_floors_are_the_tables(name):
    assert OLM_OPERATORS[name].minimum == stated_floor(name)
    assert "OLM_OPERATORS" in table()[OPERATOR_ROWS[name][0]]["from"]
    role = OPERATOR_ROWS[name][1]
    for variable in (OLM_OPERATORS[name].channel_variable, OLM_OPERATORS[name].starting_csv_variable):
        role_default(role, variable)  # the message names variables the role has
    assert role_default(role, OLM_OPERATORS[name].channel_variable) == OLM_OPERATORS[name].default_channel


def test_red_hats_nfd_follows_the_openshift_floor():
    assert ">= %d.%d" % stated_floor("nfd") == table()["OpenShift"]["supported"]


def _below(floor: tuple[int, int]) -> tuple[int, int]:
    return (floor[0], floor[1] - 1) if floor[1] else (floor[0] - 1, 9)


def refusal_cases():
    for name in sorted(OPERATOR_ROWS):
        below = _below(stated_floor(name))
        yield name, "stable", CSV[name] % below, below
        if name in CHANNEL:
            yield name, CHANNEL[name] % below, None, below


@pytest.mark.parametrize("name,channel,starting_csv,found", list(refusal_cases()))
def test_the_roles_refuse_an_operator_older_than_the_table(name, channel, starting_csv, found):
    operator = OLM_OPERATORS[name]
    variable, value = ((operator.starting_csv_variable, starting_csv) if starting_csv
                       else (operator.channel_variable, channel))
    message = unsupported_olm_operator(name, channel, starting_csv)
    assert message is not None
    assert message.startswith("%s %s installs the " % (variable, value)), message
    assert " %d.%d, which this collection does not support: supported " % found in message, message
    assert "%d.%d and later (docs/compatibility.md)" % stated_floor(name) in message, message
    assert "set %s to stable" % operator.channel_variable in message, message


@pytest.mark.parametrize("name,channel,starting_csv", [
    ("gpu_operator", "v23.6", None),
    ("gpu_operator", "stable", "gpu-operator-certified.v23.6.2"),
    ("gpu_operator", "v25.3", "gpu-operator-certified.v23.6.1"),  # the CSV is what installs
    ("nfd", "4.16", None),
    ("nfd", "stable", "nfd.4.16.0-202409181642"),
    ("custom_metrics_autoscaler", "stable", "custom-metrics-autoscaler.v2.13.1-427"),
])
def test_the_roles_refuse_known_old_releases(name, channel, starting_csv):
    assert unsupported_olm_operator(name, channel, starting_csv) is not None


def accepted_cases():
    for name in sorted(OPERATOR_ROWS):
        floor = stated_floor(name)
        yield name, "stable", None  # a channel without a version is not checked
        yield name, None, CSV[name] % floor
        yield name, None, CSV[name] % (floor[0] + 1, 0)
        if name in CHANNEL:
            yield name, CHANNEL[name] % floor, None
            yield name, CHANNEL[name] % _below(floor), CSV[name] % floor  # the pinned CSV is a supported one


@pytest.mark.parametrize("name,channel,starting_csv", list(accepted_cases()) + [
    ("gpu_operator", "v24.9", None), ("gpu_operator", "v25.3", "gpu-operator-certified.v25.3.4"),
    ("nfd", "stable", "nfd.4.20.0-202511041933"), ("custom_metrics_autoscaler", "stable", None),
])
def test_the_roles_accept_the_supported_operators(name, channel, starting_csv):
    assert unsupported_olm_operator(name, channel, starting_csv) is None


@pytest.mark.parametrize("role,operators", [("keda", ["custom_metrics_autoscaler"]), ("gpu_operator", ["gpu_operator", "nfd"])])
def test_the_operator_preflights_check_the_roles_variables_before_any_write(role, operators):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "preflight.yml").read_text())
    check = str(next(t for t in tasks if "gpuaas.platform.platform_info" in t))
    for name in operators:
        assert name in check
        assert OLM_OPERATORS[name].channel_variable in check and OLM_OPERATORS[name].starting_csv_variable in check
    block = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())[0]["block"]
    assert block[0]["ansible.builtin.include_tasks"] == "preflight.yml"  # the role's first task
    assert "gpuaas_is_openshift" in block[0]["when"]
    # playbooks/install.yml: every preflight before the first role that writes, then one refusal with all messages
    install = yaml.safe_load((ROOT / "playbooks" / "install.yml").read_text())[0]["tasks"]
    steps = next(t for t in install if t.get("name") == "Install in dependency order")["block"]
    names = [str(s.get("ansible.builtin.include_role", {})) + str(s.get("ansible.builtin.assert", "")) for s in steps]
    preflight = next(i for i, s in enumerate(names) if "gpuaas.platform.%s'" % role in s and "preflight" in s)
    refuse = next(i for i, s in enumerate(names) if "gpuaas_unsupported" in s)
    first_write = next(i for i, s in enumerate(names) if "preflight" not in s and "gpuaas.platform." in s)
    assert preflight < refuse < first_write


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
    # the module's problems are the role's on OpenShift only, refused by the role on its own or collected by
    # playbooks/install.yml (gpuaas_preflight_collect) into one message with the other roles' preflights
    listed = next(t for t in tasks if "_gpuaas_kueue_problems" in (t.get("ansible.builtin.set_fact") or {}))
    assert "_gpuaas_kueue_integrations.openshift_problems" in listed["ansible.builtin.set_fact"]["_gpuaas_kueue_problems"]
    assert "if gpuaas_is_openshift | bool else []" in listed["ansible.builtin.set_fact"]["_gpuaas_kueue_problems"]
    stop = next(t for t in tasks if "_gpuaas_kueue_problems" in str(t.get("ansible.builtin.assert", "")))
    assert stop["when"] == "not gpuaas_preflight_collect | default(false) | bool"
    collect = next(t for t in tasks if "gpuaas_unsupported" in (t.get("ansible.builtin.set_fact") or {}))
    assert "_gpuaas_kueue_problems" in collect["ansible.builtin.set_fact"]["gpuaas_unsupported"]
    install = yaml.safe_load((ROOT / "playbooks" / "install.yml").read_text())
    includes = [t for t in install[0]["tasks"][1]["block"] if "ansible.builtin.include_role" in t]
    kueue = next(t for t in includes if t["ansible.builtin.include_role"].get("tasks_from") == "preflight.yml"
                 and t["ansible.builtin.include_role"]["name"] == "gpuaas.platform.kueue")
    assert kueue["vars"]["gpuaas_preflight_collect"] is True


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
