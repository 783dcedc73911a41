# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""prometheus_query against the lab's real Prometheus (scraping the simulated DCGM exporter every 5 s)."""
from __future__ import annotations

import base64
import json
import socket
import time
import uuid

import pytest

from test_lab import wait_until  # noqa: F401  pylint: disable=import-error
from conftest import create_namespace, local_play, promql

NS = "itpq-%s" % uuid.uuid4().hex[:5]


def play(*tasks: dict) -> str:
    body = "".join("\n    - name: %s\n      gpuaas.platform.prometheus_query: %s\n" % (t.pop("_name"), json.dumps(t))
                   for t in tasks)
    return local_play("  tasks:%s" % body)


@pytest.fixture(scope="module")
def three_gpu_pod(kube, lab):
    """One pod holding 3 GPUs at 42 % and a Secret with a bearer token, in a namespace of its own."""
    ns_api = kube.resources.get(api_version="v1", kind="Namespace")
    # gpuaas.io/platform: a probe pod of the lab, left alone by the tenants' admission policy (issue 11)
    create_namespace(kube, NS, {"gpuaas.io/platform": "lab-test"})
    kube.resources.get(api_version="v1", kind="Pod").create(namespace=NS, body={
        "metadata": {"name": "probe", "annotations": {"lab.gpuaas.io/gpu-util": "42"}},
        "spec": {"nodeName": "gpu-h100-0", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "main", "image": "registry.invalid/cuda:latest",
                                 "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}})
    kube.resources.get(api_version="v1", kind="Secret").create(namespace=NS, body={
        "metadata": {"name": "prom-reader"}, "type": "Opaque",
        "data": {"token": base64.b64encode(b"lab-token").decode()}})
    wait_until(lambda: len(promql(lab, 'DCGM_FI_DEV_GPU_UTIL{namespace="%s"}' % NS)) == 3, 90, "3 scraped GPUs of the probe pod")
    time.sleep(20)  # the range query below reaches 15 s back
    yield NS
    ns_api.delete(name=NS)


def test_instant_and_range_queries(three_gpu_pod, run_playbook):
    now = int(time.time()) - 5
    run = run_playbook(play(
        {"_name": "sum", "query": 'sum(DCGM_FI_DEV_GPU_UTIL{namespace="%s"})' % NS, "time": str(now)},
        {"_name": "per gpu", "query": 'DCGM_FI_DEV_GPU_UTIL{namespace="%s"}' % NS, "fail_on_empty": True},
        {"_name": "all gpus", "query": "count(DCGM_FI_DEV_GPU_UTIL)"},
        {"_name": "range", "query": 'count(DCGM_FI_DEV_GPU_UTIL{namespace="%s"})' % NS, "window": "10s", "step": "5s",
         "time": str(now)},
        {"_name": "rfc3339", "query": "vector(1)", "time": "2026-01-01T00:00:00Z"},
    ), check=True)
    assert run.rc == 0, run.explain()
    total = run.task_results("sum")[0]
    assert total["result_type"] == "vector" and total["series"] == 1 and total["value"] == 126.0  # 3 x 42
    assert total["end"] == now and total["changed"] is False
    per_gpu = run.task_results("per gpu")[0]
    assert per_gpu["series"] == 3 and {r["value"] for r in per_gpu["result"]} == {42.0}
    labels = per_gpu["result"][0]["metric"]
    assert labels["pod"] == "probe" and labels["Hostname"] == "gpu-h100-0" and labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert run.task_results("all gpus")[0]["value"] == 23.0  # 16 H100 + 7 MIG slices
    rng = run.task_results("range")[0]
    assert rng["result_type"] == "matrix" and rng["step"] == 5.0 and rng["start"] == now - 10
    assert [v for _ts, v in rng["result"][0]["values"]] == [3.0, 3.0, 3.0]
    assert run.task_results("rfc3339")[0]["end"] == 1767225600.0


def test_token_from_secret(three_gpu_pod, run_playbook, lab):
    run = run_playbook(play({"_name": "with secret", "query": 'count(DCGM_FI_DEV_GPU_UTIL{namespace="%s"})' % NS,
                             "prometheus": {"url": lab.prometheus_url, "token_secret": {"name": "prom-reader", "namespace": NS}}}))
    assert run.rc == 0, run.explain()
    assert run.task_results("with secret")[0]["value"] == 3.0
    assert "lab-token" not in run.stdout  # no_log: the token never shows
    run = run_playbook(play({"_name": "missing secret", "query": "up",
                             "prometheus": {"url": lab.prometheus_url, "token_secret": {"name": "nope", "namespace": NS}}}))
    assert run.rc != 0
    failed = run.task_results("missing secret")[0]
    assert failed["msg"].startswith("the token Secret %s/nope does not exist" % NS)


def test_clear_errors(run_playbook, lab):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    run = run_playbook(play(
        {"_name": "unreachable", "query": "up", "prometheus": {"url": "http://127.0.0.1:%d" % port, "timeout": 5}},
    ))
    assert run.rc != 0
    res = run.task_results("unreachable")[0]
    assert res["msg"].startswith("cannot reach Prometheus at http://127.0.0.1:%d" % port) and "port-forward" in res["hint"]

    run = run_playbook(play({"_name": "bad promql", "query": "sum(rate(DCGM_FI_DEV_GPU_UTIL[1m]"}))
    res = run.task_results("bad promql")[0]
    assert run.rc != 0 and res["msg"].startswith("PromQL error in 'sum(rate(DCGM_FI_DEV_GPU_UTIL[1m]'")

    run = run_playbook(play({"_name": "empty", "query": 'DCGM_FI_DEV_GPU_UTIL{namespace="no-such-namespace"}',
                             "fail_on_empty": True}))
    res = run.task_results("empty")[0]
    assert run.rc != 0 and "returned no series" in res["msg"]

    run = run_playbook(play({"_name": "wrong path", "query": "up", "prometheus": {"url": lab.prometheus_url + "/graph"}}))
    res = run.task_results("wrong path")[0]
    assert run.rc != 0 and "HTTP 404" in res["msg"] and "base URL" in res["hint"]
