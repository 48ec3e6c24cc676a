"""List then watch one kind, forever: the local copy follows the server through every failure.

- A watch resumes from the last resourceVersion seen (events and bookmarks).
- 410 Gone / "too old resource version" (as an HTTP status or an ERROR event) means the history
  the watch needs is compacted away: list again and replace, emitting the differences so that
  subscribers see exactly what changed while we were away.
- A watch that delivers nothing (not even a bookmark) for `silence_timeout` is presumed dead and
  restarted; a stream the server ends is resumed at once.
- Errors (5xx, 429 with Retry-After, connection failures) back off exponentially with jitter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gpuclaim.kube.backoff import Backoff
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.kube.metrics import CacheMetrics
from gpuclaim.kube.sharing import Interner

Obj = dict[str, Any]
Sink = Callable[[str, Obj | None, Obj | None], None]  # (event type, old, new); DELETED has new=None
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchSpec:
    kind: str
    api_version: str
    plural: str
    label_selector: str = ""
    namespaced: bool = False
    compact: Callable[[Obj], Obj] | None = None  # keep only what consumers need, to save memory
    # A kind not every supported cluster serves (DeviceTaintRule: v1 from 1.37, v1beta2/v1alpha3 behind gates
    # before). `api_version` first, then `fallbacks`; when none is served (404) the kind counts as synced and empty,
    # and the reflector asks again every `absent_recheck` seconds: start-up never waits for it, and an upgraded
    # control plane or an enabled gate is followed without a restart.
    optional: bool = False
    fallbacks: tuple[str, ...] = ()
    absent_recheck: float = 60.0

    @property
    def path(self) -> str:
        return resource_path(self.api_version, self.plural)

    @property
    def paths(self) -> tuple[tuple[str, str], ...]:
        """(apiVersion, path) in the order to try them."""
        return tuple((v, resource_path(v, self.plural)) for v in (self.api_version, *self.fallbacks))


class _Expired(Exception):
    pass


def object_key(obj: Obj) -> str:
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


class Reflector:
    def __init__(self, client: KubeClient, spec: WatchSpec, sink: Sink, *, backoff: Backoff,
                 metrics: CacheMetrics, silence_timeout: float = 90.0, watch_timeout: float = 300.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 interner: Interner | None = None, page_size: int = 500,
                 on_list: Callable[[], None] | None = None) -> None:
        self.client = client
        self.spec = spec
        self.sink = sink
        self.backoff = backoff
        self.metrics = metrics
        self.silence_timeout = silence_timeout
        self.watch_timeout = watch_timeout
        self.clock = clock
        self.sleep = sleep
        self.items: dict[str, Obj] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.last_activity: float | None = None
        self.lists = 0
        self.interner = interner
        self.page_size = page_size
        self.on_list = on_list  # after every complete list (the first and each relist)
        self.path = spec.path  # the served version's path (an optional kind may fall back to an older version)
        self.served_version: str | None = spec.api_version  # None: an optional kind the cluster does not serve

    def _touch(self) -> None:
        self.last_activity = self.clock()

    def _prepare(self, obj: Obj) -> Obj:
        obj.setdefault("apiVersion", self.served_version or self.spec.api_version)
        obj.setdefault("kind", self.spec.kind)
        metadata = obj.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("managedFields", None)
        if self.spec.compact:
            obj = self.spec.compact(obj)
        return self.interner.share(obj) if self.interner is not None else obj

    async def run(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    if self.spec.optional and not await self._find_served():
                        await self.sleep(self.spec.absent_recheck)
                        continue
                    await self._list()
                    need_list = False
                started, delivered = self.clock(), await self._watch()
                self.metrics.restarts.labels(self.spec.kind, "closed").inc()
                if delivered == 0 and self.clock() - started < 1.0:
                    await self.sleep(self.backoff.next())  # a server closing at once must not make us spin
                else:
                    self.backoff.reset()
            except _Expired:
                log.info("%s: resourceVersion %s expired, relisting", self.spec.kind, self.resource_version)
                self.metrics.restarts.labels(self.spec.kind, "expired").inc()
                need_list = True
            except TimeoutError:
                log.warning("%s: watch silent for %.0fs, restarting", self.spec.kind, self.silence_timeout)
                self.metrics.restarts.labels(self.spec.kind, "silent").inc()
            except (ApiError, ApiUnavailable, ValueError) as exc:  # ValueError: a malformed line in the stream
                if self.spec.optional and isinstance(exc, ApiError) and exc.code == 404:
                    need_list = True  # no longer served (downgrade, gate turned off): find out again
                retry_after = exc.retry_after if isinstance(exc, ApiError) else None
                delay = retry_after if retry_after is not None else self.backoff.next()
                log.warning("%s: %s; retrying in %.2fs", self.spec.kind, exc, delay)
                if not need_list:
                    self.metrics.restarts.labels(self.spec.kind, "error").inc()
                await self.sleep(delay)

    async def _find_served(self) -> bool:
        """Pick the first served version of an optional kind; none served: empty, synced, and False."""
        for version, path in self.spec.paths:
            try:
                await self.client.list(path, params={"limit": "1"}, time_limit=self.client.timeout)
            except ApiError as exc:
                if exc.code == 404:
                    continue
                if exc.code == 403:  # an older chart's role: run without the kind rather than never become ready
                    log.warning("%s: not allowed to list %s (%s); treated as none until allowed", self.spec.kind,
                                path, exc)
                    break
                raise
            if version != self.served_version or path != self.path:
                log.info("%s: served as %s", self.spec.kind, version)
            self.served_version, self.path = version, path
            return True
        if self.served_version is not None:
            log.info("%s: not served by this cluster (tried %s); treated as none", self.spec.kind,
                     ", ".join(v for v, _ in self.spec.paths))
        self.served_version = None
        old_items, self.items = self.items, {}
        for old in old_items.values():
            self._emit("DELETED", old, None)
        self._touch()
        self.synced.set()
        return False

    async def _list(self) -> None:
        # pages of `page_size`, as client-go's reflector does: bounds the response held in memory at once
        fresh: dict[str, Obj] = {}
        token, resource_version = "", ""
        while True:
            params = {"limit": str(self.page_size)}
            if token:
                params["continue"] = token
            if self.spec.label_selector:
                params["labelSelector"] = self.spec.label_selector
            response = await self.client.list(self.path, params=params,
                                              time_limit=max(self.client.timeout, 60.0))
            for item in response.get("items") or ():
                obj = self._prepare(item)
                fresh[object_key(obj)] = obj
            metadata = response.get("metadata") or {}
            resource_version = resource_version or str(metadata.get("resourceVersion", ""))
            token = str(metadata.get("continue") or "")
            if not token:
                break
        if self.lists:
            self.metrics.relists.labels(self.spec.kind).inc()
        self.lists += 1
        old_items, self.items = self.items, fresh
        for key, obj in fresh.items():
            old = old_items.get(key)
            if old is None:
                self._emit("ADDED", None, obj)
            elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._emit("MODIFIED", old, obj)
        for key, old in old_items.items():
            if key not in fresh:
                self._emit("DELETED", old, None)
        self.resource_version = resource_version
        self._touch()
        self.backoff.reset()
        self.synced.set()
        if self.on_list is not None:
            self.on_list()

    def _emit(self, event_type: str, old: Obj | None, new: Obj | None) -> None:
        self.metrics.events.labels(self.spec.kind, event_type).inc()
        self.sink(event_type, old, new)

    async def _watch(self) -> int:
        params = {"watch": "true", "allowWatchBookmarks": "true", "resourceVersion": self.resource_version,
                  "timeoutSeconds": str(int(self.watch_timeout))}
        if self.spec.label_selector:
            params["labelSelector"] = self.spec.label_selector
        delivered = 0
        async with self.client.stream(self.path, params=params, silence_timeout=self.silence_timeout) as events:
            async for event in events:
                self._apply(event)
                delivered += 1
        return delivered

    def _apply(self, event: Obj) -> None:
        event_type, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"{self.spec.kind}: watch event without an object: {str(event)[:200]}")
        if event_type == "ERROR":
            if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _Expired()
            raise ApiError.from_status(int(obj.get("code") or 500), obj)
        self._touch()
        rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if event_type == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            self.metrics.events.labels(self.spec.kind, "BOOKMARK").inc()
            return
        obj = self._prepare(obj)
        key = object_key(obj)
        if event_type in ("ADDED", "MODIFIED"):
            old = self.items.get(key)
            self.items[key] = obj
            self._emit(event_type, old, obj)
        elif event_type == "DELETED":
            old = self.items.pop(key, None)
            self._emit("DELETED", old or obj, None)
        else:
            raise ValueError(f"{self.spec.kind}: unknown watch event type {event_type!r}")
        self.resource_version = rv or self.resource_version
