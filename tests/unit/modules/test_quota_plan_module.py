# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""quota_plan (issue 26): the queries it sends (the DCGM query of observe/promql.py, Kueue's pending requests without
follower replicas), input checked before anything is read, a trace file, unchanged result."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.modules import quota_plan as qp

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_utilization_info import FakeProm  # noqa: E402  pylint: disable=wrong-import-position

GPU = "nvidia.com/gpu"
INVENTORY = {"gpuaas_flavors": [{"name": "h100", "node_labels": {"p": "h100"}}], "gpuaas_cohorts": [{"name": "org"}],
             "gpuaas_tenants": [{"name": "nlp", "namespaces": ["nlp"], "cohort": "org",
                                 "quotas": [{"flavor": "h100", "resources": {GPU: 1}, "borrowing_limit": {GPU: 0}}]},
                                {"name": "cv", "namespaces": ["cv"], "cohort": "org",
                                 "quotas": [{"flavor": "h100", "resources": {GPU: 1}}]}]}
PROPOSED = {"gpuaas_tenants_override": [dict(INVENTORY["gpuaas_tenants"][0], quotas=[{"flavor": "h100", "resources": {GPU: 1}}]),
                                        INVENTORY["gpuaas_tenants"][1]]}


class Module:
    def __init__(self, prom=None, **params):
        self.params = {"inventory": INVENTORY, "proposed": PROPOSED, "trace": None, "window": "60s", "time": "1060",
                       "step": "10s", "dcgm_selector": "", "kueue_selector": "", "capacity": {}}
        self.params.update(params)
        self.prom = prom
        self.warnings = []

    def prometheus_client(self):
        assert self.prom is not None, "no Prometheus expected"
        return self.prom

    def warn(self, text):
        self.warnings.append(text)


def points(value, count=7, start=1000.0, step=10.0):
    return [[start + i * step, str(value)] for i in range(count)]


def test_prometheus_demand_queries_and_plan():
    gpu = {"namespace": "nlp", "pod": "train-1", "UUID": "GPU-1", "Hostname": "n1"}
    prom = FakeProm({"DCGM_FI_DEV_GPU_UTIL": [{"metric": gpu, "values": points(90)}],
                     "kueue_cluster_queue_resource_pending": [{"metric": {"cluster_queue": "nlp", "resource": GPU},
                                                               "values": points(1)}]})
    out = qp.run(Module(prom))
    assert any(q.startswith("max by (") and "DCGM_FI_DEV_GPU_UTIL" in q for q in prom.queries)
    assert any("kueue_cluster_queue_resource_pending{" in q and 'replica_role!="follower"' in q for q in prom.queries)
    assert out["changed"] is False and out["demand"]["source"] == "prometheus"
    # a 60 s window of 10 s steps has 6 points over 50 s (observe/promql.range_bounds), samples before it are left out;
    # the pod ran the whole window (W = 50 s); 1 GPU pending at the end -> one more 1-GPU job of W
    assert (out["demand"]["jobs"], out["demand"]["notes"]["pending_jobs_added"]) == (2, 1)
    current, proposed = (out["plan"]["variants"][v]["tenants"]["nlp"] for v in ("current", "proposed"))
    w = 50 / 60.0
    assert (current["wait_p95_minutes"], proposed["wait_p95_minutes"]) == (round(w, 3), 0.0)   # borrowing limit 0 vs none
    assert proposed["borrowed_gpu_hours"] == round(w / 60, 3)


def test_bad_capacity_or_inventory_fails_before_prometheus_is_read():
    with pytest.raises(GpuaasError) as err:
        qp.run(Module(None, capacity={"h100": "lots"}))
    assert "capacity.h100" in err.value.message
    bad = dict(INVENTORY, gpuaas_tenants=[{"name": "x", "namespaces": ["x"], "quotas": [{"flavor": "nope", "resources": {GPU: 1}}]}])
    with pytest.raises(GpuaasError) as err:
        qp.run(Module(None, inventory=bad, proposed={}))
    assert any(p.startswith("current:") for p in err.value.problems) and any(p.startswith("proposed:") for p in err.value.problems)


def test_a_trace_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"params": {"horizon": 20}, "jobs": [
        {"id": "a", "tenant": "nlp", "pool": "h100", "size": 1, "submit": 0, "duration": 10},
        {"id": "b", "tenant": "nlp", "pool": "h100", "size": 1, "submit": 0, "duration": 10}]}))
    out = qp.run(Module(None, trace=str(path)))
    assert out["demand"] == {"source": "trace", "path": str(path), "jobs": 2, "horizon_minutes": 20.0}
    assert out["plan"]["variants"]["current"]["tenants"]["nlp"]["wait_p95_minutes"] == 10.0
    assert out["plan"]["variants"]["proposed"]["tenants"]["nlp"]["wait_p95_minutes"] == 0.0
    assert "| nlp | proposed |" in out["markdown"] and out["html"].startswith("<!DOCTYPE html>")
    path.write_text("{not json")
    with pytest.raises(GpuaasError):
        qp.run(Module(None, trace=str(path)))
