# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fairness/replay.py without a lab: the Job it submits and how recorded events become runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.fairness import replay  # noqa: E402

T0 = 1_700_000_000_000


def wl(ms, job, ctype, status):
    return {"kind": "workload", "job": "fs-" + job, "ms": T0 + ms, "type": ctype, "status": status}


def test_events_become_runs_in_trace_minutes():
    trace = {"jobs": [{"id": j, "tenant": "t", "pool": "gpu", "size": 1, "submit": 0, "duration": 10}
                      for j in ("a", "b", "c", "d")]}
    meta = {"t0_ms": T0, "scale": 2.0, "ended_ms": T0 + 40_000,
            "created": {"a": T0, "b": T0 + 1_000, "c": T0 + 1_200}}
    events = [
        wl(2_000, "a", "QuotaReserved", "True"), wl(2_000, "a", "Admitted", "True"), wl(22_000, "a", "Finished", "True"),
        # b: evicted at 8 s, its Job stopped (quota released) at 10 s, admitted again at 14 s, finished at 34 s
        wl(4_000, "b", "QuotaReserved", "True"), wl(8_000, "b", "Evicted", "True"),
        wl(10_000, "b", "QuotaReserved", "False"), wl(14_000, "b", "QuotaReserved", "True"),
        wl(34_000, "b", "Finished", "True"),
        # c: admitted at 6 s and still running when the replay ended at 40 s
        wl(6_000, "c", "QuotaReserved", "True"),
    ]
    got = {r.id: (r.submit, [(x.start, x.end, x.evicted) for x in r.runs]) for r in replay.to_results(trace, meta, events)}
    # 2 s of lab time per trace minute: 2 s -> 1 min, 22 s -> 11 min ...
    assert got["a"] == (0.0, [(1.0, 11.0, False)])
    assert got["b"] == (0.5, [(2.0, 5.0, True), (7.0, 17.0, False)])
    assert got["c"] == (0.6, [(3.0, 20.0, True)])
    # d was never created: its trace submission time is kept, it never ran
    assert got["d"] == (0.0, [])


def test_job_body():
    job = {"id": "j0042", "tenant": "fs-nlp", "pool": "fs-h100", "size": 4, "submit": 3.5, "duration": 2.5}
    body = replay.job_body(job, "fs-nlp", "nvidia.com/gpu", scale=2.0, binpack=True)
    assert body["metadata"]["name"] == "fs-j0042"
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    pod = body["spec"]["template"]
    # 2.5 trace minutes x 2 s = 5 s after Ready
    assert pod["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"] == "5000ms"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert pod["spec"]["terminationGracePeriodSeconds"] == 1
    assert pod["spec"]["schedulerName"] == replay.BINPACK
    assert "schedulerName" not in replay.job_body(job, "fs-nlp", "nvidia.com/gpu", 1.0, False)["spec"]["template"]["spec"]


def test_bench_namespaces_come_from_the_inventory():
    from bench.fairness import model

    inv = model.variant(model.load_inventory(), "static")
    assert replay.namespaces_of(inv) == {"fs-nlp": "fs-nlp", "fs-vision": "fs-vision", "fs-speech": "fs-speech",
                                         "fs-analytics": "fs-analytics"}
    with pytest.raises(KeyError):
        replay.namespaces_of({"gpuaas_tenants": [{"name": "x"}]})


def test_binds_and_every_eviction_are_kept():
    # issue 26: x is preempted a second time while its pods are still stopping (two Evicted=True transitions in one
    # run: Kueue's kueue_preempted_workloads_total counts both); y is evicted before its pod was bound
    trace = {"jobs": [{"id": j, "tenant": "t", "pool": "gpu", "size": 1, "submit": 0, "duration": 10}
                      for j in ("x", "y")]}
    meta = {"t0_ms": T0, "scale": 2.0, "ended_ms": T0 + 40_000, "created": {"x": T0, "y": T0}}

    def bound(ms, job, pod):
        return {"kind": "bound", "job": "fs-" + job, "ms": T0 + ms, "pod": pod, "node": "n0"}

    events = [
        wl(2_000, "x", "QuotaReserved", "True"), bound(3_000, "x", "x-1"), wl(4_000, "x", "Evicted", "True"),
        wl(5_000, "x", "Evicted", "True"), wl(6_000, "x", "QuotaReserved", "False"),
        wl(8_000, "x", "QuotaReserved", "True"), wl(8_000, "x", "Evicted", "False"), bound(9_000, "x", "x-2"),
        wl(30_000, "x", "Finished", "True"),
        wl(2_000, "y", "QuotaReserved", "True"), wl(2_500, "y", "Evicted", "True"), wl(3_000, "y", "QuotaReserved", "False"),
        wl(4_000, "y", "QuotaReserved", "True"), bound(4_200, "y", "y-1"), wl(26_000, "y", "Finished", "True"),
    ]
    got = {r.id: r for r in replay.to_results(trace, meta, events)}
    x, y = got["x"], got["y"]
    # 2 s per trace minute: x runs 1.0 .. 3.0 (evicted, bound at 1.5) and 4.0 .. 15.0 (bound at 4.5)
    assert [(r.start, r.end, r.evicted, r.bind) for r in x.runs] == [(1.0, 3.0, True, 1.5), (4.0, 15.0, False, 4.5)]
    assert x.evictions == 2
    # y: first run 1.0 .. 1.5 never bound, second bound at 2.1
    assert [(r.start, r.end, r.evicted, r.bind) for r in y.runs] == [(1.0, 1.5, True, None), (2.0, 13.0, False, 2.1)]
    assert y.evictions == 1
