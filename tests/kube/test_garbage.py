"""kube.garbage against the API double through the real cluster view: idle templates and sharing-group claims
deleted after the idle time (an injected clock, no sleeping), referenced ones kept, foreign ones never touched,
dryRun deletes nothing, the uid/resourceVersion precondition keeps an object that changed, and the same through
two collectors racing for one Lease: only the leader deletes, and when it dies the other takes over."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from eventually import eventually
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.double.apiserver.resources import BY_KIND
from gpuclaim.kube import garbage, leader
from gpuclaim.kube.cache import ClusterCache
from gpuclaim.kube.client import KubeClient

NS = "ml"
IDLE = 3600.0
SHARING = "gpuclaim.io/sharing-group"
OURS = {"app.kubernetes.io/managed-by": "gpuclaim"}
TEMPLATE = BY_KIND[("resource.k8s.io/v1", "ResourceClaimTemplate")]
CLAIM = BY_KIND[("resource.k8s.io/v1", "ResourceClaim")]
POD = BY_KIND[("v1", "Pod")]
DEVICES = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}


def template(name: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "labels": OURS if labels is None else labels, **meta},
            "spec": {"metadata": {"labels": OURS}, "spec": DEVICES}}


def claim(name: str, *, labels: dict[str, str] | None = None, group: str | None = "g", **meta: Any) -> dict[str, Any]:
    annotations = {SHARING: group} if group else {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": OURS if labels is None else labels, "annotations": annotations,
                         **meta}, "spec": DEVICES}


def pod(name: str, **refs: str) -> dict[str, Any]:
    """refs: resourceClaimTemplateName=... or resourceClaimName=..."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "resourceClaims": [{"name": "gpu", **refs}]}}


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def view(double: RunningDouble, client: KubeClient) -> AsyncIterator[ClusterCache]:
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    cache = ClusterCache(client, registry=CollectorRegistry())
    await cache.start()
    await cache.wait_synced(10)
    yield cache
    await cache.stop()


async def create(double: RunningDouble, obj: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return await double.store.create(BY_KIND[(obj["apiVersion"], obj["kind"])], namespace, copy.deepcopy(obj))


def names(double: RunningDouble, rt: Any) -> set[str]:
    return {o["metadata"]["name"] for o in double.store.list(rt, NS, lambda _: True)[0]}


async def settle(cache: ClusterCache, double: RunningDouble) -> None:
    """Wait until the view holds what the store holds (the watch is asynchronous)."""
    def stored(rt: Any) -> dict[str, str]:
        return {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                for o in double.store.list(rt, None, lambda _: True)[0]}

    def seen(kind: str) -> dict[str, str]:
        return {k: o["metadata"]["resourceVersion"] for k, o in cache.objects(kind).items()}

    await eventually(lambda: seen("ResourceClaimTemplate") == stored(TEMPLATE)
                     and seen("ResourceClaim") == stored(CLAIM))


def collector(client: KubeClient, cache: Any, clock: Callable[[], float], **kw: Any) -> garbage.GarbageCollector:
    return garbage.GarbageCollector(client, cache, registry=CollectorRegistry(), idle_seconds=IDLE,
                                    sharing_annotation=SHARING, now=clock, **kw)


def sample(gc: garbage.GarbageCollector, name: str, kind: str = "ResourceClaimTemplate") -> float | None:
    return gc.metrics.registry.get_sample_value(name, {"kind": kind})


async def test_idle_objects_are_deleted_after_the_idle_time_and_used_ones_kept(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    for name in ("gpuclaim-idle", "gpuclaim-used"):
        await create(double, template(name))
    for name in ("gpuclaim-shared-idle", "gpuclaim-shared-by-pod", "gpuclaim-shared-reserved"):
        await create(double, claim(name))
    reserved = copy.deepcopy(double.store.get(CLAIM, NS, "gpuclaim-shared-reserved"))
    reserved["status"] = {"reservedFor": [{"resource": "pods", "name": "other", "uid": "u-1"}]}
    await double.store.update(CLAIM, NS, "gpuclaim-shared-reserved", reserved, subresource="status")
    await create(double, pod("p1", resourceClaimTemplateName="gpuclaim-used"))
    await create(double, pod("p2", resourceClaimName="gpuclaim-shared-by-pod"))
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock)

    first = await gc.sweep()
    assert first.deleted == [] and first.waiting == 2 and first.in_use == 3  # unused, but not for an hour yet
    clock.t += IDLE - 1
    assert (await gc.sweep()).deleted == []
    clock.t += 2  # the creationTimestamp is about the real now, the clock an hour and a second later
    done = await gc.sweep()
    assert sorted(done.deleted) == [f"ResourceClaim {NS}/gpuclaim-shared-idle",
                                    f"ResourceClaimTemplate {NS}/gpuclaim-idle"]
    assert names(double, TEMPLATE) == {"gpuclaim-used"}
    assert names(double, CLAIM) == {"gpuclaim-shared-by-pod", "gpuclaim-shared-reserved"}
    assert sample(gc, "gpuclaim_gc_deleted_total", "ResourceClaimTemplate") == 1
    assert sample(gc, "gpuclaim_gc_deleted_total", "ResourceClaim") == 1


async def test_the_metrics_are_zero_initialised_under_the_gpuclaim_namespace(client: KubeClient) -> None:
    registry = CollectorRegistry()
    garbage.GarbageCollector(client, StaleView({}), registry=registry, idle_seconds=1, sharing_annotation=SHARING)
    for kind in garbage.KINDS:
        assert registry.get_sample_value("gpuclaim_gc_deleted_total", {"kind": kind}) == 0.0
        assert registry.get_sample_value("gpuclaim_gc_delete_conflicts_total", {"kind": kind}) == 0.0
    assert registry.get_sample_value("gpuclaim_gc_leader") == 0.0


async def test_objects_gpuclaim_did_not_make_are_never_touched(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    foreign = [
        template("team-template", labels={}),  # no label
        template("gpuclaim-lookalike", labels={"app.kubernetes.io/managed-by": "helm"}),
        template("not-ours", labels=OURS),  # our label, not our name
        claim("gpuclaim-shared-x", labels={}),
        claim("gpuclaim-no-group", group=None),  # a claim made from one of our templates carries our label
        claim("gpuclaim-owned", ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-2",
                                                  "controller": True, "blockOwnerDeletion": True}]),
    ]
    for obj in foreign:
        await create(double, obj)
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock)
    await gc.sweep()
    clock.t += 10 * IDLE
    result = await gc.sweep()
    assert result.deleted == [] and result.waiting == 0 and result.in_use == 0
    assert names(double, TEMPLATE) == {"team-template", "gpuclaim-lookalike", "not-ours"}
    assert names(double, CLAIM) == {"gpuclaim-shared-x", "gpuclaim-no-group", "gpuclaim-owned"}


async def test_dry_run_counts_what_it_would_delete_and_deletes_nothing(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-idle"))
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock, dry_run=True)
    await gc.sweep()
    clock.t += IDLE + 1
    for _ in range(2):
        result = await gc.sweep()
        assert result.would_delete == [f"ResourceClaimTemplate {NS}/gpuclaim-idle"] and result.deleted == []
    assert names(double, TEMPLATE) == {"gpuclaim-idle"}
    assert sample(gc, "gpuclaim_gc_would_delete_total", "ResourceClaimTemplate") == 2
    assert sample(gc, "gpuclaim_gc_deleted_total", "ResourceClaimTemplate") == 0


async def test_a_template_referenced_again_before_the_deletion_survives(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-t"))
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock)
    await gc.sweep()
    clock.t += IDLE / 2
    await create(double, pod("late", resourceClaimTemplateName="gpuclaim-t"))  # listed fresh at every sweep
    clock.t += IDLE
    assert (await gc.sweep()).in_use == 1
    await double.store.delete(POD, NS, "late")
    clock.t += 1
    assert (await gc.sweep()).deleted == []  # unused again: the idle time starts over from now
    clock.t += IDLE
    assert (await gc.sweep()).deleted == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]


async def test_a_pod_created_during_a_long_run_of_deletions_keeps_its_template(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-t"))
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock)
    gc.relist_seconds = 0.0  # the pods are listed again before every DELETE
    real = gc.referenced
    calls = 0

    async def referenced_then_a_pod_appears(namespace: str) -> set[tuple[str, str]]:
        nonlocal calls
        calls += 1
        listed = await real(namespace)
        if calls == 2:  # just after the second sweep judged the template idle
            await create(double, pod("new", resourceClaimTemplateName="gpuclaim-t"))
        return listed

    gc.referenced = referenced_then_a_pod_appears  # type: ignore[method-assign]
    await gc.sweep()
    clock.t += IDLE + 1
    result = await gc.sweep()
    assert calls == 3 and result.deleted == [] and result.in_use == 1
    assert names(double, TEMPLATE) == {"gpuclaim-t"}


async def test_the_last_used_annotation_postpones_the_deletion(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    clock = Clock()
    await create(double, template("gpuclaim-t", annotations={
        garbage.LAST_USED_ANNOTATION: garbage.format_time(clock.t + IDLE)}))  # touched by admission later on
    await settle(view, double)
    gc = collector(client, view, clock)
    await gc.sweep()
    clock.t += IDLE + 1
    assert (await gc.sweep()).deleted == []
    clock.t += IDLE
    assert (await gc.sweep()).deleted == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]


class StaleView:
    """The cluster view as it was before: the collector judges from it, the store has moved on."""

    def __init__(self, objects: dict[str, dict[str, dict[str, Any]]]) -> None:
        self._objects = objects

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return self._objects.get(kind, {})


@pytest.mark.parametrize("change", ["touched", "recreated"])
async def test_the_delete_precondition_keeps_an_object_that_changed_since_it_was_judged(
        double: RunningDouble, client: KubeClient, change: str) -> None:
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    before = copy.deepcopy(await create(double, template("gpuclaim-t")))
    if change == "touched":  # admission on another replica refreshed last-used: a new resourceVersion
        current = copy.deepcopy(double.store.get(TEMPLATE, NS, "gpuclaim-t"))
        current["metadata"].setdefault("annotations", {})[garbage.LAST_USED_ANNOTATION] = garbage.format_time(0)
        await double.store.update(TEMPLATE, NS, "gpuclaim-t", current)
    else:  # deleted and created again by a new pod's admission: same name, new uid
        await double.store.delete(TEMPLATE, NS, "gpuclaim-t")
        await create(double, template("gpuclaim-t"))
    clock = Clock()
    gc = collector(client, StaleView({"ResourceClaimTemplate": {f"{NS}/gpuclaim-t": before}}), clock)
    await gc.sweep()
    clock.t += IDLE + 1
    result = await gc.sweep()
    assert result.deleted == [] and result.kept == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    assert names(double, TEMPLATE) == {"gpuclaim-t"}
    assert sample(gc, "gpuclaim_gc_delete_conflicts_total", "ResourceClaimTemplate") == 1


async def test_a_sweep_stops_deleting_when_the_lease_is_lost(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-t"))
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock)
    await gc.sweep()
    clock.t += IDLE + 1
    assert (await gc.sweep(may_delete=lambda: False)).deleted == []
    assert names(double, TEMPLATE) == {"gpuclaim-t"}


# ---- two replicas, one Lease ------------------------------------------------------------------------------

FAST = leader.Timing(lease_duration=2.0, renew_deadline=1.5, retry_period=0.25)


class Replica:
    def __init__(self, name: str, client: KubeClient, cache: ClusterCache) -> None:
        self.elector = leader.LeaderElector(client, namespace="gpuclaim", name="gpuclaim-gc", identity=name,
                                            timing=FAST)
        self.gc = garbage.GarbageCollector(client, cache, registry=CollectorRegistry(), idle_seconds=0.2,
                                           sharing_annotation=SHARING)
        self.task = asyncio.create_task(garbage.run(self.gc, self.elector, interval=0.1), name=f"gc-{name}")

    @property
    def deleted(self) -> float:
        return sample(self.gc, "gpuclaim_gc_deleted_total") or 0.0

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def _until(condition: Callable[[], bool], within: float = 15.0) -> None:
    await eventually(condition, within)


async def test_two_replicas_only_the_leader_deletes_and_the_other_takes_over_when_it_dies(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuclaim"}})
    replicas = [Replica("a", client, view), Replica("b", client, view)]
    try:
        await _until(lambda: any(r.elector.is_leader for r in replicas))
        first = next(r for r in replicas if r.elector.is_leader)
        other = next(r for r in replicas if r is not first)
        await create(double, template("gpuclaim-one"))
        await _until(lambda: "gpuclaim-one" not in names(double, TEMPLATE))
        assert (first.deleted, other.deleted) == (1, 0)
        assert not other.elector.is_leader
        lease = double.store.get(BY_KIND[("coordination.k8s.io/v1", "Lease")], "gpuclaim", "gpuclaim-gc")
        assert lease["spec"]["holderIdentity"] == first.elector.identity

        async def crashed() -> bool:  # a killed replica releases nothing: the lease must expire
            return False

        first.elector.release = crashed  # type: ignore[method-assign]
        lost_at = time.monotonic()
        await first.stop()
        await _until(lambda: other.elector.is_leader)
        waited = time.monotonic() - lost_at
        # not before the lease expired as `other` saw it: lease_duration after the last renewal it observed,
        # which came at most one renewal period before the crash
        assert waited >= FAST.lease_duration - FAST.retry_period - 0.1, waited
        await create(double, template("gpuclaim-two"))
        await _until(lambda: "gpuclaim-two" not in names(double, TEMPLATE))
        assert (first.deleted, other.deleted) == (1, 1)
        lease = double.store.get(BY_KIND[("coordination.k8s.io/v1", "Lease")], "gpuclaim", "gpuclaim-gc")
        assert lease["spec"]["holderIdentity"] == other.elector.identity
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        for replica in replicas:
            await replica.stop()


async def test_a_replica_that_stops_releases_the_lease_and_the_other_takes_over_at_once(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuclaim"}})
    a = Replica("a", client, view)
    try:
        await _until(lambda: a.elector.is_leader)
        b = Replica("b", client, view)
        await asyncio.sleep(FAST.retry_period * 2)
        assert not b.elector.is_leader
        stopped_at = time.monotonic()
        await a.stop()
        lease = double.store.get(BY_KIND[("coordination.k8s.io/v1", "Lease")], "gpuclaim", "gpuclaim-gc")
        assert lease["spec"].get("holderIdentity") in (None, "") and lease["spec"]["leaseDurationSeconds"] == 1
        await _until(lambda: b.elector.is_leader)
        assert time.monotonic() - stopped_at < FAST.lease_duration  # the released lease is not waited out
    finally:
        await a.stop()
        with contextlib.suppress(NameError):
            await b.stop()
