"""Structured logs: one JSON line per admission at debug, per denial/error at info, with the uid; never the
object's contents (env values may be secrets)."""

from __future__ import annotations

import io
import logging

import orjson
import pytest
from server_helpers import Server, pod_review

from gpuclaim.serving import logs as wlogging

SECRET = "s3cr3t-value-from-env"




def _secret_pod(name: str, uid: str) -> dict[str, object]:
    doc = pod_review(name=name, uid=uid)
    doc["request"]["object"]["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": SECRET}]
    return doc


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


async def test_each_admission_is_one_json_line_at_debug_with_the_uid(server: Server, json_log: io.StringIO) -> None:
    await server.post("/mutate", _secret_pod("pod-a", "u-debug"))
    (line,) = [x for x in _lines(json_log) if x.get("uid") == "u-debug"]
    assert line["level"] == "debug" and line["msg"] == "admitted"
    assert (line["endpoint"], line["operation"], line["kind"], line["object_name"]) == ("mutate", "CREATE", "Pod",
                                                                                        "pod-a")
    assert line["patch_ops"] == 1 and line["converted"] is True and isinstance(line["duration_ms"], float)
    assert SECRET not in json_log.getvalue()


async def test_denials_and_internal_errors_are_logged_at_info_without_object_contents(
        server: Server, json_log: io.StringIO) -> None:
    logging.getLogger("gpuclaim").setLevel(logging.INFO)  # the fixture restores it
    await server.post("/validate", _secret_pod("deny-a", "u-deny"))
    await server.post("/mutate", _secret_pod("boom-a", "u-boom"))
    await server.post("/mutate", _secret_pod("pod-b", "u-quiet"))
    lines = _lines(json_log)
    denied = [x for x in lines if x.get("uid") == "u-deny"]
    assert [x["msg"] for x in denied] == ["denied"] and denied[0]["level"] == "info"
    assert denied[0]["reason"] == "FieldValueInvalid" and "spec.containers[0]" in str(denied[0]["denial"])
    errors = [x for x in lines if x.get("uid") == "u-boom"]
    assert {x["msg"] for x in errors} == {"admission check failed", "internal error answered per "
                                          "webhook.internalErrorPolicy"}
    assert any("RuntimeError: a bug in a check" in str(x.get("exception")) for x in errors)
    assert not [x for x in lines if x.get("uid") == "u-quiet"]  # allowed: nothing at info
    assert SECRET not in json_log.getvalue()


def test_the_text_format_is_one_readable_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(wlogging.TextFormatter())
    record = logging.LogRecord("gpuclaim.webhook", logging.INFO, "", 0, "denied", None, None)
    record.uid = "u-1"
    handler.emit(record)
    assert stream.getvalue() == "info    gpuclaim.webhook: denied uid=u-1\n"


def _deep(n: int) -> None:
    if n:
        _deep(n - 1)
    raise RecursionError("maximum recursion depth exceeded in " + "(" * 200_000)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_deep_traceback_is_logged_bounded(fmt: str) -> None:
    """Issue 14, finding 8: a RecursionError logged ~124 KB per request."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(wlogging.JsonFormatter() if fmt == "json" else wlogging.TextFormatter())
    try:
        _deep(600)
    except RecursionError:
        import sys
        record = logging.LogRecord("gpuclaim.webhook", logging.ERROR, "", 0, "admission check failed", None,
                                   sys.exc_info())
    handler.emit(record)
    text = stream.getvalue()
    assert len(text) < wlogging.MAX_EXCEPTION_CHARS + 500
    assert "characters of traceback left out" in text and "RecursionError" in text
