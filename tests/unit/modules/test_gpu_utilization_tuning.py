# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_utilization_info (issue 16): the tuning queries it sends (Kueue v0.19 names, follower replicas excluded),
millisecond timestamps aligned to the window's points, no analysis without Prometheus history, flavors of nodes."""

from __future__ import annotations

import os
import sys

from ansible_collections.gpuaas.platform.plugins.modules import gpu_utilization_info as gui

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_utilization_info import FakeModule, FakeProm  # noqa: E402  pylint: disable=wrong-import-position

START, STEP, N = 1000.0004, 5.0, 4  # a window start with sub-millisecond digits, as time.time() gives


def series(cq, values, **labels):
    metric = dict({"cluster_queue": cq, "flavor": "h100", "resource": "nvidia.com/gpu", "cohort": "org"}, **labels)
    # Prometheus answers with millisecond timestamps
    return [{"metric": metric, "values": [[round(START + i * STEP, 3), str(v)] for i, v in enumerate(values)]}]


def module(**params):
    base = {"tenants": [{"name": "nlp", "namespaces": ["nlp"]}], "quantile": 0.95, "min_window": "10s", "min_coverage": 0.9}
    base.update(params)
    return FakeModule(**base)


def test_tuning_queries_and_alignment():
    pending = [{"metric": {"cluster_queue": "nlp", "resource": "nvidia.com/gpu"},
                "values": [[round(START + i * STEP, 3), "2"] for i in range(N)]}]
    prom = FakeProm({"kueue_cluster_queue_nominal_quota": series("nlp", [1] * N),
                     "kueue_cluster_queue_resource_usage": series("nlp", [1] * N),
                     "kueue_cluster_queue_lending_limit": series("nlp", ["+Inf"] * N),
                     "kueue_cluster_queue_resource_pending": pending})
    util = [({"gpu": "0"}, [(round(START + i * STEP, 3), 50.0) for i in range(N)])]
    analysis = gui.tuning_analysis(module(), prom, "prometheus", START, START + (N - 1) * STEP, STEP, util)
    assert all('replica_role!="follower"' in q for q in prom.queries)
    assert any(q.startswith("max by (cluster_queue, resource) (kueue_cluster_queue_resource_pending{") for q in prom.queries)
    row = analysis["rows"][0]
    assert (row["points"], row["coverage"], row["demand_quantile"], row["lending_limit"]) == (N, 1.0, 3.0, None)
    assert analysis["sufficient"] and analysis["dcgm_coverage"] == 1.0


def test_no_analysis_without_prometheus_history():
    prom = FakeProm({})
    assert gui.tuning_analysis(module(), prom, "cluster", START, START + 15, STEP, []) == {}
    assert prom.queries == []


def test_flavors_of_nodes(monkeypatch):
    class Nodes:
        def resource(self, api_version, kind):
            assert (api_version, kind) == ("v1", "Node")
            return self

        def list(self):
            return [{"metadata": {"name": "gpu-0", "labels": {"p": "h100"}}}, {"metadata": {"name": "cpu-0", "labels": {}}}]

    monkeypatch.setattr(gui, "get_client", lambda m: Nodes())
    warnings = []
    assert gui.flavor_of_nodes(module(flavors=[{"name": "h100", "node_labels": {"p": "h100"}}]), warnings) == {"gpu-0": "h100"}
    assert gui.flavor_of_nodes(module(flavors=[]), warnings) == {} and warnings == []
