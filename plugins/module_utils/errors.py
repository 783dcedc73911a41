# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Errors a user can see: what is wrong (message) and how to fix it (hint)."""

from __future__ import annotations

import typing as t


class GpuaasError(Exception):
    """An error with a user-facing message and an optional hint on how to fix it.

    ``problems`` lists every individual problem when validation found several.
    ``details`` carries machine-readable context (object reference, HTTP status, ...).
    """

    def __init__(
        self,
        message: str,
        hint: t.Optional[str] = None,
        problems: t.Optional[t.List[str]] = None,
        details: t.Optional[t.Dict[str, t.Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.problems = list(problems or [])
        self.details = dict(details or {})

    def __str__(self) -> str:
        text = self.message
        if self.problems:
            text += "\n" + "\n".join("- %s" % p for p in self.problems)
        if self.hint:
            text += "\nHint: %s" % self.hint
        return text

    def to_fail_kwargs(self) -> t.Dict[str, t.Any]:
        """Keyword arguments for ``AnsibleModule.fail_json``."""
        kwargs: t.Dict[str, t.Any] = {"msg": str(self)}
        if self.hint:
            kwargs["hint"] = self.hint
        if self.problems:
            kwargs["problems"] = self.problems
        if self.details:
            kwargs["error_details"] = self.details
        return kwargs


class ValidationError(GpuaasError):
    """Options that cannot produce a valid object; ``problems`` lists each mistake."""


def fail_module(module: t.Any, error: GpuaasError, **extra: t.Any) -> None:
    """Fail an Ansible module with the message, hint and problems of ``error``."""
    kwargs = error.to_fail_kwargs()
    kwargs.update(extra)
    module.fail_json(**kwargs)
