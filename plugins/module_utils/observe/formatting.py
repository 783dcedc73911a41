# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""How numbers, durations and report windows are written in messages and reports."""

from __future__ import annotations

import typing as t


def format_number(value: t.Optional[float]) -> str:
    if value is None:
        return "n/a"
    if float(value).is_integer():
        return "%d" % value
    return (("%.4f" if abs(value) < 1 else "%.2f") % value).rstrip("0").rstrip(".")


def window_text(report: t.Mapping[str, t.Any]) -> str:
    seconds = int(report["window"]["seconds"])
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return "%dh%02dm" % (seconds // 3600, (seconds % 3600) // 60)
    if seconds >= 60:
        return "%dm%02ds" % (seconds // 60, seconds % 60) if seconds % 60 else "%dm" % (seconds // 60)
    return "%ds" % seconds
