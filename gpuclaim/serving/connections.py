"""The bounds on one client connection, so idle and slow connections cannot pile up (issue 14, finding 4).

Measured on aiohttp 3.14 before this module: a TLS connection that completed its handshake and then sent nothing,
or sent its request head or body a byte at a time, stayed open for good (1,500 of them took the webhook from 82
to 500 MB). aiohttp has a keep-alive timer but no header or body timeout, so each bound is set where it can be:

- TLS handshake: asyncio's `ssl_handshake_timeout` on the listening socket (`BoundedSite`); its clock starts at
  the TCP accept, so a socket that never sends a ClientHello is closed by it too.
- First request head: `_HeadDeadline` sits between the transport and aiohttp's protocol until the end of the
  first request head (CRLF CRLF) has arrived, and closes the connection if it has not within the bound; then it
  hands the transport to aiohttp's protocol directly (`set_protocol`), so it costs nothing afterwards.
- Idle keep-alive (and the heads of later requests on a kept-alive connection): aiohttp's `keepalive_timeout`,
  counted from the previous response.
- Request body: `read_body`, a deadline on reading the whole body: HTTP 408, and the connection closed at most
  the same time later (aiohttp's lingering close, bounded by `serve`, lets a client still sending read the 408).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web

_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")  # aiohttp's parser also accepts bare LF line ends


@dataclass(frozen=True, slots=True)
class Bounds:
    handshake_seconds: float
    header_seconds: float
    body_seconds: float
    idle_seconds: float


BOUNDS = web.AppKey("gpuclaim.serving.bounds", Bounds)


class _HeadDeadline(asyncio.Protocol):
    """Forwards to aiohttp's protocol; closes the connection when no complete request head came in time."""

    def __init__(self, inner: Any, timeout: float) -> None:
        self._inner = inner
        self._timeout = timeout
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # a stream server's transports are Transports
        self._timer = asyncio.get_running_loop().call_later(self._timeout, self._expired)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        seen = self._tail + data
        self._inner.data_received(data)
        if any(end in seen for end in _HEAD_ENDS):
            self._head_arrived()
        else:
            self._tail = seen[-3:]

    def _head_arrived(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.set_protocol(self._inner)  # out of the path for the rest of the connection

    def _expired(self) -> None:
        self._timer = None
        if self._transport is not None:
            self._transport.abort()  # a slow client gets no orderly TLS close: nothing more is sent to it

    def eof_received(self) -> bool | None:
        return cast("bool | None", self._inner.eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class BoundedSite(web.BaseSite):
    """A TCP site (like aiohttp's TCPSite) with the handshake and first-head bounds on every connection."""

    __slots__ = ("_bounds", "_host", "_port")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, bounds: Bounds,
                 ssl_context: ssl.SSLContext | None = None, backlog: int = 1024) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port, self._bounds = host, port, bounds

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        factory = self._runner.server
        assert factory is not None
        head = self._bounds.header_seconds
        extra: dict[str, Any] = {}
        if self._ssl_context is not None:
            extra["ssl_handshake_timeout"] = self._bounds.handshake_seconds
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _HeadDeadline(factory(), head), self._host, self._port, ssl=self._ssl_context,
            backlog=self._backlog, **extra)

    def url(self) -> str:
        """The bound address (port 0 picks one)."""
        server = self._server
        assert isinstance(server, asyncio.Server) and server.sockets
        host, port = server.sockets[0].getsockname()[:2]
        return f"{'https' if self._ssl_context else 'http'}://{host}:{port}"


async def read_body(request: web.Request) -> bytes:
    """The whole request body, read within the app's body bound; past it: 408 and the connection closed.
    aiohttp's own 413 for a body over `client_max_size` passes through for the caller to answer."""
    bounds = request.app.get(BOUNDS)
    if bounds is None:
        return await request.read()
    try:
        async with asyncio.timeout(bounds.body_seconds):
            return await request.read()
    except TimeoutError:
        reply = web.HTTPRequestTimeout(text=f"request body not received within {bounds.body_seconds:g}s\n")
        reply.force_close()
        raise reply from None
