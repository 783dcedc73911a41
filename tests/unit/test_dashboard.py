# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Grafana dashboard of the observability role: Grafana's schema (grafana-foundation-sdk types), valid PromQL
(promtool), and only metrics that the DCGM exporter, Kueue (v0.17; kueue_cluster_queue_resource_pending since v0.19)
or our own recording rules publish."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.observe.promql import (
    DCGM_METRICS,
    KUEUE_METRICS,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.monitoring import RECORDED_METRICS, TENANT_INFO_METRIC, tenant_mapping_rule_group

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DASHBOARD = os.path.join(ROOT, "roles", "observability", "files", "gpuaas-gpu-dashboard.json")
RULES = os.path.join(ROOT, "roles", "observability", "files", "gpuaas-alerts.rules.yml")

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
                   "offset", "inf", "nan",
                   # aggregation operators (may be followed by a by/without clause instead of "(")
                   "sum", "avg", "count", "min", "max", "stddev", "stdvar", "topk", "bottomk", "quantile",
                   "count_values", "group", "limitk", "limit_ratio"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def load():
    with open(DASHBOARD, encoding="utf-8") as handle:
        return json.load(handle)


def expressions(dash):
    """Every PromQL expression: panel targets and query variables."""
    out = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            out.append(target["expr"])
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            match = re.match(r"label_values\((.+),\s*\w+\)$", query)
            assert match, "unexpected variable query %r" % query
            out.append(match.group(1))
    return out


def metric_names(expr):
    """Metric names used in a PromQL expression (label names, functions, keywords and strings removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                       # strings
    text = re.sub(r"\{[^}]*\}", "{}", text)                                # label matchers
    text = re.sub(r"\[[^\]]*\]", "[]", text)                               # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)
    text = re.sub(r"(?<![A-Za-z_:])[0-9][0-9.]*(ms|s|m|h|d|w|y)?", "0", text)   # numbers and durations
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or name.lower() in PROMQL_KEYWORDS:
            continue  # a function or a keyword
        names.add(name)
    return names


def known_metric(name):
    if name in DCGM_METRICS or name in KUEUE_METRICS or name in RECORDED_METRICS:
        return True
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in KUEUE_METRICS:
            return True
    return False


def test_metric_name_extraction():
    assert metric_names('sum by (cluster_queue) (kueue_pending_workloads{status="active"} offset 5m)') == {"kueue_pending_workloads"}
    assert metric_names('histogram_quantile(0.9, sum by (le) (rate(x_bucket{a="b"}[5m])))') == {"x_bucket"}
    assert metric_names('a * on (namespace) group_left (tenant) b:c{tenant=~"$t"} or vector(0)') == {"a", "b:c"}


def test_dashboard_loads_in_grafana_schema():
    from grafana_foundation_sdk.cog import plugins
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    plugins.register_default_plugins()
    original = load()
    decoded = json.loads(json.dumps(Dashboard.from_json(original).to_json(), cls=JSONEncoder))
    lost = []

    def walk(a, b, path):
        if isinstance(a, dict):
            for key, value in a.items():
                if key not in b:
                    lost.append(path + "." + key)
                else:
                    walk(value, b[key], path + "." + key)
        elif isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b), path
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, "%s[%d]" % (path, i))
        else:
            assert a == b, "%s: %r became %r" % (path, a, b)

    walk(original, decoded, "")
    assert not lost, "fields unknown to Grafana's dashboard schema: %s" % lost


def test_dashboard_structure():
    dash = load()
    assert dash["uid"] == "gpuaas-gpu-utilization" and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    titles = {p["title"] for p in dash["panels"]}
    for wanted in ("GPU utilization by tenant", "GPU utilization by project (namespace)", "Utilization per GPU",
                   "GPU quota vs usage per ClusterQueue", "Pending workloads per ClusterQueue"):
        assert wanted in titles
    cells = set()
    for panel in dash["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, "panel %r overlaps another" % panel["title"]
                cells.add((x, y))
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "tenant", "namespace"]


def test_per_tenant_quota_usage_pending_panels():
    """Issue 16: the validate report's quota vs usage vs pending per tenant, borrowing/lending and idle share."""
    panels = {p["title"]: p for p in load()["panels"]}
    quota = panels["GPU quota vs usage vs pending per tenant"]
    exprs = [t["expr"] for t in quota["targets"]]
    assert [re.search(r"\) \((\w+)\{", e).group(1) for e in exprs] == [
        "kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_resource_pending"]
    assert all('cluster_queue=~"$tenant"' in e and 'replica_role!="follower"' in e for e in exprs)
    assert "kueue_cluster_queue_lending_limit" in str(panels["Borrowed GPUs and lending limit per tenant"]["targets"])
    idle = panels["Idle share of allocated GPUs per tenant"]
    assert idle["fieldConfig"]["defaults"]["unit"] == "percentunit" and 'tenant=~"$tenant"' in idle["targets"][0]["expr"]


def test_dashboard_uses_only_published_metrics():
    used = set()
    for expr in expressions(load()):
        used |= metric_names(expr)
    unknown = sorted(m for m in used if not known_metric(m))
    assert not unknown, "metrics neither dcgm-exporter, Kueue nor our recording rules publish: %s" % unknown
    assert {"gpuaas:gpu_utilization", "gpuaas:gpu_memory_used_mib", TENANT_INFO_METRIC, "kueue_pending_workloads",
            "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota",
            "kueue_admission_wait_time_seconds_bucket", "kueue_cluster_queue_resource_pending",
            "kueue_cluster_queue_lending_limit"} == used
    # the recording rules the dashboard relies on exist: the static ones in the rule file, the tenant one is generated
    rules = yaml.safe_load(open(RULES, encoding="utf-8"))
    records = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    records.add(tenant_mapping_rule_group([{"name": "a", "namespaces": ["b"]}])["rules"][0]["record"])
    assert {m for m in used if ":" in m} <= records


def test_dashboard_promql_is_valid(tmp_path):
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    assert os.path.exists(promtool), "promtool is missing: apt-get install prometheus"
    rules = []
    for i, expr in enumerate(expressions(load())):
        expr = expr.replace("$__rate_interval", "5m").replace("$namespace", ".*").replace("$tenant", ".*")
        rules.append({"record": "dashboard:expr_%d" % i, "expr": expr})
    rules_file = tmp_path / "dashboard.rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: %d rules found" % len(rules) in proc.stdout


@pytest.mark.parametrize("expr", ['DCGM_FI_DEV_NOT_A_METRIC', 'kueue_made_up_total'])
def test_unknown_metrics_are_caught(expr):
    assert not all(known_metric(m) for m in metric_names(expr))
