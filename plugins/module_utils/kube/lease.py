# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A cluster-side lock: one ``coordination.k8s.io/v1`` Lease held by one run at a time.

The holder writes its identity (host, process, AWX job when there is one) and renews the Lease every third of
its duration from a background thread. Another run waits (bounded) and then fails with who holds the lock since
when. Every change is a compare-and-swap on ``metadata.resourceVersion``, so two runs can never both believe they
hold it.

Expiry is judged by locally observed time, as client-go's leader election does: a waiting run records when it
first saw the Lease's current (holder, renewTime, resourceVersion) on its own monotonic clock and takes the Lease
over only once that record has not changed for ``leaseDurationSeconds``. The holder's ``renewTime`` is never
compared with this host's clock: with skewed clocks that comparison took a live run's lock over early.

The holder checks that it still holds the lock before each of its writes (``confirm``): a renewal that failed in
the background thread, or another holder in the Lease, stops the run there with one ``LockLost``.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
import typing as t
import uuid

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception

LEASE_API_VERSION = "coordination.k8s.io/v1"
MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


class LockHeld(GpuaasError):
    """Another run holds the lock and did not release it within the wait."""


class LockLost(GpuaasError):
    """This run no longer holds the lock (renewal failed, or another run holds it now): it must not write."""


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def format_time(value: datetime.datetime) -> str:
    return value.astimezone(datetime.timezone.utc).strftime(MICROTIME)


def parse_time(value: t.Optional[str]) -> t.Optional[datetime.datetime]:
    if not value:
        return None
    text = value.rstrip("Z")
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            continue
    return None


def default_identity() -> str:
    """host/pid plus the AWX job id when run by AWX/AAP (JOB_ID), and a random suffix."""
    parts = [socket.gethostname(), "pid-%d" % os.getpid()]
    job = os.environ.get("JOB_ID") or os.environ.get("AWX_JOB_ID")
    if job:
        parts.append("awx-job-%s" % job)
    parts.append(uuid.uuid4().hex[:6])
    return "/".join(parts)


class LeaseLock:
    """Acquire/renew/release one Lease (see the module docstring). Use as a context manager."""

    def __init__(self, client: t.Any, name: str, namespace: str, identity: t.Optional[str] = None,
                 duration: int = 60, wait: float = 60.0, poll: float = 2.0,
                 sleep: t.Callable[[float], None] = time.sleep, clock: t.Callable[[], float] = time.monotonic,
                 now: t.Callable[[], datetime.datetime] = utcnow) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.duration = max(5, int(duration))
        self.wait = max(0.0, float(wait))
        self.poll = max(0.1, float(poll))
        self.sleep = sleep
        self.clock = clock
        self.now = now
        self.held: t.Optional[t.Dict[str, t.Any]] = None
        self.took_over: t.Optional[str] = None  # holder of an expired lease this run took over
        self.waited: float = 0.0
        self.lost = False  # another run took the Lease over (or it was deleted): do not delete it at release
        # Why this run may no longer hold the lock (a failed renewal, another holder), set by the renewal thread;
        # sticky, because a gap in the renewals is a window in which a waiting run may have taken the Lease over.
        self.failure: t.Optional[str] = None
        self._stop = threading.Event()
        self._thread: t.Optional[threading.Thread] = None
        self._mutex = threading.Lock()

    # -- helpers ------------------------------------------------------------------------------------------
    @property
    def ref(self) -> str:
        return "Lease %s/%s" % (self.namespace, self.name)

    def _res(self) -> t.Any:
        return self.client.resource(LEASE_API_VERSION, "Lease")

    @staticmethod
    def observed_record(lease: t.Mapping[str, t.Any]) -> t.Tuple[t.Any, ...]:
        """What changes whenever the holder renews: a waiting run times the Lease out by this, not by renewTime."""
        spec = lease.get("spec") or {}
        return (spec.get("holderIdentity"), spec.get("renewTime"),
                (lease.get("metadata") or {}).get("resourceVersion"))

    def _body(self, base: t.Optional[t.Mapping[str, t.Any]], acquire: bool) -> t.Dict[str, t.Any]:
        now = format_time(self.now())
        spec = dict((base or {}).get("spec") or {})
        previous = spec.get("holderIdentity")
        if acquire:
            if previous and previous != self.identity:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = now
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": self.duration, "renewTime": now})
        meta: t.Dict[str, t.Any] = {"name": self.name, "namespace": self.namespace,
                                    "labels": {"app.kubernetes.io/managed-by": "gpuaas.platform"}}
        if base is not None:
            meta["resourceVersion"] = (base.get("metadata") or {}).get("resourceVersion")
            meta["labels"] = dict(((base.get("metadata") or {}).get("labels") or {}), **meta["labels"])
        return {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": meta, "spec": spec}

    def describe(self, lease: t.Mapping[str, t.Any]) -> str:
        spec = lease.get("spec") or {}
        return ("another run (holder %s) holds the lock %s since %s (last renewed %s; a waiting run takes it over after "
                "%ss without a renewal)" % (spec.get("holderIdentity"), self.ref, spec.get("acquireTime") or "?",
                                            spec.get("renewTime") or "?", spec.get("leaseDurationSeconds") or "?"))

    def lease_duration(self, lease: t.Mapping[str, t.Any]) -> int:
        return int((lease.get("spec") or {}).get("leaseDurationSeconds") or self.duration)

    # -- acquire / renew / release ----------------------------------------------------------------------------
    def acquire(self) -> "LeaseLock":
        """Take the lock, waiting up to ``wait`` seconds for another holder; LockHeld when it stays held.

        Another holder's Lease is taken over only after this run has seen it unchanged (same holder, renewTime and
        resourceVersion) for its leaseDurationSeconds of this host's monotonic time (see the module docstring).
        """
        res = self._res()
        start = self.clock()
        observed: t.Optional[t.Tuple[t.Any, ...]] = None
        observed_at = start
        while True:
            # The first look is timed at the start of the wait, so a lock_wait equal to the Lease's duration is
            # long enough to take over a Lease seen unchanged from the first look to the last.
            tick = start if observed is None else self.clock()
            try:
                lease = res.get(self.name, self.namespace)
                if lease is None:
                    self.held = res.create(self._body(None, acquire=True))
                    break
                spec = lease.get("spec") or {}
                holder = spec.get("holderIdentity")
                record = self.observed_record(lease)
                if record != observed:
                    observed, observed_at = record, tick
                unchanged_for = tick - observed_at
                if not holder or holder == self.identity or unchanged_for >= self.lease_duration(lease):
                    self.held = res.replace(self._body(lease, acquire=holder != self.identity))
                    if holder and holder != self.identity:
                        self.took_over = holder
                    break
            except ApiException as exc:
                if exc.status == 409:
                    continue  # someone created or changed it meanwhile: look again
                raise translate_api_exception(exc, "take the lock", self.ref)
            waited = tick - start
            if waited >= self.wait:
                self.waited = waited
                raise LockHeld(
                    "%s; gave up after waiting %ds" % (self.describe(lease), int(waited)),
                    hint="two runs must not reconcile (and prune) the tenancy at once: wait for the other run to "
                         "finish, or raise gpuaas_tenants_lock_wait; if that run died, a waiting run takes its lock "
                         "over once it has seen no renewal for %ss of its own time (a lock_wait at least that long), "
                         "or delete it: kubectl delete lease -n %s %s"
                         % (self.lease_duration(lease), self.namespace, self.name),
                    details={"reason": "LockHeld", "holder": holder, "lease": self.ref,
                             "acquireTime": spec.get("acquireTime"), "renewTime": spec.get("renewTime")})
            self.sleep(min(self.poll, max(0.0, self.wait - waited)))
        self.waited = self.clock() - start
        return self

    def renew(self) -> bool:
        """Renew the held lease once (compare-and-swap); False, with ``failure`` recorded, when that failed.

        A failure is recorded whatever its cause: while the renewals fail, a waiting run sees the Lease unchanged
        and takes it over after leaseDurationSeconds, so the run must stop before its next write (``confirm``).
        """
        with self._mutex:
            if self.held is None or self.lost:
                return False
            try:
                self.held = self._res().replace(self._body(self.held, acquire=False))
                return True
            except ApiException as exc:
                if exc.status in (404, 409):
                    self.lost = True
                    self.failure = self.failure or self._taken_by()
                else:
                    self.failure = self.failure or "its renewal failed: %s" % (
                        translate_api_exception(exc, "renew", self.ref).message)
                return False
            except Exception as exc:  # noqa: BLE001 - API unreachable: the thread must not die, the run must stop
                self.failure = self.failure or "its renewal failed: %s" % (getattr(exc, "message", None) or exc)
                return False

    def _taken_by(self) -> str:
        """Who holds the Lease now, for the message of a lost lock (read once; best effort)."""
        try:
            lease = self._res().get(self.name, self.namespace)
        except Exception as exc:  # noqa: BLE001 - the message still says the lock was lost
            return "its renewal was refused (the Lease changed) and it could not be read again: %s" % (
                getattr(exc, "message", None) or exc)
        if lease is None:
            return "the Lease was deleted (by hand, or by a run that took it over and finished)"
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") == self.identity:
            return "its renewal was refused: the Lease changed under it"
        return "another run (holder %s) holds it now, since %s" % (spec.get("holderIdentity") or "none",
                                                                   spec.get("acquireTime") or "?")

    def confirm(self, before: str) -> None:
        """Raise LockLost unless this run still holds the lock: a recorded renewal failure, or the Lease read now
        naming another holder (or gone). ``before`` says what the run was about to write, for the message."""
        with self._mutex:
            if self.held is None:
                return  # not held (released, or never taken): nothing to confirm
            failure = self.failure
        if failure is None:
            try:
                lease = self._res().get(self.name, self.namespace)
            except ApiException as exc:
                failure = "it could not be read to confirm it: %s" % (
                    translate_api_exception(exc, "read", self.ref).message)
            except GpuaasError as exc:
                failure = "it could not be read to confirm it: %s" % exc.message
            else:
                holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
                if holder != self.identity:
                    with self._mutex:
                        self.lost = True
                        self.failure = self.failure or self._taken_by()
                        failure = self.failure
        if failure is not None:
            raise LockLost(
                "this run lost the lock %s (%s) and stopped %s: nothing more was written" % (self.ref, failure, before),
                hint="two runs must not write the tenancy at once: re-run when the other run has finished (objects "
                     "written before this point are whole; a re-run converges)",
                details={"reason": "LockLost", "lease": self.ref, "identity": self.identity, "cause": failure})

    def _renew_loop(self) -> None:
        interval = max(1.0, self.duration / 3.0)
        while not self._stop.wait(interval):
            self.renew()

    def start_renewal(self) -> None:
        if self._thread is None and self.held is not None:
            self._thread = threading.Thread(target=self._renew_loop, name="gpuaas-lease-renewal", daemon=True)
            self._thread.start()

    def release(self) -> t.Optional[str]:
        """Stop renewing and delete the Lease if this run still holds it; a warning text when that failed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._mutex:
            held, self.held = self.held, None
        if held is None or self.lost:
            return None
        meta = held.get("metadata") or {}
        try:
            self._res().delete(self.name, self.namespace,
                               preconditions={"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")})
        except ApiException as exc:
            if exc.status in (404, 409):
                return None
            return "could not release the lock %s: %s (it expires by itself after %ss)" % (
                self.ref, translate_api_exception(exc, "delete", self.ref).message, self.duration)
        except Exception as exc:  # noqa: BLE001 - API unreachable at the end of a failed run
            return "could not release the lock %s (%s); it expires by itself %ss after its last renewal" % (
                self.ref, getattr(exc, "message", exc), self.duration)
        return None

    def __enter__(self) -> "LeaseLock":
        self.acquire()
        self.start_renewal()
        return self

    def __exit__(self, *exc: t.Any) -> None:
        self.release()


def read_holder(client: t.Any, name: str, namespace: str) -> t.Optional[t.Dict[str, t.Any]]:
    """The Lease's spec when it names a holder, else None — for check mode, which takes no lock.

    Whether that holder is still alive is not judged here: that takes watching the Lease for its duration
    (``LeaseLock.acquire``), and comparing its renewTime with this host's clock is what clock skew defeats.
    """
    try:
        lease = client.resource(LEASE_API_VERSION, "Lease").get(name, namespace)
    except (ApiException, GpuaasError):
        return None
    spec = (lease or {}).get("spec") or {}
    return dict(spec) if spec.get("holderIdentity") else None
