"""The encoder produces exactly the responses kube-apiserver accepted (tests/fixtures/admission), and none of
the shapes it rejected; decode keeps the request fields the checks need."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from server_helpers import FIXTURES

from gpuclaim.webhook import review

VERIFIED = {case["name"]: case for case in orjson.loads((FIXTURES / "responses-verified.json").read_bytes())}
UID = "3b5f1d2e-9c4a-4f7e-8a61-2d0c7b9e5a13"


def _ours(name: str) -> review.Response:
    wire = VERIFIED[name]["responseJSON"]["response"]
    status = wire.get("status")
    return review.Response(
        uid=wire["uid"], allowed=wire["allowed"],
        status=review.Status(status["code"], status["reason"], status["message"]) if status else None,
        patch=orjson.loads(base64.b64decode(wire["patch"])) if "patch" in wire else None,
        warnings=tuple(wire.get("warnings", ())), audit_annotations=wire.get("auditAnnotations", {}),
    )


@pytest.mark.parametrize("name", [n for n, c in VERIFIED.items() if c["apiserverVerdict"].startswith("ACCEPTED")])
def test_each_response_the_apiserver_accepted_is_what_we_encode(name: str) -> None:
    assert orjson.loads(review.encode(_ours(name))) == VERIFIED[name]["responseJSON"]


def test_none_of_the_rejected_shapes_can_come_out_of_the_encoder() -> None:
    rejected = [c["name"] for c in VERIFIED.values() if c["apiserverVerdict"].startswith("REJECTED")]
    assert len(rejected) == 5
    wire = review.to_wire(review.Response(UID, True, patch=[{"op": "add", "path": "/x", "value": 1}]))
    assert wire["apiVersion"] == "admission.k8s.io/v1" and "response" in wire  # ERR-wrong-apiVersion, no-response
    assert wire["response"]["patchType"] == "JSONPatch"  # ERR-mutating-patch-without-type
    assert "patch" not in review.to_wire(review.Response(UID, True, patch=[]))["response"]


def test_decode_reads_the_captured_apiserver_request() -> None:
    request, errors = review.decode((FIXTURES / "request-pod-create.wire.json").read_bytes())
    assert errors == []
    assert (request.uid, request.operation, request.namespace, request.name) == (UID, "CREATE", "gpu-test1", "pod0")
    assert request.kind == review.GroupVersionKind("", "v1", "Pod")
    assert request.resource == review.GroupVersionResource("", "v1", "pods")
    assert request.dry_run is False and request.old_object is None
    assert request.object is not None and request.object["spec"]["containers"][0]["args"][0].endswith("& wait")
    assert request.user_info["groups"] == ["kubeadm:cluster-admins", "system:authenticated"]


def test_many_warnings_are_capped_and_say_how_many_were_left_out() -> None:
    wire: dict[str, Any] = review.to_wire(review.Response(UID, True, warnings=[f"w{i}" for i in range(100)]))
    warnings = wire["response"]["warnings"]
    assert len(warnings) == review.MAX_WARNINGS and warnings[-1] == "... and 69 more warnings"


def test_a_long_warning_is_truncated_and_control_characters_become_spaces() -> None:
    wire = review.to_wire(review.Response(UID, True, warnings=["a\tb\r\n" + "x" * 2000]))
    (warning,) = wire["response"]["warnings"]
    assert warning.startswith("a b  x") and len(warning) == review.MAX_WARNING_CHARS and warning.endswith("...")
