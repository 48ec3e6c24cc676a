"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics (tools/leaderelection).

    elector = LeaderElector(client, namespace="gpuclaim", name="gpuclaim-gc", identity=default_identity())
    task = asyncio.create_task(elector.run())
    await elector.leading.wait()        # set while this replica holds the lease, cleared when it loses it
    ...
    task.cancel(); await elector.release()

or, for a loop that works only while leading (the garbage collector, the quota controller), ``lead``.

Rules as client-go's LeaseLock and LeaderElector apply them:
- a missing Lease is created with this identity (create races resolve by 409 AlreadyExists);
- another holder's lease counts as expired only when the record has not changed for ``lease_duration`` seconds
  *as observed by this replica's own clock* (never by comparing its renewTime with local time: no clock-skew
  assumption);
- every write is a PUT carrying the resourceVersion that was read, so of two replicas racing for an expired lease
  exactly one wins (the other gets 409 Conflict);
- the leader renews every ``retry_period``; when no renewal succeeded for ``renew_deadline`` it stops leading
  (``leading`` is cleared before the lease can expire for the others, since renew_deadline < lease_duration);
- ``release`` (on shutdown) empties holderIdentity with leaseDurationSeconds 1, so a successor takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path

API_VERSION = "coordination.k8s.io/v1"
JITTER_FACTOR = 1.2  # client-go's JitterFactor: acquisition retries wait retry_period * [1, 2.2)
log = logging.getLogger(__name__)
Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Timing:
    """client-go's defaults (e.g. kube-scheduler's --leader-elect-* flags): 15 s, 10 s, 2 s."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def default_identity() -> str:
    """``<hostname>_<uuid>`` as client-go components build it: the pod name, unique across restarts."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(epoch: float) -> str:
    """metav1.MicroTime's wire form: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: KubeClient, *, namespace: str, name: str, identity: str, timing: Timing = Timing(),
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 rng: random.Random | None = None, on_change: Callable[[bool], None] | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self.clock = clock
        self.wall = wall
        self.rng = rng or random.Random()
        self.on_change = on_change
        self.leading = asyncio.Event()
        self.following = asyncio.Event()  # the opposite of `leading`, to wait for the loss of the lease
        self.following.set()
        self._observed: Obj | None = None  # the last lease spec seen
        self._observed_at = 0.0  # this replica's clock when that spec was first seen
        self._lease: Obj | None = None  # the last lease object read or written (for its resourceVersion)

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    @property
    def _path(self) -> str:
        return resource_path(API_VERSION, "leases", namespace=self.namespace, name=self.name)

    # ---- the loop ------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Acquire, then renew until the renew deadline passes without success; then start over. Runs until
        cancelled (the caller then calls :meth:`release`)."""
        try:
            while True:
                await self._acquire()
                self._set_leading(True)
                await self._renew_until_lost()
                self._set_leading(False)
        finally:
            self._set_leading(False)

    async def _acquire(self) -> None:
        while True:
            if await self.try_acquire_or_renew():
                return
            await asyncio.sleep(self.timing.retry_period * (1 + self.rng.random() * JITTER_FACTOR))

    async def _renew_until_lost(self) -> None:
        last_renewal = self.clock()
        while True:
            await asyncio.sleep(self.timing.retry_period)
            try:
                async with asyncio.timeout(max(0.0, last_renewal + self.timing.renew_deadline - self.clock())):
                    while True:
                        if await self.try_acquire_or_renew():
                            break
                        await asyncio.sleep(self.timing.retry_period)
            except TimeoutError:
                log.warning("lost the lease %s/%s: no renewal within %gs", self.namespace, self.name,
                            self.timing.renew_deadline)
                return
            if self._holder() != self.identity:
                log.warning("lost the lease %s/%s to %s", self.namespace, self.name, self._holder())
                return
            last_renewal = self.clock()

    def _set_leading(self, leading: bool) -> None:
        if leading == self.leading.is_set():
            return
        if leading:
            self.leading.set()
            self.following.clear()
            log.info("became the leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
        else:
            self.leading.clear()
            self.following.set()
        if self.on_change is not None:
            self.on_change(leading)

    def _holder(self) -> str:
        return str(((self._observed or {}).get("holderIdentity")) or "")

    # ---- one attempt ---------------------------------------------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        """One step of client-go's tryAcquireOrRenew; True when this replica holds the lease afterwards."""
        now = self.wall()
        try:
            try:
                current = await self.client.get(self._path)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                return await self._create(now)
            spec = current.get("spec") or {}
            if spec != self._observed:
                self._observed, self._observed_at = dict(spec), self.clock()
            self._lease = current
            holder = str(spec.get("holderIdentity") or "")
            duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration)
            if holder and holder != self.identity and self._observed_at + duration > self.clock():
                return False  # held by someone else, and not expired as far as this replica has seen
            wanted: Obj = {"holderIdentity": self.identity,
                           "leaseDurationSeconds": _seconds(self.timing.lease_duration),
                           "renewTime": micro_time(now),
                           "acquireTime": spec.get("acquireTime") or micro_time(now),
                           "leaseTransitions": int(spec.get("leaseTransitions") or 0)}
            if holder != self.identity:
                wanted["acquireTime"] = micro_time(now)
                wanted["leaseTransitions"] += 1
            body = {"apiVersion": API_VERSION, "kind": "Lease",
                    "metadata": {**current["metadata"]}, "spec": wanted}  # carries the resourceVersion read
            updated = await self.client.update(self._path, body)
        except ApiError as exc:
            if exc.code != 409:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False  # 409: another replica wrote first; it wins this round
        except ApiUnavailable as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        self._remember(updated)
        return True

    async def _create(self, now: float) -> bool:
        body = {"apiVersion": API_VERSION, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": _seconds(self.timing.lease_duration),
                         "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}}
        created = await self.client.create(resource_path(API_VERSION, "leases", namespace=self.namespace), body)
        self._remember(created)
        return True

    def _remember(self, lease: Obj) -> None:
        self._lease = lease
        self._observed, self._observed_at = dict(lease.get("spec") or {}), self.clock()

    async def release(self) -> bool:
        """Give the lease up (client-go's ReleaseOnCancel) if this replica holds it; True when released. The
        lease is read first: a renewal cancelled in flight may have written a version this replica never saw."""
        if self._lease is None or self._holder() != self.identity:
            return False
        try:
            for _ in range(2):
                current = await self.client.get(self._path)
                spec = current.get("spec") or {}
                if spec.get("holderIdentity") != self.identity:
                    return False  # someone else holds it already
                now = micro_time(self.wall())
                body = {"apiVersion": API_VERSION, "kind": "Lease", "metadata": {**current["metadata"]},
                        "spec": {"leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now,
                                 "leaseTransitions": int(spec.get("leaseTransitions") or 0)}}
                try:
                    self._remember(await self.client.update(self._path, body))
                    return True
                except ApiError as exc:
                    if exc.code != 409:
                        raise
            return False
        except (ApiError, ApiUnavailable) as exc:
            log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        finally:
            self._set_leading(False)


def _seconds(value: float) -> int:
    return max(1, round(value))  # leaseDurationSeconds is an int32


async def lead(elector: LeaderElector, one_pass: Callable[[], Awaitable[None]], *, interval: float, name: str,
               leading: Callable[[float], None], on_follow: Callable[[], None] | None = None,
               synced: Callable[[], Any] | None = None) -> None:
    """Hold the election and, while leading, run ``one_pass`` every ``interval`` seconds; until cancelled, then
    release the lease so another replica takes over at once. ``one_pass`` handles its own errors: one bad pass must
    not end the loop for the life of the process. ``leading`` is given 1 while this replica leads and 0 otherwise
    (the loop's leader gauge); ``on_follow`` runs whenever it is about to wait for the lease; ``synced`` is awaited
    once before the first pass (the cluster view's first list). ``name`` names the election task."""
    election = asyncio.create_task(elector.run(), name=f"{name}-election")
    try:
        if synced is not None:
            await synced()
        while True:
            if not elector.is_leader:
                leading(0)
                if on_follow is not None:
                    on_follow()
                await elector.leading.wait()
            leading(1)
            await one_pass()
            with contextlib.suppress(TimeoutError):  # the next pass, unless the lease is lost first
                await asyncio.wait_for(elector.following.wait(), interval)
    finally:
        election.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await election
        leading(0)
        await elector.release()
