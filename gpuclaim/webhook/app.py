"""The webhook's aiohttp app: `create_app` (TLS: /mutate, /validate, /healthz, /readyz). gpuclaim.serving serves
it (both sites, SIGTERM, grace period, connection bounds, the /metrics app), as it serves the extender.

`create_app` is the only place that wires routes and resources; tests and production use it alike. Every
resource with a lifetime is a single-yield `cleanup_ctx`: the certificate reloader's poll task and the cluster
view (list+watch), which starts only when a kube ApiConfig is given.
"""

from __future__ import annotations

import gc
import logging
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.certs.files import CertReloader
from gpuclaim.dra.config import Config
from gpuclaim.serving import metrics as serving_metrics
from gpuclaim.serving import run as serving
from gpuclaim.tasks import running
from gpuclaim.webhook import admit, handlers, keys
from gpuclaim.webhook.metrics import WebhookMetrics

if TYPE_CHECKING:
    from gpuclaim.kube.leader import LeaderElector

log = logging.getLogger("gpuclaim.webhook")


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
    from gpuclaim.kube.cache import ClusterCache, default_specs  # the kubernetes client costs import time
    from gpuclaim.kube.client import KubeClient
    from gpuclaim.kube.version import ClusterVersion

    state = app[keys.STATE]
    config = state.context.config
    client = KubeClient(api, timeout=config.cluster.api_timeout_seconds)
    backoff = config.cluster.backoff
    specs = default_specs()
    if config.quota.enabled and config.quota.precheck:
        specs = (*specs, _quota_watch())
    cache = ClusterCache(client, registry=app[keys.REGISTRY], backoff_initial=backoff.initial_seconds,
                         backoff_cap=backoff.cap_seconds, backoff_factor=backoff.factor, backoff_jitter=backoff.jitter,
                         specs=specs, version=ClusterVersion(config.kubernetes, registry=app[keys.REGISTRY]))
    from gpuclaim.kube.mixed import MixedNodes

    mixed = MixedNodes(cache, config.conversion, policy=config.mixed_nodes)
    mixed.register(app[keys.REGISTRY])
    await cache.start()
    state.context = admit.Context(config=config, cluster=cache, client=client, mixed=mixed)
    try:
        async with running(_freeze_when_synced(cache), "gpuclaim-webhook-gc-freeze"):
            yield
    finally:
        state.context = admit.Context(config=config)
        await cache.stop()
        await client.close()


def _elector(app: web.Application, *, enabled: bool, lease_name: str, what: str,
             lost: str = "") -> LeaderElector | None:
    """The LeaderElector of `what`, a loop that runs on one replica at a time (the garbage collector, the quota
    controller), on its own Lease with gc's namespace and timings; None when that loop is not to run: no cluster,
    not enabled, or no namespace for the Lease (a warning then, ending with what is `lost`: the config asked for
    the loop)."""
    state = app[keys.STATE]
    if state.context.client is None or not enabled:
        return None
    namespace = app[keys.NAMESPACE]
    if not namespace:
        log.warning("%s is off: no namespace for its Lease (set POD_NAMESPACE or gc.leaseNamespace)%s", what, lost)
        return None
    from gpuclaim.kube import leader

    gc_config = state.context.config.gc
    return leader.LeaderElector(
        state.context.client, namespace=namespace, name=lease_name, identity=leader.default_identity(),
        timing=leader.Timing(lease_duration=gc_config.lease_duration_seconds,
                             renew_deadline=gc_config.renew_deadline_seconds,
                             retry_period=gc_config.retry_period_seconds))


async def _garbage_collection(app: web.Application) -> AsyncIterator[None]:
    """Delete idle templates and sharing-group claims the webhook made (kube/garbage.py), on the replica holding
    the Lease. Runs only with a cluster, with `gc.enabled`, and when the namespace for the Lease is known."""
    state = app[keys.STATE]
    config = state.context.config
    elector = _elector(app, enabled=config.gc.enabled, lease_name=config.gc.lease_name, what="garbage collection")
    if elector is None:
        yield
        return
    from gpuclaim.kube import garbage

    gc_config = config.gc
    collector = garbage.GarbageCollector(
        state.context.client, state.context.cluster, registry=app[keys.REGISTRY], idle_seconds=gc_config.idle_seconds,
        sharing_annotation=config.conversion.sharing.annotation, dry_run=gc_config.dry_run,
        max_deletes_per_second=gc_config.max_deletes_per_second)
    state.gc = collector
    cache = state.context.cluster
    try:
        async with running(garbage.run(collector, elector, interval=gc_config.interval_seconds,
                                        synced=lambda: cache.wait_synced(None)), "gpuclaim-webhook-gc"):
            yield
    finally:
        state.gc = None


def _quota_watch() -> Any:
    """The admission pre-check reads the quota controller's own quotas (by label: few, small), their status.used
    kept current by kube-apiserver's quota admission."""
    from gpuclaim.dra import quota
    from gpuclaim.kube.reflector import WatchSpec

    return WatchSpec("ResourceQuota", "v1", "resourcequotas", namespaced=True,
                     label_selector=f"{quota.MIRROR_LABEL}=true")


async def _quota_controller(app: web.Application) -> AsyncIterator[None]:
    """Keep a DRA-native quota beside each legacy GPU quota (kube/quota.py), on the replica holding its Lease.
    Runs only with a cluster, with `quota.enabled`, and when the namespace for the Lease is known."""
    state = app[keys.STATE]
    config = state.context.config
    elector = _elector(app, enabled=config.quota.enabled, lease_name=config.quota.lease_name,
                       what="the quota controller", lost="; GPU quotas do not hold for converted pods")
    if elector is None:
        yield
        return
    from gpuclaim.kube import quota as quota_controller

    cache = state.context.cluster
    controller = quota_controller.QuotaController(
        state.context.client, conversion=config.conversion, classes=lambda: cache.inventory.parsed_classes(),
        registry=app[keys.REGISTRY], model=(lambda: cache.version.model) if cache.version is not None else None)
    async with running(quota_controller.run(controller, elector, interval=config.quota.interval_seconds,
                                             synced=lambda: cache.wait_synced(None)), "gpuclaim-webhook-quota"):
        yield


def create_app(config: Config, *, checks: admit.Checks, reloader: CertReloader | None = None,
               kube_config: Any = None, registry: CollectorRegistry | None = None,
               time_limit: float = admit.DEFAULT_TIME_LIMIT, namespace: str | None = None) -> web.Application:
    """The admission app. `reloader` is the TLS certificate's (its poll task runs with the app; /readyz and the
    expiry metric read it); `kube_config` a `kube.ApiConfig` for the cluster view, or None to run without one;
    `namespace` the webhook's own (POD_NAMESPACE), where the garbage collector's Lease lives."""
    # the body limit is the app's: aiohttp answers a larger body with 413 before we parse anything
    app = web.Application(client_max_size=config.webhook.max_body_bytes, middlewares=[handlers.guard])
    registry = registry if registry is not None else CollectorRegistry()
    metrics = WebhookMetrics(registry)
    serving_metrics.register_server_metrics(registry, component="webhook",
                                            cert_expiry=reloader.expiry_timestamp if reloader else None)
    serving.install(app, timeouts=config.webhook.timeouts, max_connections=config.webhook.max_connections,
                    max_connections_per_source=config.webhook.max_connections_per_source,
                    max_buffered_body_bytes=config.webhook.max_buffered_body_bytes)
    if reloader is not None:
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
    warm_up = getattr(checks, "warm_up", None)  # the real cores have one; tests' stand-ins need none
    if warm_up is not None:

        async def _warm(_app: web.Application) -> None:
            try:  # on purpose on the loop, before the site opens: nothing else runs yet
                warm_up(config)
            except Exception:  # a warm-up that fails costs the first request its latency, never the server
                log.warning("warm-up failed; the first requests will do its work", exc_info=True)

        app.on_startup.append(_warm)
    app.cleanup_ctx.append(_cluster_view)
    app.cleanup_ctx.append(_garbage_collection)  # after the view: it reads it, and stops before it
    app.cleanup_ctx.append(_quota_controller)
    app.router.add_post("/mutate", handlers.mutate, expect_handler=handlers.expect_continue)
    app.router.add_post("/validate", handlers.validate, expect_handler=handlers.expect_continue)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    return app
