"""One long-lived oracle process spoken to in JSON lines: each request carries an ``id``, each reply echoes it, and
replies come back in request order. Both oracles' clients are this exchange plus their own request shapes."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any


class OracleError(RuntimeError):
    """The oracle process died, or answered something that is not a reply to the request sent."""


class JsonLinesProcess:
    """``exchange(requests)`` streams a batch through the process. Subclasses name the oracle and say which replies
    mean the oracle itself failed (``_failure``), as opposed to an answer about the request."""

    name = "oracle"

    def __init__(self, path: Path) -> None:
        self._proc = subprocess.Popen([str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)  # fmt: skip
        self._next = 0
        self._lock = threading.Lock()  # one batch at a time: the ids of two interleaved batches would not match

    def __enter__(self) -> JsonLinesProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    def _failure(self, reply: Mapping[str, Any]) -> str | None:
        """Why ``reply`` says the oracle failed (a protocol error, a panic), or None for an answer."""
        return None

    def exchange(self, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Replies in request order. Lines are written from a thread so that a long batch cannot deadlock on the
        pipes (the oracle answers while we still write)."""
        with self._lock:
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            first = self._next
            self._next += len(requests)
            lines = [json.dumps({**r, "id": first + i}) + "\n" for i, r in enumerate(requests)]
            writer = threading.Thread(target=_write, args=(proc.stdin, lines), daemon=True)
            writer.start()
            out = []
            for i, request in enumerate(requests):
                line = proc.stdout.readline()
                if not line:
                    err = proc.stderr.read() if proc.stderr is not None else ""
                    raise OracleError(f"{self.name} exited ({proc.poll()}): {err[-2000:]}")
                reply = json.loads(line)
                if reply.get("id") != first + i:
                    raise OracleError(f"reply {reply.get('id')} out of order, expected {first + i}")
                failure = self._failure(reply)
                if failure is not None:
                    raise OracleError(f"{self.name} failed on request {i} {dict(request)!r}: {failure}")
                out.append(reply)
            writer.join()
            return out


def _write(stream: IO[str], lines: list[str]) -> None:
    try:
        for line in lines:
            stream.write(line)
        stream.flush()
    except BrokenPipeError:  # the reader reports the exit, with the oracle's stderr
        pass
