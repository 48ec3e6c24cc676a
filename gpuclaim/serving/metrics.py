"""The /metrics app (plain HTTP, its own port) and the series every gpuclaim server exports."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, Info
from prometheus_client.aiohttp import make_aiohttp_handler


def version() -> str:
    try:
        return metadata.version("gpuclaim")
    except metadata.PackageNotFoundError:
        return "unknown"


def create_metrics_app(registry: CollectorRegistry) -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    return app


def register_server_metrics(registry: CollectorRegistry, *, component: str,
                            cert_expiry: Callable[[], float] | None) -> None:
    """`gpuclaim_build_info{version,component}` and `gpuclaim_certs_expiry_timestamp_seconds` (the serving
    certificate's notAfter; 0 before one is loaded, and while the server serves plain HTTP)."""
    Info("gpuclaim_build", "gpuclaim build", registry=registry).info({"version": version(), "component": component})
    expiry = Gauge("gpuclaim_certs_expiry_timestamp_seconds",
                   "notAfter of the serving certificate, Unix seconds (0 before it is loaded)", registry=registry)
    if cert_expiry is not None:
        expiry.set_function(cert_expiry)
