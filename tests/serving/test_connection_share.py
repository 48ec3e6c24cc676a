"""One source cannot take every place of a listening site, on both servers and both ports (issue 22, items 3, 4).

Before: `maxConnections` was counted per site only, so one client holding every place made 83% of new
connections, kube-apiserver's included, fail; and the same flood on the metrics port refused 93% of kubelet's
liveness probes. Now a source (peer IP) holds at most `maxConnectionsPerSource`, and past `maxConnections` a
source that holds no connection still gets one of a few reserved places. Loopback has many addresses: the
flood comes from 127.0.0.1, the other client (kube-apiserver, kubelet) from 127.0.0.2.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from gpuclaim.serving import connections

from . import served
from .test_connection_cap import LONG, PROMPT, _get, _refused, _until

FLOOD, OTHER = "127.0.0.1", "127.0.0.2"
KINDS = pytest.mark.parametrize("kind", ["webhook", "extender"])


def _refusals(s: served.Served, site: str, bound: str) -> float:
    value = s.registry.get_sample_value("gpuclaim_connections_refused_total", {"site": site, "bound": bound})
    assert value is not None
    return value


async def _tls_from(s: served.Served, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(s.host, s.port, ssl=s.client, server_hostname="127.0.0.1",
                                         local_addr=(source, 0))


async def _plain_from(url: str, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return await asyncio.open_connection(host, int(port), local_addr=(source, 0))


async def _healthz_from(url: str, source: str, ssl_context: object = None) -> int:
    connector = aiohttp.TCPConnector(ssl=ssl_context or False, local_addr=(source, 0))
    async with (aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=PROMPT)) as session,
                session.get(f"{url}/healthz") as response):
        return response.status


@KINDS
async def test_one_source_holds_at_most_its_share_and_another_source_is_served(kind: str, tmp_path: Path) -> None:
    section = {"timeouts": LONG, "maxConnections": 8, "maxConnectionsPerSource": 3}
    async with served.serve(kind, tmp_path, section, metrics=True) as s:
        assert s.metrics_url is not None
        held = [await _tls_from(s, FLOOD) for _ in range(3)]
        held += [await _plain_from(s.metrics_url, FLOOD) for _ in range(3)]
        try:
            # the flood's next connection is refused on each port, at once, by the source bound
            assert await _refused(s) < PROMPT
            assert await _plain_refused(s.metrics_url, FLOOD), "the metrics port served a 4th connection"
            assert _refusals(s, "main", "source") == 1 and _refusals(s, "metrics", "source") == 1
            assert _refusals(s, "main", "site") == 0
            # another source (kube-apiserver; kubelet's probe) is served on both ports while the flood holds on
            https = f"https://{s.host}:{s.port}"
            assert await _healthz_from(https, OTHER, s.client) == 200
            assert await _healthz_from(s.metrics_url, OTHER) == 200
            # the flood's open connections keep working (its kept-alive requests are not cut)
            assert (await _get(*held[0], "/healthz")).startswith(b"HTTP/1.1 200")
        finally:
            for _reader, writer in held:
                writer.close()
        await _until(lambda: s.registry.get_sample_value("gpuclaim_connections_open", {"site": "main"}) == 0,
                     "every place given back")


@KINDS
async def test_a_new_source_gets_a_reserved_place_on_a_full_site(kind: str, tmp_path: Path) -> None:
    # a flood from many sources fills the site (here one source allowed all of it): a source that holds no
    # connection, as kubelet between two probes, still gets a place; its second one does not
    section = {"timeouts": LONG, "maxConnections": 4, "maxConnectionsPerSource": 8}
    async with served.serve(kind, tmp_path, section, metrics=True) as s:
        assert s.metrics_url is not None
        held = [await _plain_from(s.metrics_url, FLOOD) for _ in range(4)]
        try:
            assert await _plain_refused(s.metrics_url, FLOOD), "a full site served its flood a 5th connection"
            assert _refusals(s, "metrics", "site") == 1
            for _ in range(3):  # probe after probe (kubelet's liveness: a new connection each period)
                assert await _healthz_from(s.metrics_url, OTHER) == 200
            kept = await _plain_from(s.metrics_url, OTHER)
            try:
                assert await _plain_refused(s.metrics_url, OTHER), "a source got two reserved places"
            finally:
                kept[1].close()
            assert _refusals(s, "metrics", "site") == 2
        finally:
            for _reader, writer in held:
                writer.close()


async def _plain_refused(url: str, source: str) -> bool:
    """A new plain connection is reset or closed at once, before it could carry a request."""
    try:
        async with asyncio.timeout(PROMPT):
            reader, writer = await _plain_from(url, source)
            try:
                return await reader.read(1) == b""
            finally:
                writer.close()
    except ConnectionError:
        return True


@pytest.mark.parametrize(("address", "source"), [
    (("10.0.0.7", 51234), "10.0.0.7"),
    (("::ffff:10.0.0.7", 51234, 0, 0), "10.0.0.7"),
    (("fd00::7", 51234, 0, 0), "fd00::7"),
    ("10.0.0.7", "10.0.0.7"),
], ids=["ipv4", "ipv4-mapped", "ipv6", "bare"])
def test_a_source_is_the_peer_ip_without_the_port(address: object, source: str) -> None:
    assert connections.source_of(address) == source
