"""/metrics is formatted off the event loop (issue 22, round 2): a scrape of the fleet families at thousands of
nodes held the extender's loop about 0.4 s, and every /prioritize and probe waited for it.

Through the metrics app over HTTP, with the extender app's registry and a real FleetIndex:

- while a large registry is scraped the loop keeps answering: its longest gap stays well below what formatting that
  registry on the loop costs, measured on this machine in this test;
- the scrape is the exposition generate_latest makes, the fleet collector reading its snapshot on the loop;
- scrapes of one exposition share one formatting, at most `MAX_FORMATS` different ones are formatted at once (503
  past it), a scraper that hangs up does not cancel what others wait for;
- every Accept, Accept-Encoding and `name[]` gets an exposition or a 4xx naming the header (Hypothesis), never a 5xx.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import http.client
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gpuclaim.dra.config import load_config
from gpuclaim.extender import app as extender_app
from gpuclaim.extender.offline import OfflineView
from gpuclaim.fleet import metrics as fleet_metrics
from gpuclaim.fleet import model
from gpuclaim.serving.metrics import MAX_FORMATS, create_metrics_app

from . import fleet
from .test_bounds import _gaps_during

NODES = 2000
MODELS = [f"NVIDIA model {m}" for m in range(8)]  # one per GPU: 16 device series a node, not 2


def _fleet_index(nodes: int) -> model.FleetIndex:
    index = model.FleetIndex(load_config({}))
    for device_class in fleet.gpu_classes():
        index.on_event("DeviceClass", "ADDED", device_class)
    for i in range(nodes):
        index.on_event("ResourceSlice", "ADDED", fleet.node_slice(f"node-{i:05d}", [
            fleet.gpu(f"gpu-{g}", root=f"pci{g // 2}", numa=g // 4, product=MODELS[g]) for g in range(8)]))
    index.flush()
    return index


def _extender_app() -> tuple[CollectorRegistry, Any]:
    config = load_config({})
    view = OfflineView([fleet.pairs_node("n0"), *fleet.gpu_classes()], config=config.extender)
    registry = CollectorRegistry()
    return registry, extender_app.create_app(config, view=view, registry=registry)


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for family in text_string_to_metric_families(text) for s in family.samples
            if not s.name.endswith("_created")}


async def test_a_big_scrape_is_formatted_while_the_loop_keeps_answering(aiohttp_client: Any) -> None:
    registry, app = _extender_app()
    index = _fleet_index(NODES)
    fleet_metrics.register(registry, index)
    client = await aiohttp_client(app)
    metrics = await aiohttp_client(create_metrics_app(registry))
    body = orjson.dumps({"Pod": fleet.pod("t1"), "Nodes": None, "NodeNames": ["n0"]})
    assert (await client.post("/prioritize", data=body)).status == 200
    # what the loop would stand still for if it formatted the scrape itself, as the handler did: measured here, on
    # this machine, so the bound means the same on a fast one and a slow one (families cached, as in the scrape)
    blocking = min(_timed(lambda: generate_latest(registry)) for _ in range(3))
    expected = generate_latest(registry).decode()
    assert expected.count("\n") > 30_000
    answered: list[str] = []

    async def scrape() -> Any:
        resp = await metrics.get("/metrics")
        answered.append(await resp.text())
        return resp

    gaps = await _gaps_during(scrape())
    print(f"formatting on the loop: {blocking * 1000:.0f} ms; longest loop gap during the scrape: "
          f"{max(gaps) * 1000:.0f} ms")
    assert max(gaps) < blocking / 3, (f"the event loop stood still {max(gaps) * 1000:.0f} ms; formatting on the "
                                      f"loop would have stopped it {blocking * 1000:.0f} ms")
    assert _series(answered[0]) == _series(expected)
    # ordinary calls and probes are answered while a scrape is formatted
    scraping = asyncio.ensure_future(metrics.get("/metrics"))
    for _ in range(5):
        assert (await client.post("/prioritize", data=body)).status == 200
        assert (await client.get("/healthz")).status == 200
    assert (await scraping).status == 200


def _timed(fn: Any) -> float:
    gc.disable()
    try:
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started
    finally:
        gc.enable()


async def test_the_fleet_families_follow_the_index_from_the_metrics_thread(aiohttp_client: Any) -> None:
    index = _fleet_index(3)
    registry = CollectorRegistry()
    fleet_metrics.register(registry, index)
    metrics = await aiohttp_client(create_metrics_app(registry))

    async def free(node: str) -> float:
        text = await (await metrics.get("/metrics", params={"name[]": fleet_metrics.DEVICES})).text()
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.labels.get("node") == node and s.labels.get("state") == "free")

    assert await free("node-00001") == 8
    # an event the index has not flushed yet: the snapshot is taken on the loop, which flushes it first
    index.on_event("ResourceClaim", "ADDED", fleet.allocated_claim("held", [("node-00001", "gpu-3")]))
    assert await free("node-00001") == 7
    gone = fleet.node_slice("node-00001", [])
    index.on_event("ResourceSlice", "DELETED", gone)
    assert await free("node-00001") == 0


class _Held(Collector):
    """A collector that waits in the metrics thread until the test lets it go: a formatting in progress."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(30)
        yield GaugeMetricFamily("test_held", "held", value=self.calls)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("test_held", "held")


async def test_one_exposition_is_formatted_once_for_every_scrape_and_different_ones_are_bounded(
        aiohttp_client: Any) -> None:
    registry = CollectorRegistry()
    held = _Held()
    registry.register(held)
    for i in range(MAX_FORMATS + 1):
        Counter(f"test_other_{i}", "other", registry=registry).inc(i)
    metrics = await aiohttp_client(create_metrics_app(registry))
    loop = asyncio.get_running_loop()
    whole = [asyncio.ensure_future(metrics.get("/metrics")) for _ in range(3)]
    await loop.run_in_executor(None, held.entered.wait, 10)
    # a scraper that hangs up while the formatting it waits for runs: the others still get theirs
    hung_up = asyncio.ensure_future(metrics.get("/metrics"))
    await asyncio.sleep(0.05)
    hung_up.cancel()
    selected = [asyncio.ensure_future(metrics.get("/metrics", params={"name[]": f"test_other_{i}_total"}))
                for i in range(MAX_FORMATS - 1)]
    await asyncio.sleep(0.1)
    refused = await metrics.get("/metrics", params={"name[]": f"test_other_{MAX_FORMATS}_total"})
    assert refused.status == 503 and refused.headers["Retry-After"] == "1"
    assert f"{MAX_FORMATS} different expositions are being formatted" in await refused.text()
    assert (await metrics.get("/healthz")).status == 200  # the loop answers while the thread is held
    held.release.set()
    texts = [await (await reply).text() for reply in whole]
    assert held.calls == 1 and len(set(texts)) == 1 and "test_held 1.0" in texts[0]
    for i, reply in enumerate(selected):
        text = await (await reply).text()
        assert f"test_other_{i}_total {float(i)}" in text and "test_held" not in text
    # once they are done, the bound is free again
    assert (await metrics.get("/metrics", params={"name[]": f"test_other_{MAX_FORMATS}_total"})).status == 200


class _Served:
    """The metrics app on its own event loop in a thread, so Hypothesis can drive it synchronously."""

    def __init__(self, registry: CollectorRegistry) -> None:
        from aiohttp import web

        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(create_metrics_app(registry))
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self.runner.addresses[0][1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def get(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers)
            reply = conn.getresponse()
            return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
        finally:
            conn.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def served() -> Iterator[_Served]:
    registry = CollectorRegistry()
    fleet_metrics.register(registry, _fleet_index(3))
    Counter("test_requests", "requests", ["verb"], registry=registry).labels("get").inc()
    running = _Served(registry)
    yield running
    running.close()


_VERSIONS = st.one_of(st.sampled_from(["1.0.0", "0.0.4", "1.1", "2.0.0", "", "x.y", "1.x", "abc"]),
                      st.text(alphabet="0123456789.-xv", max_size=8))
_FORMATS = st.sampled_from(["text/plain", "application/openmetrics-text", "*/*", "application/json", "garbage"])
_ACCEPT = st.lists(st.tuples(_FORMATS, st.none() | _VERSIONS, st.sampled_from(["", "underscores", "values", "x"])),
                   max_size=3).map(lambda parts: ", ".join(
                       f + ("" if v is None else f"; version={v}") + (f"; escaping={e}" if e else "")
                       for f, v, e in parts))
_NAMES = st.lists(st.sampled_from([fleet_metrics.DEVICES, fleet_metrics.STRANDED, "test_requests",
                                   "test_requests_total", "nothing_here", ""]) | st.text(max_size=12), max_size=3)


@settings(max_examples=60, deadline=None)
@given(accept=_ACCEPT, encoding=st.sampled_from(["", "gzip", "identity", "gzip;q=0, br", "deflate"]),
       names=_NAMES)
def test_every_accept_and_name_selection_gets_an_exposition_or_a_4xx_naming_the_header(
        served: _Served, accept: str, encoding: str, names: list[str]) -> None:
    from urllib.parse import urlencode

    query = ("?" + urlencode([("name[]", n) for n in names])) if names else ""
    status, headers, body = served.get("/metrics" + query, {"Accept": accept, "Accept-Encoding": encoding})
    try:
        _, content_type = choose_encoder(accept)
    except (TypeError, ValueError):
        assert status == 406 and body.decode().startswith("Accept: "), (status, body[:200])
        return
    assert status == 200, (status, body[:200])
    assert headers["content-type"] == content_type
    text = (gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body).decode()
    if content_type.startswith("text/plain"):
        families = {f.name for f in text_string_to_metric_families(text)}
        wanted = set(names) if names else None
        assert wanted is None or families <= {n.removesuffix("_total") for n in wanted}
    else:
        assert text.endswith("# EOF\n")
    assert served.get("/healthz", {})[0] == 200
