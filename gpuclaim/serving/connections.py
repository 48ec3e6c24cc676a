"""The bounds on one client connection, and on the connections of one client (issue 14, finding 4; issue 22).

Measured on aiohttp 3.14 before this module: a TLS connection that completed its handshake and then sent nothing,
or sent its request head or body a byte at a time, stayed open for good (1,500 of them took the webhook from 82
to 500 MB). aiohttp has a keep-alive timer but no header, body or write timeout, so each bound is set where it can:

- TLS handshake: asyncio's `ssl_handshake_timeout` on the listening socket (`BoundedSite`); its clock starts at
  the TCP accept, so a socket that never sends a ClientHello is closed by it too.
- Every request head: `_Bounded` sits between the transport and aiohttp's protocol for the whole connection. The
  first head must be complete `header_seconds` after the handshake; a later one `header_seconds` after its first
  byte (before, a later head on a kept-alive connection was held up to the idle bound, 120 s). A complete head
  is one aiohttp parsed.
- Writes: an answer the client does not read pinned its bytes and its handler for as long as the client kept
  the connection (issue 22 measured ~4.8 MB per such connection of the webhook, for 150 s and more). `_Bounded`
  counts the time the transport held writing paused (its buffer over the high-water mark: the client is not
  reading) since the last request head, and aborts the connection past `write_seconds`.
- Idle keep-alive: aiohttp's `keepalive_timeout`, counted from the previous response.
- Request body: `read_body`, a deadline on reading the whole body: HTTP 408, and the connection closed at most
  the same time later (aiohttp's lingering close, bounded by `serve`, lets a client still sending read the 408).
- Open connections per listening site and per source: `Gate`. Each connection costs memory whatever it does
  (~67 KB for an idle TLS one, measured), so the timeouts alone let a client that opens connections faster than
  they expire grow the process without bound. The site's listening socket (`_GatedListener`) counts every
  accepted TCP connection until its socket is closed (TLS handshakes in progress included) and, past a bound,
  closes a new connection with a reset as it is accepted: no TLS handshake, no protocol, no memory. One source
  (a peer IP address) may hold at most `max_connections_per_source`: with one count per site, one client held
  every place and 83% of kube-apiserver's new connections were reset (issue 22, item 3). Past `max_connections`
  a source holding no connection still gets one of `RESERVED_FOR_NEW_SOURCES` places, so a flood from many
  sources does not keep out a client that comes once in a while: kubelet's probe, a first apiserver connection.
  Connections already open are untouched; each site (the main one, the metrics one) has its own counts.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Bounds:
    handshake_seconds: float
    header_seconds: float
    body_seconds: float
    idle_seconds: float
    write_seconds: float
    max_connections: int
    max_connections_per_source: int


#: places past `max_connections` for a source that holds no connection on the site (each ~67 KB)
RESERVED_FOR_NEW_SOURCES = 16


def source_of(address: Any) -> str:
    """The source a peer address counts as: its IP (an IPv4-mapped IPv6 address as the IPv4 one); no port."""
    host = str(address[0]) if isinstance(address, tuple | list) and address else str(address)
    return host.removeprefix("::ffff:") if host.startswith("::ffff:") and "." in host else host


Refused = Callable[[str], None]  # called with the bound that refused: "site" or "source"


@dataclass(slots=True)
class _Turns:
    semaphore: asyncio.Semaphore
    users: int = 0  # holders and waiters


class SourceSlots:
    """At most `per_source` holders at once per source; the others wait their turn, in order. A source's entry
    exists only while it has a holder or a waiter, so there are never more entries than open connections."""

    def __init__(self, per_source: int) -> None:
        self.per_source = per_source
        self._by_source: dict[str, _Turns] = {}

    @contextlib.asynccontextmanager
    async def slot(self, source: str) -> AsyncIterator[None]:
        turns = self._by_source.get(source)
        if turns is None:
            turns = self._by_source[source] = _Turns(asyncio.Semaphore(self.per_source))
        turns.users += 1
        try:
            async with turns.semaphore:
                yield
        finally:
            turns.users -= 1
            if not turns.users:
                del self._by_source[source]


class Gate:
    """The open connections of one listening site, per source, and the bounds on them. `on_refused` is called
    for each connection closed at accept (the metric) with the bound that refused it."""

    __slots__ = ("by_source", "limit", "on_refused", "open", "per_source")

    def __init__(self, limit: int, per_source: int, on_refused: Refused | None = None) -> None:
        self.limit = limit
        self.per_source = per_source
        self.open = 0
        self.by_source: dict[str, int] = {}
        self.on_refused = on_refused

    def enter(self, source: str) -> bool:
        held = self.by_source.get(source, 0)
        if held >= self.per_source:
            return self._refuse("source")
        if self.open >= self.limit and (held or self.open >= self.limit + RESERVED_FOR_NEW_SOURCES):
            return self._refuse("site")
        self.open += 1
        self.by_source[source] = held + 1
        return True

    def _refuse(self, bound: str) -> bool:
        if self.on_refused is not None:
            self.on_refused(bound)
        return False

    def leave(self, source: str) -> None:
        self.open -= 1
        held = self.by_source[source] - 1
        if held:
            self.by_source[source] = held
        else:
            del self.by_source[source]


_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST and keeps no TIME_WAIT state
_REFUSALS_PER_CALL = 256


class _CountedSocket(socket.socket):
    """An accepted connection's socket: gives its place in the gate back when it is closed (asyncio's transport
    closes it when the connection is lost, whatever ended it: a handshake that failed, a timeout, the client)."""

    __slots__ = ("_gate", "_source")

    def __init__(self, *args: Any, gate: Gate | None = None, source: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate
        self._source = source

    def _release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.leave(self._source)

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
            source = source_of(address)
            if not self._gate.enter(source):
                try:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                finally:
                    conn.close()
                continue
            try:
                counted = _CountedSocket(conn.family, conn.type, conn.proto, fileno=conn.detach(), gate=self._gate,
                                         source=source)
            except BaseException:
                self._gate.leave(source)
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


_ASSUMED = ("_request_count", "_waiter")  # aiohttp RequestHandler attributes _Bounded reads


class _Bounded(asyncio.Protocol):
    """Forwards to aiohttp's protocol for the whole connection; aborts it when a request head is not complete in
    time, or when writing stayed paused (the client not reading) too long since the last head.

    It reads two private attributes of aiohttp's RequestHandler (3.14): `_request_count`, the requests parsed on
    the connection (a head is complete when it grows), and `_waiter`, pending while the handler waits for the
    next request (bytes arriving then start a head). tests/serving/test_connections.py pins both behaviours."""

    __slots__ = ("_head_seconds", "_head_timer", "_inner", "_loop", "_paused_at", "_paused_for", "_transport",
                 "_write_seconds", "_write_timer")

    def __init__(self, inner: Any, *, head_seconds: float, write_seconds: float) -> None:
        self._inner = inner
        self._head_seconds = head_seconds
        self._write_seconds = write_seconds
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._head_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._paused_at: float | None = None  # loop time writing was paused, while it is
        self._paused_for = 0.0  # seconds writing was paused since the last request head

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # a stream server's transports are Transports
        self._head_timer = self._loop.call_later(self._head_seconds, self._expired)  # the first head
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        inner = self._inner
        parsed = inner._request_count
        inner.data_received(data)
        if inner._request_count != parsed:  # a head is complete (or answered 400)
            self._paused_for = 0.0
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
        elif self._head_timer is None and data and self._between_requests():
            self._head_timer = self._loop.call_later(self._head_seconds, self._expired)

    def _between_requests(self) -> bool:
        waiter = self._inner._waiter
        return waiter is not None and not waiter.done()

    def _expired(self) -> None:
        for timer in (self._head_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._write_timer = None
        if self._transport is not None:
            self._transport.abort()  # a slow client gets no orderly TLS close: nothing more is sent to it

    def eof_received(self) -> bool | None:
        return cast("bool | None", self._inner.eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._write_timer = None
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._paused_at = self._loop.time()
        if self._write_timer is None:
            self._write_timer = self._loop.call_later(max(0.0, self._write_seconds - self._paused_for), self._expired)
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._paused_at is not None:
            self._paused_for += self._loop.time() - self._paused_at
            self._paused_at = None
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self._inner.resume_writing()


class BoundedSite(web.BaseSite):
    """A TCP site (like aiohttp's TCPSite) with the handshake, head and write bounds on every connection, and at
    most `bounds.max_connections` connections open at once, `bounds.max_connections_per_source` from one source
    (`gate`, whose counts a metric may read)."""

    __slots__ = ("_bounds", "_host", "_others", "_port", "gate")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, bounds: Bounds,
                 ssl_context: ssl.SSLContext | None = None, backlog: int = 1024,
                 on_refused: Refused | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port, self._bounds = host, port, bounds
        self.gate = Gate(bounds.max_connections, bounds.max_connections_per_source, on_refused)
        self._others: list[asyncio.AbstractServer] = []  # a host with several addresses: one server per address

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self._port}"

    async def start(self) -> None:
        # _Bounded reads two private attributes of aiohttp's protocol: a version without them is refused here,
        # at start, rather than failing every connection
        from aiohttp import web_protocol

        missing = [a for a in _ASSUMED if not hasattr(web_protocol.RequestHandler, a)]
        if missing:
            raise RuntimeError(f"this aiohttp's RequestHandler has no {', '.join(missing)}: gpuclaim.serving "
                               "bounds request heads with them (tested with aiohttp 3.14)")
        await super().start()
        factory = self._runner.server
        assert factory is not None
        head, write = self._bounds.header_seconds, self._bounds.write_seconds
        extra: dict[str, Any] = {}
        if self._ssl_context is not None:
            extra["ssl_handshake_timeout"] = self._bounds.handshake_seconds
        loop = asyncio.get_running_loop()
        listeners = await _listeners(self._host, self._port, self._backlog, self.gate)
        servers: list[asyncio.AbstractServer] = []

        def bounded() -> _Bounded:
            return _Bounded(factory(), head_seconds=head, write_seconds=write)

        try:
            for listener in listeners:
                servers.append(await loop.create_server(bounded, sock=listener, ssl=self._ssl_context,
                                                        backlog=self._backlog, **extra))
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
