"""At most `maxConnections` connections per listening site, on both servers (issue 14, finding 4).

Before the cap, every connection a client opened was accepted and held until a timeout closed it (~67 KB each for
an idle TLS connection), so a client opening them faster than they expire could grow the process past its memory
limit. Now: past the cap a new connection is reset as it is accepted; the connections already open keep working;
/healthz on the metrics port answers; `gpuclaim_connections_refused_total` counts the refusals; and a place is
given back when a connection closes, however it ends (a failed TLS handshake included).

The timeouts are long here, so that any close the test sees within seconds can only come from the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from pathlib import Path

import aiohttp
import pytest

from . import served

CAP = 6
EXTRA = 4
LONG = {"handshakeSeconds": 60, "headerSeconds": 60, "bodySeconds": 60, "idleSeconds": 120}
PROMPT = 5.0  # a refused connection fails within this (on a loaded machine), far below every timeout


def _sample(s: served.Served, name: str, site: str = "main", **labels: str) -> float:
    if name == "gpuclaim_connections_refused_total":
        labels = {"bound": "site", **labels}  # this file is about the site's bound; test_connection_share: source
    value = s.registry.get_sample_value(name, {"site": site, **labels})
    assert value is not None, name
    return value


async def _until(check: object, what: str, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def _tls(s: served.Served) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(s.host, s.port, ssl=s.client, server_hostname="127.0.0.1")


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> bytes:
    """One keep-alive HTTP/1.1 request on an open connection; the status line."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b""):
        pass
    await asyncio.wait_for(reader.readexactly(3), 10)  # "ok\n"
    return status


async def _refused(s: served.Served) -> float:
    """Seconds until a new connection failed (reset before or during its TLS handshake, or closed right after)."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(30):
            reader, writer = await _tls(s)
            try:
                assert await reader.read(1) == b"", "a connection over the cap was served"
            finally:
                writer.close()
    except (ConnectionError, ssl.SSLError):
        pass
    return time.monotonic() - started


KINDS = pytest.mark.parametrize("kind", ["webhook", "extender"])


@KINDS
async def test_connections_over_the_cap_are_refused_and_the_open_ones_keep_working(kind: str,
                                                                                 tmp_path: Path) -> None:
    async with served.serve(kind, tmp_path, {"timeouts": LONG, "maxConnections": CAP}, metrics=True) as s:
        held = [await _tls(s) for _ in range(CAP)]
        try:
            await _until(lambda: _sample(s, "gpuclaim_connections_open") == CAP, "the open connections counted")
            times = [await _refused(s) for _ in range(EXTRA)]
            assert max(times) < PROMPT, times
            assert _sample(s, "gpuclaim_connections_refused_total") == EXTRA
            assert _sample(s, "gpuclaim_connections_open") == CAP
            # the connections already open are served, a request after another (kube-apiserver's keep-alive)
            for reader, writer in held:
                assert (await _get(reader, writer, "/healthz")).startswith(b"HTTP/1.1 200")
            assert (await _get(*held[0], "/healthz")).startswith(b"HTTP/1.1 200")
            # the metrics site counts its own connections: its /healthz answers while the main site is full
            async with aiohttp.ClientSession() as session, session.get(f"{s.metrics_url}/healthz") as response:
                assert response.status == 200
                assert await response.text() == "ok\n"
            assert _sample(s, "gpuclaim_connections_refused_total", "metrics") == 0
            # places come back as connections close: a new client is served again
            for _reader, writer in held[:2]:
                writer.close()
            held = held[2:]
            await _until(lambda: _sample(s, "gpuclaim_connections_open") == CAP - 2, "closed connections released")
            connector = aiohttp.TCPConnector(ssl=s.client)
            async with (aiohttp.ClientSession(connector=connector) as session,
                        session.get(f"https://{s.host}:{s.port}/healthz") as response):
                assert response.status == 200
        finally:
            for _reader, writer in held:
                writer.close()
        await _until(lambda: _sample(s, "gpuclaim_connections_open") == 0, "every place given back")
        assert _sample(s, "gpuclaim_connections_refused_total") == EXTRA


@KINDS
async def test_a_failed_handshake_gives_its_place_back(kind: str, tmp_path: Path) -> None:
    async with served.serve(kind, tmp_path, {"timeouts": LONG, "maxConnections": 1}) as s:
        for _ in range(3):  # with the place kept, the second round would be refused
            reader, writer = await asyncio.open_connection(s.host, s.port)
            writer.write(b"GET / HTTP/1.1\r\n\r\n")  # not a TLS ClientHello: the handshake fails at once
            with contextlib.suppress(ConnectionError):
                async with asyncio.timeout(PROMPT):
                    while await reader.read(65536):
                        pass
            writer.close()
            await _until(lambda: _sample(s, "gpuclaim_connections_open") == 0, "the failed handshake released")
        reader, writer = await _tls(s)
        try:
            assert (await _get(reader, writer, "/healthz")).startswith(b"HTTP/1.1 200")
        finally:
            writer.close()
        assert _sample(s, "gpuclaim_connections_refused_total") == 0
