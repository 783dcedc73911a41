#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: prometheus_query
short_description: Run a PromQL instant or range query against Prometheus or the OpenShift Thanos querier
version_added: "0.1.0"
description:
  - Runs one PromQL expression and returns the series with their values as numbers.
  - Instant query by default; a range query when O(window) or O(start) is given.
  - Errors say what went wrong and how to fix it (server unreachable, TLS verification, 401/403, PromQL syntax).
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  query:
    description: The PromQL expression.
    type: str
    required: true
  time:
    description:
      - Evaluation time of an instant query, or end of a range query, as unix seconds or RFC 3339
        (V(2026-11-30T10:00:00Z)). Default is now.
    type: str
  window:
    description:
      - Run a range query over this duration ending at O(time), for example V(10m), V(1h), V(7d).
    type: str
  start:
    description:
      - Start of a range query (unix seconds or RFC 3339); alternative to O(window).
    type: str
  step:
    description:
      - Resolution of a range query (seconds or a duration such as V(30s)). Default gives at most 240 points
        per series, never less than 15 seconds.
    type: str
  fail_on_empty:
    description: Fail when the query returns no series (for example to assert that a metric exists).
    type: bool
    default: false
notes:
  - The Kubernetes connection options are only used to read O(prometheus.token_secret).
extends_documentation_fragment:
  - gpuaas.platform.prometheus
  - gpuaas.platform.k8s_auth
  - gpuaas.platform.info_module
"""

EXAMPLES = r"""
- name: Average GPU utilization per namespace right now
  gpuaas.platform.prometheus_query:
    prometheus: "{{ gpuaas_prometheus }}"
    query: avg by (namespace) (DCGM_FI_DEV_GPU_UTIL)
  register: util

- name: Pending Kueue workloads over the last hour, one point a minute
  gpuaas.platform.prometheus_query:
    prometheus:
      url: https://thanos-querier.openshift-monitoring.svc:9091
      token_secret: {name: gpuaas-monitoring-reader, namespace: gpuaas-system}
      ca_file: /etc/pki/service-ca.crt
    query: sum by (cluster_queue) (kueue_pending_workloads)
    window: 1h
    step: 1m

- name: Fail unless the DCGM exporter is scraped
  gpuaas.platform.prometheus_query:
    query: DCGM_FI_DEV_GPU_UTIL
    fail_on_empty: true
"""

RETURN = r"""
query:
  description: The expression that was run.
  returned: always
  type: str
result_type:
  description: C(vector), C(matrix), C(scalar) or C(string).
  returned: always
  type: str
  sample: vector
result:
  description:
    - The series. Instant queries give C(metric), C(timestamp) and C(value); range queries give C(metric) and
      C(values) (a list of C([timestamp, value])). Values are numbers; NaN and infinities are null.
  returned: always
  type: list
  elements: dict
  sample: [{"metric": {"namespace": "nlp-train"}, "timestamp": 1795000000.0, "value": 85.0}]
value:
  description: For a single-series vector or a scalar, its value; else null.
  returned: always
  type: float
series:
  description: Number of series returned.
  returned: always
  type: int
warnings_from_server:
  description: Warnings Prometheus/Thanos attached to the answer (for example partial responses).
  returned: always
  type: list
  elements: str
start:
  description: Start of the range (unix seconds), range queries only.
  returned: when a range query ran
  type: float
end:
  description: Evaluation time (instant) or end of the range (unix seconds).
  returned: always
  type: float
step:
  description: Step of the range query in seconds.
  returned: when a range query ran
  type: float
"""

import math
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import (
    PROMETHEUS_ARG_SPEC,
    PrometheusError,
    jsonable_result,
    now,
    parse_duration,
    parse_time,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.promql import auto_step


def run(module: t.Any) -> t.Dict[str, t.Any]:
    params = module.params
    client = module.prometheus_client()
    end = parse_time(params["time"], now())
    out: t.Dict[str, t.Any] = {"changed": False, "query": params["query"], "end": end}
    if params["window"] or params["start"]:
        if params["window"] and params["start"]:
            raise PrometheusError("give window or start, not both")
        start = end - parse_duration(params["window"]) if params["window"] else parse_time(params["start"], end)
        step = parse_duration(params["step"]) if params["step"] else auto_step(end - start)
        answer = client.query_range(params["query"], start, end, step)
        out.update({"start": start, "step": step})
    else:
        answer = client.query(params["query"], time=end)
    result_type = answer["result_type"]
    raw = answer["result"]
    if result_type in ("scalar", "string"):
        ts, val = raw
        value = float(val) if result_type == "scalar" else None
        result = [{"metric": {}, "timestamp": float(ts), "value": value if value is None or math.isfinite(value) else None}]
    else:
        result = jsonable_result(raw)
    single = result[0].get("value") if len(result) == 1 and "value" in result[0] else None
    out.update({"result_type": result_type, "result": result, "series": len(result), "value": single,
                "warnings_from_server": answer["warnings"]})
    if params["fail_on_empty"] and not result:
        raise PrometheusError(
            "the query %r returned no series" % params["query"],
            hint="check that the metric is scraped (Prometheus UI: Status > Targets) and the label matchers",
        )
    for warning in answer["warnings"]:
        module.warn("Prometheus: %s" % warning)
    return out


def main() -> None:
    spec: t.Dict[str, t.Any] = dict(PROMETHEUS_ARG_SPEC)
    spec.update(
        query={"type": "str", "required": True},
        time={"type": "str"},
        window={"type": "str"},
        start={"type": "str"},
        step={"type": "str"},
        fail_on_empty={"type": "bool", "default": False},
    )
    module = GpuaasModule(argument_spec=spec, supports_check_mode=True, mutually_exclusive=[("window", "start")])
    module.run(run)


if __name__ == "__main__":
    main()
