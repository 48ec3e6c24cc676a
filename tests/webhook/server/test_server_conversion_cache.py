"""The webhook's conversion cache against the real cluster view of the API double: pods of one shape reuse one
conversion (the patch bytes are identical), and a DeviceClass or namespace-label change seen by the watch changes
the next answer for that same shape (no stale entry survives it)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from server_helpers import Server, classes_double, make_config, pod_review, reloader_for, serving

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.client import KubeClient
from gpuclaim.webhook import admit, app, keys

NAMESPACE = "gpu-test1"


@pytest.fixture
async def double(tmp_path: Path) -> AsyncIterator[RunningDouble]:
    running = await classes_double(tmp_path, NAMESPACE)
    yield running
    await running.close()


@pytest.fixture
async def client(double: RunningDouble) -> AsyncIterator[KubeClient]:
    kube = KubeClient(kube_config.from_kubeconfig(double.kubeconfig))
    yield kube
    await kube.close()


@pytest.fixture
async def live(double: RunningDouble, tls_files: selfsigned.TlsFiles) -> AsyncIterator[tuple[Server, admit.CoreChecks]]:
    checks = admit.CoreChecks(own_namespace="gpuclaim")
    application = app.create_app(make_config(), checks=checks, reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig))
    async with serving(application, tls_files) as server:
        await _until(lambda: application[keys.STATE].context.cluster is not None
                     and application[keys.STATE].context.cluster.synced)
        yield server, checks


async def _until(condition: Callable[[], bool], within: float = 10.0) -> None:
    for _ in range(int(within / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not true within {within:g}s")


async def _mutate(server: Server, n: int) -> dict[str, Any]:
    status, body = await server.post("/mutate", pod_review(name=f"train-{n}", uid=f"u-{n}", gpus=1))
    assert status == 200, body
    return dict(body["response"])


def _cluster(server: Server) -> Any:
    return server.app[keys.STATE].context.cluster


async def test_pods_of_one_shape_reuse_the_conversion(live: tuple[Server, admit.CoreChecks]) -> None:
    server, checks = live
    first = await _mutate(server, 0)
    assert first["allowed"] is True and first["patchType"] == "JSONPatch"
    await _until(lambda: _cluster(server).template(NAMESPACE, _template_name(first)) is not None)
    answers = [await _mutate(server, n) for n in range(1, 6)]
    assert {a["patch"] for a in answers} == {first["patch"]}
    assert checks.conversions.misses == 1 and checks.conversions.hits == 5


def _template_name(response: dict[str, Any]) -> str:
    ops = orjson.loads(base64.b64decode(response["patch"]))
    return str(ops[0]["value"][0]["resourceClaimTemplateName"])


async def test_a_device_class_change_reaches_the_next_pod_of_a_cached_shape(
        live: tuple[Server, admit.CoreChecks], client: KubeClient) -> None:
    server, checks = live
    before = await _mutate(server, 0)
    assert any("KEP-5004" in w for w in before["warnings"])  # gpu.nvidia.com declares nvidia.com/gpu
    path = "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com"
    changed = await client.patch(path, {"spec": {"extendedResourceName": None}})
    version = changed["metadata"]["resourceVersion"]
    await _until(lambda: _cluster(server).device_class("gpu.nvidia.com")["metadata"]["resourceVersion"] == version)
    after = await _mutate(server, 1)
    assert after["allowed"] is True and "patch" in after
    assert not any("KEP-5004" in w for w in after.get("warnings", ()))
    await client.delete(path)
    await _until(lambda: _cluster(server).device_class("gpu.nvidia.com") is None)
    gone = await _mutate(server, 2)  # requireClassesExist (default on): the mapped class no longer exists
    assert gone["allowed"] is False and "gpu.nvidia.com does not exist" in gone["status"]["message"]
    assert checks.conversions.hits == 0 and checks.conversions.misses == 3


async def test_a_namespace_opt_out_label_reaches_the_next_pod_of_a_cached_shape(
        live: tuple[Server, admit.CoreChecks], client: KubeClient) -> None:
    server, _checks = live
    assert "patch" in await _mutate(server, 0)
    await client.patch(f"/api/v1/namespaces/{NAMESPACE}", {"metadata": {"labels": {"gpuclaim.io/webhook": "disabled"}}})
    await _until(lambda: (_cluster(server).namespace_labels(NAMESPACE) or {}).get("gpuclaim.io/webhook") == "disabled")
    opted_out = await _mutate(server, 1)
    assert opted_out["allowed"] is True and "patch" not in opted_out
