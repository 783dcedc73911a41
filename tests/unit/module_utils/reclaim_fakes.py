# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the idle-reclaim unit tests (RayClusters: test_ray_reclaim.py, Notebooks: test_notebook_reclaim.py) run the
reclaim against: the fake API server serving the workload kinds, a fake Prometheus, and one run at a fixed clock."""

from __future__ import annotations

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.reconcile.ray_reclaim_runner import RayReclaimRun
from .fake_kube import FakeClient

NOW = 1_800_000_000.0


class FakePrometheus:
    """GPU utilization by pod name (``util``), every sample at NOW; ``queries``: the PromQL it was asked."""

    def __init__(self, util):
        self.util = util
        self.queries = []

    def query(self, promql):
        self.queries.append(promql)
        return {"result": [{"metric": {"pod": p}, "value": [NOW, str(v)]} for p, v in self.util.items()]}


def reclaim_cluster(*objects, notebooks=False):
    """The fake API server serving RayClusters and Pods (and Notebooks with ``notebooks``), ``objects`` on it."""
    client = FakeClient()
    if notebooks:
        client.serve("kubeflow.org/v1", "Notebook", "notebooks")
    return client.serve("ray.io/v1", "RayCluster", "rayclusters").serve("v1", "Pod", "pods").seed(*objects)


def reclaim_run(client, util, entries, now=NOW, check_mode=False, scrape=5):
    """One run over the opted-in ``entries`` at ``now`` (diff on), Prometheus answering ``util``."""
    engine = ApplyEngine(client, check_mode=check_mode)
    return RayReclaimRun(client, FakePrometheus(util), engine, scrape, clock=lambda: now).run(entries, diff=True)
