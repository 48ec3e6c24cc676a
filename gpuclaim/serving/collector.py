"""The cycle collector's pauses: measured (`gpuclaim_cycle_collector_pause_seconds`) and kept short.

Both servers move what is alive into the collector's permanent generation once the cluster view is built
(`gc.freeze()`): a full collection over that view stopped the event loop for 18-41 ms. What the servers build
afterwards is not frozen, and in the extender that is a lot: each new pod shape adds a verdict to every node's
cache. In the extender's `shapes` flood (64 new shapes over 5,000 nodes, `python -m e2e.bench extender`) full
collections came every half second and each stopped the loop for 21-32 ms (in process, 2026-11-27), the whole of
that phase's /healthz p99.

So after a full collection that took longer than `REFREEZE_AFTER_SECONDS`, what survived it is frozen too: the
next full collection walks only what is newer. A frozen object is never examined again, so garbage in a cycle
among frozen objects (a request in flight at the freeze, once it ends) is not freed; once an hour
(`THAW_SECONDS`), at a moment no request is in flight, everything is thawed, collected and frozen again. That one
full collection is the only long pause left, once an hour instead of every half second while shapes are new.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REFREEZE_AFTER_SECONDS = 0.005
THAW_SECONDS = 3600.0
#: a thaw waits this long for a moment with no request in flight, then happens anyway
THAW_WAIT_SECONDS = 60.0
CHECK_SECONDS = 1.0
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class CollectorWatch:
    """Registered in `gc.callbacks` for the server's lifetime (`running`); its task does the freezing on the loop,
    never inside a collection (the callback only measures and raises a flag)."""

    def __init__(self, registry: CollectorRegistry, *, idle: Callable[[], bool],
                 thaw_seconds: float = THAW_SECONDS) -> None:
        self.pauses = Histogram("gpuclaim_cycle_collector_pause_seconds",
                                "Pauses of the cycle collector, by generation", ["generation"], buckets=_BUCKETS,
                                registry=registry)
        self.freezes = Counter("gpuclaim_cycle_collector_freezes_total",
                               "Freezes of what survived a collection: after a long full collection (pause), or "
                               "the periodic thaw and collect (thaw)", ["reason"], registry=registry)
        frozen = Gauge("gpuclaim_cycle_collector_frozen_objects", "Objects in the collector's permanent generation",
                       registry=registry)
        frozen.set_function(gc.get_freeze_count)
        self._by_generation = [self.pauses.labels(str(g)) for g in range(3)]
        self._idle = idle
        self._thaw_seconds = thaw_seconds
        self._started = 0.0
        self._refreeze = False
        self._last_thaw = time.monotonic()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        # runs inside a collection, on whichever thread triggered it: measure and flag, nothing else
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        generation = info["generation"]
        self._by_generation[generation].observe(took)
        if generation == 2 and took > REFREEZE_AFTER_SECONDS:
            self._refreeze = True

    def check(self, now: float | None = None) -> str | None:
        """One turn of the task: what it did ("pause", "thaw") or None."""
        now = time.monotonic() if now is None else now
        due = now - self._last_thaw
        if due >= self._thaw_seconds and (self._idle() or due >= self._thaw_seconds + THAW_WAIT_SECONDS):
            self._last_thaw = now
            self._refreeze = False
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.freezes.labels("thaw").inc()
            return "thaw"
        if self._refreeze:
            self._refreeze = False
            gc.collect(1)  # the young generations' garbage goes before what lives is frozen
            gc.freeze()
            self.freezes.labels("pause").inc()
            return "pause"
        return None

    async def run(self) -> None:
        gc.callbacks.append(self._callback)
        try:
            while True:
                await asyncio.sleep(CHECK_SECONDS)
                self.check()
        finally:
            gc.callbacks.remove(self._callback)
