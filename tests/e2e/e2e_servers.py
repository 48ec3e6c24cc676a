"""Small real TLS servers (webhook / extender stand-ins) and the API double with the webhook chain."""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from e2e_hooks import SERVICE_HOST

from gpuclaim.certs.context import server_context
from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble, Settings, Store, serve
from gpuclaim.double.apiserver.webhooks import WebhookAdmission
from gpuclaim.kube import KubeClient, config

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
_ports = itertools.count()


@dataclass
class TlsServer:
    """A real HTTPS server on loopback; `routes` answers by path, `seen` records every JSON body received."""

    tls: selfsigned.TlsFiles
    routes: dict[str, Handler] = field(default_factory=dict)
    seen: list[tuple[str, Any]] = field(default_factory=list)
    runner: web.AppRunner | None = None
    port: int = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.tls.ca_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.seen.append((request.path, body))
        handler = self.routes.get(request.path)
        if handler is None:
            return web.Response(status=404)
        result = await handler(body)
        if isinstance(result, web.StreamResponse):
            return result
        return web.Response(body=orjson.dumps(result), content_type="application/json")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._dispatch)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", self.port,
                           ssl_context=server_context(cert_file=self.tls.cert_path, key_file=self.tls.key_path))
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[TlsServer]:
    tls = selfsigned.issue(tmp_path / f"srv{next(_ports)}", hosts=("127.0.0.1", "localhost", SERVICE_HOST))
    server = TlsServer(tls)
    await server.start()
    yield server
    await server.stop()


@dataclass
class Cluster:
    double: RunningDouble
    chain: WebhookAdmission
    client: KubeClient

    @property
    def store(self) -> Store:
        return self.double.store

    async def raw(self, method: str, path: str, body: Any = None, **params: str) -> tuple[int, Any, list[str]]:
        """A request whose response headers we can read (kube.KubeClient returns bodies only)."""
        import ssl

        assert self.double.ca_pem is not None
        context = ssl.create_default_context(cadata=self.double.ca_pem.decode())
        async with (aiohttp.ClientSession() as session,
                    session.request(method, self.double.url + path, params=params, ssl=context,
                                    data=None if body is None else orjson.dumps(body),
                                    headers={"Content-Type": "application/json"}) as reply):
            return reply.status, orjson.loads(await reply.read()), reply.headers.getall("Warning", [])


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    chain = WebhookAdmission()
    store = Store(history_size=500, admission=chain)
    chain.store = store
    double = await serve(store=store, workdir=tmp_path / "double", settings=Settings(bookmark_interval=0.2))
    client = KubeClient(config.from_kubeconfig(double.kubeconfig), timeout=10.0)
    yield Cluster(double, chain, client)
    await client.close()
    await double.close()
