"""The one serving routine of both servers: `install` on the app (the factories call it), then `serve`.

`serve` runs the app's site (TLS when given a context) and the metrics site until SIGTERM/SIGINT or `stop`, then:
/readyz turns 503 (`stopping`), the sites stop accepting, in-flight requests get `grace_period` seconds to finish,
what is left is cancelled, idle keep-alive connections are closed and the app's cleanup contexts run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.dra.config import ConnectionTimeouts, split_listen
from gpuclaim.serving import bodies, collector
from gpuclaim.serving.connections import BOUNDS, BoundedSite, Bounds
from gpuclaim.serving.metrics import ConnectionMetrics, create_metrics_app
from gpuclaim.tasks import running

log = logging.getLogger("gpuclaim.serving")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class Lifecycle:
    """Whether SIGTERM came, and the requests being answered (what the grace period waits for)."""

    stopping: bool = False
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)


LIFECYCLE = web.AppKey("gpuclaim.serving.lifecycle", Lifecycle)
#: GET routes of the main app served on the metrics site too (its /readyz when the main site needs client certs)
METRICS_ROUTES: web.AppKey[tuple[tuple[str, Handler], ...]] = web.AppKey("gpuclaim.serving.metrics_routes")

# asyncio's SSLProtocol gives every TLS connection a 256 KiB read buffer up front: 1,500 idle connections held
# 420 MB (measured). A TLS record is at most 16 KiB, so 32 KiB reads lose nothing but take 8 times less memory.
# The setting is process-wide (asyncio has no per-server knob); the servers' own clients are unaffected in kind.
TLS_READ_BUFFER = 32 * 1024


def _small_tls_read_buffers() -> None:
    from asyncio import sslproto

    if getattr(sslproto.SSLProtocol, "max_size", 0) > TLS_READ_BUFFER:
        sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


# How long a worker thread may keep the GIL while the event loop waits for it (CPython's default: 5 ms). Each time
# the loop comes back from select() with a worker busy (a big body decoded or converted, big selectors compiled:
# both run in worker threads so that they do not stall the loop), it waits up to this long, several times per
# request. Measured in `python -m e2e.bench hostile` on 2 cores shared with other work, four back-to-back pairs:
# the ordinary admissions' p99 while 250 big pods were sent went from 10.2-20.5 ms to 8.1-11.7 ms.
# A shorter interval only costs when two threads want the GIL, never on the usual path (the loop alone).
SWITCH_INTERVAL_SECONDS = 0.0005


def bounds_of(timeouts: ConnectionTimeouts, *, max_connections: int, max_connections_per_source: int) -> Bounds:
    return Bounds(handshake_seconds=timeouts.handshake_seconds, header_seconds=timeouts.header_seconds,
                  body_seconds=timeouts.body_seconds, idle_seconds=timeouts.idle_seconds,
                  write_seconds=timeouts.write_seconds, max_connections=max_connections,
                  max_connections_per_source=max_connections_per_source)


@web.middleware
async def _track(request: web.Request, handler: Handler) -> web.StreamResponse:
    in_flight = request.app[LIFECYCLE].in_flight
    task = asyncio.current_task()
    if task is not None:
        in_flight.add(task)
    try:
        return await handler(request)
    finally:
        if task is not None:
            in_flight.discard(task)


def install(app: web.Application, *, timeouts: ConnectionTimeouts, max_connections: int,
            max_connections_per_source: int, max_buffered_body_bytes: int) -> None:
    """Make `app` servable by `serve`: the lifecycle state, in-flight tracking (outermost middleware), the body
    budget (next: a refused request never reaches the app's own middlewares) and the connection bounds
    (`connections.read_body` reads the body bound from the app; `serve` the others)."""
    app[LIFECYCLE] = Lifecycle()
    app[BOUNDS] = bounds_of(timeouts, max_connections=max_connections,
                            max_connections_per_source=max_connections_per_source)
    app[bodies.BODY_BUDGET] = bodies.BodyBudget(max_buffered_body_bytes)
    app.middlewares.insert(0, bodies.middleware)
    app.middlewares.insert(0, _track)


def stopping(app: web.Application) -> bool:
    """For /readyz: True from the moment shutdown begins."""
    return app[LIFECYCLE].stopping


async def serve(app: web.Application, *, listen: str, metrics_listen: str | None, registry: CollectorRegistry,
                ssl_context: ssl.SSLContext | None, grace_period: float,
                on_started: Callable[[list[str]], None] | None = None, stop: asyncio.Event | None = None) -> None:
    """Serve `app` (prepared by `install`) until SIGTERM/SIGINT or `stop`; OSError when an address is taken."""
    bounds = app[BOUNDS]
    lifecycle = app[LIFECYCLE]
    _small_tls_read_buffers()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on the main thread / platform
            loop.add_signal_handler(sig, stop.set)
    # aiohttp's own shutdown waits up to its timeout twice (for the handler, then after cancelling the request);
    # the grace period is kept here instead, so the process exits within it. No access log: a line per call
    # costs more than answering a pod without claims; the servers log what matters themselves.
    # lingering_time: after an early answer (408, 413) aiohttp keeps reading what the client still sends, so the
    # client can read the answer instead of a reset; bounded like the body itself
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.25,
                           keepalive_timeout=bounds.idle_seconds, lingering_time=min(10.0, bounds.body_seconds))
    metrics_runner = None
    await runner.setup()
    switch_interval = sys.getswitchinterval()
    try:
        sys.setswitchinterval(min(switch_interval, SWITCH_INTERVAL_SECONDS))  # process-wide: restored on the way out
        connection_metrics = ConnectionMetrics(registry)
        budget = app[bodies.BODY_BUDGET]
        budget.on_refused = lambda scope: connection_metrics.bodies_refused.labels(scope=scope).inc()
        connection_metrics.body_bytes.set_function(lambda: budget.held)
        host, port = split_listen(listen)
        site = BoundedSite(runner, host, port, bounds=bounds, ssl_context=ssl_context,
                           on_refused=connection_metrics.refusal_counter("main"))
        connection_metrics.open.labels(site="main").set_function(lambda: site.gate.open)
        await site.start()
        urls = [site.url()]
        if metrics_listen is not None:
            also: tuple[tuple[str, Handler], ...] = app.get(METRICS_ROUTES, ())
            metrics_runner = web.AppRunner(create_metrics_app(registry, also), handle_signals=False, access_log=None,
                                           shutdown_timeout=1.0, keepalive_timeout=bounds.idle_seconds)
            await metrics_runner.setup()
            m_host, m_port = split_listen(metrics_listen)
            metrics_site = BoundedSite(metrics_runner, m_host, m_port, bounds=bounds,
                                       on_refused=connection_metrics.refusal_counter("metrics"))
            connection_metrics.open.labels(site="metrics").set_function(lambda: metrics_site.gate.open)
            await metrics_site.start()
            urls.append(metrics_site.url())
        # start-up objects (modules, CEL grammar, config) live as long as the process: keep the cycle collector
        # from scanning them again (a full collection over them paused the loop 18-41 ms, measured)
        gc.freeze()
        log.info("serving", extra={"urls": urls})
        if on_started is not None:
            on_started(urls)
        watch = collector.CollectorWatch(registry, idle=lambda: not lifecycle.in_flight)
        async with running(watch.run(), "gpuclaim-gc-watch"):
            await stop.wait()
        log.info("stopping: no new connections, in-flight requests get the grace period",
                 extra={"grace_period_s": grace_period})
        lifecycle.stopping = True
        for running_site in list(runner.sites):
            await running_site.stop()  # no new connections; open ones finish their request
        pending = set(lifecycle.in_flight)
        if pending:
            _done, pending = await asyncio.wait(pending, timeout=grace_period)
        for task in pending:
            log.warning("cancelling a request still running at the end of the grace period")
            task.cancel()
    finally:
        # AppRunner.cleanup: stop the sites, close idle keep-alive connections, wait up to shutdown_timeout
        # for running handlers, cancel the rest, then the app's cleanup contexts
        await runner.cleanup()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        sys.setswitchinterval(switch_interval)
    log.info("stopped")
