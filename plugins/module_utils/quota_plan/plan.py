# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The quota plan: one demand replayed against the current tenancy and a proposed one, per tenant side by side.
Pure: the module reads the trace or Prometheus; nothing here (or there) writes to the cluster.

``proposed_inventory(current, proposed)``: the proposed vars over the current ones; a quota tuning patch
(``gpuaas_tenants_override``, written by ``gpu_utilization_info``/``playbooks/validate.yml``) replaces
``gpuaas_tenants`` as the tenants role would. Both are validated by ``TenantModel.from_inventory`` (every problem
at once, the path names which inventory) before anything is replayed.
"""

from __future__ import annotations

import copy
import html
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError, TenantModel
from ansible_collections.gpuaas.platform.plugins.module_utils.observe import html_report
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.figures import allocation_series, schedule_figures
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.scheduler import Job, simulate
from ansible_collections.gpuaas.platform.plugins.module_utils.quota_plan.tenancy import Tree, tree_from_model

TENANT_COLUMNS = ("served_gpu_hours", "wait_p50_minutes", "wait_p95_minutes", "preemptions", "borrowed_gpu_hours",
                  "lent_gpu_hours", "wasted_gpu_hours", "jobs", "finished")
OVERRIDE = "gpuaas_tenants_override"


def proposed_inventory(current: t.Mapping[str, t.Any], proposed: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """The proposed inventory: ``proposed`` over ``current``; a tuning patch's override replaces the tenants."""
    out = copy.deepcopy(dict(current))
    for key, value in proposed.items():
        if key != OVERRIDE:
            out[key] = copy.deepcopy(value)
    if proposed.get(OVERRIDE) is not None:
        out["gpuaas_tenants"] = copy.deepcopy(proposed[OVERRIDE])
    out.pop(OVERRIDE, None)
    return out


def validated(inventories: t.Mapping[str, t.Mapping[str, t.Any]]) -> t.Dict[str, TenantModel]:
    """Each inventory through the validated model; every problem of every one at once."""
    models: t.Dict[str, TenantModel] = {}
    problems: t.List[str] = []
    for name, inventory in inventories.items():
        try:
            models[name] = TenantModel.from_inventory(inventory)
        except InventoryError as err:
            problems.extend("%s: %s" % (name, p) for p in (err.problems or [err.message]))
    if problems:
        raise GpuaasError("The %s inventory is not valid; nothing was planned." % " / ".join(
            n for n in inventories if n not in models),
            hint="Fix the listed items (the prefix says which inventory: current = the inventory, proposed = it with "
                 "the proposal over it) and run again.", problems=problems)
    return models


def capacity_of(tree: Tree, given: t.Optional[t.Mapping[str, t.Any]]) -> t.Dict[str, float]:
    """GPUs per pool: ``given`` (flavor -> GPUs, or a list of GPUs per node), else the sum of the nominal quotas
    (the tenants' and their cohorts' own)."""
    out = {pool: sum(root.guaranteed(pool) for root in tree.roots) for pool in tree.pools}
    for flavor, value in (given or {}).items():
        out[flavor] = float(sum(float(v) for v in value)) if isinstance(value, (list, tuple)) else float(value)
    return out


def _delta(a: t.Optional[float], b: t.Optional[float]) -> t.Optional[float]:
    return None if a is None or b is None else round(b - a, 3) + 0.0


def plan(models: t.Mapping[str, TenantModel], jobs: t.Sequence[Job], horizon: float,
         capacity: t.Optional[t.Mapping[str, t.Any]] = None) -> t.Dict[str, t.Any]:
    """Replay ``jobs`` against each model (``current`` and ``proposed``); figures per model, and proposed - current
    per tenant. ``capacity`` defaults to the current tenancy's nominal quotas per flavor."""
    trees = {name: tree_from_model(m) for name, m in models.items()}
    pools = capacity_of(trees["current"], capacity)
    for tree in trees.values():
        for pool in tree.pools:
            pools.setdefault(pool, capacity_of(tree, capacity)[pool])
    known = {j for tree in trees.values() for j in tree.tenant_nodes}
    dropped = [j for j in jobs if j.tenant not in known or j.pool not in pools]
    out: t.Dict[str, t.Any] = {"capacity": pools, "horizon_minutes": round(horizon, 3),
                               "jobs": len(jobs), "jobs_outside_tenancy": len(dropped),
                               "dropped_tenants": sorted({j.tenant for j in dropped}), "variants": {}, "series": {}}
    for name, tree in trees.items():
        schedule = simulate(jobs, tree, pools)
        out["variants"][name] = schedule_figures(schedule, tree, pools, horizon)
        out["series"][name] = {pool: allocation_series(schedule, pool, horizon, tree.tenant_names) for pool in tree.pools}
    current, proposed = out["variants"]["current"], out["variants"].get("proposed")
    if proposed is not None:
        names = list(dict.fromkeys(list(current["tenants"]) + list(proposed["tenants"])))
        out["delta"] = {n: {c: _delta((current["tenants"].get(n) or {}).get(c), (proposed["tenants"].get(n) or {}).get(c))
                            for c in TENANT_COLUMNS} for n in names}
    return out


def _cell(value: t.Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return ("%.2f" % value).rstrip("0").rstrip(".") if value != int(value) else "%d" % value
    return str(value)


def tenant_rows(result: t.Mapping[str, t.Any]) -> t.List[t.List[str]]:
    """One row per tenant and variant: the figures of TENANT_COLUMNS."""
    rows = []
    variants = result["variants"]
    names = list(dict.fromkeys(n for v in variants.values() for n in v["tenants"]))
    for n in names:
        for variant, figures in variants.items():
            row = figures["tenants"].get(n)
            if row is not None:
                rows.append([n, variant] + [_cell(row[c]) for c in TENANT_COLUMNS])
    return rows


def render_markdown(result: t.Mapping[str, t.Any]) -> str:
    head = ["tenant", "inventory", "served GPU-h", "wait p50 min", "wait p95 min", "preemptions", "borrowed GPU-h",
            "lent GPU-h", "wasted GPU-h", "jobs", "finished"]
    lines = ["# Quota plan", "",
             "Demand: %d jobs over %s minutes; capacity %s. Nothing was applied." % (
                 result["jobs"], _cell(result["horizon_minutes"]),
                 ", ".join("%s %s" % (p, _cell(c)) for p, c in sorted(result["capacity"].items()))), "",
             "| %s |" % " | ".join(head), "|%s" % ("---|" * len(head))]
    lines.extend("| %s |" % " | ".join(r) for r in tenant_rows(result))
    lines += ["", "| inventory | pool | Jain (saturated) | saturated min | allocation | preemptions (all pools) |", "|---|---|---|---|---|---|"]
    for variant, figures in result["variants"].items():
        for pool, p in sorted(figures["pools"].items()):
            cells = (variant, pool, _cell(p["jain"]), _cell(p["saturated_minutes"]), _cell(p["allocation"]),
                     figures["preemptions"])
            lines.append("| %s | %s | %s | %s | %s | %d |" % cells)
    if result.get("jobs_outside_tenancy"):
        lines += ["", "%d job(s) of tenants or flavors outside the tenancy were left out: %s." % (
            result["jobs_outside_tenancy"], ", ".join(result["dropped_tenants"]) or "-")]
    return "\n".join(lines) + "\n"


def _esc(value: t.Any) -> str:
    return html.escape(str(value))


def render_html(result: t.Mapping[str, t.Any], title: str = "GPU quota plan") -> str:
    """A self-contained page: the tables and, per pool and inventory, GPUs held per tenant (the validation report's
    inline SVG charts, ``observe/html_report.line_chart``)."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>%s</title><style>%s</style></head><body>'
             % (_esc(title), html_report.CSS), "<h1>%s</h1>" % _esc(title),
             "<p>Demand: %d jobs over %s minutes. Nothing was applied.</p>" % (result["jobs"], _esc(_cell(result["horizon_minutes"])))]
    head = ("tenant", "inventory", "served GPU-h", "wait p50 min", "wait p95 min", "preemptions", "borrowed GPU-h",
            "lent GPU-h", "wasted GPU-h", "jobs", "finished")
    parts.append("<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (
        "".join("<th>%s</th>" % _esc(h) for h in head),
        "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _esc(c) for c in r) for r in tenant_rows(result))))
    parts.append("<h2>GPUs held per tenant</h2>")
    for variant, pools in result["series"].items():
        for pool, series in sorted(pools.items()):
            chart_id = "held-%s-%s" % (variant, pool)
            caption = "%s inventory, %s (capacity %s)" % (variant, pool, _cell(result["capacity"].get(pool)))
            parts.append("<figure><figcaption>%s</figcaption>%s</figure>" % (_esc(caption), html_report.line_chart(
                chart_id, caption, sorted(series.items()), "GPUs", result["capacity"].get(pool))))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
