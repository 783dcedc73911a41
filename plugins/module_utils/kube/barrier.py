# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Barriers between apply tiers (issue 22 item 8).

Some objects take effect a moment after they are written: the API server reads admission policies through an
informer, so for a short while after an update it still enforces the previous version. Objects applied in a later
tier of the same run may be judged by that previous version. A ``Barrier`` names the kinds it follows; after the
last tier of a reconcile that writes one of them, the engine calls ``wait`` with what was written of those kinds and
the objects still to be applied, and goes on only when it returns (it raises to stop the run). The engine knows
nothing of what is waited for; the caller does (the tenants runner: the policy is enforced).

In check mode nothing changes, so nothing is waited for; ``judged_late`` names the later objects whose dry run would
be judged by what the run would have changed first (the previous policy version): the engine reports them without a
dry run, as it does the content of namespaces not created yet.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception


class Barrier:
    """Wait after the last apply tier that writes one of ``kinds``, before the next tier."""

    __slots__ = ("kinds", "wait", "judged_late")

    def __init__(self, kinds: t.Iterable[str],
                 wait: t.Callable[[t.List[t.Any], t.List[t.Dict[str, t.Any]]], None],
                 judged_late: t.Optional[t.Callable[[t.List[t.Any], t.List[t.Dict[str, t.Any]]],
                                                    t.Iterable[t.Mapping[str, t.Any]]]] = None) -> None:
        self.kinds = frozenset(kinds)
        # wait(written ObjectResults of these kinds, desired objects of the later tiers still to be applied)
        self.wait = wait
        # judged_late(the same, from a dry run) -> the pending objects check mode reports without a dry run
        self.judged_late = judged_late

    def last_tier(self, tiers: t.Mapping[int, t.Sequence[str]]) -> t.Optional[int]:
        """The last of ``tiers`` (tier -> kinds to write there) that writes one of this barrier's kinds."""
        hits = [tier for tier, kinds in tiers.items() if self.kinds.intersection(kinds)]
        return max(hits) if hits else None


def pass_barriers(barriers: t.Sequence[Barrier], tier: int, tiers: t.Mapping[int, t.Sequence[t.Any]],
                  result: t.Any, check_mode: bool = False) -> t.Set[t.Tuple[str, str, str]]:
    """Call each barrier whose kinds ``tier`` was the last to write, when it wrote some. ``tiers``: the engine's
    to-do per tier, (DesiredObject, action, live) items; ``result``: the ReconcileResult so far (the partial result
    of a refusal). Returns the keys of the later objects check mode must not dry-run (``judged_late``)."""
    kinds = {tr: [item[0].ref.kind for item in items] for tr, items in tiers.items()}
    late: t.Set[t.Tuple[str, str, str]] = set()
    for barrier in barriers:
        if barrier.last_tier(kinds) != tier:
            continue
        written = [r for r in result.results if r.ref.kind in barrier.kinds and r.action in ("created", "updated")]
        if not written:
            continue
        later = [item[0] for tr in sorted(tiers) if tr > tier for item in tiers[tr]]
        if check_mode:
            if barrier.judged_late is not None:
                judged = [id(o) for o in barrier.judged_late(written, [d.obj for d in later])]
                late.update(d.ref.key for d in later if id(d.obj) in judged)
            continue
        try:
            barrier.wait(written, [d.obj for d in later])
        except GpuaasError as err:
            err.details.setdefault("partial_result", result.to_module_result())
            raise
    return late


def dry_run_refusal(engine: t.Any, obj: t.Mapping[str, t.Any]) -> t.Optional[GpuaasError]:
    """Server-side dry run of ``engine`` applying ``obj`` (its field manager): None when admitted, else the refusal.
    What a barrier's ``wait`` probes with."""
    d = engine.prepare(obj)
    try:
        d.res.apply(d.obj, engine.field_manager, force=engine.force_conflicts, dry_run=True)
    except ApiException as exc:
        return translate_api_exception(exc, "dry-run apply", str(d.ref))
    return None
