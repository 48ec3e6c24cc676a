"""The extender predicts with the cluster's version: its allocator and the DeviceTaintRules its scheduler applies.

The differential against the upstream allocator is tests/dra/test_taint_prediction_oracle.py; rules and their
version semantics have their own tests in tests/dra/test_taints.py.
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
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"


def rule(name: str, selector: dict[str, Any] | None, effect: str = "NoSchedule",
         key: str = "example.com/broken") -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": key, "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def one_gpu_pod(tolerations: list[dict[str, Any]] | None = None, count: int = 1) -> tuple[dict[str, Any], ...]:
    more = {"tolerations": tolerations} if tolerations else {}
    return (fleet.template("one", {"requests": [fleet.exact("gpu", count, **more)]}), fleet.pod("one"))


def offline_devices(objects: list[dict[str, Any]], pod: dict[str, Any], minor: int) -> tuple[str, ...] | None:
    view = OfflineView(copy.deepcopy(objects), config=CONFIG.extender, model=versions.model_for(minor))
    request = predict.resolve(pod, view, CONFIG.extender)
    (verdict,) = predict.predict(request, ["n"], view, CONFIG.extender)
    return None if verdict.score is None else verdict.devices


def test_a_rule_moves_the_prediction_on_1_37_and_not_where_its_gate_is_off() -> None:
    template, pod = one_gpu_pod()
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(), template,
               rule("gpu-0-broken", {"driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0"})]
    assert offline_devices(objects, pod, 37) == ("gpu.nvidia.com/n/gpu-1",)
    # 1.36 and 1.35: DRADeviceTaintRules is off by default, so kube-scheduler reads no rule
    assert offline_devices(objects, pod, 36) == ("gpu.nvidia.com/n/gpu-0",)
    assert offline_devices(objects, pod, 35) == ("gpu.nvidia.com/n/gpu-0",)
    # a toleration lets the claim take the tainted device again
    template, pod = one_gpu_pod([{"key": "example.com/broken", "operator": "Exists", "effect": "NoSchedule"}])
    objects[3] = template
    assert offline_devices(objects, pod, 37) == ("gpu.nvidia.com/n/gpu-0",)


def test_a_rule_that_taints_every_device_leaves_the_node_unfit_with_the_reason() -> None:
    template, pod = one_gpu_pod()
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(), template, rule("all", {"driver": "gpu.nvidia.com"})]
    view = OfflineView(objects, config=CONFIG.extender)
    request = predict.resolve(pod, view, CONFIG.extender)
    (verdict,) = predict.predict(request, ["n"], view, CONFIG.extender)
    assert verdict.score is None and verdict.devices == ()


# ---- live: the extender's view follows rules and the cluster's version ------------------------------------------

@pytest.fixture
async def live(client: KubeClient) -> AsyncIterator[LiveView]:
    cache = ClusterCache(client, registry=CollectorRegistry(), rng=random.Random(7), silence_timeout=5.0,
                         backoff_initial=0.01, backoff_cap=0.2, specs=extender_specs(CONFIG),
                         version=ClusterVersion(CONFIG.kubernetes, registry=CollectorRegistry()))
    view = LiveView(cache, CONFIG)
    yield view
    await cache.stop()


def _devices(view: LiveView) -> tuple[str, ...]:
    _, pod = one_gpu_pod()
    request = predict.resolve(pod, view, CONFIG.extender)
    return predict.predict(request, ["n"], view, CONFIG.extender)[0].devices


async def test_the_live_view_follows_rules_as_they_come_and_go(double: RunningDouble, live: LiveView) -> None:
    template, _ = one_gpu_pod()
    template["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuclaim"}
    for obj in (fleet.pairs_node("n"), *fleet.gpu_classes(), template):
        double.store.restore(obj)
    await live.cache.start()
    await live.cache.wait_synced(5)
    assert _devices(live) == ("gpu.nvidia.com/n/gpu-0",)
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig), timeout=5.0)
    try:
        await client.create(RULES, rule("r0", {"pool": "n", "device": "gpu-0"}))
        await client.create(RULES, rule("r1", {"device": "gpu-1"}, effect="NoExecute"))
        await client.create(RULES, rule("r2", {"device": "gpu-2"}, effect="None"))  # informational only
        await eventually(lambda: _devices(live) == ("gpu.nvidia.com/n/gpu-2",))
        await client.delete(f"{RULES}/r0")
        await eventually(lambda: _devices(live) == ("gpu.nvidia.com/n/gpu-0",))
    finally:
        await client.close()


async def test_the_live_view_predicts_with_the_version_the_cluster_reports(double: RunningDouble,
                                                                           live: LiveView) -> None:
    from gpuclaim.double.apiserver.app import SETTINGS

    template, _ = one_gpu_pod()
    template["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuclaim"}
    for obj in (fleet.pairs_node("n"), *fleet.gpu_classes(), template,
                rule("r0", {"device": "gpu-0"})):
        double.store.restore(obj)
    await live.cache.start()
    await live.cache.wait_synced(5)
    await eventually(lambda: live.cache.version is not None and live.cache.version.cluster is not None)
    assert live.model().minor == 37
    assert _devices(live) == ("gpu.nvidia.com/n/gpu-1",)
    # the control plane now says 1.36 (what a relist reads from /version): its scheduler reads no rule
    assert live.cache.version is not None
    double.app[SETTINGS].git_version = "v1.36.4"
    await live.cache.version.refresh(live.cache.client)
    assert live.model().minor == 36
    assert _devices(live) == ("gpu.nvidia.com/n/gpu-0",)
