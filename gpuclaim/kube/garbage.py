"""Garbage collection of what gpuclaim's webhook creates (docs/garbage-collection.md).

Candidates, from the cluster view (the webhook's list+watch of templates and claims):
- a ResourceClaimTemplate gpuclaim made: label ``app.kubernetes.io/managed-by: gpuclaim`` and a ``gpuclaim-`` name;
- a sharing-group ResourceClaim gpuclaim made: the same label and name prefix, the sharing annotation, and no
  ownerReferences (claims the resourceclaim controller makes from a template carry the label too, but belong to
  their pod and are the controller's to delete).
Anything else is never touched.

A candidate is in use while a pod of its namespace references it (``spec.resourceClaims[]``
``resourceClaimTemplateName`` / ``resourceClaimName``; pods are listed fresh, per namespace that has candidates,
at every sweep) or, for a claim, while its ``status.reservedFor`` is not empty. It is deleted once it has been
unused for ``idle_seconds`` by all three clocks:
- since this collector first saw it unused (in memory: a new leader waits a full idle period);
- since its creationTimestamp;
- since its ``gpuclaim.io/last-used`` annotation, which admission refreshes when it hands the object to a new pod
  (webhook/templates.py: ``touch``), so a pod admitted on another replica a moment before the deletion changes the
  object's resourceVersion.
The DELETE carries preconditions on uid and resourceVersion: an object recreated, touched or otherwise changed
since it was judged idle survives (409), and is judged again at the next sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.kube.leader import LeaderElector

Obj = dict[str, Any]
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpuclaim"
NAME_PREFIX = "gpuclaim-"
LAST_USED_ANNOTATION = "gpuclaim.io/last-used"
KINDS = ("ResourceClaimTemplate", "ResourceClaim")
_PLURALS = {"ResourceClaimTemplate": "resourceclaimtemplates", "ResourceClaim": "resourceclaims"}
_API = "resource.k8s.io/v1"
log = logging.getLogger(__name__)


class View(Protocol):
    """The cluster view's cached objects (``kube.ClusterCache.objects``)."""

    def objects(self, kind: str) -> Mapping[str, Obj]: ...


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp (metav1.Time or MicroTime) as epoch seconds; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_used(obj: Mapping[str, Any]) -> float | None:
    """The later of creationTimestamp and the last-used annotation."""
    meta = obj.get("metadata") or {}
    times = [t for t in (parse_time(meta.get("creationTimestamp")),
                         parse_time((meta.get("annotations") or {}).get(LAST_USED_ANNOTATION))) if t is not None]
    return max(times) if times else None


def is_ours(kind: str, obj: Mapping[str, Any], *, sharing_annotation: str) -> bool:
    """Made by gpuclaim's webhook (see the module doc); the only objects the collector may delete."""
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
        return False
    if not str(meta.get("name", "")).startswith(NAME_PREFIX):
        return False
    if kind == "ResourceClaim":
        return sharing_annotation in (meta.get("annotations") or {}) and not meta.get("ownerReferences")
    return kind == "ResourceClaimTemplate"


def pod_references(pod: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """(kind, name) of every template and claim a pod's ``spec.resourceClaims`` names."""
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if not isinstance(entry, Mapping):
            continue
        if isinstance(entry.get("resourceClaimTemplateName"), str):
            yield "ResourceClaimTemplate", entry["resourceClaimTemplateName"]
        if isinstance(entry.get("resourceClaimName"), str):
            yield "ResourceClaim", entry["resourceClaimName"]


def _in_use(kind: str, obj: Mapping[str, Any], referenced: set[tuple[str, str]]) -> bool:
    meta = obj.get("metadata") or {}
    if (kind, str(meta.get("name", ""))) in referenced:
        return True
    return kind == "ResourceClaim" and bool((obj.get("status") or {}).get("reservedFor"))


class GcMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.deleted = Counter("gpuclaim_gc_deleted_total", "Objects gpuclaim made and deleted once idle, by kind",
                               ["kind"], registry=registry)
        self.would_delete = Counter("gpuclaim_gc_would_delete_total",
                                    "Idle objects gc.dryRun left in place, by kind (counted at every sweep)",
                                    ["kind"], registry=registry)
        self.kept = Counter("gpuclaim_gc_delete_conflicts_total",
                            "Deletions refused by their uid/resourceVersion precondition (the object changed or "
                            "was re-used since it was judged idle), by kind", ["kind"], registry=registry)
        self.errors = Counter("gpuclaim_gc_errors_total", "API calls of a sweep that failed (list or delete)",
                              registry=registry)
        self.sweeps = Counter("gpuclaim_gc_sweeps_total", "Sweeps run by the leader", registry=registry)
        self.idle = Gauge("gpuclaim_gc_idle_objects", "Objects of gpuclaim unused at the last sweep, by kind",
                          ["kind"], registry=registry)
        self.leader = Gauge("gpuclaim_gc_leader", "1 while this replica holds the garbage-collection lease",
                            registry=registry)
        for kind in KINDS:
            self.deleted.labels(kind)
            self.would_delete.labels(kind)
            self.kept.labels(kind)
            self.idle.labels(kind)


@dataclass
class SweepResult:
    deleted: list[str] = field(default_factory=list)  # "Kind namespace/name"
    would_delete: list[str] = field(default_factory=list)  # dryRun
    kept: list[str] = field(default_factory=list)  # precondition failed
    in_use: int = 0
    waiting: int = 0  # unused, but not for idle_seconds yet


class GarbageCollector:
    """One sweep at a time, by the leader only (the caller decides when: :meth:`sweep`)."""

    def __init__(self, client: KubeClient, view: View, *, registry: CollectorRegistry, idle_seconds: float,
                 sharing_annotation: str, dry_run: bool = False, now: Callable[[], float] = time.time,
                 page_size: int = 500, max_deletes_per_second: float = 20.0) -> None:
        self.client = client
        self.view = view
        self.idle_seconds = idle_seconds
        self.sharing_annotation = sharing_annotation
        self.dry_run = dry_run
        self.now = now
        self.page_size = page_size
        self.delete_interval = 1.0 / max_deletes_per_second
        self.relist_seconds = 10.0
        self._next_delete = 0.0  # time.monotonic() before which the next DELETE waits
        self.metrics = GcMetrics(registry)
        # (kind, namespace, name, uid) -> when this collector first saw it unused
        self._unused_since: dict[tuple[str, str, str, str], float] = {}

    def forget(self) -> None:
        """Leadership lost: timers start again from the next sweep as leader."""
        self._unused_since.clear()

    def candidates(self) -> dict[str, list[tuple[str, Obj]]]:
        """namespace -> [(kind, object)] of every object gpuclaim made, from the cluster view."""
        out: dict[str, list[tuple[str, Obj]]] = {}
        for kind in KINDS:
            for obj in list(self.view.objects(kind).values()):
                if is_ours(kind, obj, sharing_annotation=self.sharing_annotation):
                    namespace = str((obj.get("metadata") or {}).get("namespace", ""))
                    out.setdefault(namespace, []).append((kind, obj))
        return out

    async def referenced(self, namespace: str) -> set[tuple[str, str]]:
        """(kind, name) referenced by some pod of the namespace, from a fresh paginated list."""
        out: set[tuple[str, str]] = set()
        params = {"limit": str(self.page_size)}
        path = resource_path("v1", "pods", namespace=namespace)
        while True:
            page = await self.client.list(path, params=params)
            for pod in page.get("items") or ():
                if isinstance(pod, Mapping):
                    out.update(pod_references(pod))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return out
            params = {"limit": str(self.page_size), "continue": token}

    async def sweep(self, *, may_delete: Callable[[], bool] = lambda: True) -> SweepResult:
        """Judge every candidate once; delete the idle ones while ``may_delete()`` (the lease is still held)."""
        result = SweepResult()
        self.metrics.sweeps.inc()
        seen: set[tuple[str, str, str, str]] = set()
        idle_counts = dict.fromkeys(KINDS, 0)
        for namespace, objects in sorted(self.candidates().items()):
            try:
                due = await self._judge(namespace, objects, result, seen, idle_counts)
                await self._delete_due(namespace, due, result, may_delete)
            except (ApiError, ApiUnavailable) as exc:  # without the pods nothing here can be judged: skip it
                log.warning("gc: cannot list the pods of namespace %s: %s", namespace, exc)
                self.metrics.errors.inc()
                seen.update(k for k in self._unused_since if k[1] == namespace)
        for key in list(self._unused_since):
            if key not in seen:
                del self._unused_since[key]  # in use again, or gone
        for kind, count in idle_counts.items():
            self.metrics.idle.labels(kind).set(count)
        return result

    async def _judge(self, namespace: str, objects: list[tuple[str, Obj]], result: SweepResult,
                     seen: set[tuple[str, str, str, str]], idle_counts: dict[str, int]
                     ) -> list[tuple[str, tuple[str, str, str, str]]]:
        """The objects of one namespace unused for idle_seconds by every clock: [(kind, key)]."""
        referenced = await self.referenced(namespace)
        due = []
        for kind, obj in objects:
            meta = obj.get("metadata") or {}
            key = (kind, namespace, str(meta.get("name", "")), str(meta.get("uid", "")))
            if _in_use(kind, obj, referenced):
                result.in_use += 1
                continue
            seen.add(key)
            idle_counts[kind] += 1
            now = self.now()
            since = self._unused_since.setdefault(key, now)
            used = last_used(obj)
            if now - since < self.idle_seconds or (used is not None and now - used < self.idle_seconds):
                result.waiting += 1
                continue
            due.append((kind, key))
        return due

    async def _delete_due(self, namespace: str, due: list[tuple[str, tuple[str, str, str, str]]],
                          result: SweepResult, may_delete: Callable[[], bool]) -> None:
        """Delete, paced; the pods are listed again every ``relist_seconds`` of a long run of deletions, and each
        object is read again from the cluster view just before its DELETE (its latest resourceVersion)."""
        referenced: set[tuple[str, str]] | None = None
        listed_at = time.monotonic()
        for kind, key in due:
            if not may_delete():
                log.info("gc: lost the lease during a sweep; %s %s/%s left for the next leader", *key[:3])
                return
            if time.monotonic() - listed_at > self.relist_seconds:
                referenced, listed_at = await self.referenced(namespace), time.monotonic()
            obj = self.view.objects(kind).get(f"{namespace}/{key[2]}")
            if obj is None or str((obj.get("metadata") or {}).get("uid", "")) != key[3]:
                continue  # gone, or replaced: a new object is judged afresh at the next sweep
            if referenced is not None and _in_use(kind, obj, referenced):
                result.in_use += 1
                continue
            await self._delete(kind, obj, key, result)

    async def _delete(self, kind: str, obj: Obj, key: tuple[str, str, str, str], result: SweepResult) -> None:
        _, namespace, name, uid = key
        where = f"{kind} {namespace}/{name}"
        if self.dry_run:
            log.info("gc (dryRun): would delete %s, unused for %gs", where, self.idle_seconds)
            self.metrics.would_delete.labels(kind).inc()
            result.would_delete.append(where)
            return
        path = resource_path(_API, _PLURALS[kind], namespace=namespace, name=name)
        pause = self._next_delete - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        self._next_delete = time.monotonic() + self.delete_interval
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        try:
            await self.client.delete(path, preconditions={"uid": uid, "resourceVersion": version})
        except ApiError as exc:
            if exc.code == 409:  # re-used, touched or recreated since the cluster view saw it: judged again later
                log.info("gc: kept %s: %s", where, exc.message)
                self.metrics.kept.labels(kind).inc()
                result.kept.append(where)
                return
            if exc.code == 404:
                return  # already gone
            log.warning("gc: cannot delete %s: %s", where, exc)
            self.metrics.errors.inc()
            return
        except ApiUnavailable as exc:
            log.warning("gc: cannot delete %s: %s", where, exc)
            self.metrics.errors.inc()
            return
        log.info("gc: deleted %s, unused for %gs", where, self.idle_seconds)
        self.metrics.deleted.labels(kind).inc()
        self._unused_since.pop(key, None)
        result.deleted.append(where)


async def run(collector: GarbageCollector, elector: LeaderElector, *, interval: float,
              synced: Callable[[], Any] | None = None) -> None:
    """Hold the election and, while leading, sweep every ``interval`` seconds; until cancelled, then release the
    lease so another replica takes over at once. ``synced``: awaited once before the first sweep (the cluster
    view's first list)."""
    election = asyncio.create_task(elector.run(), name="gpuclaim-gc-election")
    try:
        if synced is not None:
            await synced()
        while True:
            if not elector.is_leader:
                collector.metrics.leader.set(0)
                collector.forget()
                await elector.leading.wait()
            collector.metrics.leader.set(1)
            try:
                await collector.sweep(may_delete=lambda: elector.is_leader)
            except Exception:  # one bad sweep must not end garbage collection for the life of the process
                log.exception("gc: sweep failed")
                collector.metrics.errors.inc()
            with contextlib.suppress(TimeoutError):  # the next sweep, unless the lease is lost first
                await asyncio.wait_for(elector.following.wait(), interval)
    finally:
        election.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await election
        collector.metrics.leader.set(0)
        await elector.release()
