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
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError


class Barrier:
    """Wait after the last apply tier that writes one of ``kinds``, before the next tier."""

    __slots__ = ("kinds", "wait")

    def __init__(self, kinds: t.Iterable[str],
                 wait: t.Callable[[t.List[t.Any], t.List[t.Dict[str, t.Any]]], None]) -> None:
        self.kinds = frozenset(kinds)
        # wait(written ObjectResults of these kinds, desired objects of the later tiers still to be applied)
        self.wait = wait

    def last_tier(self, tiers: t.Mapping[int, t.Sequence[str]]) -> t.Optional[int]:
        """The last of ``tiers`` (tier -> kinds to write there) that writes one of this barrier's kinds."""
        hits = [tier for tier, kinds in tiers.items() if self.kinds.intersection(kinds)]
        return max(hits) if hits else None


def pass_barriers(barriers: t.Sequence[Barrier], tier: int, tiers: t.Mapping[int, t.Sequence[t.Any]],
                  result: t.Any) -> None:
    """Call each barrier whose kinds ``tier`` was the last to write, when it wrote some. ``tiers``: the engine's
    DesiredObjects to write per tier; ``result``: the ReconcileResult so far (the partial result of a refusal)."""
    kinds = {tr: [d.ref.kind for d in items] for tr, items in tiers.items()}
    for barrier in barriers:
        if barrier.last_tier(kinds) != tier:
            continue
        written = [r for r in result.results if r.ref.kind in barrier.kinds and r.action in ("created", "updated")]
        if not written:
            continue
        try:
            barrier.wait(written, [d.obj for tr in sorted(tiers) if tr > tier for d in tiers[tr]])
        except GpuaasError as err:
            err.details.setdefault("partial_result", result.to_module_result())
            raise
