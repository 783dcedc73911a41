# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scaled_object module's builder (options -> ScaledObject)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.modules.scaled_object import build


def params(**extra):
    out = {"name": "vllm", "namespace": "nlp-serve", "target": {"kind": "Deployment", "name": "vllm", "api_version": "apps/v1"},
           "min_replicas": 0, "max_replicas": 2, "polling_interval": None, "cooldown_period": None,
           "initial_cooldown_period": None, "idle_replica_count": None,
           "idle_scale_to_zero": {"after_minutes": 10, "utilization_threshold": "5", "wake_query": None,
                                  "wake_threshold": "1"},
           "prometheus_url": "http://prom:9090", "authentication_ref": None, "triggers": [], "labels": None}
    out.update(extra)
    return out


def test_idle_scale_to_zero():
    obj = build(params())
    spec = obj["spec"]
    assert spec["minReplicaCount"] == 0 and spec["maxReplicaCount"] == 2
    assert spec["cooldownPeriod"] == 60 and spec["initialCooldownPeriod"] == 600
    (trig,) = spec["triggers"]
    assert trig["metadata"]["activationThreshold"] == "5"
    assert "[10m]" in trig["metadata"]["query"]
    # not labelled as a tenants-module object: the tenants module never prunes it
    assert "gpuaas.io/component" not in (obj["metadata"].get("labels") or {})


def test_wake_query_and_auth_and_extra_triggers():
    obj = build(params(authentication_ref={"name": "gpuaas-prometheus", "kind": "ClusterTriggerAuthentication"},
                       triggers=[{"type": "cron", "metadata": {"timezone": "UTC", "start": "0 8 * * *",
                                                               "end": "0 18 * * *", "desiredReplicas": "1"}}],
                       idle_scale_to_zero={"after_minutes": 15, "utilization_threshold": "1",
                                           "wake_query": "sum(pending)", "wake_threshold": "1"}))
    triggers = obj["spec"]["triggers"]
    assert [t.get("name") for t in triggers] == ["gpu-utilization", "wake", None]
    assert triggers[0]["authenticationRef"] == {"name": "gpuaas-prometheus", "kind": "ClusterTriggerAuthentication"}
    assert triggers[0]["metadata"]["authModes"] == "bearer"
    assert triggers[2]["type"] == "cron"


def test_mistakes_are_listed():
    with pytest.raises(ValidationError) as info:
        build(params(prometheus_url=None, min_replicas=1, max_replicas=0, triggers=[{"metadata": {}}]))
    text = "\n".join(info.value.problems)
    assert "set prometheus_url" in text
    assert "min_replicas: 0" in text
    assert "min_replicas <= max_replicas" in text
    assert "triggers[0].type is required" in text


def test_needs_a_trigger():
    with pytest.raises(ValidationError) as info:
        build(params(idle_scale_to_zero=None))
    assert "at least one trigger" in info.value.problems[0]
