"""Garbage collection inside the webhook process, against the API double: the app's cleanup context runs the
collector on the replica holding the Lease (a template made by an admission and never used by a pod is deleted
once idle, counted in /metrics); admission refreshes `gpuclaim.io/last-used` of an object it hands out again,
never on dryRun; an object deleted since the cluster view saw it is created again, not referenced dangling; the
collector and the quota controller each hold their own Lease and give it up at shutdown, and both stay off, saying
why, when no namespace for a Lease is known."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from eventually import eventually
from server_helpers import Server, classes_double, pod_review, reloader_for, serving, start

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.double.apiserver.resources import BY_KIND
from gpuclaim.dra.config import Config, load_config
from gpuclaim.kube import config as kube_config
from gpuclaim.kube import garbage
from gpuclaim.kube.client import KubeClient
from gpuclaim.webhook import admit, app, keys, templates
from gpuclaim.webhook.convert import Conversion

NS = "gpu-test1"
TEMPLATE = BY_KIND[("resource.k8s.io/v1", "ResourceClaimTemplate")]
LEASE = BY_KIND[("coordination.k8s.io/v1", "Lease")]
FAST_LEASE = {"leaseDurationSeconds": 2, "renewDeadlineSeconds": 1.5, "retryPeriodSeconds": 0.25}


@pytest.fixture
async def double(tmp_path: Path) -> AsyncIterator[RunningDouble]:
    running = await classes_double(tmp_path, NS, "gpuclaim")
    yield running
    await running.close()


@contextlib.asynccontextmanager
async def _serving(double: RunningDouble, tls_files: selfsigned.TlsFiles, config: Config) -> AsyncIterator[Server]:
    """The app with the real cores, the double's cluster view and the Leases' namespace, once the view is synced."""
    application = app.create_app(config, checks=admit.core_checks(own_namespace="gpuclaim"),
                                 reloader=reloader_for(tls_files), namespace="gpuclaim",
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig))
    async with serving(application, tls_files) as server:
        await eventually(lambda: application[keys.STATE].context.cluster is not None, 5)
        await application[keys.STATE].context.cluster.wait_synced(10)
        yield server


@pytest.fixture
async def live(double: RunningDouble, tls_files: selfsigned.TlsFiles, request: pytest.FixtureRequest
               ) -> AsyncIterator[Server]:
    async with _serving(double, tls_files, load_config({"gc": request.param})) as server:
        yield server


def _stored(double: RunningDouble) -> list[dict[str, Any]]:
    return double.store.list(TEMPLATE, NS, lambda _: True)[0]


@pytest.mark.parametrize("live", [{"idleSeconds": 1, "intervalSeconds": 0.2, **FAST_LEASE}], indirect=True)
async def test_the_webhook_deletes_a_template_no_pod_used_once_idle(live: Server, double: RunningDouble) -> None:
    status, body = await live.post("/mutate", pod_review(gpus=2))
    assert status == 200 and body["response"]["allowed"] is True
    assert len(_stored(double)) == 1
    sample = live.app[keys.REGISTRY].get_sample_value
    await eventually(lambda: sample("gpuclaim_gc_leader") == 1, 10)
    await eventually(lambda: _stored(double) == [], 10)
    assert sample("gpuclaim_gc_deleted_total", {"kind": "ResourceClaimTemplate"}) == 1
    assert sample("gpuclaim_gc_deleted_total", {"kind": "ResourceClaim"}) == 0
    lease = double.store.get(LEASE, "gpuclaim", "gpuclaim-gc")
    assert lease["spec"]["holderIdentity"] and lease["spec"]["leaseDurationSeconds"] == 2
    # the next pod of that shape gets its template again
    status, body = await live.post("/mutate", pod_review(gpus=2, name="pod1", uid="u-again"))
    assert status == 200 and body["response"]["allowed"] is True and len(_stored(double)) == 1


@pytest.mark.parametrize("live", [{"enabled": False}], indirect=True)
async def test_with_gc_disabled_there_is_no_lease_and_no_collector(live: Server, double: RunningDouble) -> None:
    await asyncio.sleep(0.3)
    assert live.app[keys.STATE].gc is None
    assert double.store.list(LEASE, "gpuclaim", lambda _: True)[0] == []


@pytest.mark.parametrize(("settings", "lease", "gauge"), [
    ({"gc": FAST_LEASE}, "gpuclaim-gc", "gpuclaim_gc_leader"),
    ({"gc": {"enabled": False, **FAST_LEASE}, "quota": {"enabled": True, "precheck": False}}, "gpuclaim-quota",
     "gpuclaim_quota_leader"),
], ids=["gc", "quota"])  # fmt: skip
async def test_each_leased_loop_holds_its_own_lease_and_gives_it_up_at_shutdown(
        double: RunningDouble, tls_files: selfsigned.TlsFiles, settings: dict[str, Any], lease: str,
        gauge: str) -> None:
    async with _serving(double, tls_files, load_config(settings)) as server:
        sample = server.app[keys.REGISTRY].get_sample_value
        await eventually(lambda: sample(gauge) == 1, 10)
        held = double.store.get(LEASE, "gpuclaim", lease)
        assert held["spec"]["holderIdentity"] and held["spec"]["leaseDurationSeconds"] == 2
        assert [x["metadata"]["name"] for x in double.store.list(LEASE, "gpuclaim", lambda _: True)[0]] == [lease]
    released = double.store.get(LEASE, "gpuclaim", lease)["spec"]  # a successor takes over at once
    assert not released.get("holderIdentity") and released["leaseDurationSeconds"] == 1
    assert sample(gauge) == 0


async def test_without_a_namespace_for_the_leases_both_loops_stay_off_and_say_why(
        double: RunningDouble, tls_files: selfsigned.TlsFiles, caplog: pytest.LogCaptureFixture) -> None:
    application = app.create_app(load_config({"gc": FAST_LEASE, "quota": {"enabled": True, "precheck": False}}),
                                 checks=admit.core_checks(own_namespace="gpuclaim"), reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig), namespace=None)
    with caplog.at_level("WARNING", logger="gpuclaim.webhook"):
        runner, _ = await start(application)
    try:
        await asyncio.sleep(0.5)
        assert application[keys.STATE].gc is None
        assert double.store.list(LEASE, "gpuclaim", lambda _: True)[0] == []
    finally:
        await runner.cleanup()
    warned = [r.getMessage() for r in caplog.records if r.name == "gpuclaim.webhook"]
    assert any(m.startswith("garbage collection is off: no namespace for its Lease") for m in warned), warned
    assert any(m.startswith("the quota controller is off: no namespace for its Lease") for m in warned), warned


async def _age(double: RunningDouble, name: str) -> None:
    """Make the stored template look created long ago (a real write, so the cluster view sees it)."""
    stored = double.store.get(TEMPLATE, NS, name)
    stored["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"  # the store keeps it on update
    edited = copy.deepcopy(stored)
    edited["metadata"].setdefault("labels", {})["aged"] = "yes"
    await double.store.update(TEMPLATE, NS, name, edited)


@pytest.mark.parametrize("live", [{"idleSeconds": 3600}], indirect=True)
async def test_admission_refreshes_last_used_of_a_template_it_hands_out_again_never_on_dry_run(
        live: Server, double: RunningDouble) -> None:
    await live.post("/mutate", pod_review(gpus=2))
    (template,) = _stored(double)
    name = template["metadata"]["name"]
    await _age(double, name)
    cache = live.app[keys.STATE].context.cluster
    await eventually(lambda: (cache.template(NS, name) or {}).get("metadata", {}).get("labels", {}).get("aged"))

    status, body = await live.post("/mutate", pod_review(gpus=2, name="dry", uid="u-dry", dry_run=True))
    assert status == 200 and body["response"]["allowed"] is True
    assert garbage.LAST_USED_ANNOTATION not in (_stored(double)[0]["metadata"].get("annotations") or {})

    version = _stored(double)[0]["metadata"]["resourceVersion"]
    status, body = await live.post("/mutate", pod_review(gpus=2, name="again", uid="u-again"))
    assert status == 200 and body["response"]["allowed"] is True
    (after,) = _stored(double)
    used = garbage.parse_time(after["metadata"]["annotations"][garbage.LAST_USED_ANNOTATION])
    assert used is not None and after["metadata"]["resourceVersion"] != version  # a GC DELETE on `version` fails
    assert garbage.last_used(after) == used  # the collector now counts idle time from this admission


class _StaleView:
    """The cluster view still holding an object the collector just deleted."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    def template(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.obj if name == self.obj["metadata"]["name"] else None

    def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None


async def test_an_object_deleted_since_the_view_saw_it_is_created_again(double: RunningDouble) -> None:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpuclaim-0123456789abcdef", "labels": {"app.kubernetes.io/managed-by": "gpuclaim"}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}}
    seen = await double.store.create(TEMPLATE, NS, copy.deepcopy(body))
    seen = copy.deepcopy(seen)
    seen["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"  # due for a refresh
    await double.store.delete(TEMPLATE, NS, body["metadata"]["name"])  # the collector got there first
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig))
    try:
        made = await templates.create_objects(client, _StaleView(seen), NS, Conversion(templates=[body]),
                                              dry_run=False, touch_after=1800.0,
                                              sharing_annotation="gpuclaim.io/sharing-group")
    finally:
        await client.close()
    assert made.created == [f"ResourceClaimTemplate {NS}/{body['metadata']['name']}"]
    (again,) = _stored(double)
    assert again["metadata"]["uid"] != seen["metadata"]["uid"]
