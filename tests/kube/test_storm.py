"""A storm of faults while the cluster changes: afterwards the cache equals the server exactly.

Dropped watches every few events, 410 Expired (as an ERROR event and by compacting the history),
500s, 429 with Retry-After and slow answers hit every kind while writers create, update (status
included) and delete objects. Once the faults stop, the cache's objects, its resourceVersions and
its indexes must equal what a fresh read of the server gives: nothing lost, nothing stale.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

import kube_objects as cluster
import pytest
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import Fault, RunningDouble
from gpuclaim.double.apiserver.resources import BY_KIND
from gpuclaim.kube import ClusterCache, KubeClient
from gpuclaim.kube.cache import default_specs
from gpuclaim.kube.claims import ClaimIndex
from gpuclaim.kube.inventory import Inventory

NODES = [f"node-{i}" for i in range(6)]
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


async def _writer(client: KubeClient, rng: random.Random, until: float) -> int:
    writes = 0
    live: dict[str, dict] = {}
    while time.monotonic() < until:
        action = rng.random()
        name = f"claim-{rng.randrange(40)}"
        try:
            if action < 0.35 and name not in live:
                live[name] = await client.create(CLAIMS, cluster.claim(name))
            elif action < 0.6 and name in live:
                node = rng.choice(NODES)
                live[name] = await client.update(f"{CLAIMS}/{name}/status", {
                    **live[name], "status": cluster.allocation(node, rng.sample(range(8), 2))})
            elif action < 0.75 and name in live:
                await client.delete(f"{CLAIMS}/{name}")
                del live[name]
            elif action < 0.9:
                node = rng.choice(NODES)
                await client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"zone": rng.choice("ab")}}})
            else:
                node = rng.choice(NODES)
                path = f"{SLICES}/{node}-gpu.nvidia.com"
                current = await client.get(path)
                current["spec"]["pool"]["generation"] += 1
                current["spec"]["devices"] = current["spec"]["devices"][: rng.randrange(1, 9)]
                await client.update(path, current)
            writes += 1
        except Exception:
            live = {k: v for k, v in live.items() if k != name}
            try:
                got = await client.get(f"{CLAIMS}/{name}")
                live[name] = got
            except Exception:
                pass
        await asyncio.sleep(rng.uniform(0, 0.01))
    return writes


async def _storm(double: RunningDouble, rng: random.Random, until: float) -> None:
    kinds = ["resourceclaims", "nodes", "resourceslices", "namespaces", "deviceclasses", "resourceclaimtemplates"]
    while time.monotonic() < until:
        choice = rng.randrange(6)
        resources = frozenset({rng.choice(kinds)})
        if choice == 0:
            double.faults.add(Fault(kind="drop_watch", every=rng.randint(1, 4), times=3))
        elif choice == 1:
            double.faults.add(Fault(kind="status", verbs=frozenset({"watch"}), resources=resources, code=410))
        elif choice == 2:
            double.faults.add(Fault(kind="status", verbs=frozenset({"list", "watch"}), resources=resources, code=500))
        elif choice == 3:
            double.faults.add(Fault(kind="status", verbs=frozenset({"watch"}), code=429, retry_after=0))
        elif choice == 4:
            double.faults.add(Fault(kind="delay", delay_seconds=rng.uniform(0.05, 0.3), times=2))
        else:  # history gone and relists held back for a while: changes pile up unseen, incl. deletions
            double.faults.add(Fault(kind="delay", verbs=frozenset({"list"}), delay_seconds=0.2, times=3))
            double.faults.add(Fault(kind="status", verbs=frozenset({"list"}), code=500, times=rng.randint(1, 3)))
            double.store.compact()
            double.store.close_watches()
        await asyncio.sleep(rng.uniform(0.02, 0.1))


def _expected(double: RunningDouble, kind: str) -> dict[str, dict]:
    spec = next(s for s in default_specs() if s.kind == kind)
    rt = BY_KIND[(spec.api_version, kind)]
    from gpuclaim.double.apiserver.selectors import parse_label_selector

    labels = parse_label_selector(spec.label_selector)
    items = double.store.list(rt, None, lambda o: labels(o["metadata"].get("labels") or {}))[0]
    out = {}
    for obj in items:
        obj = spec.compact(obj) if spec.compact else obj
        meta = obj["metadata"]
        out[f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]] = obj
    return out


def _assert_cache_equals_server(double: RunningDouble, cache: ClusterCache) -> None:
    for kind in cache.reflectors:
        assert dict(cache.objects(kind)) == _expected(double, kind), kind
    fresh_inventory, fresh_claims = Inventory(), ClaimIndex()
    for obj in _expected(double, "Node").values():
        fresh_inventory.on_node(None, obj)
    for obj in _expected(double, "ResourceSlice").values():
        fresh_inventory.on_slice(None, obj)
    for obj in _expected(double, "ResourceClaim").values():
        fresh_claims.on_claim(None, obj)
    assert cache.allocated_devices() == fresh_claims.allocated()
    assert cache.claim_index.claims == fresh_claims.claims
    for node in NODES:
        seen = [d for d, _, _ in cache.devices_for_node(node)]
        assert seen == [d for d, _, _ in fresh_inventory.devices_for_node(node)]
        assert cache.pool("gpu.nvidia.com", node) == fresh_inventory.pool("gpu.nvidia.com", node)


async def _run_storm(double: RunningDouble, client: KubeClient, seconds: float, seed: int) -> None:
    for node in NODES:
        double.store.restore(cluster.node(node, zone="a"))
        double.store.restore(cluster.node_slice(node))
    double.store.restore(cluster.selector_slice("nics-b", label="zone", value="b"))
    registry = CollectorRegistry()
    cache = ClusterCache(client, registry=registry, rng=random.Random(seed), silence_timeout=1.0,
                         backoff_initial=0.01, backoff_cap=0.1)
    await cache.start()
    try:
        await cache.wait_synced(10)
        rng = random.Random(seed)
        until = time.monotonic() + seconds
        writes, _ = await asyncio.gather(_writer(client, random.Random(seed + 1), until), _storm(double, rng, until))
        double.faults.clear()
        assert writes > 20
        assert double.faults.fired.get("drop_watch", 0) > 0 and double.faults.fired.get("status", 0) > 0
        # resync: after the storm, one more write must arrive through a live watch
        await client.create(CLAIMS, cluster.claim("after-the-storm"))
        deadline = time.monotonic() + 10
        while True:
            try:
                _assert_cache_equals_server(double, cache)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        relists = sum(registry.get_sample_value("gpuclaim_kube_relists_total", {"kind": k}) or 0
                      for k in cache.reflectors)
        restarts = sum(registry.get_sample_value("gpuclaim_kube_watch_restarts_total", {"kind": k, "reason": r}) or 0
                       for k in cache.reflectors for r in ("closed", "expired", "error", "silent"))
        assert relists > 0 and restarts > 0
    finally:
        await cache.stop()


async def test_the_cache_equals_the_server_after_a_fault_storm(double: RunningDouble, client: KubeClient) -> None:
    await _run_storm(double, client, seconds=4.0, seed=11)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GPUCLAIM_LONG") != "1", reason="long storm: set GPUCLAIM_LONG=1")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_cache_survives_long_fault_storms(double: RunningDouble, client: KubeClient, seed: int) -> None:
    await _run_storm(double, client, seconds=60.0, seed=seed)
