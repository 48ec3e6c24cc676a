"""A request aiohttp cannot parse is logged without its bytes, on both servers.

aiohttp answers a header over 8,190 bytes with 400 and logs "Error handling request" at error level with the
parser's exception, whose message quotes the start of the header: with a long `Authorization` header, the
prefix of the token (found 2026-11-27). The log setup of both servers keeps the exception's class and status.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import orjson
import pytest

from . import served

TOKEN = "eyJhbGciOiJSUzI1NiJ9.secret-part-of-the-token"




@pytest.mark.parametrize(("kind", "path"), [("webhook", "/validate"), ("extender", "/prioritize")])
async def test_an_oversized_authorization_header_is_refused_and_its_token_is_not_logged(
        kind: str, path: str, tmp_path: Path, json_log: io.StringIO) -> None:
    async with served.serve(kind, tmp_path, {}) as s:
        reader, writer = await asyncio.open_connection(s.host, s.port, ssl=s.client, server_hostname="127.0.0.1")
        header = f"Bearer {TOKEN}" + "x" * 9000
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\nContent-Length: 2\r\n\r\n{{}}"
                     .encode())
        async with asyncio.timeout(10):
            answer = await reader.read(4096)
        writer.close()
    assert answer.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")), answer[:100]
    lines = [orjson.loads(line) for line in json_log.getvalue().splitlines() if line.strip()]
    (refused,) = [line for line in lines if line["logger"] == "aiohttp.server"]
    assert refused["level"] == "warning"
    assert "LineTooLong (400); the request's bytes are not logged" in refused["msg"]
    assert "exception" not in refused
    assert "secret-part" not in json_log.getvalue()
