#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: quota_plan
short_description: What a quota change would do to each tenant, before it is applied (a replay of recorded demand)
version_added: "0.2.0"
description:
  - Replays recorded GPU demand against the current tenancy (O(inventory)) and a proposed one (O(proposed), the
    quota tuning patch of M(gpuaas.platform.gpu_utilization_info) or any inventory vars) with an offline scheduler
    that follows Kueue's fair-sharing admission and preemption rules (borrowing within cohorts, cohort quotas,
    borrowing and lending limits, fair-sharing weights, reclaimWithinCohort), and reports per tenant and inventory
    the served GPU-hours, p50/p95 wait, preemptions, borrowed and lent GPU-hours, and per flavor the fairness (Jain's index
    while saturated).
  - The demand is a trace file (O(trace), the fair-sharing benchmark's JSON format) or is derived from Prometheus
    over O(window), one job per pod from the DCGM exporter's per-GPU series, the wait from Kueue's
    C(kueue_cluster_queue_resource_pending) - an approximation documented in docs/quota-plan.md.
  - Both inventories are validated with the collection's inventory model (every problem at once) before anything is
    replayed. Nothing is written to the cluster; the Kubernetes connection options are used only to read a
    Prometheus token from a Secret (O(prometheus.token_secret)).
  - The prediction has no control-plane latency and no node fragmentation; against a real replay of the same
    trace through Kueue on the lab its error is measured in docs/benchmarks.md ("Quota plan vs a lab replay").
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  inventory:
    description:
      - The current inventory vars (C(gpuaas_flavors), C(gpuaas_cohorts), C(gpuaas_tenants), ...), as the tenants
        role reads them.
    type: dict
    required: true
  proposed:
    description:
      - The proposal, laid over O(inventory) key by key. A quota tuning patch (C(gpuaas_tenants_override), as
        written by C(playbooks/validate.yml)) replaces C(gpuaas_tenants), as the tenants role would.
      - When empty, the proposed inventory is the current one (the plan then shows the current tenancy twice).
    type: dict
    default: {}
  trace:
    description:
      - A trace file in the format of bench/fairness/trace.py (which writes it), a JSON object with C(params)
        (C(horizon), the window in minutes) and C(jobs), each with C(id), C(tenant), C(pool) (a flavor name),
        C(size) (GPUs or MIG slices), C(submit) and C(duration) (minutes).
      - Without it the demand is read from Prometheus (O(prometheus), O(window)).
    type: path
  window:
    description: Length of the demand window ending at O(time) when the demand comes from Prometheus, e.g. V(14d).
    type: str
    default: 14d
  time:
    description: End of the window as unix seconds or RFC 3339; default now.
    type: str
  step:
    description:
      - Seconds (or a duration) between the Prometheus points; jobs start and end on them. Default gives at most
        2000 points and never less than 15 seconds; use the scrape interval or more.
    type: str
  dcgm_selector:
    description: Extra label matchers for the DCGM series, for example V(cluster="prod").
    type: str
    default: ""
  kueue_selector:
    description: Extra label matchers for Kueue's series.
    type: str
    default: ""
  capacity:
    description:
      - "GPUs (or MIG slices) per flavor, as a number or a list of GPUs per node, e.g. V({h100: [8, 8]})."
      - Flavors not named get the sum of the current tenants' nominal quotas.
    type: dict
    default: {}
extends_documentation_fragment:
  - gpuaas.platform.prometheus
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
notes:
  - The served GPU-hours count GPUs held inside the demand window; jobs that do not finish inside it count until the
    window ends. Waits are in minutes.
seealso:
  - module: gpuaas.platform.gpu_utilization_info
"""

EXAMPLES = r"""
- name: What would the tuning patch do, on the last 14 days of demand?
  gpuaas.platform.quota_plan:
    inventory:
      gpuaas_flavors: "{{ gpuaas_flavors }}"
      gpuaas_cohorts: "{{ gpuaas_cohorts | default([]) }}"
      gpuaas_tenants: "{{ gpuaas_tenants }}"
    proposed: "{{ lookup('file', 'gpuaas-quota-patch.yml') | from_yaml }}"
    prometheus: "{{ gpuaas_prometheus }}"
    window: 14d
  register: plan

- name: The same on a trace file, with the node sizes of the H100 pool
  gpuaas.platform.quota_plan:
    inventory: "{{ {'gpuaas_flavors': gpuaas_flavors, 'gpuaas_cohorts': gpuaas_cohorts, 'gpuaas_tenants': gpuaas_tenants} }}"
    proposed: {gpuaas_tenants: "{{ proposed_tenants }}"}
    trace: trace.json
    capacity: {h100: [8, 8]}

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ plan.markdown }}"
"""

RETURN = r"""
plan:
  description:
    - C(variants) (C(current), C(proposed)) with per tenant C(jobs), C(finished), C(served_gpu_hours),
      C(wasted_gpu_hours) (in preempted runs), C(wait_p50_minutes), C(wait_p95_minutes), C(wait_mean_minutes),
      C(preemptions), C(borrowed_gpu_hours), C(lent_gpu_hours), and per flavor C(pools) (C(jain), C(saturated_minutes),
      C(allocation)); C(delta) (proposed - current per tenant); C(capacity), C(horizon_minutes), C(jobs),
      C(jobs_outside_tenancy), C(dropped_tenants).
  returned: always
  type: dict
demand:
  description:
    - Where the demand came from; C(source) (C(trace) or C(prometheus)), C(jobs), C(horizon_minutes), and for
      Prometheus C(window) (C(start), C(end), C(step) in seconds) and C(notes) (pods read, pods outside the tenancy or
      without a flavor, pending jobs added).
  returned: always
  type: dict
markdown:
  description: The per-tenant table (current and proposed) and the per-flavor fairness, as Markdown.
  returned: always
  type: str
html:
  description: A self-contained HTML page with the tables and inline SVG charts of the GPUs held per tenant.
  returned: always
  type: str
changed:
  description: Always false; the plan writes nothing.
  returned: always
  type: bool
"""

import json
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import promql
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import (
    PROMETHEUS_ARG_SPEC,
    PrometheusError,
    matrix_samples,
    now,
    parse_duration,
    parse_time,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan import demand as demand_source
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan import plan as planner


def read_trace(path: str) -> t.Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as err:
        raise GpuaasError("cannot read the trace %s: %s" % (path, err),
                          hint="trace: a JSON file in the format of bench/fairness/trace.py")


def prometheus_demand(module: t.Any, model: t.Any) -> t.Tuple[t.List[t.Any], float, t.Dict[str, t.Any]]:
    params = module.params
    window = parse_duration(params["window"])
    if window <= 0:
        raise PrometheusError("window must be positive", hint="e.g. window: 14d")
    step = parse_duration(params["step"]) if params["step"] else promql.auto_step(window, max_points=2000)
    if step <= 0 or step > window:
        raise PrometheusError("step %s must be positive and not longer than the window %s" % (params["step"], params["window"]))
    start, end = promql.range_bounds(parse_time(params["time"], now()), window, step)
    prom = module.prometheus_client()
    dcgm = matrix_samples(prom.query_range(promql.dcgm_query(promql.DCGM_GPU_UTIL, params["dcgm_selector"]), start, end, step)["result"])
    if not dcgm:
        raise PrometheusError(
            "no %s series in Prometheus between %s and %s" % (promql.DCGM_GPU_UTIL, int(start), int(end)),
            hint="is the NVIDIA DCGM exporter running and scraped? Check dcgm_selector and the window, or plan on a trace file.")
    pending = matrix_samples(prom.query_range(promql.tuning_queries(params["kueue_selector"])["pending_resources"],
                                              start, end, step)["result"])
    jobs, horizon, notes = demand_source.jobs_from_prometheus(model, dcgm, pending, start, end, step)
    if not pending:
        notes["warning"] = ("no kueue_cluster_queue_resource_pending series (Kueue >= v0.19 with "
                            "enableClusterQueueResources): waits before the window's first admission are unknown "
                            "and taken as zero")
    return jobs, horizon, {"source": "prometheus", "window": {"start": start, "end": end, "step": step}, "notes": notes}


def run(module: t.Any) -> t.Dict[str, t.Any]:
    params = module.params
    inventories = {"current": params["inventory"],
                   "proposed": planner.proposed_inventory(params["inventory"], params["proposed"])}
    models = planner.validated(inventories)
    for flavor, value in params["capacity"].items():
        values = value if isinstance(value, list) else [value]
        try:
            if any(float(v) < 0 for v in values):
                raise ValueError(value)
        except (TypeError, ValueError):
            raise GpuaasError("capacity.%s: %r is not a GPU count (a number >= 0, or a list of them per node)" % (flavor, value),
                              hint="e.g. capacity: {h100: [8, 8]}")
    if params["trace"]:
        jobs, horizon = demand_source.jobs_from_trace(read_trace(params["trace"]))
        info: t.Dict[str, t.Any] = {"source": "trace", "path": params["trace"]}
    else:
        jobs, horizon, info = prometheus_demand(module, models["current"])
    result = planner.plan(models, jobs, horizon, params["capacity"])
    info.update(jobs=len(jobs), horizon_minutes=result["horizon_minutes"])
    warnings = []
    if result["jobs_outside_tenancy"]:
        warnings.append("%d job(s) of tenants or flavors outside the tenancy were left out: %s"
                        % (result["jobs_outside_tenancy"], ", ".join(result["dropped_tenants"])))
    if info.get("notes", {}).get("warning"):
        warnings.append(info["notes"]["warning"])
    for warning in warnings:
        module.warn(warning)
    return {"changed": False, "plan": result, "demand": info, "markdown": planner.render_markdown(result),
            "html": planner.render_html(result)}


def main() -> None:
    spec: t.Dict[str, t.Any] = dict(PROMETHEUS_ARG_SPEC)
    spec.update(
        inventory={"type": "dict", "required": True},
        proposed={"type": "dict", "default": {}},
        trace={"type": "path"},
        window={"type": "str", "default": "14d"},
        time={"type": "str"},
        step={"type": "str"},
        dcgm_selector={"type": "str", "default": ""},
        kueue_selector={"type": "str", "default": ""},
        capacity={"type": "dict", "default": {}},
    )
    module = GpuaasModule(argument_spec=spec, supports_check_mode=True)
    module.run(run, changed=False)


if __name__ == "__main__":
    main()
