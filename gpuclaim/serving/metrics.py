"""The /metrics app (plain HTTP, its own port) and the series every gpuclaim server exports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client.aiohttp import make_aiohttp_handler

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def version() -> str:
    try:
        return metadata.version("gpuclaim")
    except metadata.PackageNotFoundError:
        return "unknown"


async def _healthz(_request: web.Request) -> web.Response:
    """The process is alive and its event loop answers, on the metrics port: it keeps answering while the main
    site is at its connection limit (each site counts its own connections)."""
    return web.Response(text="ok\n")


def create_metrics_app(registry: CollectorRegistry,
                       routes: Sequence[tuple[str, Handler]] = ()) -> web.Application:
    """/metrics, /healthz and the main app's `routes` (GET): a main site behind mutual TLS serves kubelet's
    probes here, since kubelet presents no client certificate."""
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
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
