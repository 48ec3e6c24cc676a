"""The extender's aiohttp applications: the scheduler-facing one and the metrics one (separate port).

``create_app`` is the only place routes are wired; tests drive it through ``aiohttp_client`` exactly as
production serves it. ``run`` owns the process: cluster cache, both sites, TLS with hot reload, shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from gpuclaim.dra.config import Config, ExtenderConfig, split_listen

from . import handlers, keys
from .metrics import ExtenderMetrics
from .predict import ClusterView
from .readiness import Readiness

if TYPE_CHECKING:
    from gpuclaim.kube.cache import ClusterCache as ClusterCacheLike

    from .view import LiveView as LiveViewLike

log = logging.getLogger(__name__)
# kube-scheduler sends full NodeLists when nodeCacheCapable is false: thousands of Nodes are tens of MB
MAX_BODY_BYTES = 64 * 1024 * 1024


def create_app(*, config: ExtenderConfig, view: ClusterView, registry: CollectorRegistry,
               readiness: Readiness | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> web.Application:
    app = web.Application(client_max_size=max_body_bytes)
    app[keys.CONFIG] = config
    app[keys.VIEW] = view
    app[keys.METRICS] = ExtenderMetrics(registry)
    app[keys.READINESS] = readiness or Readiness()
    app.router.add_post("/prioritize", handlers.prioritize)
    app.router.add_post("/filter", handlers.filter_nodes)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    return app


def create_metrics_app(registry: CollectorRegistry) -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    return app


async def _keep_warm(cache: ClusterCacheLike, view: LiveViewLike) -> None:
    """After the first sync and after every cluster-wide invalidation, rebuild all node states ahead of time."""
    from gpuclaim.dra import cel

    await cache.wait_synced(None)
    cel.compile_selector("device.driver == ''", mode="stored")  # builds the CEL parser (about a second) now
    while True:
        if view.needs_warm:
            started = asyncio.get_running_loop().time()
            built = await view.prewarm()
            # the cluster view is long-lived: keep the cycle collector from rescanning it (pauses of 10+ ms)
            gc.freeze()
            log.info("built %d node states in %.2fs", built, asyncio.get_running_loop().time() - started)
        await asyncio.sleep(1.0)


async def run(config: Config, *, listen: str, metrics_listen: str, kubeconfig: str | None,
              tls_cert: Path | None, tls_key: Path | None) -> None:
    """Serve until SIGTERM/SIGINT. Raises KubeConfigError / OSError / ssl errors at start, before serving."""
    from gpuclaim.certs.files import reloading_server_context
    from gpuclaim.kube import config as kube_config
    from gpuclaim.kube.cache import ClusterCache
    from gpuclaim.kube.client import KubeClient

    from .view import LiveView, extender_specs

    ext = config.extender
    api = kube_config.load(kubeconfig)
    registry = CollectorRegistry()
    client = KubeClient(api, timeout=config.cluster.api_timeout_seconds)
    cache = ClusterCache(client, registry=registry, specs=extender_specs(config),
                         backoff_initial=config.cluster.backoff.initial_seconds,
                         backoff_cap=config.cluster.backoff.cap_seconds)  # fmt: skip
    view = LiveView(cache, config)
    readiness = Readiness([("cluster", view.ready),
                           ("nodes", lambda: (view.warmed, "node states built" if view.warmed else "warming up"))])
    reloader = None
    if tls_cert is not None and tls_key is not None:
        reloader = reloading_server_context(cert_file=tls_cert, key_file=tls_key, min_version=ext.tls.min_version,
                                            interval=config.certs.reload_interval_seconds)  # fmt: skip
        readiness.add("certificate", lambda: (reloader.loaded, "loaded" if reloader.loaded else "not loaded"))
    app = create_app(config=ext, view=view, registry=registry, readiness=readiness)

    async def cache_ctx(_app: web.Application) -> AsyncIterator[None]:
        await cache.start()
        try:
            yield
        finally:
            await cache.stop()
            await client.close()

    async def warm_ctx(_app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_keep_warm(cache, view), name="gpuclaim-extender-warm")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.cleanup_ctx.append(cache_ctx)
    app.cleanup_ctx.append(warm_ctx)
    if reloader is not None:
        app.cleanup_ctx.append(reloader.cleanup_ctx)
    # no access log: a line per scheduler call costs more than answering a pod without claims
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    metrics_runner = web.AppRunner(create_metrics_app(registry), handle_signals=False, access_log=None)
    await runner.setup()
    await metrics_runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        host, port = split_listen(listen)
        await web.TCPSite(runner, host, port, ssl_context=reloader.context if reloader else None).start()
        mhost, mport = split_listen(metrics_listen)
        await web.TCPSite(metrics_runner, mhost, mport).start()
        log.info("extender serving %s on %s, metrics on %s", "https" if reloader else "http", listen, metrics_listen)
        await stop.wait()
    finally:
        await runner.cleanup()
        await metrics_runner.cleanup()
