"""The live view over the real cluster cache, fed by the API double over TLS: predictions follow events, and an
event rebuilds only the node states it touches."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from eventually import eventually
from official_schemas import assert_valid
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.dra.config import load_config
from gpuclaim.extender import predict
from gpuclaim.extender.view import LiveView, extender_specs
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.cache import ClusterCache
from gpuclaim.kube.client import KubeClient

from . import fleet

CONFIG = load_config({})
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


@pytest.fixture
async def view(client: KubeClient) -> AsyncIterator[LiveView]:
    cache = ClusterCache(client, registry=CollectorRegistry(), rng=random.Random(7), silence_timeout=5.0,
                         backoff_initial=0.01, backoff_cap=0.2, specs=extender_specs(CONFIG))
    live = LiveView(cache, CONFIG)
    yield live
    await cache.stop()


def _node(name: str, annotation: str | None = None) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if annotation is not None:
        meta["annotations"] = {CONFIG.extender.nvlink_annotation: annotation, "unrelated": "dropped"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def _verdict(live: LiveView, node: str) -> predict.score.NodeVerdict:
    request = predict.resolve(fleet.pod("two"), live, CONFIG.extender)
    return predict.predict(request, [node], live, CONFIG.extender)[0]


def test_the_objects_the_test_writes_are_valid_1_34_objects() -> None:
    for obj in (fleet.pairs_node("a"), *fleet.gpu_classes(), fleet.template("two", fleet.tight_or_any(2)),
                fleet.allocated_claim("c", [("a", "gpu-0")]), _node("a", "gpu-0,gpu-1")):
        assert_valid(obj)


async def test_predictions_follow_allocations_and_rebuild_only_the_touched_node(
        double: RunningDouble, view: LiveView) -> None:
    store = double.store
    for name in ("a", "b"):
        store.restore(_node(name, "gpu-0,gpu-1,gpu-2,gpu-3;gpu-4,gpu-5,gpu-6,gpu-7" if name == "a" else None))
        store.restore(fleet.pairs_node(name))
    for obj in (*fleet.gpu_classes(), fleet.template("two", fleet.tight_or_any(2))):
        obj["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "gpuclaim"
        store.restore(obj)
    await view.cache.start()
    await view.cache.wait_synced(5)
    assert view.ready() == (True, "ok")
    assert view.cache.objects("Node")["a"]["metadata"]["annotations"] == {
        CONFIG.extender.nvlink_annotation: "gpu-0,gpu-1,gpu-2,gpu-3;gpu-4,gpu-5,gpu-6,gpu-7"}
    assert _verdict(view, "a").devices == ("gpu.nvidia.com/a/gpu-0", "gpu.nvidia.com/a/gpu-1")
    state_b = view.node_state("b")
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig), timeout=5.0)
    try:
        claim = fleet.allocated_claim("held", [("a", "gpu-0"), ("a", "gpu-2")])
        status = claim.pop("status")
        created = await client.create(CLAIMS, claim)
        await asyncio.sleep(0.1)
        assert view.node_state("b") is state_b  # a claim without allocation touches nothing
        await client.update(f"{CLAIMS}/held/status", {**created, "status": status})
        await eventually(lambda: _verdict(view, "a").devices == ("gpu.nvidia.com/a/gpu-4",
                                                                 "gpu.nvidia.com/a/gpu-5"))
        assert view.node_state("b") is state_b
        await client.delete(f"{CLAIMS}/held")
        await eventually(lambda: _verdict(view, "a").devices == ("gpu.nvidia.com/a/gpu-0",
                                                                 "gpu.nvidia.com/a/gpu-1"))
        # a class change re-predicts everywhere: here no device matches any more
        path = "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com"
        current = await client.get(path)
        current["spec"]["selectors"] = [{"cel": {"expression": "device.driver == 'other'"}}]
        await client.update(path, current)
        await eventually(lambda: view.node_state("b") is not state_b and _verdict(view, "b").score is None)
    finally:
        await client.close()


async def test_not_ready_before_the_first_list(view: LiveView) -> None:
    ok, reason = view.ready()
    assert not ok and reason == "cluster view not synced yet"


async def test_a_name_the_cluster_does_not_know_is_unfit_unless_a_slice_serves_every_node(
        double: RunningDouble, view: LiveView) -> None:
    # the quick answer for unknown names (a flood names 10,000 at a time, issue 22) must not skip slices that
    # serve any node: a network-attached pool with allNodes is usable on a name no Node object carries
    store = double.store
    store.restore(_node("a"))
    store.restore(fleet.pairs_node("a"))
    for obj in (*fleet.gpu_classes(), fleet.template("two", fleet.tight_or_any(2))):
        obj["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "gpuclaim"
        store.restore(obj)
    await view.cache.start()
    await view.cache.wait_synced(5)
    assert view.node_state("ghost") is None
    assert _verdict(view, "ghost").reason == "no ResourceSlice or Node known for this node"
    shared = fleet.pairs_node("fabric")
    del shared["spec"]["nodeName"]
    shared["spec"]["allNodes"] = True
    assert_valid(shared)
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig), timeout=5.0)
    try:
        await client.create(SLICES, shared)
    finally:
        await client.close()

    def served() -> bool:
        verdict = _verdict(view, "ghost")
        return verdict.score is not None and verdict.devices[0].startswith("gpu.nvidia.com/fabric/")

    await eventually(served)
