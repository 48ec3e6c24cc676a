"""Garbage collection against the real kube-apiserver 1.34: what tests/kube/test_garbage.py checks on the API double
(the Lease, DeleteOptions preconditions and their 409s) holds on the real thing, so the double's extensions are
faithful: idle templates deleted, used and foreign ones kept, a changed object kept by its precondition, and two
electors on one coordination.k8s.io/v1 Lease, one leading, the other taking over after a release."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from eventually import eventually
from prometheus_client import CollectorRegistry
from realkube_cluster import Kube

from gpuclaim.kube import config as kube_config
from gpuclaim.kube import garbage, leader
from gpuclaim.kube.cache import ClusterCache
from gpuclaim.kube.client import ApiError, KubeClient
from gpuclaim.kube.reflector import WatchSpec

IDLE = 3600.0
SHARING = "gpuclaim.io/sharing-group"
OURS = {"app.kubernetes.io/managed-by": "gpuclaim"}
DEVICES = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with kube.scratch_namespace("gc") as name:
        yield name


@pytest.fixture
async def client(kube: Kube) -> AsyncIterator[KubeClient]:
    api = kube_config.from_kubeconfig(Path(kube.kubeconfig))
    real = KubeClient(api, timeout=10)
    yield real
    await real.close()


def template(name: str, ns: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns, "labels": OURS if labels is None else labels},
            "spec": {"metadata": {"labels": OURS}, "spec": DEVICES}}


class Listed:
    """A cluster view from one list of the real apiserver."""

    def __init__(self, templates: list[dict[str, Any]]) -> None:
        self.templates = {f"{t['metadata']['namespace']}/{t['metadata']['name']}": t for t in templates}

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return self.templates if kind == "ResourceClaimTemplate" else {}


async def _view(client: KubeClient, ns: str) -> Listed:
    listed = await client.list(TEMPLATES.format(ns=ns))
    return Listed([{**t, "metadata": {**t["metadata"], "namespace": ns}} for t in listed["items"]])


def _names(kube: Kube, ns: str) -> set[str]:
    return {t["metadata"]["name"] for t in kube.api.list("ResourceClaimTemplate", ns)}


async def test_idle_used_foreign_and_changed_templates_on_the_real_apiserver(
        kube: Kube, ns: str, client: KubeClient) -> None:
    for obj in (template("gpuclaim-idle", ns), template("gpuclaim-used", ns), template("gpuclaim-changed", ns),
                template("gpuclaim-touched-first", ns), template("team-owned", ns, labels={})):
        kube.api.create(obj)
    kube.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}],
                              "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpuclaim-used"}]}})
    first_view = await _view(client, ns)  # "touched-first" is edited after it: its mark must not be written
    await client.patch(f"{TEMPLATES.format(ns=ns)}/gpuclaim-touched-first",
                       {"metadata": {"annotations": {garbage.LAST_USED_ANNOTATION: "2026-01-01T00:00:00Z"}}})
    now = [time.time()]
    gc = garbage.GarbageCollector(client, first_view, registry=CollectorRegistry(), idle_seconds=IDLE,
                                  sharing_annotation=SHARING, now=lambda: now[0], max_deletes_per_second=100)
    marked = await gc.sweep()  # the merge patch's resourceVersion is a precondition on the real apiserver too
    assert sorted(marked.marked) == [f"ResourceClaimTemplate {ns}/gpuclaim-changed",
                                     f"ResourceClaimTemplate {ns}/gpuclaim-idle"]
    assert gc.metrics.registry.get_sample_value("gpuclaim_gc_errors_total") == 0  # the refused mark: a 409
    view = await _view(client, ns)  # judged from this view; "changed" is edited after it
    path = f"{TEMPLATES.format(ns=ns)}/gpuclaim-changed"
    await client.patch(path, {"metadata": {"annotations": {garbage.LAST_USED_ANNOTATION: "2026-01-01T00:00:00Z"}}})
    gc.view = view
    now[0] += IDLE + 60
    result = await gc.sweep()
    # "touched-first" by this collector's own first observation, which it keeps in memory while the mark is refused
    assert sorted(result.deleted) == [f"ResourceClaimTemplate {ns}/gpuclaim-idle",
                                      f"ResourceClaimTemplate {ns}/gpuclaim-touched-first"]
    assert result.kept == [f"ResourceClaimTemplate {ns}/gpuclaim-changed"]  # the real apiserver's 409
    assert result.in_use == 1
    assert _names(kube, ns) == {"gpuclaim-used", "gpuclaim-changed", "team-owned"}
    # the API double answers a failed precondition with these same words (tests/e2e_double/test_double.py)
    stale = copy.deepcopy(view.templates[f"{ns}/gpuclaim-changed"]["metadata"])
    current = kube.api.get(path)["metadata"]["resourceVersion"]
    with pytest.raises(ApiError) as refused:
        await client.delete(path, preconditions={"uid": stale["uid"], "resourceVersion": stale["resourceVersion"]})
    assert (refused.value.code, refused.value.reason) == (409, "Conflict")
    where = 'Operation cannot be fulfilled on ResourceClaimTemplate.resource.k8s.io "gpuclaim-changed": '
    assert refused.value.message == (
        f"{where}the ResourceVersion in the precondition ({stale['resourceVersion']}) does not match the "
        f"ResourceVersion in record ({current}). The object might have been modified")
    with pytest.raises(ApiError) as wrong_uid:
        await client.delete(path, preconditions={"uid": "00000000-0000-0000-0000-000000000000"})
    assert wrong_uid.value.message == (
        f"{where}the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record "
        f"({stale['uid']}). The object might have been deleted and then recreated")


async def test_two_electors_on_a_real_lease_one_leads_and_the_other_takes_over_after_release(
        kube: Kube, ns: str, client: KubeClient) -> None:
    timing = leader.Timing(lease_duration=2.0, renew_deadline=1.5, retry_period=0.25)
    a = leader.LeaderElector(client, namespace=ns, name="gpuclaim-gc", identity="a", timing=timing)
    b = leader.LeaderElector(client, namespace=ns, name="gpuclaim-gc", identity="b", timing=timing)
    tasks = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        await eventually(lambda: a.is_leader or b.is_leader, 20)
        first, other = (a, b) if a.is_leader else (b, a)
        await asyncio.sleep(1.0)
        assert first.is_leader and not other.is_leader
        lease = kube.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/gpuclaim-gc")
        assert lease["spec"]["holderIdentity"] == first.identity and lease["spec"]["leaseDurationSeconds"] == 2
        tasks[0 if first is a else 1].cancel()
        assert await first.release()
        await eventually(lambda: other.is_leader, 20)
        lease = kube.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/gpuclaim-gc")
        assert lease["spec"]["holderIdentity"] == other.identity and lease["spec"]["leaseTransitions"] == 1
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class OneNamespace:
    """The cluster view of the real apiserver (a ClusterCache watching templates and claims), narrowed to the
    test's namespace: a collector with a clock hours ahead must not judge other tests' objects."""

    def __init__(self, cache: ClusterCache, ns: str) -> None:
        self.cache, self.prefix = cache, f"{ns}/"

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: o for k, o in self.cache.objects(kind).items() if k.startswith(self.prefix)}


def _unused_since(kube: Kube, ns: str, name: str, collection: str = TEMPLATES) -> str | None:
    got = kube.api.get(f"{collection.format(ns=ns)}/{name}")
    return (got["metadata"].get("annotations") or {}).get(garbage.UNUSED_SINCE_ANNOTATION)


def _pod(name: str, ns: str, template_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}]}}


@pytest.mark.parametrize("handover", ["released", "expired"])
async def test_the_idle_clock_survives_a_change_of_leader_on_the_real_apiserver(
        kube: Kube, ns: str, client: KubeClient, handover: str) -> None:
    """Two replicas (garbage.run, a real Lease, one injected clock): the first leader sees the templates unused
    and hands over half an idle period later; the new leader deletes the idle one an idle period after the first
    leader's observation (before the fix: only half an idle period later than that); one used in between
    survives until an idle period after its use; a malformed mark is replaced; one in use with a forged mark from
    long ago is never deleted."""
    long_ago = {garbage.LAST_USED_ANNOTATION: "2000-01-01T00:00:00Z"}
    for name, marks in (("gpuclaim-idle", {}), ("gpuclaim-used-between", {}),
                        ("gpuclaim-malformed", {garbage.UNUSED_SINCE_ANNOTATION: "an hour ago"}),
                        ("gpuclaim-in-use", {garbage.UNUSED_SINCE_ANNOTATION: "2000-01-01T00:00:00Z",
                                             **long_ago})):
        obj = template(name, ns)
        obj["metadata"]["annotations"] = marks
        kube.api.create(obj)
    kube.api.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": "gpuclaim-shared-idle", "namespace": ns, "labels": OURS,
                                  "annotations": {SHARING: "g"}}, "spec": DEVICES})
    kube.api.create(_pod("user", ns, "gpuclaim-in-use"))
    cache = ClusterCache(client, registry=CollectorRegistry(), specs=(
        WatchSpec("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates", namespaced=True),
        WatchSpec("ResourceClaim", "resource.k8s.io/v1", "resourceclaims", namespaced=True)))
    await cache.start()
    now = [time.time()]
    timing = leader.Timing(lease_duration=2.0, renew_deadline=1.5, retry_period=0.25)
    replicas: list[tuple[leader.LeaderElector, garbage.GarbageCollector, asyncio.Task[None]]] = []

    def replica(identity: str) -> tuple[leader.LeaderElector, garbage.GarbageCollector, asyncio.Task[None]]:
        elector = leader.LeaderElector(client, namespace=ns, name="gpuclaim-gc", identity=identity, timing=timing)
        gc = garbage.GarbageCollector(client, OneNamespace(cache, ns), registry=CollectorRegistry(),
                                      idle_seconds=IDLE, sharing_annotation=SHARING, now=lambda: now[0],
                                      max_deletes_per_second=100)
        task = asyncio.create_task(garbage.run(gc, elector, interval=0.2, synced=lambda: cache.wait_synced(20)))
        replicas.append((elector, gc, task))
        return elector, gc, task

    def sweeps(gc: garbage.GarbageCollector) -> float:
        return gc.metrics.registry.get_sample_value("gpuclaim_gc_sweeps_total") or 0.0

    async def sweeps_by(gc: garbage.GarbageCollector, count: int) -> None:
        before = sweeps(gc)
        await eventually(lambda: sweeps(gc) >= before + count, 20)

    try:
        a, a_gc, a_task = replica("a")
        await eventually(lambda: a.is_leader, 20)
        b, b_gc, _ = replica("b")
        observed = now[0]
        await sweeps_by(a_gc, 2)
        first_marks = {name: _unused_since(kube, ns, name) for name in _names(kube, ns)}
        claim_mark = _unused_since(kube, ns, "gpuclaim-shared-idle", CLAIMS)
        kube.api.create(_pod("between", ns, "gpuclaim-used-between"))
        await sweeps_by(a_gc, 2)  # pods are listed fresh at every sweep: a saw it in use
        after_use = _unused_since(kube, ns, "gpuclaim-used-between")
        now[0] += IDLE / 2
        kube.api.delete(f"/api/v1/namespaces/{ns}/pods/between")
        await eventually(lambda: "between" not in {p["metadata"]["name"] for p in kube.api.list("Pod", ns)}, 30)
        if handover == "expired":
            async def crashed() -> bool:
                return False

            a.release = crashed  # type: ignore[method-assign]
        a_task.cancel()
        await asyncio.gather(a_task, return_exceptions=True)
        await eventually(lambda: b.is_leader, 20)
        await sweeps_by(b_gc, 3)
        after_handover = _unused_since(kube, ns, "gpuclaim-used-between")
        assert _names(kube, ns) == {"gpuclaim-idle", "gpuclaim-used-between", "gpuclaim-malformed", "gpuclaim-in-use"}

        now[0] = observed + IDLE + 1  # an idle period after a's observation, half of one after b's first sweep
        await eventually(lambda: _names(kube, ns) == {"gpuclaim-used-between", "gpuclaim-in-use"}
                         and "gpuclaim-shared-idle" not in {c["metadata"]["name"]
                                                            for c in kube.api.list("ResourceClaim", ns)}, 20)
        await sweeps_by(b_gc, 3)
        assert _names(kube, ns) == {"gpuclaim-used-between", "gpuclaim-in-use"}
        now[0] += IDLE / 2 + 1
        await eventually(lambda: _names(kube, ns) == {"gpuclaim-in-use"}, 20)
        now[0] += 10 * IDLE
        await sweeps_by(b_gc, 3)
        assert _names(kube, ns) == {"gpuclaim-in-use"} and _unused_since(kube, ns, "gpuclaim-in-use") is None
        assert b_gc.metrics.registry.get_sample_value("gpuclaim_gc_deleted_total",
                                                      {"kind": "ResourceClaimTemplate"}) == 3
        assert b_gc.metrics.registry.get_sample_value("gpuclaim_gc_deleted_total", {"kind": "ResourceClaim"}) == 1
        assert a_gc.metrics.registry.get_sample_value("gpuclaim_gc_deleted_total",
                                                      {"kind": "ResourceClaimTemplate"}) == 0
        # how: a marked what it saw unused, replaced the malformed value, and removed the marks of what was in use
        mark = garbage.format_time(observed)
        assert first_marks == {"gpuclaim-idle": mark, "gpuclaim-used-between": mark, "gpuclaim-malformed": mark,
                               "gpuclaim-in-use": None}
        assert after_use is None and after_handover == garbage.format_time(observed + IDLE / 2)
        assert claim_mark == mark  # a ResourceClaim's metadata takes the same merge patch
    finally:
        for _, _, task in replicas:
            task.cancel()
        await asyncio.gather(*(task for _, _, task in replicas), return_exceptions=True)
        await cache.stop()
        # the cancelled watches' TLS connections close asynchronously: let them finish before the loop ends, or
        # their sockets are reported unclosed (aiohttp's documented grace for SSL transports)
        await asyncio.sleep(0.25)
