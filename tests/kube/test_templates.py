"""ensure_template: new, identical existing, different existing, API down or slow."""

from __future__ import annotations

import copy
import socket
import time
from typing import Any

import pytest
from official_schemas import assert_valid

from gpuclaim.double.apiserver import Fault, RunningDouble
from gpuclaim.kube import ApiConfig, KubeClient, TemplateError, ensure_template

NS = "default"


def _template(count: int = 2, name: str = "gpuclaim-abc123") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpuclaim"}},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}},
        ]}}},
    }


def test_the_template_fixture_is_a_valid_1_34_object() -> None:
    assert_valid(_template())


async def test_a_new_template_is_created(double: RunningDouble, client: KubeClient) -> None:
    created = await ensure_template(client, NS, _template())
    assert created["metadata"]["uid"]
    stored = double.store.list(_rt(), NS, lambda _: True)[0]
    assert [o["metadata"]["name"] for o in stored] == ["gpuclaim-abc123"]


async def test_an_identical_existing_template_is_success(double: RunningDouble, client: KubeClient) -> None:
    first = await ensure_template(client, NS, _template())
    # the server stored defaults (allocationMode, count) the caller did not write: still identical
    again = await ensure_template(client, NS, _template())
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert again["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] == "ExactCount"


async def test_defaults_written_or_omitted_compare_equal(client: KubeClient) -> None:
    sparse = _template(count=1)
    del sparse["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
    await ensure_template(client, NS, sparse)
    explicit = copy.deepcopy(_template(count=1))
    explicit["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "ExactCount"
    await ensure_template(client, NS, explicit)


async def test_a_different_existing_template_is_a_clear_error(client: KubeClient) -> None:
    await ensure_template(client, NS, _template(count=2))
    with pytest.raises(TemplateError) as info:
        await ensure_template(client, NS, _template(count=4))
    assert info.value.reference == "template-differs"
    assert str(info.value) == (
        "ResourceClaimTemplate default/gpuclaim-abc123 already exists with a different spec: "
        "spec.spec.devices.requests[0].exactly.count: existing 2, wanted 4")


async def test_dry_run_creates_nothing(double: RunningDouble, client: KubeClient) -> None:
    await ensure_template(client, NS, _template(), dry_run=True)
    assert double.store.count(_rt()) == 0


async def test_an_invalid_template_is_rejected_with_the_servers_message(client: KubeClient) -> None:
    bad = _template()
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["bogus"] = True
    with pytest.raises(TemplateError) as info:
        await ensure_template(client, NS, bad)
    assert info.value.reference == "api-refused" and info.value.status is not None
    assert info.value.status[0] == 422
    assert "422" in str(info.value) and "bogus" in str(info.value)


async def test_a_slow_api_fails_within_the_time_limit(double: RunningDouble, client: KubeClient) -> None:
    double.faults.add(Fault(kind="delay", verbs=frozenset({"create"}), delay_seconds=5.0))
    started = time.monotonic()
    with pytest.raises(TemplateError) as info:
        await ensure_template(client, NS, _template(), time_limit=0.5)
    assert time.monotonic() - started < 1.5
    assert info.value.reference == "api-unavailable"
    assert "did not answer within 0.5s" in str(info.value)


async def test_an_api_that_is_down_is_a_clear_error_within_the_time_limit() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = KubeClient(ApiConfig(server=f"http://127.0.0.1:{port}"))
    started = time.monotonic()
    with pytest.raises(TemplateError) as info:
        await ensure_template(down, NS, _template(), time_limit=2.0)
    await down.close()
    assert time.monotonic() - started < 2.5
    assert info.value.reference == "api-unavailable"
    assert f"127.0.0.1:{port}" in str(info.value)


def _rt() -> Any:
    from gpuclaim.double.apiserver.resources import BY_KEY

    return BY_KEY["resource.k8s.io/v1/resourceclaimtemplates"]
