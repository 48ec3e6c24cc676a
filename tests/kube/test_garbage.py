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
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.double.apiserver.faults import Fault
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
    def __init__(self, name: str, client: KubeClient, cache: ClusterCache, *, idle_seconds: float = 0.2,
                 clock: Callable[[], float] = time.time) -> None:
        self.elector = leader.LeaderElector(client, namespace="gpuclaim", name="gpuclaim-gc", identity=name,
                                            timing=FAST)
        self.gc = garbage.GarbageCollector(client, cache, registry=CollectorRegistry(), idle_seconds=idle_seconds,
                                           sharing_annotation=SHARING, now=clock)
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


# ---- the idle clock survives a change of leader (gpuclaim.io/unused-since) -----------------------------------

UNUSED = garbage.UNUSED_SINCE_ANNOTATION


def annotation(double: RunningDouble, name: str, rt: Any = TEMPLATE) -> str | None:
    value = (double.store.get(rt, NS, name)["metadata"].get("annotations") or {}).get(UNUSED)
    return None if value is None else str(value)


async def test_a_new_leader_counts_the_idle_time_from_the_old_leaders_first_observation(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-t"))
    await create(double, claim("gpuclaim-shared-g"))
    await settle(view, double)
    clock = Clock()
    first = collector(client, view, clock)
    marked = await first.sweep()
    assert sorted(marked.marked) == [f"ResourceClaim {NS}/gpuclaim-shared-g", f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    assert annotation(double, "gpuclaim-t") == annotation(double, "gpuclaim-shared-g", CLAIM) == \
        garbage.format_time(clock.t)
    assert sample(first, "gpuclaim_gc_unused_since_writes_total", "ResourceClaimTemplate") is None  # two labels
    assert first.metrics.registry.get_sample_value("gpuclaim_gc_unused_since_writes_total",
                                                   {"kind": "ResourceClaimTemplate", "action": "mark"}) == 1
    await settle(view, double)
    clock.t += IDLE / 2
    second = collector(client, view, clock)  # a new leader: nothing in memory
    waiting = await second.sweep()
    assert waiting.deleted == [] and waiting.marked == [] and waiting.waiting == 2  # the value is trusted as is
    clock.t += IDLE / 2 - 1
    assert (await second.sweep()).deleted == []
    clock.t += 2  # an idle period after the first leader's observation, half of one after the second's
    done = await second.sweep()
    assert sorted(done.deleted) == [f"ResourceClaim {NS}/gpuclaim-shared-g", f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    assert names(double, TEMPLATE) == names(double, CLAIM) == set()


async def test_dry_run_writes_no_annotation(double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-t"))
    await settle(view, double)
    gc = collector(client, view, Clock(), dry_run=True)
    assert (await gc.sweep()).marked == []
    assert annotation(double, "gpuclaim-t") is None


async def test_an_object_used_again_between_two_leaders_survives_a_full_idle_period_after_the_use(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    await create(double, template("gpuclaim-t"))
    await settle(view, double)
    clock = Clock()
    first = collector(client, view, clock)
    await first.sweep()
    assert annotation(double, "gpuclaim-t") == garbage.format_time(clock.t)
    await settle(view, double)
    clock.t += IDLE / 4
    await create(double, pod("user", resourceClaimTemplateName="gpuclaim-t"))
    used = await first.sweep()
    assert used.in_use == 1 and used.cleared == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    assert annotation(double, "gpuclaim-t") is None  # persisted: the next leader knows it was used
    await double.store.delete(POD, NS, "user")
    await settle(view, double)
    clock.t += IDLE / 4
    second = collector(client, view, clock)  # the lease changes hands
    assert (await second.sweep()).marked == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    restarted = clock.t
    await settle(view, double)
    clock.t += IDLE / 2 + 1  # an idle period after the first observation, not after the use
    assert (await second.sweep()).deleted == []
    clock.t = restarted + IDLE + 1
    assert (await second.sweep()).deleted == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]


async def test_a_use_the_view_has_not_caught_up_with_still_restarts_the_clock(
        double: RunningDouble, client: KubeClient) -> None:
    """The cluster view lags its own write: the collector saw the object in use while the view did not show its
    mark yet, so it removes the mark anyway; and a mark from before a use it saw is not trusted even when the
    removal failed."""
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    before = copy.deepcopy(await create(double, template("gpuclaim-t")))
    lagging = StaleView({"ResourceClaimTemplate": {f"{NS}/gpuclaim-t": before}})
    clock = Clock()
    gc = collector(client, lagging, clock)
    await gc.sweep()
    marked_at = clock.t
    assert annotation(double, "gpuclaim-t") == garbage.format_time(marked_at)
    await create(double, pod("user", resourceClaimTemplateName="gpuclaim-t"))
    clock.t += IDLE / 2
    double.faults.add(Fault(kind="status", verbs=frozenset({"patch"}), code=500))  # the removal fails
    assert (await gc.sweep()).cleared == []
    assert annotation(double, "gpuclaim-t") == garbage.format_time(marked_at)
    await double.store.delete(POD, NS, "user")
    lagging._objects["ResourceClaimTemplate"][f"{NS}/gpuclaim-t"] = copy.deepcopy(
        double.store.get(TEMPLATE, NS, "gpuclaim-t"))  # the view catches up with the mark, not with the use
    clock.t = marked_at + IDLE + 1
    result = await gc.sweep()
    assert result.deleted == [] and result.marked == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    assert names(double, TEMPLATE) == {"gpuclaim-t"}


FORGED = {
    "malformed": "an hour ago",
    "a date alone": "2020-01-01",
    "no zone": "2020-01-01T00:00:00",
    "fractional seconds": "2020-01-01T00:00:00.5Z",
    "month 13": "2020-13-01T00:00:00Z",
    "other digits": "\uff12\uff10\uff12\uff10-01-01T00:00:00Z",
    "trailing newline": "2020-01-01T00:00:00Z\n",
    "far future": "2999-01-01T00:00:00Z",
    "before the creation": "1970-01-01T00:00:00Z",
}


@pytest.mark.parametrize("value", list(FORGED.values()), ids=list(FORGED))
async def test_a_forged_or_malformed_unused_since_is_not_trusted_and_replaced(
        double: RunningDouble, client: KubeClient, view: ClusterCache, value: str) -> None:
    await create(double, template("gpuclaim-t", annotations={UNUSED: value}))
    await settle(view, double)
    clock = Clock()
    gc = collector(client, view, clock)
    first = await gc.sweep()
    assert first.deleted == [] and first.marked == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]
    assert annotation(double, "gpuclaim-t") == garbage.format_time(clock.t)
    await settle(view, double)
    clock.t += IDLE - 1
    assert (await collector(client, view, clock).sweep()).deleted == []  # a new leader: counted from the mark
    clock.t += 2
    assert (await collector(client, view, clock).sweep()).deleted == [f"ResourceClaimTemplate {NS}/gpuclaim-t"]


@pytest.mark.parametrize("value", ["1970-01-01T00:00:00Z", "2000-01-01T00:00:00Z", "garbage", None],
                         ids=["before the creation", "long ago", "malformed", "absent"])
async def test_an_object_in_use_is_never_deleted_whatever_its_annotations_say(
        double: RunningDouble, client: KubeClient, view: ClusterCache, value: str | None) -> None:
    long_ago = {garbage.LAST_USED_ANNOTATION: "2000-01-01T00:00:00Z"}
    await create(double, template("gpuclaim-t", annotations={**long_ago, **({UNUSED: value} if value else {})}))
    await create(double, claim("gpuclaim-shared-g", annotations={SHARING: "g", **long_ago,
                                                                 **({UNUSED: value} if value else {})}))
    reserved = copy.deepcopy(double.store.get(CLAIM, NS, "gpuclaim-shared-g"))
    reserved["status"] = {"reservedFor": [{"resource": "pods", "name": "other", "uid": "u-1"}]}
    await double.store.update(CLAIM, NS, "gpuclaim-shared-g", reserved, subresource="status")
    await create(double, pod("user", resourceClaimTemplateName="gpuclaim-t"))
    await settle(view, double)
    clock = Clock()
    clock.t += 10 * IDLE
    for _ in range(2):  # an old leader, then a new one, long after the creation
        result = await collector(client, view, clock).sweep()
        assert result.deleted == [] and result.marked == [] and result.in_use == 2
        await settle(view, double)
    assert annotation(double, "gpuclaim-t") is None and annotation(double, "gpuclaim-shared-g", CLAIM) is None
    assert names(double, TEMPLATE) == {"gpuclaim-t"} and names(double, CLAIM) == {"gpuclaim-shared-g"}


async def test_a_mark_is_never_written_over_a_change_the_collector_did_not_judge(
        double: RunningDouble, client: KubeClient) -> None:
    """The mark carries the judged resourceVersion: a touch by admission on another replica in between wins."""
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    before = copy.deepcopy(await create(double, template("gpuclaim-t")))
    current = copy.deepcopy(before)
    current["metadata"]["annotations"] = {garbage.LAST_USED_ANNOTATION: garbage.format_time(time.time())}
    await double.store.update(TEMPLATE, NS, "gpuclaim-t", current)
    gc = collector(client, StaleView({"ResourceClaimTemplate": {f"{NS}/gpuclaim-t": before}}), Clock())
    result = await gc.sweep()
    assert result.marked == [] and result.waiting == 1
    assert annotation(double, "gpuclaim-t") is None
    assert gc.metrics.registry.get_sample_value("gpuclaim_gc_errors_total") == 0


def _epoch(days: float) -> float:
    return 1_700_000_000.0 + days * 86_400


@settings(max_examples=300, deadline=None)
@given(created_days=st.integers(0, 1000), offset=st.integers(-10**8, 10**8), now_days=st.integers(0, 2000),
       used_days=st.none() | st.integers(0, 2000), junk=st.none() | st.text(max_size=30))
def test_unused_since_is_trusted_only_within_its_bounds(created_days: int, offset: int, now_days: int,
                                                        used_days: int | None, junk: str | None) -> None:
    created = _epoch(created_days)
    since = created + offset  # by construction, as often before the creation as after it, and often in range
    value = junk if junk is not None else garbage.format_time(since)
    now = _epoch(now_days)
    used_at = None if used_days is None else _epoch(used_days)
    obj = {"metadata": {"creationTimestamp": garbage.format_time(created), "annotations": {UNUSED: value}}}
    trusted = garbage.unused_since(obj, now, used_at=used_at)
    if junk is not None and garbage.parse_strict_time(junk) is None:
        assert trusted is None
        return
    parsed = garbage.parse_strict_time(value)
    assert parsed is not None
    in_bounds = created <= parsed <= now + garbage.CLOCK_SKEW_SECONDS and (used_at is None or parsed >= used_at)
    assert trusted == (parsed if in_bounds else None)
    if trusted is not None:  # what a mark writes reads back as the same time
        assert garbage.parse_strict_time(garbage.format_time(trusted)) == trusted


@pytest.mark.parametrize("handover", ["released", "expired"])
async def test_after_a_handover_the_new_leader_deletes_once_idle_since_the_old_leaders_observation(
        double: RunningDouble, client: KubeClient, view: ClusterCache, handover: str) -> None:
    """Two replicas on one Lease with a shared injected clock: the first leader sees the template unused and
    hands over half an idle period later; the second deletes it an idle period after the first one's observation
    (before the fix: half an idle period later than that, counted from its own first sweep)."""
    double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuclaim"}})
    clock = Clock()
    a = Replica("a", client, view, idle_seconds=IDLE, clock=clock)
    await _until(lambda: a.elector.is_leader)
    b = Replica("b", client, view, idle_seconds=IDLE, clock=clock)
    try:
        def sweeps(replica: Replica) -> float:
            return replica.gc.metrics.registry.get_sample_value("gpuclaim_gc_sweeps_total") or 0.0

        await create(double, template("gpuclaim-t"))
        await settle(view, double)
        observed, before = clock.t, sweeps(a)
        await _until(lambda: sweeps(a) >= before + 2)  # a has seen it unused
        clock.t += IDLE / 2
        if handover == "expired":
            async def crashed() -> bool:
                return False

            a.elector.release = crashed  # type: ignore[method-assign]
        await a.stop()
        await _until(lambda: b.elector.is_leader)
        before = sweeps(b)
        await _until(lambda: sweeps(b) >= before + 3)
        assert names(double, TEMPLATE) == {"gpuclaim-t"}  # not idle yet: b trusts a's observation, not less
        clock.t = observed + IDLE + 1
        await _until(lambda: names(double, TEMPLATE) == set())
        assert b.deleted == 1 and a.deleted == 0
    finally:
        await a.stop()
        await b.stop()


async def test_without_patch_permission_one_refused_write_per_sweep_and_the_memory_clock_still_deletes(
        double: RunningDouble, client: KubeClient, view: ClusterCache) -> None:
    for i in range(5):
        await create(double, template(f"gpuclaim-t{i}"))
    await settle(view, double)
    double.faults.add(Fault(kind="status", verbs=frozenset({"patch"}), code=403, times=None))
    clock = Clock()
    gc = collector(client, view, clock)
    for _ in range(2):
        assert (await gc.sweep()).marked == []
    assert gc.metrics.registry.get_sample_value("gpuclaim_gc_errors_total") == 2  # not 10
    clock.t += IDLE + 1
    assert len((await gc.sweep()).deleted) == 5  # as before the clock was persisted
