"""Request bodies held at once are bounded per server, and per source within it, on both servers (issue 22,
item 5).

Before: 120 connections each sending 3 MiB minus one byte took the webhook from 284 to 829 MB, past its 512 Mi
limit. Now each request with a body is charged its declared size while it is read and answered: past half of
`maxBufferedBodyBytes` for its source the answer is 429, past the whole budget 503, both at once (the body is not
read) and with Retry-After; the charge is given back when the request ends, however it ends.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson
import pytest

from . import served
from .test_connection_cap import PROMPT, _until
from .test_connection_share import FLOOD, OTHER, _tls_from

BUDGET = 100_000
BODY = 20_000
THIRD = "127.0.0.3"
KINDS = pytest.mark.parametrize(("kind", "path"), [("webhook", "/validate"), ("extender", "/prioritize")])


async def _partial(s: served.Served, source: str, path: str, size: int = BODY
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A request whose body never ends (all but its last byte are sent)."""
    reader, writer = await _tls_from(s, source)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {size}\r\n\r\n".encode() + b" " * (size - 1))
    await writer.drain()
    return reader, writer


async def _answer(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(PROMPT):
        return await reader.readuntil(b"\r\n\r\n") + await reader.read(1000)


def _held(s: served.Served) -> float | None:
    return s.registry.get_sample_value("gpuclaim_request_body_bytes")


@KINDS
async def test_bodies_past_a_source_share_get_429_and_past_the_budget_503(kind: str, path: str,
                                                                         tmp_path: Path) -> None:
    section = {"timeouts": {"bodySeconds": 60}, "maxBufferedBodyBytes": BUDGET}
    async with served.serve(kind, tmp_path, section) as s:
        open_ = [await _partial(s, FLOOD, path) for _ in range(2)]
        try:
            await _until(lambda: _held(s) == 2 * BODY, "two bodies charged")
            # the flood's third body would pass half the budget: 429 at once, its body unread
            reader, writer = await _partial(s, FLOOD, path)
            open_.append((reader, writer))
            answer = await _answer(reader)
            assert answer.startswith(b"HTTP/1.1 429"), answer
            assert b"Retry-After: 1\r\n" in answer
            assert b"half of maxBufferedBodyBytes (100000) per client" in answer
            # another source gets its share: two bodies are held for it
            open_ += [await _partial(s, OTHER, path) for _ in range(2)]
            await _until(lambda: _held(s) == 4 * BODY, "the other source's bodies charged")
            # a third source's body would pass the server's budget: 503
            reader, writer = await _partial(s, THIRD, path, 2 * BODY)
            open_.append((reader, writer))
            answer = await _answer(reader)
            assert answer.startswith(b"HTTP/1.1 503"), answer
            assert b"Retry-After: 1\r\n" in answer and b"would pass maxBufferedBodyBytes (100000)" in answer
            for scope in ("source", "server"):
                assert s.registry.get_sample_value("gpuclaim_request_bodies_refused_total", {"scope": scope}) == 1
        finally:
            for _reader, writer in open_:
                writer.close()
        # clients that went away give their charge back
        await _until(lambda: _held(s) == 0, "every charge given back")


@KINDS
async def test_a_body_alone_is_taken_whatever_its_size(kind: str, path: str, tmp_path: Path) -> None:
    async with served.serve(kind, tmp_path, {"timeouts": {"bodySeconds": 60}, "maxBufferedBodyBytes": 1000}) as s:
        reader, writer = await _partial(s, FLOOD, path, 5000)
        try:
            await _until(lambda: _held(s) == 5000, "the body charged")
            writer.write(b" ")  # its last byte: an answer that is not about the budget
            answer = await _answer(reader)
            assert not answer.startswith((b"HTTP/1.1 429", b"HTTP/1.1 503")), answer
        finally:
            writer.close()
        await _until(lambda: _held(s) == 0, "the charge given back")


async def test_an_answer_of_many_write_steps_arrives_whole_and_is_charged_until_written(tmp_path: Path) -> None:
    # answers are written in 64 KiB steps within the charge (so an unread one stops at the transport's high-water
    # mark instead of being encrypted whole); 10,000 equal priorities are ~300 KB, five steps
    names = [f"node-{i:05d}" for i in range(10_000)]
    body = orjson.dumps({"Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}},
                         "Nodes": None, "NodeNames": names})
    async with served.serve("extender", tmp_path, {}) as s:
        connector = aiohttp.TCPConnector(ssl=s.client)
        async with (aiohttp.ClientSession(connector=connector) as session,
                    session.post(f"https://{s.host}:{s.port}/prioritize", data=body,
                                 headers={"Content-Type": "application/json"}) as response):
            data = await response.read()
        assert response.status == 200 and len(data) > 4 * 64 * 1024
        assert response.headers["Content-Length"] == str(len(data))
        assert [entry["Host"] for entry in orjson.loads(data)] == names
        await _until(lambda: _held(s) == 0, "the body and the answer given back")
