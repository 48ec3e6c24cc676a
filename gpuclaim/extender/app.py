"""The extender's aiohttp app: ``create_app`` (POST /prioritize, POST /filter, /healthz, /readyz).

``create_app`` is the only place routes and resources are wired; tests drive it through ``aiohttp_client`` exactly
as production serves it. Given a kube ``ApiConfig`` it owns the cluster cache and the node-state warm-up as
single-yield ``cleanup_ctx`` generators (as the webhook's app owns its cluster view); given a ready ``view``
(an offline inventory, a test fleet) it serves that. gpuclaim.serving runs it (sites, TLS, shutdown, /metrics).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.certs.files import CertReloader
from gpuclaim.dra.config import Config
from gpuclaim.serving import clientauth, connections
from gpuclaim.serving import metrics as serving_metrics
from gpuclaim.serving import run as serving
from gpuclaim.tasks import running

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


def create_app(config: Config, *, api: Any = None, view: ClusterView | None = None,
               registry: CollectorRegistry | None = None, readiness: Readiness | None = None,
               reloader: CertReloader | None = None, max_body_bytes: int = MAX_BODY_BYTES,
               fleet_listen: str | None = None, fleet_reloader: CertReloader | None = None) -> web.Application:
    """The extender app. `api`: a kube ApiConfig to watch the cluster with (the app starts and stops the cache and
    the warm-up task); else `view` is the cluster view to answer from. `reloader`: the serving certificate's.
    `fleet_listen`: also serve the fleet view (gpuclaim/fleet/api.py) there, from the same cache (needs `api`), with
    `fleet_reloader`'s context: the serving certificate in a context of its own, because browsers have no client
    certificate while the scheduler-facing port may require one."""
    if (api is None) == (view is None):
        raise ValueError("create_app: give exactly one of api (watch the cluster) or view (a ready view)")
    app = web.Application(client_max_size=max_body_bytes)
    registry = registry if registry is not None else CollectorRegistry()
    serving.install(app, timeouts=config.extender.timeouts, max_connections=config.extender.max_connections,
                    max_connections_per_source=config.extender.max_connections_per_source,
                    max_buffered_body_bytes=config.extender.max_buffered_body_bytes)
    # only kube-scheduler's certificate opens the TLS port (issue 22); kubelet's probes ask the metrics port
    clientauth.install(app, config.extender.client_auth, reloader, section="extender")
    serving_metrics.register_server_metrics(registry, component="extender",
                                            cert_expiry=reloader.expiry_timestamp if reloader else None)
    readiness = readiness or Readiness()
    app[keys.MIXED] = None
    if api is not None:
        view = _watch_cluster(app, config, api, registry, readiness, fleet_listen=fleet_listen,
                              ssl_context=fleet_reloader.context if fleet_reloader is not None else None)
        if fleet_reloader is not None:
            app.cleanup_ctx.append(fleet_reloader.cleanup_ctx)
    assert view is not None
    if reloader is not None:
        readiness.add("certificate", lambda: (reloader.loaded, "loaded" if reloader.loaded else "not loaded"))
        app.cleanup_ctx.append(reloader.cleanup_ctx)
    readiness.add("shutdown", lambda: (False, "stopping: finishing in-flight requests") if serving.stopping(app)
                  else (True, "serving"))
    app[serving.METRICS_ROUTES] = (("/readyz", handlers.readyz_of(readiness)),)
    app[keys.CONFIG] = config.extender
    app[keys.VIEW] = view
    app[keys.METRICS] = ExtenderMetrics(registry)
    app[keys.READINESS] = readiness
    app[keys.REGISTRY] = registry
    app[keys.LONG_CALLS] = asyncio.Lock()
    app[keys.BIG_READS] = connections.SourceSlots(handlers.BIG_READS_PER_SOURCE)
    app.router.add_post("/prioritize", handlers.prioritize, expect_handler=handlers.expect_continue)
    app.router.add_post("/filter", handlers.filter_nodes, expect_handler=handlers.expect_continue)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    return app


def _watch_cluster(app: web.Application, config: Config, api: Any, registry: CollectorRegistry,
                   readiness: Readiness, *, fleet_listen: str | None = None,
                   ssl_context: ssl.SSLContext | None = None) -> ClusterView:
    """The live view over a cluster cache; the cache and the warm-up run while the app runs."""
    from gpuclaim.kube.cache import ClusterCache  # the kubernetes client costs import time: only with a cluster
    from gpuclaim.kube.client import KubeClient
    from gpuclaim.kube.version import ClusterVersion

    from .view import LiveView, extender_specs

    client = KubeClient(api, timeout=config.cluster.api_timeout_seconds)
    # cache.version.model: the Kubernetes version the cluster runs, followed across upgrades
    cache = ClusterCache(client, registry=registry, specs=extender_specs(config),
                         backoff_initial=config.cluster.backoff.initial_seconds,
                         backoff_cap=config.cluster.backoff.cap_seconds, backoff_factor=config.cluster.backoff.factor,
                         backoff_jitter=config.cluster.backoff.jitter,
                         version=ClusterVersion(config.kubernetes, registry=registry))  # fmt: skip
    view = LiveView(cache, config)
    from gpuclaim.kube.mixed import MixedNodes

    app[keys.MIXED] = MixedNodes(cache, config.conversion, policy=config.mixed_nodes)
    app[keys.MIXED].register(registry)
    if fleet_listen is not None:
        from gpuclaim.fleet import metrics as fleet_metrics
        from gpuclaim.fleet import serve as fleet_serve

        index = fleet_serve.attach(app, config, cache=cache, client=client, listen=fleet_listen,
                                   ssl_context=ssl_context)
        fleet_metrics.register(registry, index)  # gpuclaim_fleet_* on the metrics port, from the same index
    readiness.add("cluster", view.ready)
    readiness.add("nodes", lambda: (view.warmed, "node states built" if view.warmed else "warming up"))

    async def cache_ctx(_app: web.Application) -> AsyncIterator[None]:
        await cache.start()
        try:
            yield
        finally:
            await cache.stop()
            await client.close()

    async def warm_ctx(_app: web.Application) -> AsyncIterator[None]:
        async with running(_keep_warm(cache, view), "gpuclaim-extender-warm"):
            yield

    app.cleanup_ctx.append(cache_ctx)
    app.cleanup_ctx.append(warm_ctx)
    return view


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
