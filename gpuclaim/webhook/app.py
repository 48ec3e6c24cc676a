"""The webhook's aiohttp apps and how they run: `create_app` (TLS: /mutate, /validate, /healthz, /readyz),
`create_metrics_app` (plain HTTP: /metrics) and `serve` (both sites, SIGTERM, grace period).

`create_app` is the only place that wires routes and resources; tests and production use it alike. Every
resource with a lifetime is a single-yield `cleanup_ctx`: the certificate reloader's poll task and the cluster
view (list+watch), which starts only when a kube ApiConfig is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from gpuclaim.certs.files import CertReloader
from gpuclaim.dra.config import Config, split_listen
from gpuclaim.webhook import admit, handlers, keys
from gpuclaim.webhook.metrics import WebhookMetrics

log = logging.getLogger("gpuclaim.webhook")


def _version() -> str:
    try:
        return metadata.version("gpuclaim")
    except metadata.PackageNotFoundError:
        return "unknown"


async def _freeze_when_synced(cache: Any) -> None:
    """Once the cluster view holds the cluster, move everything alive into the GC's permanent generation: a full
    collection over those long-lived objects stopped the event loop for 18-41 ms (measured), several times the
    p99 budget of an admission; after gc.freeze() the pause seen under load was 2.5 ms."""
    await cache.wait_synced(None)
    gc.freeze()


async def _cluster_view(app: web.Application) -> AsyncIterator[None]:
    """List+watch the cluster while the app runs; requests are served from the first moment (readiness waits)."""
    api = app[keys.KUBE]
    if api is None:
        yield
        return
    from gpuclaim.kube.cache import ClusterCache  # the kubernetes client costs import time: only with a cluster
    from gpuclaim.kube.client import KubeClient

    state = app[keys.STATE]
    config = state.context.config
    client = KubeClient(api, timeout=config.cluster.api_timeout_seconds)
    cache = ClusterCache(client, registry=app[keys.REGISTRY], backoff_initial=config.cluster.backoff.initial_seconds,
                         backoff_cap=config.cluster.backoff.cap_seconds)
    await cache.start()
    state.context = admit.Context(config=config, cluster=cache, client=client)
    freezer = asyncio.create_task(_freeze_when_synced(cache), name="gpuclaim-webhook-gc-freeze")
    try:
        yield
    finally:
        freezer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await freezer
        state.context = admit.Context(config=config)
        await cache.stop()
        await client.close()


async def _garbage_collection(app: web.Application) -> AsyncIterator[None]:
    """Delete idle templates and sharing-group claims the webhook made (kube/garbage.py), on the replica holding
    the Lease. Runs only with a cluster, with `gc.enabled`, and when the namespace for the Lease is known."""
    state = app[keys.STATE]
    config = state.context.config
    if state.context.client is None or not config.gc.enabled:
        yield
        return
    namespace = app[keys.NAMESPACE]
    if not namespace:
        log.warning("garbage collection is off: no namespace for its Lease (set POD_NAMESPACE or gc.leaseNamespace)")
        yield
        return
    from gpuclaim.kube import garbage, leader

    gc_config = config.gc
    elector = leader.LeaderElector(
        state.context.client, namespace=namespace, name=gc_config.lease_name, identity=leader.default_identity(),
        timing=leader.Timing(lease_duration=gc_config.lease_duration_seconds,
                             renew_deadline=gc_config.renew_deadline_seconds,
                             retry_period=gc_config.retry_period_seconds))
    collector = garbage.GarbageCollector(
        state.context.client, state.context.cluster, registry=app[keys.REGISTRY], idle_seconds=gc_config.idle_seconds,
        sharing_annotation=config.conversion.sharing.annotation, dry_run=gc_config.dry_run,
        max_deletes_per_second=gc_config.max_deletes_per_second)
    state.gc = collector
    cache = state.context.cluster
    task = asyncio.create_task(garbage.run(collector, elector, interval=gc_config.interval_seconds,
                                           synced=lambda: cache.wait_synced(None)), name="gpuclaim-webhook-gc")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        state.gc = None


def create_app(config: Config, *, checks: admit.Checks, reloader: CertReloader | None = None,
               kube_config: Any = None, registry: CollectorRegistry | None = None,
               time_limit: float = admit.DEFAULT_TIME_LIMIT, namespace: str | None = None) -> web.Application:
    """The admission app. `reloader` is the TLS certificate's (its poll task runs with the app; /readyz and the
    expiry metric read it); `kube_config` a `kube.ApiConfig` for the cluster view, or None to run without one;
    `namespace` the webhook's own (POD_NAMESPACE), where the garbage collector's Lease lives."""
    # the body limit is the app's: aiohttp answers a larger body with 413 before we parse anything
    app = web.Application(client_max_size=config.webhook.max_body_bytes, middlewares=[handlers.guard])
    registry = registry if registry is not None else CollectorRegistry()
    metrics = WebhookMetrics(registry, version=_version())
    if reloader is not None:
        metrics.watch_cert_expiry(reloader.expiry_timestamp)
        app.cleanup_ctx.append(reloader.cleanup_ctx)
        if config.webhook.client_auth.ca_file:
            # optional, not required at the handshake: kubelet's HTTPS probes carry no certificate; the
            # admission handlers refuse a call without a verified one (handlers.client_refusal)
            reloader.context.verify_mode = ssl.CERT_OPTIONAL
            reloader.context.load_verify_locations(cafile=config.webhook.client_auth.ca_file)
    app[keys.CONFIG] = config
    app[keys.REGISTRY] = registry
    app[keys.METRICS] = metrics
    app[keys.CHECKS] = checks
    app[keys.RELOADER] = reloader
    app[keys.KUBE] = kube_config
    app[keys.TIME_LIMIT] = time_limit
    app[keys.NAMESPACE] = config.gc.lease_namespace or namespace
    app[keys.STATE] = keys.State(context=admit.Context(config=config))
    app.cleanup_ctx.append(_cluster_view)
    app.cleanup_ctx.append(_garbage_collection)  # after the view: it reads it, and stops before it
    app.router.add_post("/mutate", handlers.mutate)
    app.router.add_post("/validate", handlers.validate)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    return app


def create_metrics_app(registry: CollectorRegistry) -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    return app


async def serve(app: web.Application, *, listen: str, metrics_listen: str | None, grace_period: float,
                on_started: Callable[[list[str]], None] | None = None,
                stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or `stop`): then stop accepting, let in-flight requests finish within
    `grace_period` seconds, cancel what is left, close idle keep-alive connections, run the cleanup contexts."""
    reloader = app[keys.RELOADER]
    ssl_context = reloader.context if reloader is not None else None
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on the main thread / platform
            loop.add_signal_handler(sig, stop.set)
    # aiohttp's own shutdown waits up to its timeout twice (for the handler, then after cancelling the request);
    # the grace period is kept here instead, so the process exits within it
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.25)
    metrics_runner = None
    await runner.setup()
    try:
        host, port = split_listen(listen)
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context, backlog=1024)
        await site.start()
        urls = [_bound(site, "https" if ssl_context else "http")]
        if metrics_listen is not None:
            metrics_runner = web.AppRunner(create_metrics_app(app[keys.REGISTRY]), handle_signals=False,
                                           access_log=None, shutdown_timeout=1.0)
            await metrics_runner.setup()
            m_host, m_port = split_listen(metrics_listen)
            metrics_site = web.TCPSite(metrics_runner, m_host, m_port)
            await metrics_site.start()
            urls.append(_bound(metrics_site, "http"))
        gc.freeze()  # start-up objects (modules, CEL grammar, config) live as long as the process; see above
        log.info("serving", extra={"urls": urls})
        if on_started is not None:
            on_started(urls)
        await stop.wait()
        log.info("stopping: no new connections, in-flight requests get the grace period",
                 extra={"grace_period_s": grace_period})
        state = app[keys.STATE]
        state.stopping = True
        for running_site in list(runner.sites):
            await running_site.stop()  # no new connections; open ones finish their request
        pending = set(state.in_flight)
        if pending:
            _done, pending = await asyncio.wait(pending, timeout=grace_period)
        for task in pending:
            log.warning("cancelling a request still running at the end of the grace period")
            task.cancel()
    finally:
        # AppRunner.cleanup: stop the sites, close idle keep-alive connections, wait up to shutdown_timeout
        # for running handlers, cancel the rest, then the cleanup contexts (reloader, cluster view)
        await runner.cleanup()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    log.info("stopped")


def _bound(site: web.TCPSite, scheme: str) -> str:
    server = site._server  # aiohttp exposes the bound port only here (port 0 = pick one)
    assert server is not None and isinstance(server, asyncio.Server) and server.sockets
    host, port = server.sockets[0].getsockname()[:2]
    return f"{scheme}://{host}:{port}"
