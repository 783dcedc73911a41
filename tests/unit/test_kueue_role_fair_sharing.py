# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kueue role's fair-sharing preemption strategies (issue 26): what Configuration the role renders, and that
its preflight refuses exactly the lists Kueue's own Configuration validation refuses (Kueue would not start)."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLE = os.path.join(ROOT, "roles", "kueue")
S2A, S2B = "LessThanOrEqualToFinalShare", "LessThanInitialShare"
# Kueue v0.19.2 pkg/config/validation.go validStrategySets: the only lists a Configuration may carry
KUEUE_VALID = ([S2A], [S2B], [S2A, S2B])


def _load(path):
    data = yaml.safe_load(open(path, encoding="utf-8")) or {}
    return {k: trust_as_template(v) if isinstance(v, str) else v for k, v in data.items()}


def _templar(**overrides):
    variables = _load(os.path.join(ROLE, "defaults", "main.yml"))
    variables.update(_load(os.path.join(ROLE, "vars", "main.yml")))
    variables["_gpuaas_kueue_integrations"] = {"frameworks": ["batch/job"]}
    variables.update(overrides)
    return Templar(loader=DataLoader(), variables=variables)


def _config(**overrides):
    return _templar(**overrides).template(trust_as_template("{{ _gpuaas_kueue_manager_config }}"))


def test_default_is_only_rule_s2a():
    # the measured change: without LessThanInitialShare a borrower cannot take another tenant's last borrowed job
    assert _config()["fairSharing"] == {"preemptionStrategies": [S2A]}


def test_kueues_own_default_can_be_restored():
    assert _config(gpuaas_kueue_fair_sharing_preemption_strategies=[S2A, S2B])["fairSharing"] == {
        "preemptionStrategies": [S2A, S2B]}


def test_no_fair_sharing_block_when_fair_sharing_is_off():
    assert "fairSharing" not in _config(gpuaas_kueue_fair_sharing=False)


def _preflight_problems():
    """The preflight's list of problems (task "List the Kueue settings the cluster would refuse") and its vars; the
    role refuses when it is not empty (or playbooks/install.yml collects it into one message)."""
    tasks = yaml.safe_load(open(os.path.join(ROLE, "tasks", "preflight.yml"), encoding="utf-8"))
    found = [t for t in tasks if "_gpuaas_kueue_problems" in (t.get("ansible.builtin.set_fact") or {})]
    assert len(found) == 1
    refuse = [t for t in tasks if "_gpuaas_kueue_problems" in str(t.get("ansible.builtin.assert", {}).get("that", ""))]
    assert len(refuse) == 1
    return found[0]["ansible.builtin.set_fact"]["_gpuaas_kueue_problems"], found[0]["vars"]


@pytest.mark.parametrize("strategies,accepted", [
    ([S2A], True), ([S2B], True), ([S2A, S2B], True),
    ([S2B, S2A], False), ([], False), ([S2A, S2A], False), (["LessThanOrEqualToInitialShare"], False),
])
def test_preflight_refuses_what_kueue_refuses(strategies, accepted):
    assert (strategies in KUEUE_VALID) is accepted   # the case table agrees with Kueue's list
    expression, task_vars = _preflight_problems()
    overrides = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in task_vars.items()}
    problems = _templar(gpuaas_kueue_fair_sharing_preemption_strategies=strategies, gpuaas_is_openshift=False,
                        **overrides).template(trust_as_template(expression.strip()))
    assert (problems == []) is accepted, problems
    if not accepted:
        assert "Kueue would not start" in problems[0]


def test_argument_spec_states_the_default():
    spec = yaml.safe_load(open(os.path.join(ROLE, "meta", "argument_specs.yml"), encoding="utf-8"))
    option = spec["argument_specs"]["main"]["options"]["gpuaas_kueue_fair_sharing_preemption_strategies"]
    defaults = yaml.safe_load(open(os.path.join(ROLE, "defaults", "main.yml"), encoding="utf-8"))
    assert option["default"] == defaults["gpuaas_kueue_fair_sharing_preemption_strategies"] == [S2A]
    assert sorted(option["choices"]) == sorted([S2A, S2B])
