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
from gpuclaim.kube.client import ApiError, KubeClient

IDLE = 3600.0
SHARING = "gpuclaim.io/sharing-group"
OURS = {"app.kubernetes.io/managed-by": "gpuclaim"}
DEVICES = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"


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
                template("team-owned", ns, labels={})):
        kube.api.create(obj)
    kube.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}],
                              "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpuclaim-used"}]}})
    view = await _view(client, ns)  # judged from this view; "changed" is edited after it
    path = f"{TEMPLATES.format(ns=ns)}/gpuclaim-changed"
    await client.patch(path, {"metadata": {"annotations": {garbage.LAST_USED_ANNOTATION: "2026-01-01T00:00:00Z"}}})
    now = [time.time()]
    gc = garbage.GarbageCollector(client, view, registry=CollectorRegistry(), idle_seconds=IDLE,
                                  sharing_annotation=SHARING, now=lambda: now[0], max_deletes_per_second=100)
    await gc.sweep()
    now[0] += IDLE + 60
    result = await gc.sweep()
    assert result.deleted == [f"ResourceClaimTemplate {ns}/gpuclaim-idle"]
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
