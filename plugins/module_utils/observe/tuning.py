# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The quota tuning loop: demand, borrowing and lending per tenant, flavor and resource from Kueue's series;
a coverage check; recommendations with the figures behind them; the inventory patch that applies them; and
showback (GPU-hours and cost per tenant and namespace). Pure: no I/O.

Definitions (docs/validation.md, "Quota tuning"):

* points: a range query over ``window`` with ``step`` has ``window / step`` evaluation points; each stands for
  ``step`` seconds. A ClusterQueue's *coverage* is the share of the points at which Kueue reported its nominal
  quota; with less than ``min_coverage`` (or a window shorter than ``min_window``) the report says
  "insufficient data" instead of recommending.
* demand(t) = usage(t) + pending(t): Kueue's ``kueue_cluster_queue_resource_usage`` per flavor plus
  ``kueue_cluster_queue_resource_pending`` (per resource only: pending workloads have no flavor yet; the pending
  amount is attributed to the flavor with the largest nominal quota of that resource, ties by name).
* borrowed(t) = max(usage − nominal, 0); lent(t): the cohort's borrowed amount of a flavor/resource shared
  among the members that had lendable quota, in proportion to it; lendable = min(nominal − usage, lending limit).
* resource-hours = Σ value × step / 3600 (GPU-hours for accelerator resources).
"""

from __future__ import annotations

import copy
import math
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import tenant_index
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.quantity import is_accelerator, parse_quantity
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.formatting import format_duration, format_number
from ansible_collections.gpuaas.platform.plugins.module_utils.observe.utilization import UNASSIGNED, Matrix, quantile

TUNING_DEFAULTS: t.Dict[str, t.Any] = {
    "quantile": 0.95,        # demand quantile a quota should cover
    "min_window": 7 * 86400.0,   # seconds of history needed before recommending
    "min_coverage": 0.9,     # share of the window's points with Kueue data needed
    "headroom": 0.0,         # target = ceil(quantile demand * (1 + headroom))
    "min_change": 0.25,      # lower / lend only when the target is at least this share below nominal
    "persistent_ratio": 0.5,  # waiting in this share of the window while a cohort peer borrowed -> weight
}

Key = t.Tuple[str, str, str]  # cluster_queue, flavor, resource


def _index(ts: float, start: float, step: float) -> int:
    """The point a sample belongs to (Prometheus returns millisecond timestamps; the window start may not be)."""
    return int(round((ts - start) / step))


def _series(matrix: t.Optional[Matrix], start: float, step: float, *keys: str) -> t.Dict[t.Tuple[str, ...], t.Dict[int, float]]:
    out: t.Dict[t.Tuple[str, ...], t.Dict[int, float]] = {}
    for labels, values in matrix or []:
        slot = out.setdefault(tuple(labels.get(k, "") for k in keys), {})
        for ts, val in values:
            if not math.isnan(val):
                i = _index(ts, start, step)
                slot[i] = max(slot.get(i, float("-inf")), val)
    return out


def _finite(value: t.Optional[float]) -> t.Optional[float]:
    return None if value is None or math.isinf(value) or math.isnan(value) else value


def _r(value: t.Optional[float], digits: int = 4) -> t.Optional[float]:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return round(value, digits) + 0.0


def _hours(seconds: float) -> float:
    return round(seconds / 3600.0, 4) + 0.0


def points(start: float, end: float, step: float) -> t.List[float]:
    """The evaluation timestamps of a range query (``start``, ``start + step``, … ``end``)."""
    count = int(round((end - start) / step)) + 1
    return [start + i * step for i in range(count)]


def quota_analysis(
    kueue: t.Mapping[str, Matrix],
    start: float,
    end: float,
    step: float,
    tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
    q: float = TUNING_DEFAULTS["quantile"],
    min_window: float = TUNING_DEFAULTS["min_window"],
    min_coverage: float = TUNING_DEFAULTS["min_coverage"],
) -> t.Dict[str, t.Any]:
    """Per ClusterQueue, flavor and resource: coverage, demand quantile, borrowing and lending over the window.

    ``kueue`` holds range results of :func:`promql.tuning_queries` (``nominal``, ``borrowing_limit``,
    ``lending_limit``, ``usage``, ``pending_resources``).
    """
    stamps = points(start, end, step)
    expected = len(stamps)
    window = expected * step
    nominal = _series(kueue.get("nominal"), start, step, "cluster_queue", "flavor", "resource")
    usage = _series(kueue.get("usage"), start, step, "cluster_queue", "flavor", "resource")
    blim = _series(kueue.get("borrowing_limit"), start, step, "cluster_queue", "flavor", "resource")
    llim = _series(kueue.get("lending_limit"), start, step, "cluster_queue", "flavor", "resource")
    pending = _series(kueue.get("pending_resources"), start, step, "cluster_queue", "resource")
    cohorts: t.Dict[str, str] = {}
    for labels, _v in list(kueue.get("nominal") or []) + list(kueue.get("usage") or []):
        if labels.get("cluster_queue"):
            cohorts.setdefault(labels["cluster_queue"], labels.get("cohort", ""))
            if labels.get("cohort"):
                cohorts[labels["cluster_queue"]] = labels["cohort"]
    ns_map, tenant_list = tenant_index(tenants)
    cq_tenant = {x["cluster_queue"]: x["name"] for x in tenant_list if x.get("cluster_queue")}

    # pending per resource goes to the flavor of the queue with the largest nominal quota of it
    attributed: t.Dict[t.Tuple[str, str], str] = {}
    for cq, flavor, res in sorted(nominal):
        best = attributed.get((cq, res))
        current = max(nominal[(cq, flavor, res)].values())
        if best is None or current > max(nominal[(cq, best, res)].values()):
            attributed[(cq, res)] = flavor

    # aligned values per key and point (None = no data at that point)
    rows: t.Dict[Key, t.Dict[str, t.Any]] = {}
    for key in sorted(nominal):
        cq, flavor, res = key
        n_s, u_s, b_s, l_s = nominal[key], usage.get(key, {}), blim.get(key, {}), llim.get(key, {})
        p_s = pending.get((cq, res), {}) if attributed.get((cq, res)) == flavor else {}
        vals: t.List[t.Optional[t.Dict[str, t.Any]]] = []
        for i in range(expected):
            n = n_s.get(i)
            if n is None:
                vals.append(None)
                continue
            u = u_s.get(i) or 0.0
            lend = _finite(l_s.get(i))
            vals.append({"nominal": n, "usage": u, "pending": p_s.get(i) or 0.0,
                         "borrowing_limit": _finite(b_s.get(i)), "lending_limit": lend,
                         "lendable": max(min(n - u, lend if lend is not None else float("inf")), 0.0)})
        rows[key] = {"values": vals, "cohort": cohorts.get(cq, "")}

    # lent: the cohort's borrowed amount at each point shared by lendable quota
    lent: t.Dict[Key, t.List[float]] = {key: [0.0] * expected for key in rows}
    groups: t.Dict[t.Tuple[str, str, str], t.List[Key]] = {}
    for key, row in rows.items():
        if row["cohort"]:
            groups.setdefault((row["cohort"], key[1], key[2]), []).append(key)
    for members in groups.values():
        for i in range(expected):
            borrowed = sum(max(rows[k]["values"][i]["usage"] - rows[k]["values"][i]["nominal"], 0.0)
                           for k in members if rows[k]["values"][i])
            lendable = {k: rows[k]["values"][i]["lendable"] for k in members if rows[k]["values"][i]}
            total = sum(lendable.values())
            if borrowed > 0 and total > 0:
                for k, amount in lendable.items():
                    lent[k][i] = borrowed * amount / total

    out_rows = []
    queue_cov: t.Dict[str, int] = {}
    for key, row in rows.items():
        queue_cov[key[0]] = max(queue_cov.get(key[0], 0), sum(1 for v in row["values"] if v))
    for key, row in rows.items():
        cq, flavor, res = key
        present = [(i, v) for i, v in enumerate(row["values"]) if v]
        last = present[-1][1] if present else {}
        demand = [v["usage"] + v["pending"] for _i, v in present]
        use = [v["usage"] for _i, v in present]
        pend = [v["pending"] for _i, v in present]
        borrowed = [max(v["usage"] - v["nominal"], 0.0) for _i, v in present]
        lent_vals = [lent[key][i] for i, _v in present]
        cov = queue_cov[cq] / float(expected)
        reasons = []
        if window < min_window - 1e-9:
            reasons.append("the window %s is shorter than the minimum %s (min_window)"
                           % (format_duration(window), format_duration(min_window)))
        if cov < min_coverage - 1e-9:
            reasons.append("Kueue reported this queue at %d of %d points (%s%%, minimum %s%%: min_coverage)"
                           % (queue_cov[cq], expected, format_number(round(cov * 100, 1)), format_number(min_coverage * 100)))
        tenant = cq_tenant.get(cq)
        out_rows.append({
            "tenant": tenant, "cluster_queue": cq, "cohort": row["cohort"] or None, "flavor": flavor, "resource": res,
            "nominal": last.get("nominal", 0.0), "borrowing_limit": last.get("borrowing_limit"),
            "lending_limit": last.get("lending_limit"),
            "points": len(present), "expected_points": expected, "coverage": _r(cov),
            "sufficient": not reasons, "insufficient_reasons": reasons,
            "quantile": q,
            "usage_avg": _r(sum(use) / len(use)) if use else 0.0,
            "usage_max": max(use) if use else 0.0,
            "usage_quantile": _r(quantile(use, q)) if use else 0.0,
            "pending_attributed": attributed.get((cq, res)) == flavor,
            "pending_max": max(pend) if pend else 0.0,
            "pending_quantile": _r(quantile(pend, q)) if pend else 0.0,
            "pending_fraction": _r(sum(1 for v in pend if v > 0) / len(pend)) if pend else 0.0,
            "demand_quantile": _r(quantile(demand, q)) if demand else 0.0,
            "demand_max": max(demand) if demand else 0.0,
            "borrow_fraction": _r(sum(1 for v in borrowed if v > 0) / len(borrowed)) if borrowed else 0.0,
            "borrowed_max": max(borrowed) if borrowed else 0.0,
            "borrowed_hours": _hours(sum(borrowed) * step),
            "lent_max": _r(max(lent_vals)) if lent_vals else 0.0,
            "lent_hours": _hours(sum(lent_vals) * step),
            "usage_hours": _hours(sum(use) * step),
            "unused_quota_hours": _hours(sum(max(v["nominal"] - v["usage"], 0.0) for _i, v in present) * step),
            "series": {"t": [stamps[i] for i, _v in present], "nominal": [v["nominal"] for _i, v in present],
                       "usage": use, "pending": pend},
        })
    # the cohort peers' borrowing at each point, for the fair-sharing advice
    for row in out_rows:
        key = (row["cluster_queue"], row["flavor"], row["resource"])
        peers = [k for k in groups.get((row["cohort"] or "", key[1], key[2]), []) if k != key]
        vals = rows[key]["values"]
        waiting_while_peer_borrows = 0
        waiting = 0
        for i, v in enumerate(vals):
            if not v or v["pending"] <= 0:
                continue
            waiting += 1
            if any(rows[p]["values"][i] and rows[p]["values"][i]["usage"] > rows[p]["values"][i]["nominal"] for p in peers):
                waiting_while_peer_borrows += 1
        row["pending_while_peers_borrow_fraction"] = _r(waiting_while_peer_borrows / float(len(vals))) if vals else 0.0
    window_cov = max(queue_cov.values()) / float(expected) if queue_cov else 0.0
    reasons = []
    if window < min_window - 1e-9:
        reasons.append("the window %s is shorter than the minimum %s (min_window)" % (format_duration(window), format_duration(min_window)))
    if not rows:
        reasons.append("no Kueue quota series (kueue_cluster_queue_nominal_quota) in the window")
    elif window_cov < min_coverage - 1e-9:
        reasons.append("Kueue data cover %s%% of the window (minimum %s%%: min_coverage)"
                       % (format_number(round(window_cov * 100, 1)), format_number(min_coverage * 100)))
    return {"window_seconds": window, "step": step, "expected_points": expected, "quantile": q,
            "min_window_seconds": min_window, "min_coverage": min_coverage, "coverage": _r(window_cov),
            "sufficient": not reasons, "insufficient_reasons": reasons, "rows": out_rows}


def _num(value: float) -> t.Union[int, float]:
    return int(value) if float(value).is_integer() else value


def _ceil(value: float) -> int:
    return int(math.ceil(value - 1e-9))


def _amount(mapping: t.Optional[t.Mapping[str, t.Any]], res: str) -> t.Optional[float]:
    if not mapping or mapping.get(res) is None:
        return None
    try:
        return float(parse_quantity(mapping[res]))
    except (TypeError, ValueError):
        return None


def tuning_recommendations(
    analysis: t.Mapping[str, t.Any],
    tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
    report_tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]] = None,
    headroom: float = TUNING_DEFAULTS["headroom"],
    min_change: float = TUNING_DEFAULTS["min_change"],
    persistent_ratio: float = TUNING_DEFAULTS["persistent_ratio"],
    window: str = "",
) -> t.List[t.Dict[str, t.Any]]:
    """Raise / lower / lend / set a lending limit / change the fair-sharing weight, per tenant, flavor and
    accelerator resource, each with the figures behind it; "insufficient data" entries when coverage is short.

    The target for a resource is ``ceil(p(quantile) of demand * (1 + headroom))``:

    * ``raise_quota``: target above nominal (the tenant waited or borrowed for it) -> nominal = target.
    * ``lend``: in a cohort, target at least ``min_change`` below nominal, and a lending limit keeps the unused
      part from the cohort -> lending limit = nominal − target.
    * ``lower_quota``: the same without a cohort (nothing can borrow it) -> nominal = target.
    * ``set_lending_limit``: in a cohort, no lending limit, it lent while its own workloads waited ->
      lending limit = max(nominal − target, 0), so its p-quantile demand stays guaranteed.
    * ``raise_fair_sharing_weight``: in a cohort, its demand fits its nominal quota but it waited in at least
      ``persistent_ratio`` of the window while peers borrowed -> weight × 2.
    """
    by_name = {x.get("name"): x for x in tenants or [] if isinstance(x, t.Mapping)}
    idle = {x["tenant"]: x for x in report_tenants or []}
    out: t.List[t.Dict[str, t.Any]] = []
    weight_done: t.Set[str] = set()
    for row in analysis.get("rows", []):
        name = row.get("tenant")
        if not name or not is_accelerator(row["resource"]) or (row["nominal"] <= 0 and row["demand_max"] <= 0):
            continue
        base = {"tenant": name, "cluster_queue": row["cluster_queue"], "flavor": row["flavor"], "resource": row["resource"]}
        where = "%s on flavor %s" % (row["resource"], row["flavor"])
        if not row["sufficient"]:
            rec = dict(base, kind="insufficient_data", reasons=row["insufficient_reasons"],
                       message="tenant %s, %s: insufficient data, no recommendation: %s"
                               % (name, where, "; ".join(row["insufficient_reasons"])))
            out.append(rec)
            continue
        inv = by_name.get(name) or {}
        nominal = row["nominal"]
        target = _ceil(row["demand_quantile"] * (1.0 + headroom))
        pct = int(round(row["quantile"] * 100))
        idle_hours = (idle.get(name) or {}).get("idle_gpu_hours")
        figures = {
            "nominal": nominal, "target": target, "demand_quantile": row["demand_quantile"],
            "usage_quantile": row["usage_quantile"], "pending_quantile": row["pending_quantile"],
            "pending_fraction": row["pending_fraction"], "borrow_fraction": row["borrow_fraction"],
            "borrowed_max": row["borrowed_max"], "borrowed_hours": row["borrowed_hours"], "lent_hours": row["lent_hours"],
            "lent_max": row["lent_max"], "idle_gpu_hours": idle_hours, "lending_limit": row["lending_limit"],
            "borrowing_limit": row["borrowing_limit"], "coverage": row["coverage"],
        }
        why = ("p%d demand (usage + pending) %s, p%d usage %s, pending in %d%% of the %s (p%d pending %s), borrowed "
               "in %d%% (max %s, %s resource-hours), lent %s resource-hours"
               % (pct, format_number(row["demand_quantile"]), pct, format_number(row["usage_quantile"]),
                  int(round(row["pending_fraction"] * 100)), window or "window", pct, format_number(row["pending_quantile"]),
                  int(round(row["borrow_fraction"] * 100)), format_number(row["borrowed_max"]),
                  format_number(row["borrowed_hours"]), format_number(row["lent_hours"])))
        if target > nominal + 1e-9:
            out.append(dict(base, kind="raise_quota", current=nominal, suggested=target, figures=figures,
                            change={"path": "quotas[flavor=%s].resources.%s" % (row["flavor"], row["resource"]), "value": target},
                            message="tenant %s needs more %s: %s; raise the nominal quota from %s to %d"
                                    % (name, where, why, format_number(nominal), target)))
        elif nominal > 0 and target <= nominal * (1.0 - min_change) + 1e-9:
            slack = nominal - target
            idle_text = "" if idle_hours is None else ", %s GPU-hours allocated but idle" % format_number(idle_hours)
            if row["cohort"]:
                limit = row["lending_limit"]
                if limit is not None and limit + 1e-9 < slack:
                    out.append(dict(base, kind="lend", current=limit, suggested=_num(slack), figures=figures,
                                    change={"path": "quotas[flavor=%s].lending_limit.%s" % (row["flavor"], row["resource"]),
                                            "value": _num(slack)},
                                    message="tenant %s uses little of its %s: %s%s; lend the unused part to cohort %s: "
                                            "raise the lending limit from %s to %s (keeps %d guaranteed)"
                                            % (name, where, why, idle_text, row["cohort"], format_number(limit),
                                               format_number(slack), target)))
            else:
                out.append(dict(base, kind="lower_quota", current=nominal, suggested=target, figures=figures,
                                change={"path": "quotas[flavor=%s].resources.%s" % (row["flavor"], row["resource"]), "value": target},
                                message="tenant %s uses little of its %s and is in no cohort that could borrow it: %s%s; "
                                        "lower the nominal quota from %s to %d"
                                        % (name, where, why, idle_text, format_number(nominal), target)))
        if (row["cohort"] and row["lending_limit"] is None and row["lent_hours"] > 0 and row["pending_fraction"] > 0):
            suggested = max(_ceil(nominal - target), 0)
            out.append(dict(base, kind="set_lending_limit", current=None, suggested=suggested, figures=figures,
                            change={"path": "quotas[flavor=%s].lending_limit.%s" % (row["flavor"], row["resource"]), "value": suggested},
                            message="tenant %s lent %s resource-hours of %s to cohort %s while its own workloads waited "
                                    "(%s); set a lending limit of %d so its p%d demand %s stays guaranteed"
                                    % (name, format_number(row["lent_hours"]), where, row["cohort"], why, suggested, pct,
                                       format_number(row["demand_quantile"]))))
        if (row["cohort"] and target <= nominal + 1e-9 and name not in weight_done
                and row.get("pending_while_peers_borrow_fraction", 0) >= persistent_ratio):
            weight_done.add(name)
            current = inv.get("fair_sharing_weight")
            current_f = float(parse_quantity(current)) if current is not None else 1.0
            suggested_w = current_f * 2
            out.append(dict(base, kind="raise_fair_sharing_weight", current=current_f, suggested=suggested_w, figures=figures,
                            change={"path": "fair_sharing_weight", "value": suggested_w},
                            message="tenant %s waited in %d%% of the %s while cohort %s peers borrowed %s, although its p%d "
                                    "demand %s fits its nominal quota %s: raise its fair-sharing weight from %s to %s"
                                    % (name, int(round(row["pending_while_peers_borrow_fraction"] * 100)), window or "window",
                                       row["cohort"], where, pct, format_number(row["demand_quantile"]),
                                       format_number(nominal), format_number(current_f), format_number(suggested_w))))
    return out


def _set_quota_value(quota: t.Dict[str, t.Any], field: str, res: str, value: t.Any) -> t.Any:
    mapping = quota.get(field)
    if not isinstance(mapping, dict):
        mapping = quota[field] = {}
    old = mapping.get(res)
    mapping[res] = value
    return old


def inventory_patch(
    tenants: t.Optional[t.Sequence[t.Mapping[str, t.Any]]],
    recs: t.Sequence[t.Mapping[str, t.Any]],
) -> t.Dict[str, t.Any]:
    """The inventory after applying the recommendations: ``tenants`` (the whole ``gpuaas_tenants`` list with the
    changed quota entries; pass it as ``gpuaas_tenants_override``) and ``changes`` (what changed and why)."""
    out = copy.deepcopy([dict(x) for x in tenants or []])
    by_name = {x.get("name"): x for x in out}
    changes = []
    for rec in recs:
        change = rec.get("change")
        tenant = by_name.get(rec.get("tenant"))
        if not change or tenant is None:
            continue
        if change["path"] == "fair_sharing_weight":
            old = tenant.get("fair_sharing_weight")
            tenant["fair_sharing_weight"] = change["value"]
            changes.append({"tenant": rec["tenant"], "kind": rec["kind"], "field": "fair_sharing_weight",
                            "old": old, "new": change["value"], "reason": rec["message"]})
            continue
        quota = None
        for item in tenant.get("quotas") or []:
            if isinstance(item, dict) and item.get("flavor") == rec["flavor"]:
                quota = item
        if quota is None:
            quota = {"flavor": rec["flavor"], "resources": {}}
            tenant.setdefault("quotas", []).append(quota)
        field = "lending_limit" if ".lending_limit." in change["path"] else "resources"
        old = _set_quota_value(quota, field, rec["resource"], change["value"])
        if field == "resources":
            # a lending limit must stay at or below the nominal quota
            lend = _amount(quota.get("lending_limit"), rec["resource"])
            if lend is not None and lend > change["value"]:
                quota["lending_limit"][rec["resource"]] = change["value"]
        changes.append({"tenant": rec["tenant"], "kind": rec["kind"], "flavor": rec["flavor"], "resource": rec["resource"],
                        "field": "quotas[flavor=%s].%s.%s" % (rec["flavor"], field, rec["resource"]),
                        "old": old, "new": change["value"], "reason": rec["message"]})
    changed_names = {c["tenant"] for c in changes}
    return {"changes": changes, "tenants": out, "changed_tenants": sorted(n for n in changed_names if n)}


def patch_yaml(patch: t.Mapping[str, t.Any], header: t.Sequence[str] = ()) -> str:
    """The patch as a YAML vars file for ``-e @file``: comments naming each change, then
    ``gpuaas_tenants_override`` (the tenants role uses it instead of ``gpuaas_tenants``)."""
    from ansible.module_utils.common.yaml import yaml_dump  # local: keeps the pure maths importable without YAML

    lines = ["# gpuaas quota tuning patch (gpuaas.platform.gpu_utilization_info)"]
    lines.extend("# %s" % h for h in header)
    lines.append("# preview: ansible-playbook -i <inventory> playbooks/tenants.yml -e @<this file> --check --diff")
    lines.append("# apply:   ansible-playbook -i <inventory> playbooks/tenants.yml -e @<this file>")
    lines.append("# then copy the changed entries into gpuaas_tenants in the inventory (the source of truth).")
    if not patch.get("changes"):
        lines.append("# no change recommended")
    for change in patch.get("changes", []):
        lines.append("# - %s %s: %s -> %s (%s)" % (change["tenant"], change["field"], change["old"], change["new"], change["kind"]))
    body = yaml_dump({"gpuaas_tenants_override": _plain(patch.get("tenants") or [])}, default_flow_style=False,
                     sort_keys=False, width=120)
    return "\n".join(lines) + "\n---\n" + body


def _plain(value: t.Any) -> t.Any:
    """Plain Python types (no AnsibleUnsafe/ tagged strings) for the YAML dumper."""
    if isinstance(value, t.Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else float(value)
    return str(value)


# --- showback --------------------------------------------------------------------------------
SHOWBACK_COLUMNS = ("level", "tenant", "namespace", "flavor", "gpu_hours_allocated", "gpu_hours_busy", "gpu_hours_idle",
                    "gpu_hours_borrowed", "gpu_hours_lent", "price_per_gpu_hour", "cost")


def showback(
    report: t.Mapping[str, t.Any],
    analysis: t.Optional[t.Mapping[str, t.Any]] = None,
    prices: t.Optional[t.Mapping[str, t.Any]] = None,
    currency: str = "",
) -> t.Dict[str, t.Any]:
    """GPU-hours allocated / busy / idle-allocated per namespace and tenant and flavor (DCGM, ``usage_by_flavor``),
    borrowed / lent per tenant and flavor (Kueue, accelerator resources summed), cost = allocated × price."""
    prices = {str(k): float(v) for k, v in (prices or {}).items()}
    ns_rows: t.Dict[t.Tuple[str, str, str], t.Dict[str, float]] = {}
    for item in report.get("usage_by_flavor") or []:
        key = (item["tenant"], item["namespace"], item["flavor"])
        ns_rows[key] = {"gpu_hours_allocated": item["gpu_hours"], "gpu_hours_busy": item["busy_gpu_hours"],
                        "gpu_hours_idle": item["idle_gpu_hours"]}
    kueue: t.Dict[t.Tuple[str, str], t.Dict[str, float]] = {}
    for row in (analysis or {}).get("rows", []):
        if not row.get("tenant") or not is_accelerator(row["resource"]):
            continue
        slot = kueue.setdefault((row["tenant"], row["flavor"]), {"gpu_hours_borrowed": 0.0, "gpu_hours_lent": 0.0})
        slot["gpu_hours_borrowed"] += row["borrowed_hours"]
        slot["gpu_hours_lent"] += row["lent_hours"]

    def priced(flavor: str, hours: float) -> t.Tuple[t.Optional[float], t.Optional[float]]:
        if flavor not in prices:
            return None, None
        return prices[flavor], round(hours * prices[flavor], 4) + 0.0

    rows: t.List[t.Dict[str, t.Any]] = []
    tenant_totals: t.Dict[t.Tuple[str, str], t.Dict[str, float]] = {}
    for (tenant, ns, flavor), fig in sorted(ns_rows.items()):
        price, cost = priced(flavor, fig["gpu_hours_allocated"])
        rows.append(dict({"level": "namespace", "tenant": tenant, "namespace": ns, "flavor": flavor,
                          "gpu_hours_borrowed": None, "gpu_hours_lent": None, "price_per_gpu_hour": price, "cost": cost}, **fig))
        total = tenant_totals.setdefault((tenant, flavor), {"gpu_hours_allocated": 0.0, "gpu_hours_busy": 0.0, "gpu_hours_idle": 0.0})
        for k, v in fig.items():
            total[k] += v
    for key in sorted(set(tenant_totals) | set(kueue)):
        tenant, flavor = key
        zero = {"gpu_hours_allocated": 0.0, "gpu_hours_busy": 0.0, "gpu_hours_idle": 0.0}
        fig = {k: round(v, 4) + 0.0 for k, v in tenant_totals.get(key, zero).items()}
        kfig = kueue.get(key, {})
        price, cost = priced(flavor, fig["gpu_hours_allocated"])
        rows.append(dict({"level": "tenant", "tenant": tenant, "namespace": None, "flavor": flavor,
                          "gpu_hours_borrowed": _r(kfig.get("gpu_hours_borrowed")) if kfig else None,
                          "gpu_hours_lent": _r(kfig.get("gpu_hours_lent")) if kfig else None,
                          "price_per_gpu_hour": price, "cost": cost}, **fig))
    rows.sort(key=lambda r: (r["tenant"] == UNASSIGNED, r["tenant"], r["level"] != "tenant", r["namespace"] or "", r["flavor"]))
    return {"currency": currency, "prices": prices, "columns": list(SHOWBACK_COLUMNS), "rows": rows}


def showback_csv(data: t.Mapping[str, t.Any]) -> str:
    """CSV (RFC 4180 quoting, header line, empty cells for n/a) of :func:`showback` rows, for finance tools.

    Lines end in ``\\n``, not RFC 4180's ``\\r\\n``: the file is a text file in the user's working tree (and
    ``ansible-test sanity`` refuses CRLF in anything that reaches a collection); spreadsheets read both.
    """
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = list(data.get("columns") or SHOWBACK_COLUMNS)
    writer.writerow(columns + (["currency"] if data.get("currency") else []))
    for row in data.get("rows", []):
        cells = ["" if row.get(c) is None else (format_number(row[c]) if isinstance(row[c], float) else row[c]) for c in columns]
        writer.writerow(cells + ([data["currency"]] if data.get("currency") else []))
    return buf.getvalue()


def add_dcgm_coverage(analysis: t.Dict[str, t.Any], util: Matrix, start: float, end: float, step: float) -> None:
    """Mark the analysis insufficient when the DCGM series cover less of the window than ``min_coverage``."""
    stamps = points(start, end, step)
    seen = {_index(ts, start, step) for _labels, values in util for ts, _v in values}
    covered = sum(1 for i in range(len(stamps)) if i in seen)
    fraction = covered / float(len(stamps)) if stamps else 0.0
    analysis["dcgm_coverage"] = _r(fraction)
    if fraction < analysis.get("min_coverage", TUNING_DEFAULTS["min_coverage"]) - 1e-9:
        analysis["sufficient"] = False
        analysis.setdefault("insufficient_reasons", []).append(
            "DCGM data cover %s%% of the window (minimum %s%%: min_coverage)"
            % (format_number(round(fraction * 100, 1)), format_number(analysis.get("min_coverage", 0.9) * 100)))


def node_flavors(nodes: t.Sequence[t.Mapping[str, t.Any]], flavors: t.Sequence[t.Mapping[str, t.Any]]) -> t.Dict[str, str]:
    """Node name -> the first ResourceFlavor (inventory order) whose ``node_labels`` all match the node's labels."""
    out: t.Dict[str, str] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        for flavor in flavors or []:
            wanted = flavor.get("node_labels") or {}
            if wanted and all(labels.get(k) == str(v) for k, v in wanted.items()):
                out[meta.get("name", "")] = str(flavor.get("name"))
                break
    return out
