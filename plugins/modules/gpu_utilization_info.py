#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_utilization_info
short_description: GPU utilization per GPU, namespace and tenant, idle and unallocated GPUs, quota vs usage
version_added: "0.1.0"
description:
  - Reads the NVIDIA DCGM exporter metrics C(DCGM_FI_DEV_GPU_UTIL) and C(DCGM_FI_DEV_FB_USED) from Prometheus
    for a time window (range queries, one sample per O(step)) and reports
  - per GPU (node, GPU index, MIG instance, model, UUID) its state (C(busy), C(idle) = held by a pod but below
    O(idle_threshold) % for at least O(idle_for), C(unallocated) = held by no pod), average, p95 and maximum
    utilization, memory used and GPU-hours held;
  - per namespace and per tenant (tenant to namespace mapping from O(tenants)) GPUs held now, idle GPUs,
    average and p95 utilization over all their GPU samples, memory used now, GPU-hours held and busy GPU-hours
    (GPU-hours weighted by utilization);
  - per tenant ClusterQueue the quota (nominal, borrowing limit) against usage and borrowed amount per flavor and
    resource, pending and admitted workloads, and how much of the window it spent borrowing or waiting — from
    Kueue's metrics (C(kueue_cluster_queue_nominal_quota) etc., needs Kueue's
    C(metrics.enableClusterQueueResources)) or, when those are missing, from the ClusterQueue objects;
  - quota tuning per tenant, flavor and resource from Kueue's series (C(kueue_source=prometheus) or C(auto) with
    Kueue's metrics in Prometheus) - the O(quantile) of demand (usage + pending requests,
    C(kueue_cluster_queue_resource_pending) of Kueue v0.19), how often and how much it borrowed, how much it
    lent, and the GPU-hours allocated but idle - and from it recommendations (raise / lower the nominal quota, lend,
    set a lending limit, raise the fair-sharing weight), each with the figures behind it, or "insufficient data"
    when the window is shorter than O(min_window) or the data cover less than O(min_coverage) of it;
  - the recommendations as an inventory patch (RV(patch_yaml), C(gpuaas_tenants_override) for
    C(playbooks/tenants.yml -e @patch.yml)), showback (GPU-hours allocated, busy, idle, borrowed, lent and cost per
    tenant and namespace) as RV(showback) and RV(showback_csv), and a self-contained HTML report with inline SVG
    charts (RV(html));
  - idle GPUs and, when thresholds are given, the violations, each naming the tenant, the GPUs and why.
  - "DCGM label variants are handled: C(namespace)/C(pod) or C(exported_namespace)/C(exported_pod) (scrapes that do
    not honour the exporter's labels), C(Hostname) or C(hostname)."
  - Also returns a short per-tenant table and the whole report as Markdown.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  window:
    description:
      - Length of the time window ending at O(time), for example V(10m), V(1h), V(14d).
      - Quota recommendations need at least O(min_window) of history; the default is long enough for real decisions.
    type: str
    default: 14d
  time:
    description: End of the window as unix seconds or RFC 3339; default now.
    type: str
  step:
    description:
      - Seconds (or a duration) between samples. Each sample stands for O(step) seconds of GPU time.
      - Default gives at most 240 samples per GPU and never less than 15 seconds; use the scrape interval or more.
    type: str
  tenants:
    description:
      - The C(gpuaas_tenants) inventory list. Only C(name), C(namespaces) and C(state) (absent tenants are left
        out) are read; a tenant's ClusterQueue is the one the tenants role builds, named after the tenant.
        Namespaces of no tenant are reported under the tenant C((no tenant)).
    type: list
    elements: dict
    default: []
  idle_threshold:
    description: Utilization (%) below which a GPU held by a pod counts as idle.
    type: float
    default: 5.0
  idle_for:
    description: How long (trailing, up to O(time)) a GPU must stay below O(idle_threshold) to be reported idle.
    type: str
    default: 10m
  dcgm_selector:
    description: Extra PromQL label matchers for the DCGM series, for example V(job="nvidia-dcgm-exporter").
    type: str
    default: ""
  kueue_source:
    description:
      - Where quota and queue figures come from. C(auto) uses Kueue's metrics when Prometheus has them, else
        the ClusterQueue objects (snapshot), else nothing. C(none) skips them.
    type: str
    choices: [auto, prometheus, cluster, none]
    default: auto
  kueue_selector:
    description: Extra PromQL label matchers for the Kueue series (for example a C(job) or C(namespace)).
    type: str
    default: ""
  min_utilization:
    description:
      - Minimum average utilization (%) each tenant's GPUs must reach over the window; tenants below it are
        listed in RV(violations). Tenants that held no GPU in the window and namespaces of no tenant are not judged.
    type: float
  max_idle_gpus:
    description: Largest number of idle GPUs allowed; more are a violation listing each idle GPU.
    type: int
  max_unallocated_gpus:
    description: Largest number of GPUs held by no pod allowed; more are a violation.
    type: int
  persistent_ratio:
    description:
      - Share of the window a tenant must spend waiting while its cohort peers borrow for a
        C(raise_fair_sharing_weight) recommendation.
    type: float
    default: 0.5
  quantile:
    description:
      - Quantile of demand (usage + pending requests) a nominal quota should cover, for example V(0.95) (p95) or
        V(0.9). Computed with linear interpolation between ranks, as PromQL C(quantile()).
    type: float
    default: 0.95
  min_window:
    description:
      - Shortest window quota recommendations are made from. A shorter O(window) makes the report say
        "insufficient data" (recommendation kind C(insufficient_data)) instead of recommending.
    type: str
    default: 7d
  min_coverage:
    description:
      - Share of the window's points at which Kueue's quota series (per ClusterQueue) and the DCGM series must have
        data; less makes the report say "insufficient data" (for the whole report or the one queue).
    type: float
    default: 0.9
  headroom:
    description: Extra share on top of the demand quantile when sizing a quota (target = ceil(pX demand * (1 + headroom))).
    type: float
    default: 0.0
  min_change:
    description:
      - Lower a quota or lend part of it only when the target is at least this share below the nominal quota
        (avoids churn for small differences).
    type: float
    default: 0.25
  flavors:
    description:
      - The C(gpuaas_flavors) inventory list. With it the nodes are read from the cluster and each GPU is
        assigned the first flavor whose C(node_labels) the node carries, so showback splits GPU-hours per flavor
        and O(gpu_prices) give a cost. Without it (or without the permission to list nodes) the flavor is empty.
    type: list
    elements: dict
    default: []
  gpu_prices:
    description:
      - "Price of one GPU-hour per flavor, for example V({h100: 2.5, a100-mig-1g: 0.4}); showback rows of these
        flavors get C(price_per_gpu_hour) and C(cost) = allocated GPU-hours x price."
    type: dict
    default: {}
  currency:
    description: Currency of O(gpu_prices), written into the showback (for example V(EUR)).
    type: str
    default: ""
  health:
    description:
      - Health check results to include in the report and its Markdown (the RV(gpuaas.platform.platform_health_info#module:checks)
        list); a failed one makes the report's C(result) C(failed).
    type: list
    elements: dict
    default: []
notes:
  - The Kubernetes connection options are used to read ClusterQueues (O(kueue_source)) and O(prometheus.token_secret).
seealso:
  - module: gpuaas.platform.prometheus_query
    description: Any other PromQL query against the same Prometheus.
extends_documentation_fragment:
  - gpuaas.platform.prometheus
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
"""

EXAMPLES = r"""
- name: GPU utilization of the last hour per tenant
  gpuaas.platform.gpu_utilization_info:
    prometheus: "{{ gpuaas_prometheus }}"
    tenants: "{{ gpuaas_tenants }}"
    window: 1h
  register: gpu

- name: Show the per-tenant table
  ansible.builtin.debug:
    msg: "{{ gpu.table }}"

- name: Fail when a tenant keeps its GPUs below 30 % or more than 2 GPUs sit idle
  gpuaas.platform.gpu_utilization_info:
    prometheus: "{{ gpuaas_prometheus }}"
    tenants: "{{ gpuaas_tenants }}"
    window: 6h
    idle_for: 30m
    min_utilization: 30
    max_idle_gpus: 2
  register: gpu
  failed_when: gpu.violations | length > 0
"""

RETURN = r"""
report:
  description:
    - The whole report. Keys C(window), C(cluster), C(gpus), C(namespaces), C(tenants), C(idle_gpus),
      C(unallocated_gpus), C(queues), C(recommendations), C(violations), C(health), C(label_variant), C(kueue_source),
      C(result) (C(passed), or C(failed) when a threshold or a health check failed).
  returned: always
  type: dict
credentials:
  description:
    - How long the credentials this run used stay valid. C(prometheus_token) has C(expires) (UTC, from the token's
      C(exp) claim when it is a JWT such as a ServiceAccount token; null for a token that states no expiry) and
      C(days_left). A warning is given 30 days ahead and after expiry.
  returned: always
  type: dict
  sample: {"prometheus_token": {"expires": "2027-12-02T07:00:00Z", "days_left": 365.0}}
cluster:
  description: Cluster totals (GPUs, allocated, idle, unallocated, average utilization, GPU-hours).
  returned: always
  type: dict
  sample: {"gpus": 16, "allocated_gpus": 3, "idle_gpus": 1, "unallocated_gpus": 13, "avg_utilization": 10.62}
gpus:
  description: One entry per GPU or MIG instance.
  returned: always
  type: list
  elements: dict
  sample: [{"node": "gpu-h100-0", "gpu": "0", "uuid": "GPU-4c2e...", "model": "NVIDIA H100 80GB HBM3", "state": "busy",
            "namespace": "nlp-train", "pod": "train-0", "tenant": "nlp", "avg_utilization": 85.0, "p95_utilization": 85.0,
            "memory_used_mib": 40000.0, "gpu_hours": 1.0}]
namespaces:
  description: One entry per namespace that held a GPU in the window.
  returned: always
  type: list
  elements: dict
tenants:
  description:
    - One entry per tenant (in inventory order, then C((no tenant))) with C(gpus), C(idle_gpus), C(avg_utilization),
      C(p95_utilization), C(memory_used_mib), C(gpu_hours), C(busy_gpu_hours), C(gpu_list), and from Kueue C(quota),
      C(gpu_quota_nominal), C(gpu_quota_used), C(gpu_quota_borrowed), C(pending_workloads), C(admitted_workloads).
  returned: always
  type: list
  elements: dict
idle_gpus:
  description: GPUs held by a pod but idle.
  returned: always
  type: list
  elements: dict
unallocated_gpus:
  description: GPUs held by no pod now.
  returned: always
  type: list
  elements: dict
queues:
  description: Per ClusterQueue quota vs usage, borrowed amount, pending/admitted workloads.
  returned: always
  type: list
  elements: dict
recommendations:
  description:
    - Advice per tenant. C(kind) is C(raise_quota), C(lower_quota), C(lend), C(set_lending_limit),
      C(raise_fair_sharing_weight) (with C(flavor), C(resource), C(current), C(suggested), C(figures), C(change)),
      C(insufficient_data) (with C(reasons)), C(idle_gpus) or C(unallocated_while_waiting).
  returned: always
  type: list
  elements: dict
tuning:
  description:
    - The quota analysis behind the recommendations - C(sufficient), C(insufficient_reasons), C(coverage),
      C(dcgm_coverage), C(quantile), and C(rows) per ClusterQueue, flavor and resource (C(tenant), C(nominal),
      C(demand_quantile), C(usage_quantile), C(pending_fraction), C(borrow_fraction), C(borrowed_hours),
      C(lent_hours), C(coverage), C(series)). Empty when the quota figures do not come from Prometheus.
  returned: always
  type: dict
inventory_patch:
  description: C(changes) (tenant, field, old, new, reason) and C(tenants) (the whole tenant list with them applied).
  returned: always
  type: dict
patch_yaml:
  description: The patch as a vars file for C(playbooks/tenants.yml -e @file) (sets C(gpuaas_tenants_override)).
  returned: always
  type: str
showback:
  description: C(columns), C(rows) (level tenant or namespace, tenant, namespace, flavor, GPU-hours allocated, busy,
    idle, borrowed, lent, price, cost), C(currency).
  returned: always
  type: dict
showback_csv:
  description: The showback rows as CSV.
  returned: always
  type: str
html:
  description: The report as one self-contained HTML page (inline SVG charts, no external reference).
  returned: always
  type: str
violations:
  description: Threshold violations (C(check), C(tenant), C(value), C(threshold), C(gpus), C(message)).
  returned: always
  type: list
  elements: dict
table:
  description: Short per-tenant table, one string per line.
  returned: always
  type: list
  elements: str
markdown:
  description: The report as Markdown.
  returned: always
  type: str
"""

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import (
    PROMETHEUS_ARG_SPEC,
    PrometheusClient,
    PrometheusError,
    matrix_samples,
    now,
    parse_duration,
    parse_time,
    token_expiry_report,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import html_report, promql, tuning
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import recommendations
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import report as report_rendering
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import utilization as util

KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")


def cluster_queues(module: t.Any) -> t.Optional[t.List[t.Dict[str, t.Any]]]:
    """ClusterQueue objects (v1beta2 preferred), or None when Kueue's API is not served."""
    client = get_client(module)
    for version in KUEUE_VERSIONS:
        if client.served(version):
            try:
                return client.resource(version, "ClusterQueue").list()
            except ApiException as exc:
                raise translate_api_exception(exc, "list", "ClusterQueues")
    return None


def queue_figures(module: t.Any, prom: PrometheusClient, start: float, end: float, step: float,
                  warnings: t.List[str]) -> t.Tuple[t.List[t.Dict[str, t.Any]], str]:
    source = module.params["kueue_source"]
    if source == "none":
        return [], "none"
    if source in ("auto", "prometheus"):
        queries = promql.kueue_queries(module.params["kueue_selector"])
        data = {name: matrix_samples(prom.query_range(q, start, end, step)["result"]) for name, q in queries.items()}
        if data["nominal"] or data["usage"]:
            return util.queue_report_from_metrics(data["nominal"], data["borrowing_limit"], data["usage"],
                                                  data["pending"], data["admitted"], data["status"]), "prometheus"
        message = ("Kueue quota metrics (kueue_cluster_queue_nominal_quota) are not in Prometheus: is Kueue scraped "
                   "and metrics.enableClusterQueueResources on in its configuration?")
        if source == "prometheus":
            raise PrometheusError(message, hint="the observability role adds the Kueue ServiceMonitor; the kueue role "
                                                "sets enableClusterQueueResources")
        warnings.append(message + " Using the ClusterQueue objects instead (no history).")
    try:
        objects = cluster_queues(module)
    except GpuaasError as err:
        if source == "cluster":
            raise
        warnings.append("cannot read ClusterQueues: %s" % err.message)
        return [], "none"
    if objects is None:
        if source == "cluster":
            raise GpuaasError("the cluster serves no Kueue API", hint="is Kueue installed? (gpuaas.platform.kueue role)")
        warnings.append("Kueue is not installed: no quota figures")
        return [], "none"
    return util.queue_report_from_objects(objects), "cluster"


def tuning_analysis(module: t.Any, prom: PrometheusClient, source: str, start: float, end: float, step: float,
                    gpu_util: t.Any) -> t.Dict[str, t.Any]:
    """Kueue's quota/usage/pending history -> :func:`tuning.quota_analysis` (empty without Prometheus history)."""
    if source != "prometheus":
        return {}
    params = module.params
    queries = promql.tuning_queries(params["kueue_selector"])
    data = {name: matrix_samples(prom.query_range(q, start, end, step)["result"]) for name, q in queries.items()}
    analysis = tuning.quota_analysis(data, start, end, step, tenants=params["tenants"], q=params["quantile"],
                                     min_window=parse_duration(params["min_window"]), min_coverage=params["min_coverage"])
    tuning.add_dcgm_coverage(analysis, gpu_util, start, end, step)
    return analysis


def flavor_of_nodes(module: t.Any, warnings: t.List[str]) -> t.Dict[str, str]:
    if not module.params["flavors"]:
        return {}
    try:
        nodes = get_client(module).resource("v1", "Node").list()
    except (GpuaasError, ApiException) as err:
        warnings.append("cannot list nodes for the GPU flavors of the showback: %s" % getattr(err, "message", err))
        return {}
    return tuning.node_flavors(nodes, module.params["flavors"])


def run(module: t.Any) -> t.Dict[str, t.Any]:
    params = module.params
    prom = module.prometheus_client()
    window = parse_duration(params["window"])
    if window <= 0:
        raise PrometheusError("window must be positive", hint="e.g. window: 1h")
    step = parse_duration(params["step"]) if params["step"] else promql.auto_step(window)
    if step <= 0 or step > window:
        raise PrometheusError("step %s must be positive and not longer than the window %s" % (params["step"], params["window"]))
    idle_for = parse_duration(params["idle_for"])
    if not 0 < params["quantile"] <= 1 or not 0 <= params["min_coverage"] <= 1 or not 0 <= params["min_change"] < 1:
        raise GpuaasError("quantile must be in (0, 1], min_coverage in [0, 1] and min_change in [0, 1) (got %s, %s, %s)"
                          % (params["quantile"], params["min_coverage"], params["min_change"]), hint="e.g. quantile: 0.95")
    for flavor, price in params["gpu_prices"].items():
        try:
            if float(price) < 0:
                raise ValueError(price)
        except (TypeError, ValueError):
            raise GpuaasError("gpu_prices.%s: %r is not a price (a number >= 0 per GPU-hour)" % (flavor, price),
                              hint="e.g. gpu_prices: {h100: 2.5}")
    start, end = promql.range_bounds(parse_time(params["time"], now()), window, step)
    warnings: t.List[str] = []
    gpu_util = matrix_samples(prom.query_range(promql.dcgm_query(promql.DCGM_GPU_UTIL, params["dcgm_selector"]), start, end, step)["result"])
    if not gpu_util:
        raise PrometheusError(
            "no %s series in Prometheus between %s and %s" % (promql.DCGM_GPU_UTIL, int(start), int(end)),
            hint="is the NVIDIA DCGM exporter running and scraped (GPU Operator dcgmExporter + the observability "
                 "role's ServiceMonitor)? Check dcgm_selector and the window.",
        )
    fb_used = matrix_samples(prom.query_range(promql.dcgm_query(promql.DCGM_FB_USED, params["dcgm_selector"]), start, end, step)["result"])
    report = util.gpu_report(gpu_util, fb_used, start, end, step, tenants=params["tenants"],
                             idle_threshold=params["idle_threshold"], idle_for=idle_for,
                             node_flavors=flavor_of_nodes(module, warnings))
    queues, source = queue_figures(module, prom, start, end, step, warnings)
    util.attach_queues(report, queues)
    report["kueue_source"] = source
    report["tuning"] = tuning_analysis(module, prom, source, start, end, step, gpu_util)
    report["recommendations"] = recommendations.recommendations(
        report, persistent_ratio=params["persistent_ratio"], headroom=params["headroom"], min_change=params["min_change"],
        tenants=params["tenants"])
    patch = tuning.inventory_patch(params["tenants"], report["recommendations"])
    report["inventory_patch"] = {"changes": patch["changes"], "changed_tenants": patch["changed_tenants"]}
    report["showback"] = tuning.showback(report, report["tuning"], params["gpu_prices"], params["currency"])
    report["violations"] = recommendations.evaluate_thresholds(report, params["min_utilization"], params["max_idle_gpus"],
                                                               params["max_unallocated_gpus"])
    report["thresholds"] = {"min_utilization": params["min_utilization"], "max_idle_gpus": params["max_idle_gpus"],
                            "max_unallocated_gpus": params["max_unallocated_gpus"]}
    report["health"] = list(params["health"])
    failed_health = [h for h in report["health"] if not h.get("ok")]
    report["result"] = "failed" if report["violations"] or failed_health else "passed"
    header = ["window %s ending %s, p%d of demand; %d change(s)" % (
        params["window"], int(end), int(round(params["quantile"] * 100)), len(patch["changes"]))]
    out = {"changed": False, "report": report, "table": report_rendering.tenant_table(report),
           "markdown": report_rendering.render_markdown(report, health=report["health"] or None), "warnings_list": warnings,
           "inventory_patch": patch, "patch_yaml": tuning.patch_yaml(patch, header),
           "showback_csv": tuning.showback_csv(report["showback"]), "html": html_report.render_html(report)}
    for key in ("cluster", "gpus", "namespaces", "tenants", "idle_gpus", "unallocated_gpus", "queues",
                "recommendations", "violations", "tuning", "showback"):
        out[key] = report[key]
    token_info, expiry_warning = token_expiry_report(prom.token, now())
    out["credentials"] = {"prometheus_token": token_info}
    if expiry_warning:
        warnings.append(expiry_warning)
    return out


def run_and_warn(module: t.Any) -> t.Dict[str, t.Any]:
    result = run(module)
    for warning in result.pop("warnings_list"):
        module.warn(warning)
    return result


def main() -> None:
    spec: t.Dict[str, t.Any] = dict(PROMETHEUS_ARG_SPEC)
    spec.update(
        window={"type": "str", "default": "14d"},
        time={"type": "str"},
        step={"type": "str"},
        tenants={"type": "list", "elements": "dict", "default": []},
        idle_threshold={"type": "float", "default": 5.0},
        idle_for={"type": "str", "default": "10m"},
        dcgm_selector={"type": "str", "default": ""},
        kueue_source={"type": "str", "choices": ["auto", "prometheus", "cluster", "none"], "default": "auto"},
        kueue_selector={"type": "str", "default": ""},
        min_utilization={"type": "float"},
        max_idle_gpus={"type": "int"},
        max_unallocated_gpus={"type": "int"},
        persistent_ratio={"type": "float", "default": 0.5},
        quantile={"type": "float", "default": 0.95},
        min_window={"type": "str", "default": "7d"},
        min_coverage={"type": "float", "default": 0.9},
        headroom={"type": "float", "default": 0.0},
        min_change={"type": "float", "default": 0.25},
        flavors={"type": "list", "elements": "dict", "default": []},
        gpu_prices={"type": "dict", "default": {}},
        currency={"type": "str", "default": ""},
        health={"type": "list", "elements": "dict", "default": []},
    )
    module = GpuaasModule(argument_spec=spec, supports_check_mode=True)
    module.run(run_and_warn)


if __name__ == "__main__":
    main()
