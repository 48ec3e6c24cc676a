"""A small answer leaves the server as one TLS record: head and body in one write.

Each answer used to be written as a stream whose head went out at `prepare`, then the body: two records and two
sends per call, each waking the client. kube-scheduler waits for both on every /filter and /prioritize of every
scheduling cycle; in the scheduler bench (2026-11-27) a third of the extender's wall time was in those sends.

The test reads the raw bytes of the connection and decrypts them itself (ssl.SSLObject over memory BIOs), so it
counts the records the server wrote for the second answer on a kept-alive connection (the first may share the
wire with TLS 1.3's session tickets).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from . import served

KINDS = pytest.mark.parametrize(("kind", "path"), [("webhook", "/validate"), ("extender", "/prioritize")])
APPLICATION_DATA = 23


def _records(raw: bytes) -> list[int]:
    """The content types of the TLS records in `raw` (whole records only)."""
    types, at = [], 0
    while at + 5 <= len(raw):
        types.append(raw[at])
        at += 5 + int.from_bytes(raw[at + 3:at + 5], "big")
    return types


class _Client:
    def __init__(self, s: served.Served) -> None:
        self.sock = socket.create_connection((s.host, s.port), timeout=10)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = s.client.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self.incoming.write(self.sock.recv(65536))
        self._flush()

    def _flush(self) -> None:
        if pending := self.outgoing.read():
            self.sock.sendall(pending)

    def exchange(self, request: bytes) -> tuple[bytes, bytes]:
        """The answer's plaintext and the raw bytes it came in."""
        self.tls.write(request)
        self._flush()
        raw, plain = b"", b""
        while True:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            raw += chunk
            self.incoming.write(chunk)
            try:
                while True:
                    plain += self.tls.read(65536)
            except ssl.SSLWantReadError:
                pass
            head, sep, body = plain.partition(b"\r\n\r\n")
            if sep:
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                if len(body) >= length:
                    return plain, raw


@KINDS
async def test_a_small_answer_is_one_tls_record(kind: str, path: str, tmp_path: Path) -> None:
    async with served.serve(kind, tmp_path, {}) as s:
        request = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: 2\r\n\r\n{{}}").encode()
        client = await asyncio.to_thread(_Client, s)
        try:
            await asyncio.to_thread(client.exchange, request)
            plain, raw = await asyncio.to_thread(client.exchange, request)
        finally:
            client.sock.close()
    assert plain.startswith(b"HTTP/1.1 ") and len(plain) < 16_000, plain
    assert _records(raw) == [APPLICATION_DATA], f"the answer came in records {_records(raw)}: {plain!r}"
