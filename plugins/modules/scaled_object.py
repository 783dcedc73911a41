#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: scaled_object
short_description: Manage KEDA ScaledObjects, with GPU-idle scale-to-zero, wake-up and load scaling
version_added: 0.1.0
description:
  - Creates, updates or deletes a KEDA C(ScaledObject) (C(keda.sh/v1alpha1)) with server-side apply. The options
    are the keys of a tenant's C(autoscaling) entry in the inventory (the C(gpuaas.platform.tenants) module
    builds the same object from them); see C(docs/autoscaling.md) for what Kueue does with the quota.
  - O(idle_scale_to_zero) adds the C(gpu-busy) trigger, the highest C(DCGM_FI_DEV_GPU_UTIL) of the target's own
    pods over the idle window, read in both DCGM label styles (C(namespace)/C(pod) and
    C(exported_namespace)/C(exported_pod)). Pods are matched by the name grammar of the target's controller
    (Deployment C(<name>-<pod-template-hash>-<suffix>), StatefulSet C(<name>-<ordinal>), LeaderWorkerSet), so a
    Deployment C(vllm) does not match C(vllm-canary); other kinds need O(idle_scale_to_zero.pod_regex).
  - O(idle_scale_to_zero.wake_query) brings the target back from zero; O(load) scales it between 1 and
    O(max_replicas) with metric type C(AverageValue) (replicas = ceil(value / target_per_replica)).
  - A StatefulSet with O(idle_scale_to_zero) gets C(idleReplicaCount=0) and C(minReplicaCount = maxReplicaCount =
    max_replicas), because Kueue allows a StatefulSet only 0 <-> N. An C(InferenceService) target is its
    predictor Deployment C(<name>-predictor) (KServe raw deployment mode); RayCluster, RayJob and Workload have
    no C(/scale) and are refused with what to use instead.
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
        description:
          - Kind of the target. Deployment, StatefulSet and LeaderWorkerSet are known; InferenceService means its
            predictor Deployment; any other kind needs O(target.api_version) (and a C(/scale) subresource).
        type: str
        default: Deployment
      name:
        description: Name of the target.
        type: str
        required: true
      api_version:
        description: API version of the target (default per known kind, C(apps/v1) for Deployment and StatefulSet).
        type: str
  min_replicas:
    description: C(minReplicaCount) (0 with O(idle_scale_to_zero)).
    type: int
    default: 0
  max_replicas:
    description: C(maxReplicaCount); for a StatefulSet with O(idle_scale_to_zero), the N of 0 <-> N.
    type: int
    default: 1
  polling_interval:
    description: Seconds between trigger checks (C(pollingInterval), KEDA's default 30).
    type: int
  cooldown_period:
    description:
      - Seconds after the last active trigger before scaling to zero (C(cooldownPeriod)); 60 with
        O(idle_scale_to_zero) unless set.
    type: int
  initial_cooldown_period:
    description: Seconds after creation before scaling to zero is allowed (C(initialCooldownPeriod)); the idle window by default.
    type: int
  idle_replica_count:
    description: Replicas when every trigger is inactive (KEDA only accepts 0); set for StatefulSets automatically.
    type: int
  idle_scale_to_zero:
    description: Scale to zero when the target's GPUs were idle for a while.
    type: dict
    suboptions:
      after_minutes:
        description: Idle window in minutes (15 when neither this nor O(idle_scale_to_zero.after_seconds) is set).
        type: int
      after_seconds:
        description: Idle window in seconds (at least 10), for short windows such as tests.
        type: int
      utilization_threshold:
        description: GPU utilization (percent) at or below which the GPU counts as idle.
        type: str
        default: "1"
      pod_regex:
        description:
          - Regular expression (RE2, anchored) of the target's pod names, instead of the one derived from its kind.
            Required for kinds other than Deployment, StatefulSet and LeaderWorkerSet.
        type: str
      wake_query:
        description:
          - PromQL returning one value (request rate, queue depth ...); above O(idle_scale_to_zero.wake_threshold)
            it brings the target back from zero. Without it (or O(load)) the target stays at zero until scaled by hand.
        type: str
      wake_threshold:
        description: The target wakes when O(idle_scale_to_zero.wake_query) is above this value.
        type: str
        default: "0"
  load:
    description:
      - Scale between 1 and O(max_replicas) on a metric, metric type C(AverageValue) with
        C(threshold = target_per_replica). Not for StatefulSets under Kueue (0 <-> N only).
    type: dict
    suboptions:
      query:
        description: PromQL returning one value; defaults to O(idle_scale_to_zero.wake_query).
        type: str
      target_per_replica:
        description: The value one replica handles (e.g. requests per second); required.
        type: str
      activation_threshold:
        description:
          - Above this value the trigger is active (wakes from zero); defaults to O(idle_scale_to_zero.wake_threshold)
            when O(load.query) is the wake query, else 0.
        type: str
  prometheus_url:
    description:
      - Prometheus (or Thanos querier) address for O(idle_scale_to_zero) and O(load); the C(gpuaas_prometheus.url) setting.
      - Required with O(idle_scale_to_zero) or O(load).
    type: str
  authentication_ref:
    description:
      - C(ClusterTriggerAuthentication) (or C(TriggerAuthentication)) holding the Prometheus bearer token / CA for
        the generated triggers. The C(gpuaas.platform.tenants) module creates one named C(gpuaas-prometheus).
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
seealso:
  - module: gpuaas.platform.tenants
    description: Builds the same ScaledObjects from the tenants inventory, with the platform Prometheus credential.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.apply
"""

EXAMPLES = r"""
- name: vLLM to zero after 15 idle GPU minutes, back on requests, one replica per 20 requests/s up to 4
  gpuaas.platform.scaled_object:
    name: vllm
    namespace: nlp-serve
    target: {kind: Deployment, name: vllm}
    max_replicas: 4
    idle_scale_to_zero:
      after_minutes: 15
      wake_query: sum(rate(gateway_requests_total{service="vllm"}[1m]))
    load:
      target_per_replica: "20"
    prometheus_url: "{{ gpuaas_prometheus.url }}"

- name: A notebook StatefulSet with one GPU pod, to zero after 30 idle minutes (Kueue keeps its Workload on hold)
  gpuaas.platform.scaled_object:
    name: notebook-alice
    namespace: nlp-dev
    target: {kind: StatefulSet, name: alice}
    max_replicas: 1
    idle_scale_to_zero:
      after_minutes: 30
      wake_query: sum(rate(notebook_proxy_requests_total{notebook="alice"}[2m]))
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
  sample: {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "vllm", "namespace": "nlp-serve"},
           "spec": {"scaleTargetRef": {"name": "vllm"}, "minReplicaCount": 0, "maxReplicaCount": 4}}
created:
  description: Objects created, each as C(apiVersion), C(kind), C(name) and, when namespaced, C(namespace).
  returned: always
  type: list
  elements: dict
updated:
  description: Objects updated, like RV(created).
  returned: always
  type: list
  elements: dict
deleted:
  description: Objects deleted, like RV(created).
  returned: always
  type: list
  elements: dict
summary:
  description: Number of objects created, updated, unchanged and deleted.
  returned: always
  type: dict
  sample: {"created": 1, "updated": 0, "unchanged": 0, "deleted": 0}
api_versions:
  description: API version used per group; C(kueue.x-k8s.io) shows C(v1beta1) on clusters with an older Kueue.
  returned: when a Kueue object was handled
  type: dict
  sample: {"kueue.x-k8s.io": "v1beta2"}
diff:
  description: Per changed object, the fields this collection manages before and after.
  returned: in diff mode
  type: list
  elements: dict
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import PrometheusSettings, parse_autoscaling
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.object_module import argument_spec, run_object_module
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ObjectRef
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda

MODULE_SPEC: t.Dict[str, t.Any] = {
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "target": {"type": "dict", "options": {
        "kind": {"type": "str", "default": "Deployment"},
        "name": {"type": "str", "required": True},
        "api_version": {"type": "str"},
    }},
    "min_replicas": {"type": "int", "default": 0},
    "max_replicas": {"type": "int", "default": 1},
    "polling_interval": {"type": "int"},
    "cooldown_period": {"type": "int"},
    "initial_cooldown_period": {"type": "int"},
    "idle_replica_count": {"type": "int"},
    "idle_scale_to_zero": {"type": "dict", "options": {
        "after_minutes": {"type": "int"},
        "after_seconds": {"type": "int"},
        "utilization_threshold": {"type": "str", "default": "1"},
        "pod_regex": {"type": "str"},
        "wake_query": {"type": "str"},
        "wake_threshold": {"type": "str", "default": "0"},
    }},
    "load": {"type": "dict", "options": {
        "query": {"type": "str"},
        "target_per_replica": {"type": "str"},
        "activation_threshold": {"type": "str"},
    }},
    "prometheus_url": {"type": "str"},
    "authentication_ref": {"type": "dict", "options": {
        "name": {"type": "str", "required": True},
        "kind": {"type": "str", "default": "ClusterTriggerAuthentication",
                 "choices": ["ClusterTriggerAuthentication", "TriggerAuthentication"]},
    }},
    "triggers": {"type": "list", "elements": "dict", "default": []},
}

ENTRY_KEYS = ("name", "target", "min_replicas", "max_replicas", "polling_interval", "cooldown_period",
              "idle_scale_to_zero", "load", "triggers")


def _without_none(value: t.Any) -> t.Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value


def build(params: t.Mapping[str, t.Any], warnings: t.Optional[t.List[str]] = None) -> t.Dict[str, t.Any]:
    """The ScaledObject for the module options, through the inventory's autoscaling parser and the tenants
    module's builder (one definition of the triggers); ValidationError lists every mistake."""
    entry = _without_none({k: params.get(k) for k in ENTRY_KEYS})
    if not (params.get("target") or {}).get("name"):
        raise ValidationError("ScaledObject %s/%s is invalid: target.name is required with state=present"
                              % (params["namespace"], params["name"]), hint="set target: {kind: Deployment, name: ...}")
    auto, found = parse_autoscaling(entry, params["namespace"], params.get("prometheus_url"))
    if warnings is not None:
        warnings.extend(found)
    auth = params.get("authentication_ref")
    obj = keda.autoscaling_object(auto, PrometheusSettings(url=params.get("prometheus_url")), authenticated=bool(auth),
                                  labels=params.get("labels") or {})
    spec = obj["spec"]
    if auth:
        generated = len(spec["triggers"]) - len(auto.triggers)
        for trig in spec["triggers"][:generated]:
            trig["authenticationRef"] = {"name": auth["name"], "kind": auth.get("kind") or "ClusterTriggerAuthentication"}
    for key, field in (("initial_cooldown_period", "initialCooldownPeriod"), ("idle_replica_count", "idleReplicaCount")):
        if params.get(key) is not None:
            spec[field] = params[key]
    if not spec["triggers"]:
        raise ValidationError("ScaledObject %s/%s has no trigger" % (params["namespace"], params["name"]),
                              hint="set idle_scale_to_zero, load or triggers")
    if not obj["metadata"].get("labels"):
        obj["metadata"].pop("labels", None)
    return obj


def main() -> None:
    module = GpuaasModule(argument_spec=argument_spec(MODULE_SPEC), supports_check_mode=True,
                          required_if=[("state", "present", ["target"])])
    warnings: t.List[str] = []

    def _build(params: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
        obj = build(params, warnings)
        for warning in warnings:
            module.warn(warning)
        return obj

    run_object_module(module, _build, lambda p: ObjectRef(keda.KEDA_V, "ScaledObject", p["name"], p["namespace"]))


if __name__ == "__main__":
    main()
