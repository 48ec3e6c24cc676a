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
- since a collector first saw it unused: persisted on the object as the ``gpuclaim.io/unused-since`` annotation
  (written by the leader with a resourceVersion precondition, removed when a sweep sees the object in use), so the
  clock survives a change of leader; a value that is malformed, from before the object's creation, from the future
  (past a minute of clock skew) or older than a use this collector saw is not trusted: the collector's own first
  observation counts instead and is written over it;
- since its creationTimestamp;
- since its ``gpuclaim.io/last-used`` annotation, which admission refreshes when it hands the object to a new pod
  (webhook/templates.py: ``touch``), so a pod admitted on another replica a moment before the deletion changes the
  object's resourceVersion.
The in-use check comes first, whatever the annotations say. The DELETE carries preconditions on uid and
resourceVersion: an object recreated, touched or otherwise changed since it was judged idle survives (409), and is
judged again at the next sweep. With ``dry_run`` the collector writes nothing: its clock lives in memory only.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.kube.leader import LeaderElector, lead

Obj = dict[str, Any]
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpuclaim"
NAME_PREFIX = "gpuclaim-"
LAST_USED_ANNOTATION = "gpuclaim.io/last-used"
UNUSED_SINCE_ANNOTATION = "gpuclaim.io/unused-since"
# how far in the future an unused-since value may lie and still be trusted: the clocks of two leaders differ
CLOCK_SKEW_SECONDS = 60.0
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_YIELD_EVERY = 500  # candidates judged between two yields to the event loop (about 8 ms of work)
_STRICT_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
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
    return datetime.fromtimestamp(epoch, UTC).strftime(_TIME_FORMAT)


def parse_strict_time(value: object) -> float | None:
    """Exactly :func:`format_time`'s form (``2026-11-25T05:00:00Z``) as epoch seconds, else None: a date alone or
    a time without its zone (which ``fromisoformat`` would read in the local zone) is malformed."""
    if not isinstance(value, str) or not _STRICT_TIME.fullmatch(value):
        return None
    try:  # fromisoformat, not strptime: 15 times faster, and a sweep judges every candidate on the event loop
        return datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC).timestamp()
    except ValueError:  # month 13 and the like
        return None


def unused_since(obj: Mapping[str, Any], now: float, *, used_at: float | None = None) -> float | None:
    """The object's ``gpuclaim.io/unused-since`` when it can be trusted as the start of its idle clock: well
    formed, not before its creationTimestamp (it was not written for this object), not after ``now`` plus
    CLOCK_SKEW_SECONDS, and not before ``used_at`` (the last use this collector saw: the removal of an older value
    may have failed or not be in the view yet). Anything else is None: the caller counts from its own first
    observation instead."""
    meta = obj.get("metadata") or {}
    since = parse_strict_time((meta.get("annotations") or {}).get(UNUSED_SINCE_ANNOTATION))
    if since is None or since > now + CLOCK_SKEW_SECONDS:
        return None
    created = parse_time(meta.get("creationTimestamp"))
    if created is not None and since < created:
        return None
    if used_at is not None and since < math.floor(used_at):  # the annotation has whole seconds
        return None
    return since


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
        self.clock_writes = Counter(
            "gpuclaim_gc_unused_since_writes_total",
            "Writes of the gpuclaim.io/unused-since annotation: action=mark (first seen unused, or an untrusted value "
            "replaced), action=clear (seen in use again), by kind", ["kind", "action"], registry=registry)
        self.idle = Gauge("gpuclaim_gc_idle_objects", "Objects of gpuclaim unused at the last sweep, by kind",
                          ["kind"], registry=registry)
        self.leader = Gauge("gpuclaim_gc_leader", "1 while this replica holds the garbage-collection lease",
                            registry=registry)
        for kind in KINDS:
            self.deleted.labels(kind)
            self.would_delete.labels(kind)
            self.kept.labels(kind)
            self.idle.labels(kind)
            for action in ("mark", "clear"):
                self.clock_writes.labels(kind, action)


@dataclass
class SweepResult:
    deleted: list[str] = field(default_factory=list)  # "Kind namespace/name"
    would_delete: list[str] = field(default_factory=list)  # dryRun
    kept: list[str] = field(default_factory=list)  # precondition failed
    marked: list[str] = field(default_factory=list)  # unused-since written
    cleared: list[str] = field(default_factory=list)  # unused-since removed: in use again
    in_use: int = 0
    waiting: int = 0  # unused, but not for idle_seconds yet


Key = tuple[str, str, str, str]  # (kind, namespace, name, uid)


@dataclass
class _Judged:
    """What one namespace's judgement asks of the API: deletions and unused-since writes."""

    due: list[tuple[str, Key]] = field(default_factory=list)
    mark: list[tuple[str, Obj, float]] = field(default_factory=list)  # (kind, object, unused since)
    clear: list[tuple[str, Obj]] = field(default_factory=list)


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
        self._next_write = 0.0  # time.monotonic() before which the next DELETE or annotation write waits
        self.metrics = GcMetrics(registry)
        # key -> when this collector first saw it unused: the clock while the annotation is not (yet) written
        # or not trusted, and the only clock in dry_run
        self._unused_since: dict[Key, float] = {}
        # key -> when this collector last saw it in use: an unused-since from before is stale (unused_since's
        # ``used_at``), whether or not its removal succeeded or the view shows it yet
        self._used_at: dict[Key, float] = {}
        self._forbidden = False  # an annotation write got 403 in this sweep: no more this sweep

    def forget(self) -> None:
        """Leadership lost: the in-memory clocks go; the next leader reads the annotations."""
        self._unused_since.clear()
        self._used_at.clear()

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
        """Judge every candidate once; write the unused-since annotations and delete the idle objects while
        ``may_delete()`` (the lease is still held)."""
        result = SweepResult()
        self.metrics.sweeps.inc()
        self._forbidden = False
        seen: set[Key] = set()
        alive: set[Key] = set()
        idle_counts = dict.fromkeys(KINDS, 0)
        for namespace, objects in sorted(self.candidates().items()):
            alive.update(_key(kind, obj) for kind, obj in objects)
            try:
                judged = await self._judge(namespace, objects, result, seen, idle_counts)
                await self._write_clocks(judged, result, may_delete)
                await self._delete_due(namespace, judged.due, result, may_delete)
            except (ApiError, ApiUnavailable) as exc:  # without the pods nothing here can be judged: skip it
                log.warning("gc: cannot list the pods of namespace %s: %s", namespace, exc)
                self.metrics.errors.inc()
                seen.update(k for k in self._unused_since if k[1] == namespace)
        for key in list(self._unused_since):
            if key not in seen:
                del self._unused_since[key]  # in use again, or gone
        for key in list(self._used_at):
            if key not in alive:
                del self._used_at[key]
        for kind, count in idle_counts.items():
            self.metrics.idle.labels(kind).set(count)
        return result

    async def _judge(self, namespace: str, objects: list[tuple[str, Obj]], result: SweepResult,
                     seen: set[Key], idle_counts: dict[str, int]) -> _Judged:
        """Which objects of one namespace are unused for idle_seconds by every clock, and which unused-since
        annotations to write or remove."""
        referenced = await self.referenced(namespace)
        judged = _Judged()
        for count, (kind, obj) in enumerate(objects, 1):
            if count % _YIELD_EVERY == 0:  # the webhook's admissions share this event loop
                await asyncio.sleep(0)
            key = _key(kind, obj)
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            now = self.now()
            if _in_use(kind, obj, referenced):  # first, whatever the annotations say
                result.in_use += 1
                # any unused-since written before now is stale, also one the view does not show yet
                self._used_at[key] = now
                if UNUSED_SINCE_ANNOTATION in annotations or key in self._unused_since:  # (this collector marked it)
                    judged.clear.append((kind, obj))
                continue
            seen.add(key)
            idle_counts[kind] += 1
            first_seen = self._unused_since.setdefault(key, now)
            since = unused_since(obj, now, used_at=self._used_at.get(key))
            persisted = since is not None
            if since is None:  # not persisted yet, or not to be trusted: this collector's first observation counts
                since = first_seen
            used = last_used(obj)
            if now - since < self.idle_seconds or (used is not None and now - used < self.idle_seconds):
                result.waiting += 1
                if not persisted:  # persist it, never before the creation (it would not be trusted when read back)
                    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
                    judged.mark.append((kind, obj, since if created is None else max(since, created)))
                continue
            judged.due.append((kind, key))
        return judged

    async def _write_clocks(self, judged: _Judged, result: SweepResult, may_delete: Callable[[], bool]) -> None:
        """Persist the idle clocks: mark with a resourceVersion precondition (never over a change this sweep did
        not judge: a touch or a recreation wins, and the object is judged again at the next sweep); clear without
        one (removing it only makes the collector wait longer). Nothing in dry_run."""
        if self.dry_run:
            return
        for kind, obj in judged.clear:  # first: a use the next leader must know of matters more than a mark
            if not may_delete() or self._forbidden:
                return
            if await self._patch(kind, obj, {"metadata": {"annotations": {UNUSED_SINCE_ANNOTATION: None}}}, "clear"):
                result.cleared.append(_where(kind, obj))
        for kind, obj, since in judged.mark:
            if not may_delete() or self._forbidden:
                return
            meta = obj.get("metadata") or {}
            patch = {"metadata": {"resourceVersion": str(meta.get("resourceVersion", "")),
                                  "annotations": {UNUSED_SINCE_ANNOTATION: format_time(since)}}}
            if await self._patch(kind, obj, patch, "mark"):
                result.marked.append(_where(kind, obj))

    async def _patch(self, kind: str, obj: Obj, patch: Obj, action: str) -> bool:
        meta = obj.get("metadata") or {}
        path = resource_path(_API, _PLURALS[kind], namespace=str(meta.get("namespace", "")),
                             name=str(meta.get("name", "")))
        await self._pace()
        try:
            await self.client.patch(path, patch)
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone, or changed since judged: judged again at the next sweep
                log.warning("gc: cannot %s %s on %s: %s", action, UNUSED_SINCE_ANNOTATION, _where(kind, obj), exc)
                self.metrics.errors.inc()
            if exc.code == 403:  # no `patch` in this RBAC: one refusal per sweep, not one per object; the clocks
                self._forbidden = True  # stay in memory, as before they were persisted
            return False
        except ApiUnavailable as exc:
            log.warning("gc: cannot %s %s on %s: %s", action, UNUSED_SINCE_ANNOTATION, _where(kind, obj), exc)
            self.metrics.errors.inc()
            return False
        self.metrics.clock_writes.labels(kind, action).inc()
        return True

    async def _pace(self) -> None:
        """One API write per ``delete_interval``: a backlog reaches kube-apiserver paced, not as one burst."""
        pause = self._next_write - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        self._next_write = time.monotonic() + self.delete_interval

    async def _delete_due(self, namespace: str, due: list[tuple[str, Key]],
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

    async def _delete(self, kind: str, obj: Obj, key: Key, result: SweepResult) -> None:
        _, namespace, name, uid = key
        where = f"{kind} {namespace}/{name}"
        if self.dry_run:
            log.info("gc (dryRun): would delete %s, unused for %gs", where, self.idle_seconds)
            self.metrics.would_delete.labels(kind).inc()
            result.would_delete.append(where)
            return
        path = resource_path(_API, _PLURALS[kind], namespace=namespace, name=name)
        await self._pace()
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


def _key(kind: str, obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return kind, str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))


def _where(kind: str, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"


async def run(collector: GarbageCollector, elector: LeaderElector, *, interval: float,
              synced: Callable[[], Any] | None = None) -> None:
    """Hold the election and, while leading, sweep every ``interval`` seconds; until cancelled, then release the
    lease so another replica takes over at once. ``synced``: awaited once before the first sweep (the cluster
    view's first list). A replica waiting for the lease forgets its in-memory clocks (the leader reads the
    annotations)."""

    async def sweep() -> None:
        try:
            await collector.sweep(may_delete=lambda: elector.is_leader)
        except Exception:  # one bad sweep must not end garbage collection for the life of the process
            log.exception("gc: sweep failed")
            collector.metrics.errors.inc()

    await lead(elector, sweep, interval=interval, name="gpuclaim-gc", leading=collector.metrics.leader.set,
               on_follow=collector.forget, synced=synced)
