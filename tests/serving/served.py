"""Each server run as production runs it (`serving.run.serve` over TLS, its own app factory), with the config
section a test gives (`webhook:` or `extender:`), for the tests of tests/serving."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.certs.files import reloading_server_context
from gpuclaim.double import tls as selfsigned
from gpuclaim.dra.config import load_config
from gpuclaim.serving import run as serving


@dataclass
class Served:
    host: str
    port: int
    client: ssl.SSLContext
    app: web.Application
    registry: CollectorRegistry
    metrics_url: str | None  # plain HTTP, when the test asked for the metrics site


def _app(kind: str, tls_dir: Path, section: dict[str, Any]
         ) -> tuple[web.Application, CollectorRegistry, ssl.SSLContext, ssl.SSLContext]:
    """The server's app as its command builds it, its registry, the server's TLS context and a client's."""
    tls = selfsigned.issue(tls_dir, hosts=("127.0.0.1",))
    reloader = reloading_server_context(cert_file=tls.cert_path, key_file=tls.key_path)
    registry = CollectorRegistry()
    config = load_config({kind: section})
    if kind == "webhook":
        from gpuclaim.webhook import admit
        from gpuclaim.webhook import app as webhook_app

        application = webhook_app.create_app(config, checks=admit.core_checks(own_namespace="gpuclaim"),
                                             reloader=reloader, registry=registry)
    else:
        from gpuclaim.extender import app as extender_app
        from gpuclaim.extender.offline import OfflineView

        application = extender_app.create_app(config, view=OfflineView([], config=config.extender),
                                              reloader=reloader, registry=registry)
    return application, registry, reloader.context, ssl.create_default_context(cafile=str(tls.ca_path))


@contextlib.asynccontextmanager
async def serve(kind: str, tls_dir: Path, section: dict[str, Any], *, metrics: bool = False
                ) -> AsyncIterator[Served]:
    application, registry, server_context, client = _app(kind, tls_dir, section)
    started: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(serving.serve(
        application, listen="127.0.0.1:0", metrics_listen="127.0.0.1:0" if metrics else None, registry=registry,
        ssl_context=server_context, grace_period=1.0, on_started=started.set_result, stop=stop))
    try:
        urls = await asyncio.wait_for(started, 30)
        host, port = urls[0].removeprefix("https://").rsplit(":", 1)
        yield Served(host, int(port), client, application, registry, urls[1] if metrics else None)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
