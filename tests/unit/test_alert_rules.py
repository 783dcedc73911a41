# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The observability role's alert rules: valid for promtool, behaving as tests/unit/files/alerts_test.yml says,
and using only metrics the DCGM exporter and Kueue (v0.17) publish."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import yaml

from ansible_collections.gpuaas.platform.plugins.module_utils.observe.promql import DCGM_METRICS, KUEUE_METRICS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(ROOT, "roles", "observability", "files", "gpuaas-alerts.rules.yml")
RULE_TESTS = os.path.join(ROOT, "tests", "unit", "files", "alerts_test.yml")
METRIC_RE = re.compile(r"\b(DCGM_FI_[A-Z0-9_]+|kueue_[a-z0-9_]+)\b")


def promtool() -> str:
    path = shutil.which("promtool") or ("/usr/bin/promtool" if os.path.exists("/usr/bin/promtool") else None)
    assert path, "promtool is missing: apt-get install prometheus (Debian ships promtool with it)"
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], cwd=os.path.dirname(RULE_TESTS), capture_output=True, text=True,
                          timeout=120, check=False)


def test_promtool_check_rules():
    proc = run("check", "rules", RULES)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 7 rules found" in proc.stdout


def test_promtool_test_rules():
    proc = run("test", "rules", os.path.basename(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_has_a_promtool_test():
    rules = yaml.safe_load(open(RULES, encoding="utf-8"))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    records = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    assert records == {"gpuaas:gpu_utilization", "gpuaas:gpu_memory_used_mib"}
    assert alerts == {"GpuaasGpuAllocatedIdle", "GpuaasGpuXidErrors", "GpuaasDcgmExporterAbsent",
                      "GpuaasQueueBacklogGrowing", "GpuaasQuotaExhausted"}
    tests = yaml.safe_load(open(RULE_TESTS, encoding="utf-8"))
    fired = {case["alertname"] for group in tests["tests"] for case in group.get("alert_rule_test", [])
             if case.get("exp_alerts")}
    assert alerts <= fired, "alerts never shown firing in alerts_test.yml: %s" % sorted(alerts - fired)
    exprs = " ".join(case["expr"] for group in tests["tests"] for case in group.get("promql_expr_test", []))
    assert all(r in exprs for r in records), "recording rules without a promql_expr_test"


def test_rules_use_only_published_metrics():
    rules = yaml.safe_load(open(RULES, encoding="utf-8"))
    used = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            used.update(METRIC_RE.findall(rule["expr"]))
            if "alert" in rule:
                for label in ("severity", "component"):
                    assert label in rule["labels"], "%s has no %s label" % (rule["alert"], label)
                assert rule["annotations"]["description"]
    assert used == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS", "kueue_pending_workloads",
                    "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota"}
    unknown = sorted(m for m in used if m not in DCGM_METRICS and m not in KUEUE_METRICS)
    assert not unknown, "metrics that neither dcgm-exporter nor Kueue publish: %s" % unknown
