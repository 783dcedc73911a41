# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scaled_object module's builder (options -> ScaledObject): the same parser and builder as the tenants
module's autoscaling entries, plus the module-only overrides."""

from __future__ import annotations

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import PrometheusSettings, parse_autoscaling
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.modules.scaled_object import build


def params(**extra):
    out = {"name": "vllm", "namespace": "nlp-serve", "target": {"kind": "Deployment", "name": "vllm", "api_version": None},
           "min_replicas": 0, "max_replicas": 2, "polling_interval": None, "cooldown_period": None,
           "initial_cooldown_period": None, "idle_replica_count": None, "load": None,
           "idle_scale_to_zero": {"after_minutes": 10, "after_seconds": None, "utilization_threshold": "5",
                                  "pod_regex": None, "wake_query": None, "wake_threshold": "0"},
           "prometheus_url": "http://prom:9090", "authentication_ref": None, "triggers": [], "labels": None}
    out.update(extra)
    return out


def test_idle_scale_to_zero():
    warnings = []
    obj = build(params(), warnings)
    spec = obj["spec"]
    assert spec["minReplicaCount"] == 0 and spec["maxReplicaCount"] == 2
    assert spec["cooldownPeriod"] == 60 and spec["initialCooldownPeriod"] == 600
    (trig,) = spec["triggers"]
    assert trig["name"] == "gpu-busy" and trig["metadata"]["activationThreshold"] == "5"
    assert "[10m]" in trig["metadata"]["query"]
    assert any("back from zero" in w for w in warnings)
    # not labelled as a tenants-module object: the tenants module never prunes it
    assert "labels" not in obj["metadata"]


def test_module_and_inventory_build_the_same_object():
    """One definition of the triggers: the module's options are an inventory autoscaling entry."""
    entry = {"name": "vllm", "target": {"kind": "Deployment", "name": "vllm"}, "max_replicas": 4,
             "idle_scale_to_zero": {"after_seconds": 30, "wake_query": "sum(q)", "wake_threshold": "0",
                                    "utilization_threshold": "1"},
             "load": {"target_per_replica": "10"}}
    auto, _warnings = parse_autoscaling(entry, "nlp-serve", "http://prom:9090")
    from_inventory = keda.autoscaling_object(auto, PrometheusSettings(url="http://prom:9090"), False, {})
    module = build(params(max_replicas=4, load={"query": None, "target_per_replica": "10", "activation_threshold": None},
                          idle_scale_to_zero={"after_minutes": None, "after_seconds": 30, "utilization_threshold": "1",
                                              "pod_regex": None, "wake_query": "sum(q)", "wake_threshold": "0"}))
    from_inventory["metadata"].pop("labels", None)
    assert module == from_inventory


def test_wake_query_and_auth_and_extra_triggers():
    obj = build(params(authentication_ref={"name": "my-auth", "kind": "TriggerAuthentication"},
                       triggers=[{"type": "cron", "metadata": {"timezone": "UTC", "start": "0 8 * * *",
                                                               "end": "0 18 * * *", "desiredReplicas": "1"}}],
                       idle_scale_to_zero={"after_minutes": 15, "utilization_threshold": "1", "after_seconds": None,
                                           "pod_regex": None, "wake_query": "sum(pending)", "wake_threshold": "1"}))
    triggers = obj["spec"]["triggers"]
    assert [t.get("name") for t in triggers] == ["gpu-busy", "wake", None]
    assert triggers[0]["authenticationRef"] == {"name": "my-auth", "kind": "TriggerAuthentication"}
    assert triggers[1]["metadata"]["authModes"] == "bearer"
    assert "authenticationRef" not in triggers[2]  # the user's own trigger is passed unchanged
    assert triggers[2]["type"] == "cron"


def test_mistakes_are_listed():
    with pytest.raises(ValidationError) as info:
        build(params(prometheus_url=None, min_replicas=1, max_replicas=0, triggers=[{"metadata": {}}]))
    text = "\n".join(info.value.problems)
    assert "set prometheus_url" in text
    assert "min_replicas: must be 0 with idle_scale_to_zero" in text
    assert "max_replicas: must be at least 1" in text
    assert "triggers[0].type: is required" in text


def test_needs_a_trigger():
    with pytest.raises(ValidationError) as info:
        build(params(idle_scale_to_zero=None))
    assert "needs idle_scale_to_zero, load or triggers" in info.value.problems[0]


def test_overrides_and_statefulset():
    obj = build(params(target={"kind": "StatefulSet", "name": "nb", "api_version": None}, initial_cooldown_period=5))
    spec = obj["spec"]
    assert (spec["idleReplicaCount"], spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 2, 2)
    assert spec["initialCooldownPeriod"] == 5
