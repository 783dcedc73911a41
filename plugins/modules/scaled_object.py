#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: scaled_object
short_description: Manage KEDA ScaledObjects, with GPU-idle scale-to-zero from DCGM metrics
version_added: 0.1.0
description:
  - Creates, updates or deletes a KEDA C(ScaledObject) (C(keda.sh/v1alpha1)) with server-side apply.
  - O(idle_scale_to_zero) adds a Prometheus trigger on the highest C(DCGM_FI_DEV_GPU_UTIL) of the target's pods
    over the idle window (both C(namespace)/C(pod) and C(exported_namespace)/C(exported_pod) label styles), so
    KEDA scales the target to zero once its GPUs stayed idle for O(idle_scale_to_zero.after_minutes).
  - O(triggers) are passed to KEDA unchanged (any scaler).
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  name:
    description: Name of the ScaledObject.
    type: str
    required: true
  namespace:
    description: Namespace of the ScaledObject and of its target.
    type: str
    required: true
  target:
    description: The workload to scale (any resource with a C(/scale) subresource in the same namespace).
    type: dict
    suboptions:
      kind:
        description: Kind of the target.
        type: str
        default: Deployment
      name:
        description: Name of the target.
        type: str
        required: true
      api_version:
        description: API version of the target (default C(apps/v1)).
        type: str
        default: apps/v1
  min_replicas:
    description: C(minReplicaCount).
    type: int
    default: 0
  max_replicas:
    description: C(maxReplicaCount).
    type: int
    default: 1
  polling_interval:
    description: Seconds between trigger checks (C(pollingInterval)).
    type: int
  cooldown_period:
    description: Seconds after the last active trigger before scaling to zero (C(cooldownPeriod)).
    type: int
  initial_cooldown_period:
    description: Seconds after creation before scaling to zero is allowed (C(initialCooldownPeriod)).
    type: int
  idle_replica_count:
    description: Replicas when every trigger is inactive (KEDA only accepts 0).
    type: int
  idle_scale_to_zero:
    description: Scale to zero when the target's GPUs were idle for a while.
    type: dict
    suboptions:
      after_minutes:
        description: Idle window in minutes.
        type: int
        default: 15
      utilization_threshold:
        description: GPU utilization (percent) at or below which the GPU counts as idle.
        type: str
        default: "1"
      wake_query:
        description:
          - A PromQL query that, when above O(idle_scale_to_zero.wake_threshold), brings the target back from
            zero (for example pending requests at a gateway). Without it, the target stays at zero until scaled by hand
            or by another trigger.
        type: str
      wake_threshold:
        description: Threshold of O(idle_scale_to_zero.wake_query).
        type: str
        default: "1"
  prometheus_url:
    description:
      - Prometheus (or Thanos querier) address for O(idle_scale_to_zero); the C(gpuaas_prometheus.url) setting.
      - Required with O(idle_scale_to_zero).
    type: str
  authentication_ref:
    description:
      - C(ClusterTriggerAuthentication) (or C(TriggerAuthentication)) holding the Prometheus bearer token / CA for
        the generated trigger. The C(gpuaas.platform.tenants) module creates one named C(gpuaas-prometheus).
    type: dict
    suboptions:
      name:
        description: Name of the authentication object.
        type: str
        required: true
      kind:
        description: Its kind.
        type: str
        choices: [ClusterTriggerAuthentication, TriggerAuthentication]
        default: ClusterTriggerAuthentication
  triggers:
    description: Additional KEDA triggers, as in the ScaledObject spec (C(type), C(metadata), ...).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
seealso:
  - module: gpuaas.platform.tenants
"""

EXAMPLES = r"""
- name: Scale the vLLM server to zero after 15 idle GPU minutes
  gpuaas.platform.scaled_object:
    name: vllm
    namespace: nlp-serve
    target: {kind: Deployment, name: vllm}
    max_replicas: 2
    idle_scale_to_zero:
      after_minutes: 15
      wake_query: sum(gateway_pending_requests{service="vllm"})
    prometheus_url: "{{ gpuaas_prometheus.url }}"

- name: Remove it
  gpuaas.platform.scaled_object:
    name: vllm
    namespace: nlp-serve
    state: absent
"""

RETURN = r"""
result:
  description: The ScaledObject as stored (after the dry run in check mode); empty when absent.
  returned: always
  type: dict
created:
  description: Objects created (apiVersion, kind, name, namespace).
  returned: always
  type: list
  elements: dict
updated:
  description: Objects updated.
  returned: always
  type: list
  elements: dict
deleted:
  description: Objects deleted.
  returned: always
  type: list
  elements: dict
summary:
  description: Number of objects created, updated, unchanged and deleted.
  returned: always
  type: dict
"""

import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module

MODULE_SPEC: t.Dict[str, t.Any] = {
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "target": {"type": "dict", "options": {
        "kind": {"type": "str", "default": "Deployment"},
        "name": {"type": "str", "required": True},
        "api_version": {"type": "str", "default": "apps/v1"},
    }},
    "min_replicas": {"type": "int", "default": 0},
    "max_replicas": {"type": "int", "default": 1},
    "polling_interval": {"type": "int"},
    "cooldown_period": {"type": "int"},
    "initial_cooldown_period": {"type": "int"},
    "idle_replica_count": {"type": "int"},
    "idle_scale_to_zero": {"type": "dict", "options": {
        "after_minutes": {"type": "int", "default": 15},
        "utilization_threshold": {"type": "str", "default": "1"},
        "wake_query": {"type": "str"},
        "wake_threshold": {"type": "str", "default": "1"},
    }},
    "prometheus_url": {"type": "str"},
    "authentication_ref": {"type": "dict", "options": {
        "name": {"type": "str", "required": True},
        "kind": {"type": "str", "default": "ClusterTriggerAuthentication",
                 "choices": ["ClusterTriggerAuthentication", "TriggerAuthentication"]},
    }},
    "triggers": {"type": "list", "elements": "dict", "default": []},
}


def build(params: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """The ScaledObject for the module options; ValidationError lists every mistake."""
    problems = []
    target = params.get("target") or {}
    if not target.get("name"):
        problems.append("target.name is required with state=present")
    if params["min_replicas"] < 0 or params["max_replicas"] < 1 or params["min_replicas"] > params["max_replicas"]:
        problems.append("need 0 <= min_replicas <= max_replicas and max_replicas >= 1 (got %s..%s)"
                        % (params["min_replicas"], params["max_replicas"]))
    idle = params.get("idle_scale_to_zero")
    auth = params.get("authentication_ref")
    triggers: t.List[t.Dict[str, t.Any]] = []
    cooldown = params.get("cooldown_period")
    initial = params.get("initial_cooldown_period")
    if idle:
        if not params.get("prometheus_url"):
            problems.append("idle_scale_to_zero reads GPU utilization from Prometheus: set prometheus_url")
        if params["min_replicas"] != 0:
            problems.append("idle_scale_to_zero needs min_replicas: 0")
        minutes = idle.get("after_minutes") or 15
        if minutes < 1:
            problems.append("idle_scale_to_zero.after_minutes must be at least 1")
        trigger = keda.prometheus_trigger(
            params.get("prometheus_url") or "", keda.gpu_idle_query(params["namespace"], target.get("name") or "", minutes),
            threshold="100", activation_threshold=idle.get("utilization_threshold") or "1",
            authenticated=bool(auth), name="gpu-utilization")
        triggers.append(trigger)
        if idle.get("wake_query"):
            triggers.append(keda.prometheus_trigger(params.get("prometheus_url") or "", idle["wake_query"],
                                                    threshold=idle.get("wake_threshold") or "1",
                                                    activation_threshold="0", authenticated=bool(auth), name="wake"))
        cooldown = 60 if cooldown is None else cooldown
        initial = minutes * 60 if initial is None else initial
        if auth:
            for trig in triggers:
                trig["authenticationRef"] = {"name": auth["name"], "kind": auth.get("kind") or "ClusterTriggerAuthentication"}
    for i, trig in enumerate(params.get("triggers") or []):
        if not trig.get("type"):
            problems.append("triggers[%d].type is required (a KEDA scaler type, e.g. prometheus, cron, cpu)" % i)
        triggers.append(dict(trig))
    if not triggers:
        problems.append("a ScaledObject needs at least one trigger: set idle_scale_to_zero or triggers")
    if problems:
        raise ValidationError("ScaledObject %s/%s is invalid (%d problem%s)" % (
            params["namespace"], params["name"], len(problems), "" if len(problems) == 1 else "s"),
            hint="fix the options listed; see ansible-doc gpuaas.platform.scaled_object", problems=problems)
    return keda.scaled_object(
        params["name"], params["namespace"], target.get("kind") or "Deployment", target["name"],
        target.get("api_version") or "apps/v1", triggers, params["min_replicas"], params["max_replicas"],
        params.get("polling_interval"), cooldown, initial, params.get("idle_replica_count"),
        labels=params.get("labels"))


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True,
                           required_if=[("state", "present", ["target"])])
    run_object_module(module, build, lambda p: ObjectRef(keda.KEDA_V, "ScaledObject", p["name"], p["namespace"]))


if __name__ == "__main__":
    main()
