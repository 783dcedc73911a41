# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``gpuaas_clusters``: a MultiKueue fleet — one manager cluster and the worker clusters it dispatches to.

The quota model (argued in docs/multicluster.md): a tenant's ``quotas`` are declared once and are the **fleet**
quota. The manager's ClusterQueue of the tenant carries exactly that quota (and its borrowing/lending limits), so
the manager is where the tenant's quota is enforced. Each worker gets the tenant's ClusterQueue with the tenant's
**share** of every quota, proportional to the capacity the worker declares for that flavor and resource; the shares
of one quota add up exactly to it (largest-remainder rounding, whole devices for accelerators, milli-units
otherwise). ``worker_quotas`` computes the shares; the builders and the checks here read it, nobody else splits.

Checked before anything is written on any cluster, every problem at once: duplicate cluster names, the manager listed
as a worker (by name, or by connection options identical to the manager's), a cluster without connection options
(it would silently reach whatever the ambient kubeconfig points at), a worker without a flavor (or without capacity
for a resource) that a tenant's quota names, tenants' quotas above the fleet's declared capacity, and rounding that
puts a worker's shares above its capacity.

No I/O.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quotas import resource_map
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.records import Flavor, Quota, Tenant
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.validator import Validator
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.auth import K8S_AUTH_ARG_SPEC

CLUSTERS_KEYS = ("manager", "workers")
MANAGER_KEYS = ("name", "auth", "kueue_namespace")
WORKER_KEYS = ("name", "auth", "kueue_namespace", "api_server", "flavors", "state", "token_expiration_seconds")
WORKER_STATES = ("present", "absent")
WORKER_FLAVOR_KEYS = ("name", "capacity")
# The connection options of every module (kube/auth.py), per cluster; aliases are accepted as the modules accept them.
AUTH_KEYS: t.Tuple[str, ...] = tuple(K8S_AUTH_ARG_SPEC) + tuple(
    alias for spec in K8S_AUTH_ARG_SPEC.values() for alias in spec.get("aliases", ()))
# Options that say which API server a cluster is; without one of them a cluster entry would reach whatever the
# ambient KUBECONFIG / in-cluster account points at — the same server for every cluster of the fleet.
LOCATING_AUTH_KEYS = ("kubeconfig", "context", "host")
# Credentials that go with ``host`` when no kubeconfig is given.
HOST_CREDENTIALS = (("api_key",), ("client_cert", "client_key"), ("username", "password"))
DEFAULT_KUEUE_NAMESPACE = "kueue-system"
# MultiKueueConfig.spec.clusters has maxItems 20 (Kueue v0.19.2 CRD kueue.x-k8s.io_multikueueconfigs.yaml).
MAX_WORKERS = 20
# A worker's bound MultiKueue token (token_expiration_seconds): the API server refuses a TokenRequest below 10 minutes
# (ValidateTokenRequest); the upper bound keeps the value an int32, as the API's expirationSeconds is.
MIN_TOKEN_EXPIRATION = 600
MAX_TOKEN_EXPIRATION = 2 ** 31 - 1
# The worker share of a non-accelerator resource is computed in milli-units (the finest unit of a CPU quantity).
MILLI = Decimal(1000)


@dataclass
class Cluster:
    """A cluster of the fleet and how to reach it (the modules' connection options; ``auth`` is never printed)."""
    name: str
    auth: t.Dict[str, t.Any] = field(default_factory=dict, repr=False)
    kueue_namespace: str = DEFAULT_KUEUE_NAMESPACE


@dataclass
class Worker(Cluster):
    # the API server URL as the manager's Kueue reaches it (None: the URL the connection options resolve to)
    api_server: t.Optional[str] = None
    # flavor -> {resource: capacity as canonical text}
    capacity: t.Dict[str, t.Dict[str, str]] = field(default_factory=dict)
    # "absent": a worker being retired — drained, then torn out by a run with prune_workers (docs/multicluster.md)
    state: str = "present"
    # None: MultiKueue's credential is a long-lived ServiceAccount token Secret; seconds: a bound token requested with
    # this lifetime (TokenRequest), renewed by the run once half of it has passed (docs/multicluster.md)
    token_expiration_seconds: t.Optional[int] = None


@dataclass
class Fleet:
    manager: Cluster
    workers: t.List[Worker] = field(default_factory=list)
    # workers with state: absent — in no quota split, no MultiKueueConfig; reachable to be drained and torn out
    retired: t.List[Worker] = field(default_factory=list)

    def worker(self, name: str) -> t.Optional[Worker]:
        for worker in self.workers:
            if worker.name == name:
                return worker
        return None


def parse_clusters(check: Validator, value: t.Any, flavors: t.Sequence[Flavor], tenants: t.Sequence[Tenant],
                   allow_overcommit: bool = False) -> t.Optional[Fleet]:
    """The fleet, or ``None`` when ``gpuaas_clusters`` is unset (a single-cluster inventory: nothing changes)."""
    if value is None:
        return None
    data = check.mapping("gpuaas_clusters", value, CLUSTERS_KEYS)
    if data is None:
        return None
    manager = _manager(check, data.get("manager"))
    entries = _workers(check, data.get("workers"), {f.name for f in flavors})
    _distinct_clusters(check, manager, entries)
    if manager is None:
        return None
    fleet = Fleet(manager, [w for w in entries if w.state == "present"], [w for w in entries if w.state == "absent"])
    if _tenant_flavors_on_every_worker(check, fleet, tenants):
        _fleet_capacity(check, fleet, tenants, allow_overcommit)
    return fleet


def _manager(check: Validator, value: t.Any) -> t.Optional[Cluster]:
    path = "gpuaas_clusters.manager"
    if value is None:
        check.err(path, "is required: the cluster whose Kueue dispatches the tenants' workloads to the workers")
        return None
    data = check.mapping(path, value, MANAGER_KEYS)
    if data is None:
        return None
    name = check.label_name(path + ".name", data.get("name"))
    auth = _auth(check, path + ".auth", data.get("auth"))
    namespace = check.label_name(path + ".kueue_namespace", data.get("kueue_namespace", DEFAULT_KUEUE_NAMESPACE))
    if name is None:
        return None
    return Cluster(name, auth, namespace or DEFAULT_KUEUE_NAMESPACE)


def _workers(check: Validator, value: t.Any, flavors: t.Set[str]) -> t.List[Worker]:
    path = "gpuaas_clusters.workers"
    entries = check.sequence(path, value)
    present = [e for e in entries if not (isinstance(e, t.Mapping) and e.get("state") == "absent")]
    if value is None or (isinstance(value, list) and not present):
        check.err(path, "needs at least one worker cluster" + (" with state present" if entries else ""))
    elif len(present) > MAX_WORKERS:
        check.err(path, "Kueue's MultiKueueConfig lists at most %d clusters, got %d" % (MAX_WORKERS, len(present)))
    out: t.List[Worker] = []
    for _index, wpath, data, name in check.named_items(path, entries, WORKER_KEYS, "cluster", label=True):
        state = data.get("state", "present")
        if state not in WORKER_STATES:
            check.err(wpath + ".state", "must be present or absent, got %r" % (state,))
            state = "present"
        if state == "absent":
            # a retired worker needs only how to reach it (to check it holds nothing, then remove what we made)
            auth = _auth(check, wpath + ".auth", data.get("auth"))
            namespace = check.label_name(wpath + ".kueue_namespace",
                                         data.get("kueue_namespace", DEFAULT_KUEUE_NAMESPACE))
            if name:
                out.append(Worker(name, auth, namespace or DEFAULT_KUEUE_NAMESPACE, state="absent"))
            continue
        auth = _auth(check, wpath + ".auth", data.get("auth"))
        namespace = check.label_name(wpath + ".kueue_namespace", data.get("kueue_namespace", DEFAULT_KUEUE_NAMESPACE))
        api_server = data.get("api_server")
        if api_server is not None and (not isinstance(api_server, str) or not api_server.startswith("https://")):
            check.err(wpath + ".api_server", "%r is not an https:// URL (MultiKueue refuses kubeconfigs without TLS "
                                             "verification)" % (api_server,))
            api_server = None
        capacity = _worker_flavors(check, wpath + ".flavors", data.get("flavors"), flavors)
        lifetime = None
        if data.get("token_expiration_seconds") is not None:
            lifetime = check.integer(wpath + ".token_expiration_seconds", data["token_expiration_seconds"],
                                     MIN_TOKEN_EXPIRATION, MAX_TOKEN_EXPIRATION)
        if name:
            out.append(Worker(name, auth, namespace or DEFAULT_KUEUE_NAMESPACE, api_server, capacity,
                              token_expiration_seconds=lifetime))
    return out


def _worker_flavors(check: Validator, path: str, value: t.Any, flavors: t.Set[str]) -> t.Dict[str, t.Dict[str, str]]:
    if value is None:
        check.err(path, "is required: the flavors this worker offers, each with its capacity "
                        "(e.g. [{name: a100, capacity: {nvidia.com/gpu: 16}}])")
        return {}
    out: t.Dict[str, t.Dict[str, str]] = {}
    for _index, fpath, data, name in check.named_items(path, value, WORKER_FLAVOR_KEYS, "flavor"):
        if name and name not in flavors:
            check.unknown_ref(fpath + ".name", name, flavors, "flavor")
        if data.get("capacity") is None:
            check.err(fpath + ".capacity", "is required (e.g. {nvidia.com/gpu: 16, cpu: 256, memory: 2Ti})")
        capacity = resource_map(check, fpath + ".capacity", data.get("capacity"))
        if name and name not in out:
            out[name] = capacity
    return out


def _auth(check: Validator, path: str, value: t.Any) -> t.Dict[str, t.Any]:
    """The connection options of one cluster: known keys, the right types, enough to locate one API server."""
    if value is None:
        check.err(path, "is required: how to reach this cluster (kubeconfig and/or context, or host with api_key)")
        return {}
    data = check.mapping(path, value, AUTH_KEYS)
    if data is None:
        return {}
    aliases = {alias: name for name, spec in K8S_AUTH_ARG_SPEC.items() for alias in spec.get("aliases", ())}
    out: t.Dict[str, t.Any] = {}
    for key, option in data.items():
        name = aliases.get(key, key)
        spec = K8S_AUTH_ARG_SPEC.get(name)
        if spec is None or option is None:
            continue  # unknown keys are reported by check.mapping
        if name in out:
            check.err("%s.%s" % (path, key), "sets %s a second time (through an alias)" % name)
            continue
        if _auth_type_ok(spec.get("type"), name, option):
            out[name] = option
        else:
            check.err("%s.%s" % (path, key), "must be %s, got %s" % (_auth_type_text(spec.get("type"), name),
                                                                     type(option).__name__))
    if not any(out.get(k) for k in LOCATING_AUTH_KEYS):
        check.err(path, "names no cluster: set kubeconfig and/or context, or host (with api_key, client_cert and "
                        "client_key, or username and password); without them every cluster would reach the same "
                        "ambient KUBECONFIG")
    elif out.get("host") and not out.get("kubeconfig") and not out.get("context") and \
            not any(all(out.get(k) for k in keys) for keys in HOST_CREDENTIALS):
        check.err(path, "host %r has no credential: add api_key, client_cert and client_key, or username and "
                        "password (or a kubeconfig)" % out["host"])
    return out


def _auth_type_ok(kind: t.Optional[str], name: str, value: t.Any) -> bool:
    if name == "kubeconfig":
        return isinstance(value, (str, t.Mapping))
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "dict":
        return isinstance(value, t.Mapping)
    return isinstance(value, str)


def _auth_type_text(kind: t.Optional[str], name: str) -> str:
    if name == "kubeconfig":
        return "a path or a kubeconfig mapping"
    return {"bool": "true or false", "list": "a list of strings", "dict": "a mapping"}.get(kind or "", "a string")


def _connection_key(auth: t.Mapping[str, t.Any]) -> t.Optional[t.Tuple[str, ...]]:
    """What locates the API server: two clusters with the same key reach the same server."""
    if not auth:
        return None
    kubeconfig = auth.get("kubeconfig")
    return (repr(sorted(kubeconfig.items())) if isinstance(kubeconfig, t.Mapping) else str(kubeconfig or ""),
            str(auth.get("context") or ""), str(auth.get("host") or "").rstrip("/"))


def _distinct_clusters(check: Validator, manager: t.Optional[Cluster], workers: t.Sequence[Worker]) -> None:
    """The manager is no worker (MultiKueue does not support a cluster that is its own worker), by name or by the
    connection options; two workers never share connection options (duplicate names are reported already)."""
    seen: t.Dict[t.Tuple[str, ...], str] = {}
    if manager is not None:
        key = _connection_key(manager.auth)
        if key is not None:
            seen[key] = "the manager %r" % manager.name
    for index, worker in enumerate(workers):
        path = "gpuaas_clusters.workers[%d]" % index
        if manager is not None and worker.name == manager.name:
            check.err(path + ".name", "%r is the manager: a MultiKueue manager cannot be one of its own workers; "
                                      "give the worker its own cluster" % worker.name)
            continue
        key = _connection_key(worker.auth)
        if key is None:
            continue
        if key in seen:
            check.err(path + ".auth", "reaches the same API server as %s (identical kubeconfig, context and host); "
                                      "each cluster of the fleet needs its own connection options" % seen[key])
        else:
            seen[key] = "worker %r" % worker.name


def _tenant_flavors_on_every_worker(check: Validator, fleet: Fleet, tenants: t.Sequence[Tenant]) -> bool:
    """Every worker serves every tenant (one MultiKueueConfig lists them all): each flavor a present tenant's quota
    names must be on each worker, with capacity declared for each resource of that quota."""
    ok = True
    for index, worker in enumerate(fleet.workers):
        path = "gpuaas_clusters.workers[%d].flavors" % index
        for tenant in tenants:
            if not tenant.present:
                continue
            for quota in tenant.quotas:
                if quota.flavor not in worker.capacity:
                    ok = False
                    check.err(path, "worker %r has no flavor %r, which a quota of tenant %r names; add it with its "
                                    "capacity (MultiKueue may dispatch the tenant's workloads to any worker)"
                              % (worker.name, quota.flavor, tenant.name))
                    continue
                for res in quota.resources:
                    if res not in worker.capacity[quota.flavor]:
                        ok = False
                        check.err("%s[%s].capacity" % (path, quota.flavor),
                                  "worker %r declares no %s capacity for flavor %r, which a quota of tenant %r names"
                                  % (worker.name, res, quota.flavor, tenant.name))
    return ok


def worker_quotas(fleet: Fleet, tenant: Tenant) -> t.Dict[str, t.List[Quota]]:
    """``{worker name: the tenant's quotas on that worker}``: each nominal quota split over the workers in
    proportion to their capacity for the flavor and resource; the shares add up exactly to the quota.

    Borrowing and lending limits are not split: they are enforced once, on the manager (docs/multicluster.md)."""
    out: t.Dict[str, t.List[Quota]] = {w.name: [] for w in fleet.workers}
    for quota in tenant.quotas:
        per_worker: t.Dict[str, t.Dict[str, str]] = {w.name: {} for w in fleet.workers}
        for res, amount in quota.resources.items():
            weights = [_capacity(w, quota.flavor, res) for w in fleet.workers]
            unit = Decimal(1) if is_accelerator(res) else 1 / MILLI
            for worker, share in zip(fleet.workers, split(parse_quantity(amount), weights, unit)):
                per_worker[worker.name][res] = quantity_from_decimal(share)
        for worker in fleet.workers:
            out[worker.name].append(Quota(quota.flavor, per_worker[worker.name]))
    return out


def split(total: Decimal, weights: t.Sequence[Decimal], unit: Decimal) -> t.List[Decimal]:
    """``total`` split in proportion to ``weights`` in whole ``unit`` steps, adding up to ``total`` rounded down to a
    ``unit`` (largest remainder; ties go to the earlier entry). All-zero weights split evenly."""
    if not weights:
        return []
    units = (total / unit).to_integral_value(rounding=ROUND_FLOOR)
    weights = list(weights) if sum(weights) > 0 else [Decimal(1)] * len(weights)
    whole = sum(weights)
    exact = [units * w / whole for w in weights]
    floors = [e.to_integral_value(rounding=ROUND_FLOOR) for e in exact]
    left = int(units - sum(floors))
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - floors[i]), i))
    for i in order[:left]:
        floors[i] += 1
    return [f * unit for f in floors]


def quantity_from_decimal(value: Decimal) -> str:
    """A Kubernetes quantity for a share: whole numbers plain, fractions in milli-units (``500m``)."""
    if value == value.to_integral_value():
        return str(int(value))
    return "%dm" % int((value * MILLI).to_integral_value(rounding=ROUND_FLOOR))


def _capacity(worker: Worker, flavor: str, res: str) -> Decimal:
    amount = worker.capacity.get(flavor, {}).get(res)
    return parse_quantity(amount) if amount is not None else Decimal(0)


def _fleet_capacity(check: Validator, fleet: Fleet, tenants: t.Sequence[Tenant], allow_overcommit: bool) -> None:
    """The tenants' quotas fit the fleet's declared capacity, and no worker gets shares above its own capacity
    (rounding can do that); warnings instead of errors with ``gpuaas_allow_overcommit``."""
    present = [x for x in tenants if x.present]
    wanted: t.Dict[t.Tuple[str, str], Decimal] = {}
    for tenant in present:
        for quota in tenant.quotas:
            for res, amount in quota.resources.items():
                wanted[(quota.flavor, res)] = wanted.get((quota.flavor, res), Decimal(0)) + parse_quantity(amount)

    def report(path: str, message: str) -> None:
        if allow_overcommit:
            check.warn("%s: %s (allowed by gpuaas_allow_overcommit)" % (path, message))
        else:
            check.err(path, message + "; lower the quotas, raise the workers' capacity, or set gpuaas_allow_overcommit: true")

    for (flavor, res), amount in sorted(wanted.items()):
        have = sum((_capacity(w, flavor, res) for w in fleet.workers), Decimal(0))
        if amount > have:
            report("gpuaas_clusters.workers", "tenants' quotas ask for %s %s on flavor %r but the workers declare %s"
                   % (_text(amount), res, flavor, _text(have)))
    shares = {tenant.name: worker_quotas(fleet, tenant) for tenant in present}
    for index, worker in enumerate(fleet.workers):
        for flavor, capacity in worker.capacity.items():
            for res, cap in capacity.items():
                total = sum((parse_quantity(q.resources[res]) for per in shares.values() for q in per[worker.name]
                             if q.flavor == flavor and res in q.resources), Decimal(0))
                if total > parse_quantity(cap):
                    report("gpuaas_clusters.workers[%d].flavors[%s].capacity.%s" % (index, flavor, res),
                           "the tenants' shares on worker %r add up to %s, above its capacity %s"
                           % (worker.name, _text(total), cap))


def _text(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())
