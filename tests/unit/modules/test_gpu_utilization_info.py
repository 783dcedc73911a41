# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_utilization_info: where quota figures come from (Kueue metrics, ClusterQueue objects, nothing)."""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.prometheus import PrometheusError
from ansible_collections.gpuaas.platform.plugins.modules import gpu_utilization_info as gui

sys.path.insert(0, os.path.dirname(__file__))
from fake_kube import FakeKube  # noqa: E402  pylint: disable=wrong-import-position


class FakeProm:
    """Answers range queries by metric name (the part before '{' inside the outermost aggregation)."""

    def __init__(self, series):
        self.series = series
        self.queries = []

    def query_range(self, promql, start, end, step):
        self.queries.append(promql)
        for metric, result in self.series.items():
            if metric in promql:
                return {"result_type": "matrix", "result": result, "warnings": []}
        return {"result_type": "matrix", "result": [], "warnings": []}


class FakeModule:
    def __init__(self, **params):
        self.params = {"kueue_source": "auto", "kueue_selector": ""}
        self.params.update(params)


CQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "nlp"},
      "spec": {"resourceGroups": [{"flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]},
      "status": {"pendingWorkloads": 1, "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "3"}]}]}}
NOMINAL = [{"metric": {"cluster_queue": "nlp", "flavor": "h100", "resource": "nvidia.com/gpu", "cohort": "org"},
            "values": [[100, "8"], [105, "8"]]}]


@pytest.fixture
def kube(monkeypatch):
    fake = FakeKube([("kueue.x-k8s.io/v1beta2", "ClusterQueue")])
    fake.add(CQ)
    monkeypatch.setattr(gui, "get_client", lambda module: fake)
    return fake


def test_metrics_preferred(kube):
    warnings = []
    queues, source = gui.queue_figures(FakeModule(), FakeProm({"kueue_cluster_queue_nominal_quota": NOMINAL}), 100, 105, 5, warnings)
    assert source == "prometheus" and warnings == []
    assert queues[0]["cluster_queue"] == "nlp" and queues[0]["resources"][0]["nominal"] == 8.0


def test_auto_falls_back_to_cluster_queues_with_a_warning(kube):
    warnings = []
    prom = FakeProm({})
    queues, source = gui.queue_figures(FakeModule(), prom, 100, 105, 5, warnings)
    assert source == "cluster"
    assert queues[0]["resources"][0]["usage"] == 3.0 and queues[0]["pending_workloads"] == 1
    assert len(warnings) == 1 and "metrics.enableClusterQueueResources" in warnings[0]
    assert len(prom.queries) == 6 and all('replica_role!="follower"' in q for q in prom.queries)


def test_prometheus_source_requires_metrics(kube):
    with pytest.raises(PrometheusError, match="kueue_cluster_queue_nominal_quota"):
        gui.queue_figures(FakeModule(kueue_source="prometheus"), FakeProm({}), 100, 105, 5, [])


def test_no_kueue(monkeypatch):
    fake = FakeKube([])
    fake.served = lambda gv: False
    monkeypatch.setattr(gui, "get_client", lambda module: fake)
    warnings = []
    assert gui.queue_figures(FakeModule(), FakeProm({}), 100, 105, 5, warnings) == ([], "none")
    assert warnings[-1] == "Kueue is not installed: no quota figures"
    with pytest.raises(GpuaasError, match="serves no Kueue API"):
        gui.queue_figures(FakeModule(kueue_source="cluster"), FakeProm({}), 100, 105, 5, [])
    assert gui.queue_figures(FakeModule(kueue_source="none"), FakeProm({}), 100, 105, 5, []) == ([], "none")
