"""`python -m e2e.bench.metrics_scrape [--nodes N] [--scrapes N]`: what one /metrics scrape of the fleet families
costs the extender's event loop (issue 22, round 2).

The fleet of the extender and fleet benchmarks (`e2e/bench/cache.py`'s generator: 5,000 nodes x 8 H100-like GPUs,
20,000 allocated claims) fed to a FleetIndex as cache events, its collector and the extender's own metrics in one
registry, served by the metrics app (gpuclaim/serving/metrics.py) on loopback in this process. Figures:

- ``generate_latest_ms``: the shortest of three ``generate_latest`` calls on the loop (families already built for
  the revision; gzip not counted);
- scrapes through HTTP (Prometheus' Accept and Accept-Encoding), ``unchanged`` (the fleet as at the last scrape)
  and ``changed`` (one claim released or taken again before each: the families are rebuilt), each with
  ``scrape_ms`` (wall), ``longest_gap_ms`` (the longest wall time between two turns of a task that yields at every
  loop turn: what a probe or /prioritize arriving meanwhile waited for, on this machine's load) and
  ``longest_step_cpu_ms`` (the loop thread's CPU time in its longest step, which the machine's load does not
  inflate).

``--on-loop`` serves /metrics with prometheus_client's aiohttp handler, which formats on the loop, as before.
The cycle collector is off while measuring, and the GIL switch interval is the servers' (0.5 ms). Progress goes
to stderr; one JSON object to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.aiohttp import make_aiohttp_handler

from e2e.bench import cache as cache_bench
from gpuclaim.dra.config import Config
from gpuclaim.extender.metrics import ExtenderMetrics
from gpuclaim.fleet import metrics as fleet_metrics
from gpuclaim.fleet import model
from gpuclaim.serving.metrics import create_metrics_app
from gpuclaim.serving.run import SWITCH_INTERVAL_SECONDS

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of 1 or more")
    return value


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _index(nodes: int, claims: int) -> tuple[model.FleetIndex, dict[str, Any]]:
    """The fleet's index and one of its allocated claims."""
    index = model.FleetIndex(Config())
    with tempfile.TemporaryDirectory(prefix="gpuclaim-bench-metrics-") as tmp:
        cache_bench.generate(Path(tmp), nodes=nodes, claims=claims)
        for kind, name in (("Node", "01-nodes.json"), ("DeviceClass", "04-classes.json"),
                           ("ResourceSlice", "02-slices.json"), ("ResourceClaim", "03-claims.json")):
            for obj in orjson.loads((Path(tmp) / name).read_bytes())["items"]:
                index.on_event(kind, "ADDED", obj)
                if kind == "ResourceClaim":
                    claim = obj
    index.flush()
    return index, claim


def _metrics_app(registry: CollectorRegistry, on_loop: bool) -> web.Application:
    if not on_loop:
        return create_metrics_app(registry)
    # the handler before issue 22's round 2: prometheus_client's, which formats on the event loop
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    return app


async def _measured(call: Any) -> tuple[float, float, float]:
    """(wall ms of `call`, longest wall gap ms, longest loop-thread CPU step ms) while `call` runs."""
    steps: list[tuple[float, float]] = []
    done = asyncio.Event()

    async def tick() -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        while not done.is_set():
            await asyncio.sleep(0)
            now_wall, now_cpu = time.perf_counter(), time.thread_time()
            steps.append((now_wall - wall, now_cpu - cpu))
            wall, cpu = now_wall, now_cpu

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    try:
        await call
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        await ticker
    return (round(elapsed * 1000, 1), round(max(s[0] for s in steps) * 1000, 1),
            round(max(s[1] for s in steps) * 1000, 1))


async def main(nodes: int, scrapes: int, on_loop: bool) -> dict[str, Any]:
    started = time.perf_counter()
    index, claim = _index(nodes, claims=nodes * 4)
    _say(f"fleet index of {nodes} nodes built in {time.perf_counter() - started:.1f} s")
    registry = CollectorRegistry()
    ExtenderMetrics(registry)
    fleet_metrics.register(registry, index)
    text = generate_latest(registry)  # builds the families of this revision, as the first scrape would
    released = {**claim, "status": {}}
    figures: dict[str, Any] = {"handler": "on the loop (before)" if on_loop else "metrics thread", "nodes": nodes,
                               "series": text.count(b"\n") - 2 * text.count(b"# HELP"), "bytes": len(text),
                               "load_average_1m": round(os.getloadavg()[0], 2)}
    # as the servers run (gpuclaim/serving/run.py): the loop waits at most this long for a thread holding the GIL
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    gc.disable()
    try:
        costs = []
        for _ in range(3):
            begin = time.perf_counter()
            generate_latest(registry)
            costs.append((time.perf_counter() - begin) * 1000)
        figures["generate_latest_ms"] = round(min(costs), 1)
        client = TestClient(TestServer(_metrics_app(registry, on_loop)))
        await client.start_server()
        try:
            # unchanged: the families of the revision are reused; changed: one claim released or taken again
            # before each scrape, so the scrape rebuilds the families (a busy cluster's usual case)
            for case in ("unchanged", "changed"):
                runs = []
                for k in range(scrapes):
                    if case == "changed":
                        index.on_event("ResourceClaim", "MODIFIED", released if k % 2 == 0 else claim)

                    async def scrape() -> None:
                        reply = await client.get("/metrics", headers={"Accept": PROMETHEUS_ACCEPT,
                                                                       "Accept-Encoding": "gzip"})
                        assert reply.status == 200, reply.status
                        await reply.read()

                    runs.append(await _measured(scrape()))
                figures[case] = {"scrape_ms": [r[0] for r in runs], "longest_gap_ms": [r[1] for r in runs],
                                 "longest_step_cpu_ms": [r[2] for r in runs]}
                _say(f"{case}: {figures[case]}")
        finally:
            await client.close()
    finally:
        gc.enable()
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.metrics_scrape", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=_positive, default=5000, help="nodes of 8 GPUs in the fleet (default 5000)")
    parser.add_argument("--scrapes", type=_positive, default=5, help="scrapes measured (default 5)")
    parser.add_argument("--on-loop", action="store_true",
                        help="serve /metrics with prometheus_client's handler, on the event loop, as before")
    args = parser.parse_args()
    print(orjson.dumps(asyncio.run(main(args.nodes, args.scrapes, args.on_loop))).decode())
