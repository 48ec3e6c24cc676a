"""The server with the real cores (conversion and validation) and the cluster view of the API double, in
process over TLS: dryRun creates nothing, a real admission creates the template the patch references, a
selector gpuclaim cannot compile is admitted with a warning at its field path (the apiserver compiled it first),
and the Kubernetes version is read from /version and followed across a relist."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import kubernetes_validate
import orjson
import pytest
import yaml
from eventually import eventually
from server_helpers import FIXTURES, Server, client_ssl, make_config, pod_review, reloader_for, start

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import Fault, RunningDouble, Settings, Store, serve
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.client import KubeClient
from gpuclaim.webhook import admit, app, keys

CLASSES = FIXTURES.parent / "deviceclasses" / "ALL-rendered-resource.k8s.io-v1.yaml"
SLICES = FIXTURES.parent / "resourceslices" / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/gpu-test1/resourceclaimtemplates"


@pytest.fixture
async def double(tmp_path: Path) -> AsyncIterator[RunningDouble]:
    running = await serve(store=Store(), workdir=tmp_path, settings=Settings(bookmark_interval=0.2))
    running.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-test1"}})
    for doc in yaml.safe_load_all(CLASSES.read_text()):
        if doc:
            running.store.restore(doc)
    for item in yaml.safe_load(SLICES.read_text())["items"]:
        running.store.restore(item)
    yield running
    await running.close()


@pytest.fixture
async def live(double: RunningDouble, tls_files: selfsigned.TlsFiles) -> AsyncIterator[Server]:
    application = app.create_app(make_config(), checks=admit.core_checks(own_namespace="gpuclaim"),
                                 reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig))
    runner, url = await start(application)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl(tls_files)))
    try:
        server = Server(url, application, session, None, tls_files.ca_pem)
        for _ in range(200):
            if (await server.get("/readyz"))[0] == 200:
                break
            await asyncio.sleep(0.05)
        assert (await server.get("/readyz"))[0] == 200
        yield server
    finally:
        await session.close()
        await runner.cleanup()


async def _templates(double: RunningDouble) -> list[dict[str, Any]]:
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig))
    try:
        return (await client.list(TEMPLATES))["items"]
    finally:
        await client.close()


async def test_dry_run_converts_the_pod_but_creates_nothing(live: Server, double: RunningDouble) -> None:
    status, body = await live.post("/mutate", pod_review(gpus=2, dry_run=True))
    response = body["response"]
    assert status == 200 and response["allowed"] is True and response["patchType"] == "JSONPatch"
    assert await _templates(double) == []
    sample = live.app[keys.REGISTRY].get_sample_value
    assert sample("gpuclaim_webhook_templates_created_total") == 0
    assert sample("gpuclaim_webhook_conversions_total") == 1


async def test_a_real_admission_creates_the_template_the_patched_pod_references(
        live: Server, double: RunningDouble) -> None:
    sent = pod_review(gpus=2)
    status, body = await live.post("/mutate", sent)
    response = body["response"]
    assert status == 200 and response["allowed"] is True, response
    patched = jsonpatch.apply_patch(sent["request"]["object"], orjson.loads(base64.b64decode(response["patch"])))
    kubernetes_validate.validate(patched, "1.34.0", strict=True)
    limits = patched["spec"]["containers"][0].get("resources", {}).get("limits", {})
    assert "nvidia.com/gpu" not in limits
    (template,) = await _templates(double)
    referenced = {c.get("resourceClaimTemplateName") for c in patched["spec"]["resourceClaims"]}
    assert template["metadata"]["name"] in referenced
    assert live.app[keys.REGISTRY].get_sample_value("gpuclaim_webhook_templates_created_total") == 1
    # a second pod of the same shape reuses it
    status, body = await live.post("/mutate", pod_review(gpus=2, name="pod1", uid="u-second"))
    assert status == 200 and body["response"]["allowed"] is True
    assert len(await _templates(double)) == 1


async def test_an_api_server_outage_while_creating_admits_the_pod_unchanged_with_a_warning(
        live: Server, double: RunningDouble) -> None:
    await double.close()  # the cluster view saw no template, and creating one now cannot work
    status, body = await live.post("/mutate", pod_review(gpus=1, uid="u-outage"))
    response = body["response"]
    assert status == 200 and response["allowed"] is True and "patch" not in response
    assert "admitted unchanged" in response["warnings"][0] and "u-outage" in response["warnings"][0]


def _claim_review(expression: str) -> dict[str, Any]:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "gpu-test1"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {
                     "expression": expression}}]}}]}}}
    doc = pod_review()
    doc["request"].update(kind={"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
                          resource={"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
                          object=claim, name="c")
    return doc


async def test_validate_admits_a_selector_it_cannot_compile_with_a_warning_at_its_field_path(live: Server) -> None:
    # kube-apiserver compiles selectors before any webhook runs: one gpuclaim cannot compile was admitted there
    status, body = await live.post("/validate", _claim_review(
        'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")'))
    response = body["response"]
    assert status == 200 and response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith("spec.devices.requests[0].exactly.selectors[0].cel.expression: not checked: ")


async def test_the_kubernetes_version_is_read_from_the_cluster_and_followed_after_a_relist(
        live: Server, double: RunningDouble) -> None:
    registry = live.app[keys.REGISTRY]
    state = live.app[keys.STATE]

    def modelled(name: str) -> bool:
        return registry.get_sample_value("gpuclaim_kubernetes_version_info", {
            "model": name, "cluster": double.settings.git_version, "source": "cluster"}) == 1.0

    def relist_at(git_version: str) -> None:
        """The control plane changes version: its watches answer 410 and gpuclaim relists."""
        double.settings.git_version = git_version
        double.faults.add(Fault(kind="status", verbs=frozenset({"watch"}), resources=frozenset({"nodes"}),
                                code=410, times=1))
        double.store.close_watches()

    sort = "[2, 1].sort()[0] == 1"  # ext.Lists v3: new selectors have it from 1.35
    await eventually(lambda: modelled("1.37"))  # the double plays the newest minor
    relist_at("v1.34.4")
    await eventually(lambda: modelled("1.34"), within=10.0)
    _, body = await live.post("/validate", _claim_review(sort))
    assert "not checked" in body["response"]["warnings"][0]
    relist_at("v1.37.2")  # upgraded
    await eventually(lambda: modelled("1.37"), within=10.0)
    assert state.context.kubernetes().name == "1.37"
    _, body = await live.post("/validate", _claim_review(sort))
    assert body["response"]["allowed"] is True and "warnings" not in body["response"]


async def test_validate_dry_runs_selectors_against_the_live_devices(live: Server) -> None:
    # the p5 nodes publish H100s: a selector for A100s matches none of them (a warning by default)
    a100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"
    h100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
    for _ in range(2):  # the live inventory is built once, not per request
        _, none = await live.post("/validate", _claim_review(a100))
        _, some = await live.post("/validate", _claim_review(h100))
        assert none["response"]["allowed"] is True and none["response"]["warnings"]
        assert some["response"]["allowed"] is True and "warnings" not in some["response"]


async def test_before_the_cluster_view_has_synced_gpu_pods_follow_the_internal_error_policy(
        double: RunningDouble, tls_files: selfsigned.TlsFiles) -> None:
    # found by the reliability suite: right after a restart the view knew no DeviceClass yet, and a GPU pod was
    # refused with "the mapped DeviceClass ... not found" although the class existed
    double.faults.add(Fault("delay", verbs=frozenset({"list"}), resources=frozenset({"deviceclasses"}),
                            delay_seconds=30.0, times=None))
    config = make_config()
    config = dataclasses.replace(config, webhook=dataclasses.replace(
        config.webhook, internal_error_policy=dataclasses.replace(config.webhook.internal_error_policy,
                                                                  mutate="deny")))
    application = app.create_app(config, checks=admit.core_checks(own_namespace="gpuclaim"),
                                 reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig))
    runner, url = await start(application)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl(tls_files)))
    try:
        server = Server(url, application, session, None, tls_files.ca_pem)
        assert (await server.get("/readyz"))[0] == 503
        status, body = await server.post("/mutate", pod_review(gpus=1, uid="u-early"))
        response = body["response"]
        assert status == 200 and response["allowed"] is False
        assert response["status"]["code"] == 500  # a retriable failure, not a refusal of the pod
        assert "not finished its first list" in response["status"]["message"]
        assert "not found" not in response["status"]["message"]
        # a pod with nothing to convert is not held up by the unsynced view
        status, body = await server.post("/mutate", pod_review(gpus=None, uid="u-plain"))
        assert status == 200 and body["response"]["allowed"] is True and "patch" not in body["response"]
    finally:
        double.faults.clear()
        await session.close()
        await runner.cleanup()
