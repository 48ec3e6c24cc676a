"""`Expect: 100-continue` answered against the body limit, before the body is invited.

aiohttp's default expect handler answers `100 Continue` to any declared length: a client announcing a body past the
limit was invited to send it all, and only then refused (issue 22, item 7). Here a declared `Content-Length` over
the app's `client_max_size` gets the server's own 413 at once, and the connection is closed (the client may send
the body anyway). `refuse`, if given, is asked next (e.g. a missing client certificate): a response from it is the
answer too. Otherwise the answer is aiohttp's: `100 Continue` on HTTP/1.1, 417 for another expectation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

__all__ = ["ExpectHandler", "expect_handler"]

ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]
Answer = Callable[[web.Request], web.StreamResponse | None]


def expect_handler(*, too_large: Callable[[web.Request], web.StreamResponse],
                   refuse: Answer | None = None) -> ExpectHandler:
    async def handle(request: web.Request) -> web.StreamResponse | None:
        if request.version != HttpVersion11:
            return None  # HTTP/1.0 has no 100 Continue: the client sends the body, the handler reads it
        expect = request.headers.get(hdrs.EXPECT, "")
        if expect.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect[:100]}")
        length = request.content_length
        answer = too_large(request) if length is not None and length > request.client_max_size else None
        if answer is None and refuse is not None:
            answer = refuse(request)
        if answer is not None:
            answer.force_close()
            return answer
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own size starts after the interim line, as aiohttp counts
        return None

    return handle
