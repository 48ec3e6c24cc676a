"""`gpuclaim_mixed_nodes` through the metrics app: the scrape is formatted in the metrics thread, and the gauge's
count is read from the cluster cache on the event loop that owns it (gpuclaim/serving/metrics.py `on_loop`), with
the real cache following the API double over TLS."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import kube_objects as cluster
import pytest
from eventually import eventually
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.dra.config import load_config
from gpuclaim.kube import ClusterCache, KubeClient
from gpuclaim.kube.mixed import MixedNodes
from gpuclaim.serving.metrics import create_metrics_app

NODES = "/api/v1/nodes"


def plugin_node(name: str, gpus: str) -> dict[str, Any]:
    """A node whose device plugin advertises `gpus` nvidia.com/gpu."""
    node = cluster.node(name)
    node["status"]["allocatable"] = {"cpu": "192", "nvidia.com/gpu": gpus}
    return node


@pytest.fixture
async def cache(client: KubeClient) -> AsyncIterator[tuple[ClusterCache, CollectorRegistry]]:
    registry = CollectorRegistry()
    view = ClusterCache(client, registry=registry, rng=random.Random(7), silence_timeout=5.0,
                        backoff_initial=0.01, backoff_cap=0.2)
    yield view, registry
    await view.stop()


async def test_the_mixed_nodes_gauge_is_read_on_the_loop_while_the_thread_formats(
        double: RunningDouble, client: KubeClient, cache: tuple[ClusterCache, CollectorRegistry],
        aiohttp_client: Any) -> None:
    view, registry = cache
    for name in ("n1", "n2", "n3"):
        double.store.restore(cluster.node_slice(name))
    double.store.restore(plugin_node("n1", "8"))
    double.store.restore(plugin_node("n2", "0"))  # advertised, none to hand out: not mixed
    double.store.restore(cluster.node("n3"))
    MixedNodes(view, load_config({}).conversion, max_age=0.0).register(registry)
    metrics = await aiohttp_client(create_metrics_app(registry))

    async def mixed() -> float:
        text = await (await metrics.get("/metrics", params={"name[]": "gpuclaim_mixed_nodes"})).text()
        (family,) = text_string_to_metric_families(text)
        return family.samples[0].value

    assert await mixed() == 0  # not synced yet
    await view.start()
    await view.wait_synced(5)
    assert await mixed() == 1
    await client.create(NODES, plugin_node("n4", "4"))
    await client.create("/apis/resource.k8s.io/v1/resourceslices", cluster.node_slice("n4"))
    # the watch brings n4 in; each scrape asks the cache again (max_age 0)
    await eventually(lambda: len(view.objects("Node")) == 4 and bool(view.slices_for_node("n4")))
    assert await mixed() == 2
