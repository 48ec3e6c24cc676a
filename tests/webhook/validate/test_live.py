"""The live inventory over the cluster cache (API double over TLS): parses each slice once per change,
rebuilds the device index only after a change, answers UNKNOWN before the first sync and, on a view
narrowed to gpuclaim's templates, for templates the cache does not watch."""

from __future__ import annotations

import asyncio
import copy
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import validate_objects as o
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.kube import ClusterCache, KubeClient
from gpuclaim.kube.cache import MANAGED_BY_SELECTOR, default_specs
from gpuclaim.webhook.validate import UNKNOWN, DeviceIndex, validate_object
from gpuclaim.webhook.validate.live import LiveInventory

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


async def eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


@pytest.fixture
async def cache(client: KubeClient) -> AsyncIterator[ClusterCache]:
    view = ClusterCache(client, registry=CollectorRegistry(), rng=random.Random(7), silence_timeout=5.0,
                        backoff_initial=0.01, backoff_cap=0.2)
    yield view
    await view.stop()


def _real(kind: str, path: Any, name: str | None = None) -> dict[str, Any]:
    for obj in o.load(path):
        if not isinstance(obj, dict) or obj.get("kind") != kind:
            continue
        if name == obj["metadata"]["name"] or (name is None and obj["spec"].get("driver") == "gpu.nvidia.com"):
            clean = copy.deepcopy(obj)
            meta = clean["metadata"]
            clean["metadata"] = {k: meta[k] for k in ("name", "labels") if k in meta}
            return clean
    raise AssertionError(f"no {kind} {name} in {path}")


async def test_live_inventory_dry_runs_against_the_cached_slices(
    double: RunningDouble, cache: ClusterCache, client: KubeClient,
) -> None:
    gpu_slice = _real("ResourceSlice", o.H100_SLICES)
    name = gpu_slice["metadata"]["name"]
    double.store.restore(gpu_slice)
    double.store.restore(_real("DeviceClass", o.CLASSES, "gpu.nvidia.com"))
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    inventory = LiveInventory(cache)
    assert inventory.devices() is UNKNOWN and inventory.device_class("gpu.nvidia.com") is UNKNOWN
    await cache.start()
    await cache.wait_synced(5)

    unguarded = o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].index == 0"))
    for _ in range(3):
        verdict = validate_object(unguarded, operation="CREATE", inventory=inventory, config=o.config())
        assert o.paths(verdict.denials) == [("spec.devices.requests[0].exactly.selectors[0].cel.expression",
                                             "FieldValueInvalid")]
        assert "8 devices" in verdict.message
    first_index = inventory.devices()
    assert isinstance(first_index, DeviceIndex) and inventory.devices() is first_index  # no change, no rebuild
    # the cache parsed the slice when it arrived; the inventory reads that model, it parses nothing itself
    assert [s.source for s in first_index.segments] == [cache.inventory.parsed_slice(name)]
    assert first_index.segments[0].source is cache.inventory.parsed_slice(name)

    second = copy.deepcopy(gpu_slice)
    second["metadata"]["name"] = "second"
    second["spec"]["pool"]["name"] = "second-pool"
    await client.create(SLICES, second)
    await eventually(lambda: cache.inventory.parsed_slice("second") is not None)
    index = inventory.devices()
    assert isinstance(index, DeviceIndex) and index is not first_index
    assert first_index.segments[0] in index.segments  # the unchanged slice keeps its segment
    verdict = validate_object(unguarded, operation="CREATE", inventory=inventory, config=o.config())
    assert "16 devices" in verdict.message

    await client.delete(f"{SLICES}/second")
    await eventually(lambda: len(inventory.devices()) == 8)  # type: ignore[arg-type]


async def test_every_template_is_looked_up_and_a_missing_one_is_missing(cache: ClusterCache) -> None:
    inventory = LiveInventory(cache)
    await cache.start()
    await cache.wait_synced(5)
    assert inventory.template("default", "user-template") is None  # the view watches every template
    assert inventory.template("default", "gpuclaim-0123abcd") is None
    assert inventory.namespace_labels("nowhere") is None


async def test_a_view_narrowed_to_gpuclaims_templates_cannot_tell_for_other_names(client: KubeClient) -> None:
    narrow = ClusterCache(client, registry=CollectorRegistry(), specs=default_specs(MANAGED_BY_SELECTOR))
    inventory = LiveInventory(narrow)
    await narrow.start()
    try:
        await narrow.wait_synced(5)
        assert inventory.template("default", "user-template") is UNKNOWN
        assert inventory.template("default", "gpuclaim-0123abcd") is None
    finally:
        await narrow.stop()


async def test_a_slice_update_patches_the_index_and_evaluates_only_that_slice(
    double: RunningDouble, cache: ClusterCache, client: KubeClient,
) -> None:
    gpu_slice = _real("ResourceSlice", o.H100_SLICES)
    double.store.restore(gpu_slice)
    second = copy.deepcopy(gpu_slice)
    second["metadata"]["name"] = "second"
    second["spec"]["pool"]["name"] = "second-pool"
    double.store.restore(second)
    double.store.restore(_real("DeviceClass", o.CLASSES, "gpu.nvidia.com"))
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    inventory = LiveInventory(cache)
    await cache.start()
    await cache.wait_synced(5)
    unguarded = o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].index == 0"))

    def verdict() -> str:
        return validate_object(unguarded, operation="CREATE", inventory=inventory, config=o.config()).message

    assert "CEL runtime error on 16 devices" in verdict()
    before = inventory.devices()
    assert isinstance(before, DeviceIndex)
    stats = before.summaries.stats
    assert stats.segments_evaluated == 2

    current = await client.get(f"{SLICES}/second")  # a device health update: the driver rewrites its slice
    current["spec"]["devices"][0]["attributes"]["index"] = {"int": 0}
    await client.update(f"{SLICES}/second", current)
    await eventually(lambda: cache.inventory.parsed_slice("second").meta.resource_version  # type: ignore[union-attr]
                     != current["metadata"]["resourceVersion"])
    assert "CEL runtime error on 15 devices" in verdict()
    after = inventory.devices()
    assert isinstance(after, DeviceIndex) and after.parent is before and len(after.patched) == 1
    assert stats.segments_evaluated == 3  # the unchanged slice was not evaluated again
