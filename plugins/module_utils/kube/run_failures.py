# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""How the apply engine (kube/engine.py) reports a run that did not finish: the API server went away part-way
(one message: what was done, what not, that a re-run converges), or objects failed (every failure at once). Both
carry the partial result, so a caller still sees what was written."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiUnreachable
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ReconcileResult


def unreachable_error(cause: t.Optional[GpuaasError], result: ReconcileResult, check_mode: bool,
                      pending: t.Sequence[t.Any] = (), stage: str = "apply") -> ApiUnreachable:
    """One message for a run cut short by an unreachable API server: what was done, what not, how to go on."""
    cause = cause or ApiUnreachable("the Kubernetes API server is unreachable")
    done = {"created": 0, "updated": 0, "deleted": 0}
    for r in result.results:
        if r.action in done:
            done[r.action] += 1
    pending_refs = [p for p in pending if p is not None]
    applied = ", ".join("%d %s" % (n, a) for a, n in done.items() if n) or "no change"
    verb = "sent" if check_mode else "applied"
    message = ("%s. Stopped during %s: %s %s before the API server went away; %d change%s not %s%s. "
               "Nothing is half-applied: every object is written whole by server-side apply, so re-running the same "
               "playbook once the API server is back converges."
               % (cause.message.rstrip("."), stage, applied, "(dry run)" if check_mode else "",
                  len(pending_refs), "" if len(pending_refs) == 1 else "s", verb,
                  "" if stage != "apply" else "; nothing pruned"))
    message = message.replace("  ", " ")
    details = {k: v for k, v in cause.details.items() if k not in ("ref", "partial_result")}
    details.update({"reason": "Unreachable", "stage": stage, "done": done,
                    "not_applied": [str(r) for r in pending_refs][:50],
                    "not_applied_count": len(pending_refs)})
    return ApiUnreachable(message, hint=cause.hint, details=details)


def raise_many(errors: t.List[GpuaasError], verb: str, result: ReconcileResult) -> None:
    """Raise the one error as it is, or one error listing every failure with their hints; each with the partial
    result of the run."""
    if len(errors) == 1:
        err = errors[0]
        err.details.setdefault("partial_result", result.to_module_result())
        raise err
    problems: t.List[str] = []
    hints: t.List[str] = []
    for err in errors:
        problems.append(str(err.message))
        if err.hint and err.hint not in hints:
            hints.append(err.hint)
    raise GpuaasError("%d objects failed to %s" % (len(errors), verb), hint="; ".join(hints) or None,
                      problems=problems, details={"partial_result": result.to_module_result()})
