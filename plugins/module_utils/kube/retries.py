# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Retries of transient API failures: which failures are transient, and the bounded backoff between attempts.

Connection-class failures (refused, reset, timeouts) and HTTP 429/5xx are retried; a failing admission webhook is
not (retrying cannot make it pass). Connection failures that outlast the budget become one ``ApiUnreachable``,
which the client remembers so later requests fail at once instead of waiting through the backoff again.
"""

from __future__ import annotations

import random
import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.library import ApiException

# Transient API errors are retried with a bounded exponential backoff (see RetryPolicy).
RETRY_STATUSES = frozenset((429, 500, 502, 503, 504))


class RetryPolicy:
    """Bounded exponential backoff for transient API errors.

    ``attempts`` requests at most, delays ``base * factor**n`` capped at ``max_delay`` (plus up to ``jitter``
    of it at random), a server's ``Retry-After`` honoured up to ``max_delay``, and never more than ``budget``
    seconds of waiting in total per request.
    """

    def __init__(self, attempts: int = 6, base: float = 0.5, factor: float = 2.0, max_delay: float = 8.0,
                 budget: float = 30.0, jitter: float = 0.1) -> None:
        self.attempts = max(1, int(attempts))
        self.base = float(base)
        self.factor = float(factor)
        self.max_delay = float(max_delay)
        self.budget = float(budget)
        self.jitter = float(jitter)

    def delay(self, attempt: int, retry_after: t.Optional[float] = None,
              rand: t.Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(float(retry_after), self.max_delay)
        wait = min(self.base * (self.factor ** (attempt - 1)), self.max_delay)
        return wait * (1.0 + self.jitter * rand())


DEFAULT_RETRY = RetryPolicy()


class ApiUnreachable(GpuaasError):
    """The API server stayed unreachable (connection refused/reset, timeouts) through the retry budget."""


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection-class failure (the request may not have reached the API server)."""
    try:
        from urllib3 import exceptions as u3
    except ImportError:  # pragma: no cover
        u3 = None  # type: ignore[assignment]
    if u3 is not None:
        if isinstance(exc, u3.MaxRetryError):
            reason = getattr(exc, "reason", None)
            return reason is None or not isinstance(reason, u3.SSLError)
        if isinstance(exc, u3.SSLError):
            return False
        if isinstance(exc, (u3.ProtocolError, u3.TimeoutError, u3.NewConnectionError)):
            return True
    return isinstance(exc, (ConnectionError, TimeoutError))


def _retry_after(exc: t.Any) -> t.Optional[float]:
    headers = getattr(exc, "headers", None) or {}
    try:
        value = headers.get("Retry-After") or headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def is_transient_status(exc: t.Any) -> bool:
    """HTTP errors worth retrying: 429, 5xx and etcd timeouts, but not a failing admission webhook."""
    status = getattr(exc, "status", None) or 0
    if status not in RETRY_STATUSES:
        return False
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = ("%s %s" % (body or "", getattr(exc, "reason", "") or "")).lower()
    return "failed calling webhook" not in text and "admission webhook" not in text


def with_retries(call: t.Callable[[], t.Any], client: t.Any, what: str = "the request") -> t.Any:
    """Run ``call`` under ``client.retry`` (RetryPolicy), ``client.sleep`` and ``client.clock``.

    Raises the last ApiException for HTTP errors, ApiUnreachable when connection failures outlast the budget,
    and anything else unchanged.
    """
    policy: RetryPolicy = getattr(client, "retry", None) or DEFAULT_RETRY
    sleep = getattr(client, "sleep", None) or time.sleep
    clock = getattr(client, "clock", None) or time.monotonic
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            value = call()
        except ApiException as exc:
            if not is_transient_status(exc):
                raise
            last: BaseException = exc
            connection = False
            retry_after = _retry_after(exc)
        except Exception as exc:  # noqa: BLE001 - classified below
            if not is_connection_error(exc):
                raise
            last = exc
            connection = True
            retry_after = None
        else:
            if getattr(client, "unreachable", None) is not None:
                client.unreachable = None
            return value
        known_down = getattr(client, "unreachable", None)
        wait = policy.delay(attempt, retry_after)
        spent = clock() - start
        if known_down is not None and connection:
            raise ApiUnreachable(known_down.message, hint=known_down.hint, details=dict(known_down.details))
        if attempt >= policy.attempts or spent + wait > policy.budget:
            if connection:
                err = ApiUnreachable(
                    "the Kubernetes API server at %s is unreachable: %s (%d attempts in %.0fs)"
                    % (getattr(client, "host", "?"), _short(last), attempt, spent),
                    hint="check that the API server is up and reachable (network, proxy, host/kubeconfig), then re-run",
                    details={"reason": "Unreachable", "attempts": attempt, "seconds": round(spent, 1),
                             "request": what})
                try:
                    client.unreachable = err
                except AttributeError:  # pragma: no cover - clients without the attribute
                    pass
                raise err
            raise last
        try:
            client.retried = getattr(client, "retried", 0) + 1
        except AttributeError:  # pragma: no cover
            pass
        sleep(wait)


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    text = text.split("\n", maxsplit=1)[0]
    return text if len(text) <= 200 else text[:197] + "..."
