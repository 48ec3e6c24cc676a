"""Structured logs: one JSON object per line on stderr, `extra={...}` fields included (uid, endpoint, ...).

Callers put identifiers in `extra` (uid, kind, namespace, name, result, reasons), never object contents: a pod's
env values may be secrets. Messages of denials are the users' own field paths and our prose, not values from
containers' env (the cores render values only for the fields they check).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

import orjson

#: a traceback in the log is cut to its first and last lines beyond this (issue 14, finding 8: a RecursionError
#: logged ~124 KB per request); a log line stays bounded whatever the request
MAX_EXCEPTION_CHARS = 8192


def bounded_exception(text: str, limit: int = MAX_EXCEPTION_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - 2 * half} characters of traceback left out) ...\n{text[-half:]}"


# attributes every LogRecord has: anything else on a record came from `extra`
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = bounded_exception(self.formatException(record.exc_info))
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """For people at a terminal: the message, then the extra fields as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_"))
        line = f"{record.levelname.lower():7} {record.name}: {record.getMessage()}" + (f" {extras}" if extras else "")
        if record.exc_info:
            line += "\n" + bounded_exception(self.formatException(record.exc_info))
        return line


class ClientBytesRedaction(logging.Filter):
    """aiohttp logs a request it cannot parse (a header over 8,190 bytes, a bad request line) at error level with
    the parser's exception, whose message quotes the start of the offending bytes: the prefix of a token in an
    `Authorization` header (found 2026-11-27). Such a record keeps the exception's class and status, never its
    text, at warning level: the client sent bad HTTP, the server did nothing wrong."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = f"{record.getMessage()}: {type(exc).__name__} ({exc.code}); the request's bytes are not logged"
            record.args = ()
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def setup(*, level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> logging.Handler:
    """Configure the root logger once for the server process; returns the handler (tests remove it)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # aiohttp's access log would duplicate our per-admission line (and it is not JSON)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, ClientBytesRedaction) for f in server_log.filters):
        server_log.addFilter(ClientBytesRedaction())
    return handler
