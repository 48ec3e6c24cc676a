"""Mutate and validate over real TLS, one test per decision type: the uid echo, allowed, status, patch,
warnings, auditAnnotations, the request fields checks receive, and the internal-error policy."""

from __future__ import annotations

import base64
from typing import Any

import jsonpatch
import orjson
import pytest
from official_schemas import assert_valid
from server_helpers import FIXTURES, Server, StandInChecks, make_config, pod_review, reloader_for, serving

from gpuclaim.webhook import app


def _response(body: dict[str, Any]) -> dict[str, Any]:
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    return body["response"]


async def test_a_gpu_pod_is_mutated_with_a_jsonpatch_that_applies_and_yields_a_valid_pod(server: Server) -> None:
    sent = pod_review(gpus=2)
    status, body = await server.post("/mutate", sent)
    response = _response(body)
    assert status == 200 and response["uid"] == sent["request"]["uid"] and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = orjson.loads(base64.b64decode(response["patch"]))
    patched = jsonpatch.apply_patch(sent["request"]["object"], patch)
    assert patched["metadata"]["annotations"] == {"gpuclaim.io/converted": "true"}
    assert_valid(patched)
    assert "status" not in response and "warnings" not in response


async def test_a_pod_without_gpus_is_allowed_without_patch_or_patch_type(server: Server) -> None:
    status, body = await server.post("/mutate", pod_review(gpus=None))
    response = _response(body)
    assert status == 200 and response["allowed"] is True
    assert "patch" not in response and "patchType" not in response


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
async def test_a_denial_carries_status_422_invalid_and_the_field_path(server: Server, endpoint: str) -> None:
    status, body = await server.post(endpoint, pod_review(name="deny-me", uid="u-deny"))
    response = _response(body)
    assert status == 200 and response["uid"] == "u-deny" and response["allowed"] is False
    assert response["status"] == {
        "metadata": {}, "code": 422, "reason": "Invalid",
        "message": 'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "0": '
                   'must be a positive integer',
    }
    assert "patch" not in response


async def test_validate_denies_by_its_own_rule_with_a_forbidden_field(server: Server) -> None:
    sent = pod_review()
    sent["request"]["object"]["metadata"]["labels"] = {"tier": "forbidden"}
    _, body = await server.post("/validate", sent)
    assert _response(body)["status"]["message"] == "metadata.labels[tier]: Forbidden: tier forbidden is reserved"


async def test_warnings_and_audit_annotations_are_returned_cleaned(server: Server) -> None:
    _, body = await server.post("/validate", pod_review(name="warn-me"))
    response = _response(body)
    assert response["allowed"] is True
    assert response["warnings"] == ["spec.x: no device matches", "second line"]  # no newline in a header
    assert response["auditAnnotations"] == {"dra-check": "feasible-on-0-nodes"}
    registry = server.app[app.keys.REGISTRY]
    sample = registry.get_sample_value
    assert sample("gpuclaim_webhook_warnings_total", {"endpoint": "validate", "reason": "no-match"}) == 1
    assert sample("gpuclaim_webhook_warnings_total", {"endpoint": "validate", "reason": "other"}) == 1


async def test_validate_never_returns_a_patch_even_if_a_check_produced_one(server: Server) -> None:
    # the apiserver rejects a validating webhook's response that carries a patch
    _, body = await server.post("/validate", pod_review(gpus=1))
    assert "patch" not in _response(body)


async def test_checks_receive_operation_old_object_namespace_user_info_and_dry_run(server: Server) -> None:
    old = pod_review()["request"]["object"]
    sent = pod_review(operation="UPDATE", old=old, dry_run=True, namespace="team-a")
    await server.post("/validate", sent)
    assert isinstance(server.checks, StandInChecks)
    seen = server.checks.seen[-1]
    assert (seen.operation, seen.namespace, seen.dry_run) == ("UPDATE", "team-a", True)
    assert seen.old_object == old and seen.object is not None
    assert seen.user_info["username"] == "kubernetes-admin"
    assert (seen.kind.kind, seen.resource.resource) == ("Pod", "pods")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("object", "a string", 'request.object: Invalid value: "a string": must be a JSON object or null'),
    ("object", [1, 2], 'request.object: Invalid value: "<array>": must be a JSON object or null'),
    ("operation", "PATCH", 'request.operation: Unsupported value: "PATCH": supported values: "CREATE", "UPDATE", '
                           '"DELETE", "CONNECT"'),
    ("dryRun", "yes", 'request.dryRun: Invalid value: "yes": must be a boolean'),
    ("kind", None, "request.kind: Required value"),
], ids=["object-string", "object-array", "operation-unknown", "dryrun-string", "kind-missing"])
async def test_a_malformed_request_field_is_denied_naming_the_field(
        server: Server, field: str, value: Any, message: str) -> None:
    sent = pod_review(uid="u-bad-field")
    sent["request"][field] = value
    status, body = await server.post("/mutate", sent)
    response = _response(body)
    assert status == 200 and response["uid"] == "u-bad-field" and response["allowed"] is False
    assert response["status"]["code"] == 400 and response["status"]["message"] == message
    assert not server.checks.seen  # never reached a check


async def test_an_internal_error_in_mutate_admits_the_pod_unchanged_with_a_warning(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    status, body = await server.post("/mutate", pod_review(name="boom-1", uid="u-boom"))
    response = _response(body)
    assert status == 200 and response["allowed"] is True and "patch" not in response
    assert "admitted unchanged" in response["warnings"][0] and "u-boom" in response["warnings"][0]
    logged = [r for r in caplog.records if getattr(r, "uid", None) == "u-boom"]
    assert any(r.exc_info for r in logged)  # the traceback is in the log, with the uid
    assert "a bug in a check" not in orjson.dumps(body).decode()  # and not in the answer
    sample = server.app[app.keys.REGISTRY].get_sample_value
    assert sample("gpuclaim_webhook_admission_reviews_total",
                  {"endpoint": "mutate", "operation": "CREATE", "result": "error"}) == 1


async def test_an_internal_error_in_validate_is_a_denial_with_status_500(server: Server) -> None:
    _, body = await server.post("/validate", pod_review(name="boom-2", uid="u-boom2"))
    response = _response(body)
    assert response["allowed"] is False
    assert response["status"]["code"] == 500 and response["status"]["reason"] == "InternalError"
    assert "u-boom2" in response["status"]["message"]


async def test_the_internal_error_policy_is_read_from_config(tls_files: Any) -> None:
    config = make_config(internalErrorPolicy={"validate": "allow", "mutate": "deny"})
    application = app.create_app(config, checks=StandInChecks(), reloader=reloader_for(tls_files))
    async with serving(application, tls_files) as server:
        _, mutated = await server.post("/mutate", pod_review(name="boom"))
        _, validated = await server.post("/validate", pod_review(name="boom"))
    assert mutated["response"]["allowed"] is False and mutated["response"]["status"]["code"] == 500
    assert validated["response"]["allowed"] is True
    assert "without gpuclaim's checks" in validated["response"]["warnings"][0]


async def test_a_check_that_hangs_is_answered_before_the_apiserver_gives_up(server: Server) -> None:
    # the fixture's time limit is 1 s; the stand-in sleeps 30 s
    status, body = await server.post("/validate", pod_review(name="slow-30-x"))
    response = _response(body)
    assert status == 200 and response["allowed"] is False
    assert "did not finish within 1s" in response["status"]["message"]


async def test_the_captured_apiserver_request_is_answered_byte_for_byte_as_sent(server: Server) -> None:

    raw = (FIXTURES / "request-pod-create.wire.json").read_bytes()
    status, body = await server.post("/mutate", raw, raw=True)
    assert status == 200 and body == {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
                                      "response": {"uid": "3b5f1d2e-9c4a-4f7e-8a61-2d0c7b9e5a13", "allowed": True}}


async def test_requests_over_one_keep_alive_connection_each_get_their_own_uid(server: Server) -> None:
    import asyncio

    sent = [pod_review(uid=f"u-{i}", name=("deny" if i % 3 == 0 else "ok") + f"-{i}") for i in range(30)]
    answers = await asyncio.gather(*(server.post("/mutate", s) for s in sent))
    for s, (status, body) in zip(sent, answers, strict=True):
        assert status == 200 and body["response"]["uid"] == s["request"]["uid"]
        assert body["response"]["allowed"] is not s["request"]["name"].startswith("deny")
