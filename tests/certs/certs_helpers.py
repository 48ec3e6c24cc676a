"""Helpers for the certs tests: a fixed clock, the wanted names, an HTTPS server on loopback, the CLI run."""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gpuclaim import cli
from gpuclaim.certs import material, selfsigned

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
NAMES = selfsigned.Names.build([*selfsigned.service_dns_names("gpuclaim-webhook", "gpuclaim"), "localhost"],
                               ["127.0.0.1"])


def write_pair(directory: Path, pair: material.KeyPair) -> tuple[Path, Path]:
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    return cert, key


def run_certs(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """`gpuclaim certs ARGV` through the CLI: the exit code, stdout (decoded when `-o` asked for JSON), stderr."""
    code = cli.main(["certs", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "-o" in argv and out.strip() else out), err


async def _hello(request: web.Request) -> web.Response:
    """Answer the TLS version; the client's port in X-Peer tells which connection carried the request."""
    ssl_obj = request.transport.get_extra_info("ssl_object") if request.transport else None
    version = ssl_obj.version() if ssl_obj is not None else "none"
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return web.Response(text=version or "none", headers={"X-Peer": str(peer[1] if peer else "")})


@contextlib.asynccontextmanager
async def https_server(ctx: ssl.SSLContext) -> AsyncIterator[int]:
    """An aiohttp app on 127.0.0.1 over `ctx`; yields the port. GET / answers the TLS version."""
    app = web.Application()
    app.router.add_get("/", _hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port
    finally:
        await runner.cleanup()
