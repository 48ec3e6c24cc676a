"""Shared devices (DRAConsumableCapacity, on by default from 1.36): a GPU that allows multiple allocations is left
to other claims while its capacity remains, in the extender's prediction as in kube-scheduler's allocator.

The allocator's share semantics are held to upstream's by tests/dra/test_allocator_oracle_random.py; here the
extender's two views (offline and live) must hand the allocator what shares other claims hold.
"""

from __future__ import annotations

import copy
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from eventually import eventually
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.dra import versions
from gpuclaim.dra.config import load_config
from gpuclaim.extender import predict
from gpuclaim.extender.offline import OfflineView
from gpuclaim.extender.view import LiveView, extender_specs
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.cache import ClusterCache
from gpuclaim.kube.client import KubeClient
from gpuclaim.kube.version import ClusterVersion

from . import fleet

CONFIG = load_config({})
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def shared_node(node: str = "n") -> dict[str, Any]:
    """One 80Gi GPU that allows multiple allocations."""
    gpu = fleet.gpu("gpu-0", root="pci0")
    return fleet.node_slice(node, [{**gpu, "allowMultipleAllocations": True,
                                    "capacity": {"memory": {"value": "80Gi"}}}])


def share_claim(name: str, memory: str, share: str) -> dict[str, Any]:
    """A claim holding a `memory` share of n/gpu-0."""
    claim = fleet.allocated_claim(name, [("n", "gpu-0")])
    request = claim["spec"]["devices"]["requests"][0]["exactly"]
    request["capacity"] = {"requests": {"memory": memory}}
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    result.update({"shareID": share, "consumedCapacity": {"memory": memory}})
    return claim


def asking(memory: str) -> tuple[dict[str, Any], dict[str, Any]]:
    template = fleet.template("one", {"requests": [fleet.exact("gpu", capacity={"requests": {"memory": memory}})]})
    template["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuclaim"}
    return template, fleet.pod("one")


def offline(objects: list[dict[str, Any]], pod: dict[str, Any], minor: int) -> tuple[str, ...] | None:
    view = OfflineView(copy.deepcopy(objects), config=CONFIG.extender, model=versions.model_for(minor))
    (verdict,) = predict.predict(predict.resolve(pod, view, CONFIG.extender), ["n"], view, CONFIG.extender)
    return None if verdict.score is None else verdict.devices


@pytest.mark.parametrize(("minor", "fits"), [(37, True), (36, True), (35, False)])
def test_a_share_of_a_half_used_gpu_is_predicted_where_the_scheduler_shares_devices(minor: int, fits: bool) -> None:
    template, pod = asking("40Gi")
    objects = [shared_node(), *fleet.gpu_classes(), template, share_claim("held", "40Gi", "a1b2c")]
    # 1.35's scheduler runs with ConsumableCapacity off: an allocated device is taken, share or not
    assert offline(objects, pod, minor) == (("gpu.nvidia.com/n/gpu-0",) if fits else None)


def test_a_share_larger_than_what_is_left_does_not_fit() -> None:
    template, pod = asking("41Gi")
    objects = [shared_node(), *fleet.gpu_classes(), template, share_claim("held", "40Gi", "a1b2c")]
    assert offline(objects, pod, 37) is None
    assert offline(objects[:-1], pod, 37) == ("gpu.nvidia.com/n/gpu-0",)  # the GPU alone has room for it


@pytest.fixture
async def live(client: KubeClient) -> AsyncIterator[LiveView]:
    cache = ClusterCache(client, registry=CollectorRegistry(), rng=random.Random(7), silence_timeout=5.0,
                         backoff_initial=0.01, backoff_cap=0.2, specs=extender_specs(CONFIG),
                         version=ClusterVersion(CONFIG.kubernetes, registry=CollectorRegistry()))
    yield LiveView(cache, CONFIG)
    await cache.stop()


async def test_the_live_view_counts_shares_as_claims_come_and_go(double: RunningDouble, live: LiveView) -> None:
    template, pod = asking("30Gi")
    for obj in (shared_node(), *fleet.gpu_classes(), template, share_claim("a", "40Gi", "aaaaa")):
        double.store.restore(obj)
    await live.cache.start()
    await live.cache.wait_synced(5)

    def devices() -> tuple[str, ...]:
        (verdict,) = predict.predict(predict.resolve(pod, live, CONFIG.extender), ["n"], live, CONFIG.extender)
        return verdict.devices if verdict.score is not None else ()

    assert devices() == ("gpu.nvidia.com/n/gpu-0",)  # 40Gi of 80Gi used: 30Gi more fits
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig), timeout=5.0)
    try:
        claim = share_claim("b", "20Gi", "bbbbb")  # 60Gi used: 30Gi no longer fits
        created = await client.create(CLAIMS, {**claim, "status": {}})  # as the apiserver does, status apart
        await client.update(f"{CLAIMS}/b/status", {**created, "status": claim["status"]})
        await eventually(lambda: devices() == ())
        await client.delete(f"{CLAIMS}/a")  # 20Gi used
        await eventually(lambda: devices() == ("gpu.nvidia.com/n/gpu-0",))
    finally:
        await client.close()
