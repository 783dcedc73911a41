# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one polling wait of the lab benchmarks (bench/*/run.py, bench/multicluster/dispatch.py)."""

from __future__ import annotations

import time
import typing as t


def wait_until(predicate: t.Callable[[], t.Any], timeout: float, what: str, interval: float = 0.2) -> t.Any:
    """The predicate's first truthy value, polled every ``interval`` seconds; TimeoutError naming ``what`` after
    ``timeout`` seconds. A benchmark's interval is part of its latency resolution: each script states its own."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("timed out after %ss waiting for %s" % (timeout, what))
