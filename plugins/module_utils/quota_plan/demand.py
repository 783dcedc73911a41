# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The demand the quota plan replays: jobs (tenant, flavor, GPUs, submission, duration) from a trace file or
derived from Prometheus series. Pure (the caller runs the queries).

**Trace file** (the fair-sharing benchmark's format, ``bench/fairness/trace.py``): JSON ``{"params": {...},
"jobs": [{"id", "tenant", "pool" (flavor name), "size" (GPUs or MIG slices), "submit", "duration"}, ...]}``,
times in minutes; the window is ``params.horizon`` when given, else the last submission.

**Prometheus** (an approximation, documented in docs/quota-plan.md): Kueue's metrics are per ClusterQueue, not
per workload, so jobs are taken from the DCGM exporter's per-GPU series, which name the pod holding each GPU:

* one job per pod (``namespace``/``pod``, or ``exported_namespace``/``exported_pod``): GPUs = the most distinct
  GPUs (UUID + MIG instance) the pod held at one point; it ran from its first to its last point (+ one step);
  the tenant is the one owning the namespace; the flavor is the tenant's flavor with the largest nominal quota of
  the resource the GPU gives (``nvidia.com/mig-<GPU_I_PROFILE>`` for a MIG slice, else ``nvidia.com/gpu``);
* its submission: Kueue's ``kueue_cluster_queue_resource_pending`` of the tenant's ClusterQueue for that resource
  — the job is taken to have waited through the contiguous points before its start at which at least its size was
  pending (none: submitted when it started);
* demand still pending at the end of the window (never admitted, so absent from DCGM) becomes jobs of the
  tenant's median size and duration (1 GPU and the window when the tenant ran none), submitted when that pending
  stretch began;
* a pod already running at the start of the window counts from the start; one still running at the end until the
  end; a preempted workload's pods show up as separate, shorter jobs (its restarts are demand seen twice).
"""

from __future__ import annotations

import math
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.quantity import parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.scheduler import Job

Matrix = t.Sequence[t.Tuple[t.Mapping[str, str], t.Sequence[t.Tuple[float, float]]]]
TRACE_JOB_KEYS = ("tenant", "pool", "size", "submit", "duration")


def jobs_from_trace(trace: t.Any) -> t.Tuple[t.List[Job], float]:
    """``(jobs, horizon minutes)`` of a trace; every malformed entry is reported at once."""
    if not isinstance(trace, dict) or not isinstance(trace.get("jobs"), list):
        raise GpuaasError("The trace is not a JSON object with a 'jobs' list.",
                          hint="Use the format of bench/fairness/trace.py: {\"params\": {...}, \"jobs\": [{\"id\", "
                               "\"tenant\", \"pool\", \"size\", \"submit\", \"duration\"}, ...]}.")
    problems: t.List[str] = []
    jobs: t.List[Job] = []
    for i, entry in enumerate(trace["jobs"]):
        if not isinstance(entry, dict):
            problems.append("jobs[%d]: not a mapping" % i)
            continue
        missing = [k for k in TRACE_JOB_KEYS if k not in entry]
        if missing:
            problems.append("jobs[%d]: missing %s" % (i, ", ".join(missing)))
            continue
        try:
            size, submit, duration = float(entry["size"]), float(entry["submit"]), float(entry["duration"])
        except (TypeError, ValueError):
            problems.append("jobs[%d]: size, submit and duration must be numbers" % i)
            continue
        if size <= 0 or submit < 0 or duration <= 0:
            problems.append("jobs[%d]: size and duration must be positive and submit not negative" % i)
            continue
        jobs.append(Job(str(entry.get("id", "j%04d" % i)), str(entry["tenant"]), str(entry["pool"]), size, submit,
                        duration))
    if problems:
        raise GpuaasError("The trace has %d malformed job(s); nothing was planned." % len(problems),
                          hint="Fix the listed entries of the trace file.", problems=problems)
    params = trace.get("params") if isinstance(trace.get("params"), dict) else {}
    horizon = params.get("horizon")
    try:
        horizon = float(horizon) if horizon is not None else None
    except (TypeError, ValueError):
        horizon = None
    if horizon is None or horizon <= 0:
        horizon = max((j.submit for j in jobs), default=0.0)
    return jobs, horizon


def flavor_for(model: TenantModel, tenant: str, resource: str) -> t.Optional[str]:
    """The tenant's flavor with the largest nominal quota of ``resource`` (ties: the first listed)."""
    entry = model.tenant(tenant)
    best: t.Optional[t.Tuple[float, str]] = None
    for quota in entry.quotas if entry else []:
        if resource in quota.resources:
            amount = float(parse_quantity(quota.resources[resource]))
            if best is None or amount > best[0]:
                best = (amount, quota.flavor)
    return best[1] if best else None


def _index(ts: float, start: float, step: float) -> int:
    return int(round((ts - start) / step))


def _median(values: t.Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0


def jobs_from_prometheus(model: TenantModel, dcgm: Matrix, pending: Matrix, start: float, end: float,
                         step: float) -> t.Tuple[t.List[Job], float, t.Dict[str, t.Any]]:
    """``(jobs, horizon minutes, notes)`` from a DCGM range query (per GPU, with pod labels) and
    ``kueue_cluster_queue_resource_pending`` by cluster_queue and resource, over ``[start, end]`` every ``step``
    seconds (see the module docstring). ``notes``: counts of what was left out and why."""
    ns_tenant = {ns: x.name for x in model.present_tenants for ns in x.namespaces}
    points = int(round((end - start) / step)) + 1
    # (namespace, pod) -> point -> GPU ids held; and the resource they give
    held: t.Dict[t.Tuple[str, str], t.Dict[int, t.Set[str]]] = {}
    resource_of: t.Dict[t.Tuple[str, str], str] = {}
    for labels, values in dcgm:
        ns = labels.get("namespace") or labels.get("exported_namespace") or ""
        pod = labels.get("pod") or labels.get("exported_pod") or ""
        if not ns or not pod:
            continue
        gpu = "%s/%s/%s" % (labels.get("UUID") or labels.get("gpu", ""), labels.get("Hostname") or labels.get("hostname", ""),
                            labels.get("GPU_I_ID", ""))
        profile = labels.get("GPU_I_PROFILE") or ""
        resource_of[(ns, pod)] = "nvidia.com/mig-%s" % profile if profile else "nvidia.com/gpu"
        slots = held.setdefault((ns, pod), {})
        for ts, val in values:
            index = _index(ts, start, step)
            if not math.isnan(val) and 0 <= index < points:
                slots.setdefault(index, set()).add(gpu)
    pend: t.Dict[t.Tuple[str, str], t.Dict[int, float]] = {}
    for labels, values in pending:
        slot = pend.setdefault((labels.get("cluster_queue", ""), labels.get("resource", "")), {})
        for ts, val in values:
            index = _index(ts, start, step)
            if not math.isnan(val) and 0 <= index < points:
                slot[index] = val

    def minutes(index: int) -> float:
        return max(0.0, index * step / 60.0)

    notes: t.Dict[str, t.Any] = {"pods": len(held), "pods_outside_tenancy": 0, "pods_without_flavor": 0,
                                 "pending_jobs_added": 0}
    jobs: t.List[Job] = []
    observed: t.Dict[t.Tuple[str, str], t.List[Job]] = {}
    for (ns, pod), slots in sorted(held.items()):
        if not slots:
            continue
        tenant = ns_tenant.get(ns)
        if tenant is None:
            notes["pods_outside_tenancy"] += 1
            continue
        resource = resource_of[(ns, pod)]
        flavor = flavor_for(model, tenant, resource)
        if flavor is None:
            notes["pods_without_flavor"] += 1
            continue
        first, last = min(slots), max(slots)
        size = float(max(len(g) for g in slots.values()))
        waiting = pend.get((tenant, resource), {})
        submit_index = first
        while submit_index - 1 >= 0 and waiting.get(submit_index - 1, 0.0) >= size:
            submit_index -= 1
        run_end = min(last + 1, points - 1) if last < points - 1 else last
        duration = max(minutes(run_end) - minutes(first), step / 60.0)
        job = Job("%s/%s" % (ns, pod), tenant, flavor, size, minutes(submit_index), duration)
        jobs.append(job)
        observed.setdefault((tenant, resource), []).append(job)
    # demand still pending at the end: never admitted inside the window, so not in DCGM
    for (queue, resource), slot in sorted(pend.items()):
        left = slot.get(points - 1, 0.0)
        tenant = queue if model.tenant(queue) is not None else None
        flavor = flavor_for(model, tenant, resource) if tenant else None
        if left <= 0 or flavor is None:
            continue
        seen = observed.get((tenant, resource), [])
        size = _median([j.size for j in seen]) if seen else 1.0
        duration = _median([j.duration for j in seen]) if seen else minutes(points - 1) or step / 60.0
        since = points - 1
        while since - 1 >= 0 and slot.get(since - 1, 0.0) > 0:
            since -= 1
        for i in range(int(math.ceil(left / size))):
            jobs.append(Job("%s/pending-%d" % (tenant, i), tenant, flavor, min(size, left - i * size), minutes(since),
                            duration))
            notes["pending_jobs_added"] += 1
    jobs.sort(key=lambda j: (j.submit, j.id))
    return jobs, minutes(points - 1), notes
