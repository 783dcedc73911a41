#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_idle_reclaim
short_description: Give back the GPUs of idle RayClusters and Notebooks, and bring them back on the tenant's wake signal
version_added: "0.2.0"
description:
  - "For every RayCluster a tenant opts in (a C(gpuaas_tenants[].autoscaling) entry with C(target.kind: RayCluster)):
    when every GPU worker pod of its chosen groups has run for the whole idle window and none of its GPUs went above
    C(utilization_threshold) in it (DCGM C(DCGM_FI_DEV_GPU_UTIL) from Prometheus), the groups' C(replicas) and
    C(minReplicas) are recorded in the annotation C(gpuaas.io/idle-reclaim) and set to 0. The head group is not
    touched and nothing is deleted."
  - "When the cluster is reclaimed and the tenant sets the annotation C(gpuaas.io/wake) to a new value (for example
    the time), the recorded replicas come back (never above a group's C(maxReplicas)); after a wake the cluster is
    not reclaimed again for C(cooldown_period) seconds (default: the idle window)."
  - "The cluster must be one of Kueue's elastic jobs (annotation C(kueue.x-k8s.io/elastic-job: \"true\")): its
    Workload then shrinks in place at zero workers (the GPU quota is freed, the head keeps its CPU quota) and a
    wake creates a new Workload slice that Kueue admits like any workload, by reclaiming from borrowers if the
    tenant's C(reclaim_within_cohort) allows it. See docs/autoscaling.md (RayCluster)."
  - "Kubeflow / OpenShift AI Notebooks (workbenches) too, despite the module's name: an entry with
    C(target.kind: Notebook) (C(kubeflow.org/v1)). When the workbench's pod (label C(notebook-name)) has run for the
    whole idle window with none of its GPUs above C(utilization_threshold), the run sets the notebook controller's stop
    annotation C(kubeflow-resource-stopped) to the time (what the Kubeflow culler and the OpenShift AI dashboard's Stop
    do; the controller then sets its StatefulSet to 0 and Kueue frees its quota) and records the same time in
    C(gpuaas.io/idle-reclaim). On a new C(gpuaas.io/wake) value it removes the stop annotation (the controller starts
    the workbench, Kueue admits it again). A workbench whose stop annotation the collection did not set (its user
    stopped it) is never started by the run. KEDA cannot do this: the controller writes the StatefulSet's replicas back
    on every reconcile. See docs/autoscaling.md (Notebooks)."
  - "Every entry is checked against its live object before the first write, every problem of every kind reported at
    once: an idle window shorter than C(scrape_interval), a cluster without a GPU worker group, a group name the
    cluster does not have or that asks for no GPU, a cluster without the elastic-job annotation, a Notebook whose pod
    asks for no GPU."
  - Writes with server-side apply (field manager C(gpuaas.platform)) only C(spec.workerGroupSpecs) (an atomic list in
    KubeRay's CRD, so applied whole with only the replicas changed) and the one annotation of a RayCluster, and the two
    annotations of a Notebook (the stop annotation is removed by leaving it out of the apply); no ownership labels.
  - Run it on a schedule, e.g. every minute as an AWX job template (C(playbooks/ray_idle_reclaim.yml), docs/awx.md);
    with O(watch_seconds) the run keeps watching for most of the period, so a wake does not wait for the next run.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  tenants:
    description: The tenants (inventory C(gpuaas_tenants)); only their RayCluster and Notebook autoscaling entries are read.
  flavors:
    description: Kueue ResourceFlavors (inventory C(gpuaas_flavors)), to validate the tenants.
  cohorts:
    description: Cohorts (inventory C(gpuaas_cohorts)), to validate the tenants.
  priorities:
    description: WorkloadPriorityClasses (inventory C(gpuaas_priorities)), to validate the tenants.
  limit_tenants:
    description: Only these tenants' RayClusters and Notebooks; all tenants when omitted.
    type: list
    elements: str
  scrape_interval:
    description:
      - Seconds between two scrapes of the DCGM exporter by the Prometheus at O(prometheus). An idle window shorter
        than this holds no sample and is refused.
    type: int
    default: 30
  watch_seconds:
    description:
      - After the first pass, keep watching the opted-in clusters for this many seconds (counted from the start),
        one more pass every O(watch_interval) seconds, so that a tenant's wake is acted on within O(watch_interval)
        instead of at the next scheduled run. For a job scheduled every minute, C(45) leaves room for start-up.
      - C(0) is one pass. In check mode the run is always one pass.
    type: int
    default: 0
  watch_interval:
    description: Seconds between two passes while watching (O(watch_seconds)); each pass reads every opted-in cluster.
    type: int
    default: 5
attributes:
  check_mode:
    description: Decides with the live metrics and sends the writes as server-side dry runs; nothing is written.
    support: full
  diff_mode:
    description: The applied fields (worker groups, stop and reclaim annotations) before and after, per changed object.
    support: full
notes:
  - Needs to get RayClusters and Notebooks and list pods in the tenants' namespaces, and patch RayClusters and
    Notebooks there (roles/automation_rbac, playbook C(ray_idle_reclaim)).
  - The wake annotation and the reclaim annotation are on the tenant's own object; what a tenant can do with them is
    what it can do with its RayCluster anyway (set replicas up to C(maxReplicas)), always under Kueue's quota.
seealso:
  - module: gpuaas.platform.tenants
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.inventory
  - gpuaas.platform.prometheus
"""

EXAMPLES = r"""
- name: Reclaim idle Ray GPU workers, wake the clusters their tenants asked back
  gpuaas.platform.ray_idle_reclaim:
    tenants: "{{ gpuaas_tenants }}"
    flavors: "{{ gpuaas_flavors }}"
    cohorts: "{{ gpuaas_cohorts | default([]) }}"
    priorities: "{{ gpuaas_priorities | default([]) }}"
    prometheus: "{{ gpuaas_prometheus }}"
    scrape_interval: 15

- name: The same, scheduled every minute, acting on a wake within 5 s (AWX job template; docs/awx.md)
  gpuaas.platform.ray_idle_reclaim:
    tenants: "{{ gpuaas_tenants }}"
    flavors: "{{ gpuaas_flavors }}"
    prometheus: "{{ gpuaas_prometheus }}"
    watch_seconds: 45
    watch_interval: 5

# inventory: the tenant opts its RayCluster in
# gpuaas_tenants:
#   - name: nlp
#     namespaces: [nlp-dev]
#     autoscaling:
#       - name: tune
#         target: {kind: RayCluster, name: tune}
#         worker_groups: [gpu]                # default: every group whose pods ask for GPUs
#         idle_scale_to_zero: {after_minutes: 30, utilization_threshold: 1}
#         cooldown_period: 600
#       - name: alice-workbench                # a Notebook: stopped when idle (kubeflow-resource-stopped)
#         target: {kind: Notebook, name: alice}
#         idle_scale_to_zero: {after_minutes: 60}
# the tenant wakes it: kubectl annotate raycluster tune gpuaas.io/wake="$(date +%s)" --overwrite
#                      kubectl annotate notebook alice gpuaas.io/wake="$(date +%s)" --overwrite
"""

RETURN = r"""
changed:
  description: Whether a cluster or notebook was reclaimed or woken (or would be, in check mode).
  returned: always
  type: bool
clusters:
  description: Per opted-in RayCluster or Notebook (C(kind)) the action (reclaim, wake, keep), why, and for a
    RayCluster the groups and their replicas recorded (reclaim) or restored (wake); a Notebook's reclaim is its stop,
    its wake its start (no groups).
  returned: always
  type: list
  elements: dict
  sample: [{"tenant": "nlp", "kind": "RayCluster", "namespace": "nlp-dev", "name": "tune", "groups": ["gpu"], "action": "reclaim",
            "reason": "every GPU worker (2) at or below 1% for 1800s", "replicas": {"gpu": 2}, "changed": true}]
changes:
  description: Every reclaim or wake the run wrote (or would write, in check mode), in order, each a row of
    RV(clusters) with the pass it was made in.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "tune", "namespace": "nlp-dev", "action": "wake", "replicas": {"gpu": 2}, "changed": true, "pass": 4}]
passes:
  description: How many passes the run made (1 without O(watch_seconds) or in check mode).
  returned: always
  type: int
  sample: 9
warnings:
  description: Entries skipped (their RayCluster or Notebook does not exist), and why a watch ended early.
  returned: always
  type: list
  elements: str
diff:
  description: With C(--diff), the applied fields of each changed cluster or notebook before and after.
  returned: when diff mode is on
  type: list
  elements: dict
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import get_client
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import PROMETHEUS_ARG_SPEC
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.inputs import inventory_from_params
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.ray_reclaim_runner import run_ray_reclaim


def work(module: GpuaasModule) -> t.Dict[str, t.Any]:
    params = dict(module.params, _diff=module._diff)
    inventory = inventory_from_params(params)
    prometheus = module.prometheus_client()
    # this run reads Prometheus itself (not KEDA in the cluster): the URL it reaches counts for the inventory check
    inventory["gpuaas_prometheus"] = dict(inventory.get("gpuaas_prometheus") or {}, url=prometheus.url)
    result = run_ray_reclaim(get_client(module), prometheus, params, inventory, module.check_mode)
    for warning in result.get("warnings") or []:
        module.warn(warning)
    return result


def main() -> None:
    spec: t.Dict[str, t.Any] = dict(PROMETHEUS_ARG_SPEC)
    spec.update(
        tenants={"type": "list", "elements": "dict", "default": []},
        flavors={"type": "list", "elements": "dict", "default": []},
        cohorts={"type": "list", "elements": "dict", "default": []},
        priorities={"type": "list", "elements": "dict", "default": []},
        limit_tenants={"type": "list", "elements": "str"},
        scrape_interval={"type": "int", "default": 30},
        watch_seconds={"type": "int", "default": 0},
        watch_interval={"type": "int", "default": 5},
    )
    module = GpuaasModule(argument_spec=spec, supports_check_mode=True)
    module.run(work, changed=False)


if __name__ == "__main__":
    main()
