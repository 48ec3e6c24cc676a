"""Hypothesis fuzzing of request bodies against the running server (real TLS, real cores when present):
every answer is a well-formed AdmissionReview echoing the uid, or a 4xx Status with a message; the server
keeps answering. Bounded in CI; GPUCLAIM_LONG=1 runs many more examples."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_helpers import StandInChecks, client_ssl, make_config, pod_review, reloader_for, start

from gpuclaim.double import tls as selfsigned
from gpuclaim.webhook import admit, app

EXAMPLES = 2000 if os.environ.get("GPUCLAIM_LONG") == "1" else 120

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20)
quantities = st.one_of(st.sampled_from(["1", "2", "0", "-1", "1.5", "33", "1k", "2Gi", "", "abc"]),
                       st.integers(-3, 40), json_values)
resources = st.dictionaries(st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "cpu",
                                             "example.com/x"]), quantities, max_size=3)
containers = st.lists(st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=12), "image": st.just("busybox")},
    optional={"resources": st.fixed_dictionaries({}, optional={"limits": resources, "requests": resources,
                                                               "claims": json_values})}), max_size=3)
pods = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod")},
    optional={"metadata": st.fixed_dictionaries({}, optional={"name": st.text(max_size=20),
                                                              "annotations": st.dictionaries(st.text(max_size=30),
                                                                                             st.text(max_size=10))}),
              "spec": st.fixed_dictionaries({}, optional={"containers": containers, "initContainers": containers,
                                                          "resourceClaims": json_values,
                                                          "nodeSelector": st.dictionaries(st.text(), st.text())})})


@st.composite
def reviews(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:
        return json.dumps(draw(json_values)).encode()
    doc: dict[str, Any] = pod_review(uid=draw(st.text(min_size=1, max_size=40)))
    request = doc["request"]
    request["operation"] = draw(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH", 3]))
    request["object"] = draw(st.one_of(pods, json_values)) if kind < 8 else pod_review(gpus=draw(quantities)
                                                                                        )["request"]["object"]
    for key in draw(st.lists(st.sampled_from(["kind", "resource", "namespace", "dryRun", "oldObject", "userInfo",
                                               "name", "subResource"]), max_size=3)):
        request[key] = draw(json_values)
    if kind == 2:
        doc[draw(st.sampled_from(["apiVersion", "kind"]))] = draw(json_values)
    return json.dumps(doc).encode()


class _Thread:
    """The server on its own event loop in a thread, so hypothesis can drive it synchronously."""

    def __init__(self, tls_files: selfsigned.TlsFiles, checks: admit.Checks) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.port = 0
        self.thread = threading.Thread(target=self._run, args=(tls_files, checks), daemon=True)

    def _run(self, tls_files: selfsigned.TlsFiles, checks: admit.Checks) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main(tls_files, checks))

    async def _main(self, tls_files: selfsigned.TlsFiles, checks: admit.Checks) -> None:
        self.stop = asyncio.Event()
        application = app.create_app(make_config(maxBodyBytes=4096), checks=checks, reloader=reloader_for(tls_files))
        runner, url = await start(application)
        self.port = int(url.rsplit(":", 1)[1])
        self.ready.set()
        await self.stop.wait()
        await runner.cleanup()

    def close(self) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module", params=["stand-in", "cores"])
def fuzz_server(request: pytest.FixtureRequest,
                tls_files: selfsigned.TlsFiles) -> Iterator[http.client.HTTPSConnection]:
    checks: admit.Checks = StandInChecks() if request.param == "stand-in" else admit.core_checks()
    server = _Thread(tls_files, checks)
    server.thread.start()
    assert server.ready.wait(10)
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=client_ssl(tls_files), timeout=10)
    try:
        yield connection
    finally:
        connection.close()
        server.close()


def _post(connection: http.client.HTTPSConnection, path: str, body: bytes) -> tuple[int, Any]:
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
    except (http.client.HTTPException, ConnectionError):
        connection.close()  # a 413 closes the connection; reconnect once
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
    return response.status, orjson.loads(response.read())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])
@given(body=reviews(), path=st.sampled_from(["/mutate", "/validate"]))
def test_every_body_gets_a_well_formed_answer(fuzz_server: http.client.HTTPSConnection, body: bytes,
                                              path: str) -> None:
    status, answer = _post(fuzz_server, path, body)
    if status == 200:
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        response = answer["response"]
        assert response["uid"] == orjson.loads(body)["request"]["uid"]
        assert isinstance(response["allowed"], bool)
        if not response["allowed"]:
            assert response["status"]["message"] and response["status"]["code"] >= 400
        assert ("patch" in response) == ("patchType" in response)
        assert path == "/mutate" or "patch" not in response
        assert all(isinstance(w, str) and w.isprintable() for w in response.get("warnings", []))
    else:
        assert status in (400, 413, 415) and answer["kind"] == "Status" and answer["message"]
    # the server is still there for the next one
    assert _post(fuzz_server, "/validate", orjson.dumps(pod_review()))[0] == 200
