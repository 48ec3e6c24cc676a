"""The cycle collector's pauses are measured, a long full collection has its survivors frozen, and the hourly thaw
frees the cyclic garbage frozen meanwhile (gpuclaim.serving.collector)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from gpuclaim.serving import collector

from . import served


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """Each test starts and ends with nothing frozen, the process-wide state these tests change."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def _watch(idle: bool = True, thaw_seconds: float = collector.THAW_SECONDS) -> tuple[collector.CollectorWatch,
                                                                                       CollectorRegistry]:
    registry = CollectorRegistry()
    return collector.CollectorWatch(registry, idle=lambda: idle, thaw_seconds=thaw_seconds), registry


class _Node:
    """Stands for cluster state in a reference cycle (weakly referable, unlike a list)."""

    def __init__(self) -> None:
        self.me = self


def _frozen_cycle() -> weakref.ref[_Node]:
    node = _Node()
    gc.freeze()
    return weakref.ref(node)


def test_every_collection_is_measured_by_generation() -> None:
    watch, registry = _watch()
    gc.callbacks.append(watch._callback)
    try:
        gc.collect(0)
        gc.collect()
    finally:
        gc.callbacks.remove(watch._callback)
    for generation in ("0", "2"):
        count = registry.get_sample_value("gpuclaim_cycle_collector_pause_seconds_count", {"generation": generation})
        assert count == 1


def test_a_long_full_collection_has_its_survivors_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    watch, registry = _watch()
    assert watch.check() is None  # nothing happened yet
    monkeypatch.setattr(collector, "REFREEZE_AFTER_SECONDS", 0.0)  # any full collection is long
    alive = [[i] for i in range(10_000)]
    gc.callbacks.append(watch._callback)
    try:
        gc.collect(0)
        assert watch.check() is None, "a young collection freezes nothing"
        gc.collect()
    finally:
        gc.callbacks.remove(watch._callback)
    assert watch.check() == "pause"
    assert gc.get_freeze_count() >= len(alive)
    assert registry.get_sample_value("gpuclaim_cycle_collector_freezes_total", {"reason": "pause"}) == 1
    assert registry.get_sample_value("gpuclaim_cycle_collector_frozen_objects") == gc.get_freeze_count()
    assert watch.check() is None, "one freeze per long collection"


def test_the_thaw_frees_garbage_frozen_in_a_cycle() -> None:
    watch, registry = _watch(thaw_seconds=0.0)
    gone = _frozen_cycle()
    gc.collect()
    assert gone() is not None, "a frozen cycle outlives a collection"
    assert watch.check() == "thaw"
    assert gone() is None
    assert gc.get_freeze_count() > 0, "what lives is frozen again"
    assert registry.get_sample_value("gpuclaim_cycle_collector_freezes_total", {"reason": "thaw"}) == 1


def test_the_thaw_waits_for_a_moment_without_requests_then_happens_anyway() -> None:
    watch, _ = _watch(idle=False, thaw_seconds=100.0)
    start = watch._last_thaw
    assert watch.check(now=start + 100.0) is None, "a request is in flight"
    assert watch.check(now=start + 100.0 + collector.THAW_WAIT_SECONDS - 1) is None
    gone = _frozen_cycle()
    assert watch.check(now=start + 100.0 + collector.THAW_WAIT_SECONDS) == "thaw"
    assert gone() is None
    assert watch.check(now=start + 100.0 + collector.THAW_WAIT_SECONDS + 1) is None, "and not again for an hour"


@pytest.mark.parametrize("kind", ["webhook", "extender"])
async def test_the_servers_export_the_pauses(kind: str, tmp_path: Path) -> None:
    async with served.serve(kind, tmp_path, {}, metrics=True) as s:
        gc.collect()
        await asyncio.sleep(0)
        assert s.metrics_url is not None
        async with aiohttp.ClientSession() as session, session.get(f"{s.metrics_url}/metrics") as answer:
            text = await answer.text()
    assert 'gpuclaim_cycle_collector_pause_seconds_count{generation="2"}' in text
    assert "gpuclaim_cycle_collector_frozen_objects" in text
