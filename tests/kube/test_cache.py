"""The cluster cache against the API double over TLS: sync, events, indexes, readiness, metrics."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import kube_objects as cluster
import pytest
from eventually import eventually
from official_schemas import assert_valid
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.kube import ClusterCache, DeviceID, KubeClient
from gpuclaim.kube.cache import MANAGED_BY_SELECTOR, default_specs

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def cache(client: KubeClient, registry: CollectorRegistry) -> AsyncIterator[ClusterCache]:
    view = ClusterCache(client, registry=registry, rng=random.Random(7), silence_timeout=5.0,
                        backoff_initial=0.01, backoff_cap=0.2)
    yield view
    await view.stop()


def test_test_objects_are_valid_1_34_objects() -> None:
    for obj in (cluster.node("n"), cluster.namespace("x"), cluster.node_slice("n"),
                cluster.selector_slice("s", label="a", value="b"), cluster.claim("c")):
        assert_valid(obj)
    assert_valid({**cluster.claim("c"), "status": cluster.allocation("n", [0])})


async def test_initial_sync_builds_every_index(double: RunningDouble, cache: ClusterCache) -> None:
    store = double.store
    store.restore(cluster.namespace("team-a", tier="gold"))
    for name, zone in (("n1", "z1"), ("n2", "z2")):
        store.restore(cluster.node(name, zone=zone))
        store.restore(cluster.node_slice(name))
    store.restore(cluster.selector_slice("nics-z1", label="zone", value="z1"))
    store.restore({**cluster.claim("c1"), "status": cluster.allocation("n1", [0, 1])})
    store.restore({**cluster.claim("admin"), "status": cluster.allocation("n1", [2], admin=True)})
    assert not cache.synced
    await cache.start()
    await cache.wait_synced(5)
    assert cache.synced
    assert cache.namespace_labels("team-a") == {"tier": "gold"}
    assert cache.node_labels("n2") == {"zone": "z2"}
    assert cache.objects("Node")["n1"]["metadata"].keys() == {"name", "uid", "resourceVersion", "labels"}
    n1 = [(d.driver, d.device) for d, _, _ in cache.devices_for_node("n1")]
    assert n1 == [("gpu.nvidia.com", f"gpu-{i}") for i in range(8)] + [("nic.example.com", "nic-0"),
                                                                          ("nic.example.com", "nic-1")]
    assert len(list(cache.devices_for_node("n2"))) == 8  # the z1 NIC slice does not apply to z2
    assert cache.allocated_devices() == {DeviceID("gpu.nvidia.com", "n1", "gpu-0"),
                                         DeviceID("gpu.nvidia.com", "n1", "gpu-1")}  # adminAccess excluded
    assert cache.claim("default", "c1") is not None
    pool = cache.pool("gpu.nvidia.com", "n1")
    assert pool is not None and pool.complete and pool.generation == 1


async def test_creates_updates_and_deletes_are_seen(double: RunningDouble, client: KubeClient,
                                                    cache: ClusterCache, registry: CollectorRegistry) -> None:
    await cache.start()
    await cache.wait_synced(5)
    await client.create("/api/v1/nodes", cluster.node("n1", zone="z1"))
    await client.create(SLICES, cluster.node_slice("n1"))
    await eventually(lambda: len(list(cache.devices_for_node("n1"))) == 8)
    created = await client.create(CLAIMS, cluster.claim("c1"))
    await eventually(lambda: cache.claim("default", "c1") is not None)
    await client.update(f"{CLAIMS}/c1/status", {**created, "status": cluster.allocation("n1", [3])})
    await eventually(lambda: cache.is_allocated(DeviceID("gpu.nvidia.com", "n1", "gpu-3")))
    # a nodeSelector slice appears on n1 only once n1's labels match it
    await client.create(SLICES, cluster.selector_slice("nics", label="zone", value="z2"))
    await asyncio.sleep(0.1)
    assert len(list(cache.devices_for_node("n1"))) == 8
    await client.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"zone": "z2"}}})
    await eventually(lambda: len(list(cache.devices_for_node("n1"))) == 10)
    await client.delete(f"{CLAIMS}/c1")
    await eventually(lambda: cache.claim("default", "c1") is None)
    assert not cache.allocated_devices()
    await client.delete(f"{SLICES}/n1-gpu.nvidia.com")
    await eventually(lambda: len(list(cache.devices_for_node("n1"))) == 2)
    assert registry.get_sample_value("gpuclaim_kube_events_total",
                                     {"kind": "ResourceClaim", "type": "DELETED"}) == 1


async def test_only_the_newest_pool_generation_counts(double: RunningDouble, client: KubeClient,
                                                      cache: ClusterCache) -> None:
    await cache.start()
    await cache.wait_synced(5)
    await client.create(SLICES, cluster.node_slice("n1", devices=8, generation=1))
    await eventually(lambda: len(list(cache.devices_for_node("n1"))) == 8)
    newer = cluster.node_slice("n1", devices=4, generation=2, suffix="-b")
    newer["spec"]["pool"]["resourceSliceCount"] = 2
    await client.create(SLICES, newer)
    await eventually(lambda: len(list(cache.devices_for_node("n1"))) == 4)
    pool = cache.pool("gpu.nvidia.com", "n1")
    assert pool is not None and pool.generation == 2 and not pool.complete


async def test_claims_are_found_for_a_pod(double: RunningDouble, client: KubeClient, cache: ClusterCache) -> None:
    owned = cluster.claim("p-gpu-x7k2p")
    owned["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid",
                                             "controller": True, "blockOwnerDeletion": True}]
    double.store.restore(owned)
    double.store.restore(cluster.claim("shared"))
    await cache.start()
    await cache.wait_synced(5)
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "pod-uid"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"},
                                       {"name": "nic", "resourceClaimName": "shared"},
                                       {"name": "other", "resourceClaimTemplateName": "t2"}]}}
    found = cache.claims_for_pod(pod)
    assert {k: v and v["metadata"]["name"] for k, v in found.items()} == {
        "gpu": "p-gpu-x7k2p", "nic": "shared", "other": None}
    pod["status"] = {"resourceClaimStatuses": [{"name": "other", "resourceClaimName": "shared"}]}
    assert cache.claims_for_pod(pod)["other"] is cache.claim("default", "shared")


async def test_every_template_is_cached_and_the_watch_can_be_narrowed_to_gpuclaims(
    double: RunningDouble, cache: ClusterCache, client: KubeClient, registry: CollectorRegistry
) -> None:
    spec = {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    for name, labels in (("mine", {"app.kubernetes.io/managed-by": "gpuclaim"}), ("theirs", {})):
        double.store.restore({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                              "metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": spec})
    await cache.start()
    await cache.wait_synced(5)
    assert cache.template("default", "mine") is not None
    assert cache.template("default", "theirs") is not None  # the validator checks users' templates too
    narrow = ClusterCache(client, registry=CollectorRegistry(), specs=default_specs(MANAGED_BY_SELECTOR))
    await narrow.start()
    try:
        await narrow.wait_synced(5)
        assert narrow.template("default", "mine") is not None
        assert narrow.template("default", "theirs") is None
    finally:
        await narrow.stop()


async def test_a_silent_watch_is_restarted_and_staleness_is_visible(double: RunningDouble, client: KubeClient,
                                                                    registry: CollectorRegistry) -> None:
    double.app[__import__("gpuclaim.double.apiserver.app", fromlist=["SETTINGS"]).SETTINGS].bookmark_interval = 60.0
    view = ClusterCache(client, registry=registry, rng=random.Random(1), silence_timeout=0.3,
                        backoff_initial=0.01, backoff_cap=0.05)
    await view.start()
    try:
        await view.wait_synced(5)
        assert view.ready(max_age=5.0)
        await asyncio.sleep(0.5)
        assert view.stale_kinds(max_age=0.2) == sorted(view.reflectors)
        assert not view.ready(max_age=0.2)
        await eventually(lambda: (registry.get_sample_value(
            "gpuclaim_kube_watch_restarts_total", {"kind": "Node", "reason": "silent"}) or 0) >= 1)
        age = registry.get_sample_value("gpuclaim_kube_last_event_age_seconds", {"kind": "Node"})
        assert age is not None and age > 0.2
        assert registry.get_sample_value("gpuclaim_kube_synced") == 1.0
    finally:
        await view.stop()


async def test_wait_synced_names_the_kinds_not_listed(double: RunningDouble, client: KubeClient,
                                                      registry: CollectorRegistry) -> None:
    from gpuclaim.double.apiserver import Fault

    double.faults.add(Fault(kind="status", verbs=frozenset({"list"}), resources=frozenset({"nodes"}),
                            code=500, times=None))
    view = ClusterCache(client, registry=registry, rng=random.Random(1), backoff_initial=0.01, backoff_cap=0.05)
    await view.start()
    try:
        with pytest.raises(TimeoutError, match=r"no initial list of \['Node'\]"):
            await view.wait_synced(0.5)
        assert not view.synced
    finally:
        await view.stop()


TAINT_RULES = "/apis/resource.k8s.io/v1/devicetaintrules"


def _taint_rule(name: str, device: str) -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": device},
                     "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}}


async def test_device_taint_rules_are_watched_where_served(double: RunningDouble, client: KubeClient,
                                                         registry: CollectorRegistry) -> None:
    from gpuclaim.kube.cache import taint_rule_spec

    view = ClusterCache(client, registry=registry, silence_timeout=5.0, backoff_initial=0.01, backoff_cap=0.2,
                        specs=(*default_specs(), taint_rule_spec()))
    double.store.restore(_taint_rule("gpu-1-broken", "gpu-1"))
    try:
        await view.start()
        await view.wait_synced(5)
        assert set(view.taint_rules()) == {"gpu-1-broken"}
        await client.create(TAINT_RULES, _taint_rule("gpu-2-broken", "gpu-2"))
        await eventually(lambda: set(view.taint_rules()) == {"gpu-1-broken", "gpu-2-broken"})
        await client.delete(f"{TAINT_RULES}/gpu-1-broken")
        await eventually(lambda: set(view.taint_rules()) == {"gpu-2-broken"})
    finally:
        await view.stop()


async def test_a_cluster_without_device_taint_rules_starts_with_none(tmp_path: object,
                                                                     registry: CollectorRegistry) -> None:
    """1.35 at default gates serves no DeviceTaintRule at any version: start-up must not wait for it, and the
    kind is followed once the cluster serves it (an upgrade), without a restart."""
    from pathlib import Path

    from gpuclaim.double.apiserver import Settings, Store, serve
    from gpuclaim.kube import config
    from gpuclaim.kube.cache import taint_rule_spec

    spec = taint_rule_spec()
    spec = type(spec)(spec.kind, spec.api_version, spec.plural, optional=True, fallbacks=spec.fallbacks,
                      absent_recheck=0.2)
    running = await serve(store=Store(history_size=200), workdir=Path(str(tmp_path)),
                          settings=Settings(bookmark_interval=0.2, git_version="v1.35.4"))
    client = KubeClient(config.from_kubeconfig(running.kubeconfig), timeout=5.0)
    view = ClusterCache(client, registry=registry, silence_timeout=5.0, backoff_initial=0.01, backoff_cap=0.2,
                        specs=(*default_specs(), spec))
    try:
        await view.start()
        await view.wait_synced(5)
        assert view.taint_rules() == {}
        assert view.reflectors["DeviceTaintRule"].served_version is None
        assert "DeviceTaintRule" not in view.stale_kinds(5)
        with pytest.raises(Exception, match="404"):
            await client.create(TAINT_RULES, _taint_rule("r", "gpu-0"))
        running.app[_settings_key()].git_version = "v1.37.2"  # the control plane was upgraded
        await client.create(TAINT_RULES, _taint_rule("r", "gpu-0"))
        await eventually(lambda: set(view.taint_rules()) == {"r"}, within=5)
        assert view.reflectors["DeviceTaintRule"].served_version == "resource.k8s.io/v1"
    finally:
        await view.stop()
        await client.close()
        await running.close()


def _settings_key() -> object:
    from gpuclaim.double.apiserver.app import SETTINGS

    return SETTINGS
