"""Every bad input is answered (HTTP 4xx with a Status naming the reason), never a crash or a bare 500."""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

import orjson
import pytest
from server_helpers import Server, pod_review

from gpuclaim.certs import client_context
from gpuclaim.webhook import keys


@pytest.mark.parametrize(("body", "reason"), [
    (b"{not json", "body is not JSON"),
    (b"", "body is not JSON"),
    (b"\xff\xfe\x00", "body is not JSON"),
    (b"[1, 2]", "body is a JSON list, not an AdmissionReview object"),
    (b'"AdmissionReview"', "body is a JSON str, not an AdmissionReview object"),
    (b'{"kind": "Pod", "apiVersion": "v1"}', "kind is 'Pod', expected 'AdmissionReview'"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {"uid": "x"}}',
     "apiVersion 'admission.k8s.io/v1beta1' is not supported: this webhook speaks admission.k8s.io/v1 only"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', "request: an AdmissionReview sent to"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": []}', "request: an Admission"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": ""}}',
     "request.uid: must be a non-empty string"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": 7}}',
     "request.uid: must be a non-empty string"),
], ids=["truncated", "empty", "binary", "array", "string", "wrong-kind", "v1beta1", "no-request",
        "request-array", "empty-uid", "uid-number"])
@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
async def test_a_body_that_is_not_an_answerable_review_gets_400_with_the_reason(
        server: Server, endpoint: str, body: bytes, reason: str) -> None:
    status, answer = await server.post(endpoint, body, raw=True)
    assert status == 400
    assert answer["kind"] == "Status" and answer["code"] == 400 and answer["reason"] == "BadRequest"
    assert reason in answer["message"]


def _padded(size: int) -> bytes:
    """A valid review whose serialised size is exactly `size` bytes (padding in an annotation)."""
    doc = pod_review()
    doc["request"]["object"]["metadata"]["annotations"] = {"pad": ""}
    base = len(orjson.dumps(doc))
    doc["request"]["object"]["metadata"]["annotations"]["pad"] = "x" * (size - base)
    raw = orjson.dumps(doc)
    assert len(raw) == size
    return raw


async def test_a_review_exactly_at_the_body_limit_is_answered(server: Server) -> None:
    limit = server.app[keys.CONFIG].webhook.max_body_bytes
    status, answer = await server.post("/mutate", _padded(limit), raw=True)
    assert status == 200 and answer["response"]["allowed"] is True


async def test_a_review_one_byte_over_the_body_limit_gets_413_naming_the_limit(server: Server) -> None:
    limit = server.app[keys.CONFIG].webhook.max_body_bytes
    status, answer = await server.post("/mutate", _padded(limit + 1), raw=True)
    assert status == 413 and answer["reason"] == "RequestEntityTooLarge"
    assert f"limit of {limit} bytes (webhook.maxBodyBytes)" in answer["message"]
    # and the server still answers afterwards
    status, _ = await server.post("/mutate", pod_review())
    assert status == 200


async def test_a_body_of_another_content_type_gets_415(server: Server) -> None:
    status, answer = await server.post("/mutate", orjson.dumps(pod_review()), raw=True,
                                       headers={"Content-Type": "application/yaml"})
    assert status == 415 and "expected application/json" in answer["message"]


async def test_a_body_without_content_type_is_read_as_json(server: Server) -> None:
    async with server.session.post(server.url + "/mutate", data=orjson.dumps(pod_review()),
                                   skip_auto_headers=["Content-Type"]) as response:
        assert response.status == 200


async def test_get_on_the_admission_paths_is_405_and_unknown_paths_404(server: Server) -> None:
    status, _ = await server.get("/mutate")
    assert status == 405
    status, _ = await server.get("/nothing")
    assert status == 404


async def test_bad_requests_are_counted_by_endpoint_and_code(server: Server) -> None:
    await server.post("/validate", b"nope", raw=True)
    await server.post("/validate", b"nope", raw=True)
    sample = server.app[keys.REGISTRY].get_sample_value
    assert sample("gpuclaim_webhook_bad_requests_total", {"endpoint": "validate", "code": "400"}) == 2
    assert sample("gpuclaim_webhook_admission_reviews_total",
                  {"endpoint": "validate", "operation": "unknown", "result": "rejected"}) == 2


async def test_a_review_with_extra_unknown_fields_is_still_answered(server: Server) -> None:
    doc: dict[str, Any] = pod_review(uid="u-extra")
    doc["futureField"] = {"x": 1}
    doc["request"]["somethingNew"] = [1]
    status, answer = await server.post("/validate", doc)
    assert status == 200 and answer["response"]["uid"] == "u-extra"


async def _expect_continue(server: Server, path: str, length: int, send_body: bytes | None = None) -> list[bytes]:
    """Send a head with `Expect: 100-continue` over TLS; the status lines the server answers before any body
    (then the body, when `send_body` is given, and the final status line)."""
    url = urllib.parse.urlsplit(server.url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port, ssl=client_context(ca_pem=server.ca_pem),
                                                   server_hostname="localhost")
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {length}\r\nExpect: 100-continue\r\n\r\n".encode())
        await writer.drain()
        lines = [await asyncio.wait_for(reader.readline(), 5)]
        if send_body is not None and lines[0].startswith(b"HTTP/1.1 100"):
            await reader.readline()  # the blank line after the interim answer
            writer.write(send_body)
            await writer.drain()
            lines.append(await asyncio.wait_for(reader.readline(), 5))
        return lines
    finally:
        writer.close()


async def test_expect_continue_with_a_length_over_the_limit_gets_413_not_100(server: Server) -> None:
    """Issue 22, item 7: aiohttp's default answered `100 Continue` to any declared length, inviting a body the
    server then refused."""
    limit = server.app[keys.CONFIG].webhook.max_body_bytes
    (line,) = await _expect_continue(server, "/mutate", limit + 1)
    assert line.startswith(b"HTTP/1.1 413 ")
    body = _padded(limit)
    lines = await _expect_continue(server, "/validate", len(body), send_body=body)
    assert lines[0].startswith(b"HTTP/1.1 100 ") and lines[1].startswith(b"HTTP/1.1 200 ")
    assert server.app[keys.REGISTRY].get_sample_value(
        "gpuclaim_webhook_bad_requests_total", {"endpoint": "mutate", "code": "413"}) == 1
