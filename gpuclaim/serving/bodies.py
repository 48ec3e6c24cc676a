"""The budget for request bodies a server holds at once, so the bodies it reads cannot take it past its memory
limit (issue 22, item 5).

Each connection's body bound (`connections.read_body`) limits how long a body may take, not how many are held:
120 connections each sending 3 MiB minus one byte took the webhook from 284 to 829 MB (its chart limit is
512 Mi). `middleware` charges each request with a body its declared size (`client_max_size` when it has no
length or is compressed: that is what `read` may take) from the request's start until its answer is written,
and the answer's size while it is written (an answer the client does not read stays in memory until the
connection's write bound drops it). An answer past `WRITE_STEP` bytes is written in steps of that size, each
after the transport has taken the last (a smaller one goes out with its head in one write): asyncio's TLS layer
encrypts at once all it is given, whether the client reads or not, so an answer handed over whole is held three
times (its bytes, aiohttp's copy joined to the head, the encrypted copy) and encrypted in one call on the event
loop; in steps, an unread one stops at the transport's high-water mark, where the write bound sees the pause.

Past the budget it answers without reading the body, and closes the connection without reading the rest either
(reading a refused body would be work the flooding client chose):

- 429 when the request's source (peer IP) would hold more than half the budget: that client is the flood, and
  kube-apiserver (another source) keeps the other half;
- 503 when the server as a whole would pass it.

Both carry `Retry-After`. Neither check counts against a request while its scope holds nothing: a body up to
`client_max_size` sent alone is never refused, whatever the budget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from gpuclaim.serving import connections

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Refused = Callable[[str], None]  # called with the scope that refused: "source" or "server"

RETRY_AFTER_SECONDS = 1
WRITE_STEP = 64 * 1024  # aiohttp's own drain threshold


class BodyBudget:
    """Bytes of request bodies held, in all and per source; `on_refused` counts refusals (the metric)."""

    __slots__ = ("by_source", "held", "limit", "on_refused")

    def __init__(self, limit: int, on_refused: Refused | None = None) -> None:
        self.limit = limit
        self.held = 0
        self.by_source: dict[str, int] = {}
        self.on_refused = on_refused

    def take(self, source: str, size: int) -> str | None:
        """Charge `size` bytes to `source`; None when taken, else the scope that refused."""
        mine = self.by_source.get(source, 0)
        if mine and 2 * (mine + size) > self.limit:
            return self._refuse("source")
        if self.held and self.held + size > self.limit:
            return self._refuse("server")
        self.held += size
        self.by_source[source] = mine + size
        return None

    def _refuse(self, scope: str) -> str:
        if self.on_refused is not None:
            self.on_refused(scope)
        return scope

    def add(self, source: str, size: int) -> None:
        """Charge `size` bytes that are held already (an answer being written): never refused."""
        self.held += size
        self.by_source[source] = self.by_source.get(source, 0) + size

    def give_back(self, source: str, size: int) -> None:
        self.held -= size
        left = self.by_source[source] - size
        if left:
            self.by_source[source] = left
        else:
            del self.by_source[source]


BODY_BUDGET = web.AppKey("gpuclaim.serving.body_budget", BodyBudget)


def charge(request: web.Request) -> int:
    """The bytes a request's body is charged: 0 without a body."""
    declared = request.content_length
    if request.headers.get(hdrs.CONTENT_ENCODING) or (declared is None and request.body_exists):
        return request.client_max_size  # a compressed or chunked body may grow to what `read` accepts
    return min(declared or 0, request.client_max_size)


def _refusal(budget: BodyBudget, scope: str, source: str, size: int) -> web.Response:
    if scope == "source":
        text = (f"too many request bodies from {source} at once: {budget.by_source.get(source, 0)} bytes held, "
                f"{size} more asked, half of maxBufferedBodyBytes ({budget.limit}) per client")
        status = 429
    else:
        text = (f"the server holds {budget.held} bytes of request bodies, {size} more would pass "
                f"maxBufferedBodyBytes ({budget.limit})")
        status = 503
    return web.Response(status=status, text=f"{text}; retry after {RETRY_AFTER_SECONDS}s\n",
                        headers={hdrs.RETRY_AFTER: str(RETRY_AFTER_SECONDS)})


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    size = charge(request)
    if not size:
        return await handler(request)
    budget = request.app[BODY_BUDGET]
    source = connections.source_of(request.remote or "")
    refused = budget.take(source, size)
    if refused is not None:
        answer = _refusal(budget, refused, source, size)
        await answer.prepare(request)
        await answer.write_eof()
        request.protocol.force_close()  # after the answer, which the transport flushes first; no lingering read
        return answer
    try:
        response = await handler(request)
        if not isinstance(response, web.Response) or not isinstance(response.body, bytes) or response.prepared:
            return response
        body = response.body
        # written here, within the charge: aiohttp would write it after the middlewares returned
        budget.add(source, len(body))
        size += len(body)
        return await _write_in_steps(request, response, body)
    finally:
        budget.give_back(source, size)


async def _write_in_steps(request: web.Request, response: web.Response, body: bytes) -> web.StreamResponse:
    if len(body) <= WRITE_STEP:
        # one step: the response itself, whose head aiohttp joins to the body in one write. A StreamResponse sends
        # its head at prepare, so each answer took two TLS records and two sends, each waking the client: in the
        # scheduler bench (2026-11-27) a third of the extender's wall time was in those sends
        await response.prepare(request)
        await response.write_eof()
        return response
    stream = web.StreamResponse(status=response.status, reason=response.reason, headers=response.headers)
    stream.content_length = len(body)
    await stream.prepare(request)
    view = memoryview(body)
    for start in range(0, len(body), WRITE_STEP):
        await stream.write(view[start:start + WRITE_STEP])  # waits while the transport holds too much
    await stream.write_eof()
    return stream
