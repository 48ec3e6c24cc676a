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
- Open connections per listening site: `Gate`. Each connection costs memory whatever it does (~67 KB for an idle
  TLS one, measured), so the timeouts alone let a client that opens connections faster than they expire grow the
  process without bound. The site's listening socket (`_GatedListener`) counts every accepted TCP connection until
  its socket is closed (TLS handshakes in progress included) and, at the limit, closes a new connection with a
  reset as it is accepted: no TLS handshake, no protocol, no memory. Connections already open are untouched, so
  kube-apiserver's kept-alive connections keep working; each site (the main one, the metrics one) has its own
  count, so a full main site leaves /healthz on the metrics port answering.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import Callable
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
    max_connections: int


class Gate:
    """The open connections of one listening site, and the bound on them. `on_refused` is called for each
    connection closed at accept (the metric)."""

    __slots__ = ("limit", "on_refused", "open")

    def __init__(self, limit: int, on_refused: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self.open = 0
        self.on_refused = on_refused

    def enter(self) -> bool:
        if self.open >= self.limit:
            if self.on_refused is not None:
                self.on_refused()
            return False
        self.open += 1
        return True

    def leave(self) -> None:
        self.open -= 1


_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST and keeps no TIME_WAIT state
_REFUSALS_PER_CALL = 256


class _CountedSocket(socket.socket):
    """An accepted connection's socket: gives its place in the gate back when it is closed (asyncio's transport
    closes it when the connection is lost, whatever ended it: a handshake that failed, a timeout, the client)."""

    __slots__ = ("_gate",)

    def __init__(self, *args: Any, gate: Gate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate

    def _release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.leave()

    def close(self) -> None:
        self._release()
        super().close()

    def detach(self) -> int:
        self._release()
        return super().detach()

    def __del__(self) -> None:  # never left unclosed by asyncio, but a leaked socket must not keep its place
        if getattr(self, "_gate", None) is not None:
            self.close()


class _GatedListener(socket.socket):
    """A listening socket whose `accept` (what asyncio's loop calls) admits a connection through the gate or
    closes it with a reset at once; asyncio then never sees a refused connection."""

    __slots__ = ("_gate",)

    def __init__(self, *args: Any, gate: Gate, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(_REFUSALS_PER_CALL):  # BlockingIOError from an empty backlog ends it, as asyncio expects
            conn, address = super().accept()
            if not self._gate.enter():
                try:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                finally:
                    conn.close()
                continue
            try:
                counted = _CountedSocket(conn.family, conn.type, conn.proto, fileno=conn.detach(), gate=self._gate)
            except BaseException:
                self._gate.leave()
                raise
            counted.settimeout(conn.gettimeout())
            return counted, address
        # a flood of refused connections: back to the event loop, which calls again when the socket is readable
        raise BlockingIOError


async def _listeners(host: str, port: int, backlog: int, gate: Gate) -> list[socket.socket]:
    """Bound listening sockets for `host:port`, as asyncio's create_server makes them (one per address)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)
    out: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            listener = _GatedListener(family, kind, proto, gate=gate)
            out.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio: a v6 socket does not take the v4 addresses too
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listener.bind(address)
            listener.listen(backlog)
            listener.setblocking(False)
    except BaseException:
        for made in out:
            made.close()
        raise
    return out


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
    """A TCP site (like aiohttp's TCPSite) with the handshake and first-head bounds on every connection, and at
    most `bounds.max_connections` connections open at once (`gate`, whose count a metric may read)."""

    __slots__ = ("_bounds", "_host", "_others", "_port", "gate")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, bounds: Bounds,
                 ssl_context: ssl.SSLContext | None = None, backlog: int = 1024,
                 on_refused: Callable[[], None] | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port, self._bounds = host, port, bounds
        self.gate = Gate(bounds.max_connections, on_refused)
        self._others: list[asyncio.AbstractServer] = []  # a host with several addresses: one server per address

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
        loop = asyncio.get_running_loop()
        listeners = await _listeners(self._host, self._port, self._backlog, self.gate)
        servers: list[asyncio.AbstractServer] = []
        try:
            for listener in listeners:
                servers.append(await loop.create_server(lambda: _HeadDeadline(factory(), head), sock=listener,
                                                        ssl=self._ssl_context, backlog=self._backlog, **extra))
        except BaseException:
            for server in servers:
                server.close()
            for listener in listeners:
                listener.close()
            raise
        self._server, self._others = servers[0], servers[1:]

    async def stop(self) -> None:
        for server in self._others:
            server.close()
        await super().stop()

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
