"""The /metrics app (plain HTTP, its own port) and the series every gpuclaim server exports.

The exposition is formatted in a worker thread the metrics app owns, not on the event loop: at 5,000 nodes the
fleet families (gpuclaim/fleet/metrics.py) took one scrape about 0.4 s, and every /prioritize and probe of the loop
waited for it. Its own thread, not the big-body worker of `offload`: a flood of big bodies queued there would make
scrapes time out exactly when they matter, and a scrape would hold the flood's bodies back. Scrapes that ask for
the same exposition while one is being formatted share it, and at most `MAX_FORMATS` different ones are formatted or
waiting at once (past that: 503), so no client can queue work in the thread faster than it is done.

generate_latest reads the registry in that thread, so every collector must be thread-safe. prometheus_client's own
metrics are (a lock each); a collector or gauge function that reads state the event loop owns and changes (the
cluster cache, the fleet index, plain counts) reads it through `on_loop`, which runs the read on the loop that
serves the scrape and hands the thread what it returned: the read costs the loop its length, the formatting never.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import gzip
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import TypeVar

from aiohttp import hdrs, web
from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")
log = logging.getLogger("gpuclaim.serving")

#: different expositions (format, compression, `name[]` selection) formatted or waiting at once; a scrape past it
#: is answered 503. Prometheus asks for one; a second scraper or a person with curl is a second.
MAX_FORMATS = 4
#: how long the metrics thread waits for the event loop to run one `on_loop` read (the loop answers each request
#: in milliseconds; past this it is stuck, and the scrape is answered 503 naming the timeout)
ON_LOOP_SECONDS = 5.0

# the loop serving the scrape whose exposition this thread is formatting: set in the copy of the handler's context
# the thread runs in, so `on_loop` finds it without any process-wide state
_SCRAPE_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "gpuclaim_scrape_loop", default=None)


def version() -> str:
    try:
        return metadata.version("gpuclaim")
    except metadata.PackageNotFoundError:
        return "unknown"


def on_loop(read: Callable[[], T]) -> T:
    """`read()` on the event loop that serves the scrape being formatted, when called from the metrics thread;
    directly otherwise (on the loop itself, or outside any scrape: a test calling generate_latest). For a collector
    or gauge function over state the loop changes. TimeoutError when the loop did not run it within
    `ON_LOOP_SECONDS`."""
    loop = _SCRAPE_LOOP.get()
    if loop is None or loop.is_closed() or _running_loop() is loop:
        return read()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            done.set_result(read())
        except BaseException as exc:  # handed to the thread, which raises it in the collector
            done.set_exception(exc)

    loop.call_soon_threadsafe(run)
    try:
        return done.result(timeout=ON_LOOP_SECONDS)
    except concurrent.futures.TimeoutError:
        done.cancel()
        raise TimeoutError(f"the event loop did not run a metrics read within {ON_LOOP_SECONDS} s") from None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _healthz(_request: web.Request) -> web.Response:
    """The process is alive and its event loop answers, on the metrics port: it keeps answering while the main
    site is at its connection limit (each site counts its own connections)."""
    return web.Response(text="ok\n")


@dataclass(frozen=True, slots=True)
class _Exposition:
    """What one scrape asks for; scrapes asking for the same one share its formatting."""

    content_type: str  # the format and its version and escaping (prometheus_client's choose_encoder)
    gzip: bool
    names: tuple[str, ...] | None  # `name[]`: only these families


@dataclass(slots=True)
class Formatter:
    """The metrics app's worker thread and the expositions it is formatting (`serve`)."""

    registry: CollectorRegistry
    executor: concurrent.futures.ThreadPoolExecutor | None = None
    pending: dict[_Exposition, asyncio.Future[bytes]] = field(default_factory=dict)

    async def cleanup_ctx(self, _app: web.Application) -> AsyncIterator[None]:
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuclaim-metrics")
        try:
            yield
        finally:
            # a read waiting for the loop gives up after ON_LOOP_SECONDS; nothing else in the thread needs the loop
            self.executor.shutdown(wait=False, cancel_futures=True)

    async def serve(self, request: web.Request) -> web.Response:
        accept = ",".join(request.headers.getall(hdrs.ACCEPT, []))
        try:
            encoder, content_type = choose_encoder(accept)
        except (TypeError, ValueError):  # prometheus_client compares a version like "1.x" with numbers
            return web.Response(status=406, text=f"Accept: {accept[:200]!r}: an exposition format's version must "
                                "be numbers and dots (version=1.0.0)\n")
        names = request.query.getall("name[]", None)
        wanted = _Exposition(content_type=content_type,
                             gzip=gzip_accepted(",".join(request.headers.getall(hdrs.ACCEPT_ENCODING, []))),
                             names=tuple(sorted(set(names))) if names is not None else None)
        future = self.pending.get(wanted)
        if future is None:
            if len(self.pending) >= MAX_FORMATS:
                return web.Response(status=503, headers={"Retry-After": "1"},
                                    text=f"{MAX_FORMATS} different expositions are being formatted; ask again\n")
            future = asyncio.ensure_future(self._format(encoder, wanted))
            self.pending[wanted] = future
            future.add_done_callback(functools.partial(self._done, wanted))
        try:
            # shielded: a scraper that hangs up does not cancel the formatting the others wait for
            body = await asyncio.shield(future)
        except Exception as exc:
            return web.Response(status=503, text=f"the metrics could not be formatted: {exc}\n")
        response = web.Response(body=body, headers={hdrs.CONTENT_TYPE: content_type})
        if wanted.gzip:
            response.headers[hdrs.CONTENT_ENCODING] = "gzip"
        return response

    def _done(self, wanted: _Exposition, future: asyncio.Future[bytes]) -> None:
        self.pending.pop(wanted, None)
        if not future.cancelled() and future.exception() is not None:  # read here too: its scrapers may be gone
            log.error("formatting the metrics failed", exc_info=future.exception())

    async def _format(self, encoder: Callable[[Collector], bytes], wanted: _Exposition) -> bytes:
        if self.executor is None:
            raise RuntimeError("the metrics app is not running (Formatter.cleanup_ctx)")
        loop = asyncio.get_running_loop()
        token = _SCRAPE_LOOP.set(loop)
        try:
            context = contextvars.copy_context()
        finally:
            _SCRAPE_LOOP.reset(token)
        return await loop.run_in_executor(self.executor, context.run, _exposition, encoder, self.registry, wanted)


def _exposition(encoder: Callable[[Collector], bytes], registry: CollectorRegistry,
                wanted: _Exposition) -> bytes:
    """In the metrics thread: the exposition's body (gzipped when asked)."""
    source = registry.restricted_registry(wanted.names) if wanted.names is not None else registry
    body = encoder(source)
    return gzip.compress(body) if wanted.gzip else body


def create_metrics_app(registry: CollectorRegistry,
                       routes: Sequence[tuple[str, Handler]] = ()) -> web.Application:
    """/metrics (formatted in the app's own thread), /healthz and the main app's `routes` (GET): a main site behind
    mutual TLS serves kubelet's probes here, since kubelet presents no client certificate."""
    app = web.Application()
    formatter = Formatter(registry)
    app.cleanup_ctx.append(formatter.cleanup_ctx)
    app.router.add_get("/metrics", formatter.serve)
    app.router.add_get("/healthz", _healthz)
    for path, handler in routes:
        app.router.add_get(path, handler)
    return app


class ConnectionMetrics:
    """`gpuclaim_connections_open{site}` and `gpuclaim_connections_refused_total{site,bound}`, site `main` (the
    TLS port) or `metrics`: the connections each listening site holds, and those it closed at accept, bound
    `site` (it held `maxConnections` already) or `source` (their source held `maxConnectionsPerSource`).
    `gpuclaim_request_body_bytes` and `gpuclaim_request_bodies_refused_total{scope}`: the bytes of request
    bodies and answers held (`maxBufferedBodyBytes`), and the requests refused for it (429 `source`, 503
    `server`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.open = Gauge("gpuclaim_connections_open", "connections open on a listening site", ["site"],
                          registry=registry)
        self.refused = Counter("gpuclaim_connections_refused_total",
                               "connections closed as they were accepted: the site held maxConnections already "
                               "(bound=site) or their source maxConnectionsPerSource (bound=source)",
                               ["site", "bound"], registry=registry)
        for site in ("main", "metrics"):
            for bound in ("site", "source"):
                self.refused.labels(site=site, bound=bound)
        self.body_bytes = Gauge("gpuclaim_request_body_bytes",
                                "request bodies (declared sizes) and answers being written, charged to "
                                "maxBufferedBodyBytes",
                                registry=registry)
        self.bodies_refused = Counter("gpuclaim_request_bodies_refused_total",
                                      "requests refused for maxBufferedBodyBytes: scope=source answered 429, "
                                      "scope=server 503", ["scope"], registry=registry)
        for scope in ("source", "server"):
            self.bodies_refused.labels(scope=scope)

    def refusal_counter(self, site: str) -> Callable[[str], None]:
        return lambda bound: self.refused.labels(site=site, bound=bound).inc()


def register_server_metrics(registry: CollectorRegistry, *, component: str,
                            cert_expiry: Callable[[], float] | None) -> None:
    """`gpuclaim_build_info{version,component}` and `gpuclaim_certs_expiry_timestamp_seconds` (the serving
    certificate's notAfter; 0 before one is loaded, and while the server serves plain HTTP)."""
    Info("gpuclaim_build", "gpuclaim build", registry=registry).info({"version": version(), "component": component})
    expiry = Gauge("gpuclaim_certs_expiry_timestamp_seconds",
                   "notAfter of the serving certificate, Unix seconds (0 before it is loaded)", registry=registry)
    if cert_expiry is not None:
        expiry.set_function(cert_expiry)
