"""webhook.templates.create_objects against the API double (in process, TLS) and the real cluster cache."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from convert_support import config, nvidia_classes
from prometheus_client import CollectorRegistry

from gpuclaim.double.apiserver import Fault, RunningDouble
from gpuclaim.double.apiserver.resources import BY_KEY
from gpuclaim.kube import ClusterCache
from gpuclaim.kube.client import KubeClient, resource_path
from gpuclaim.webhook.convert import Conversion, convert_pod
from gpuclaim.webhook.convert.templates import spec_hash
from gpuclaim.webhook.templates import CreationError, create_objects

NS = "ml"
TEMPLATES = BY_KEY["resource.k8s.io/v1/resourceclaimtemplates"]
CLAIMS = BY_KEY["resource.k8s.io/v1/resourceclaims"]


@pytest.fixture
async def client(client: KubeClient) -> KubeClient:
    """The suite-wide client for the API double, with the test namespace created."""
    await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return client


def conversion(count: int = 2, group: str | None = None) -> Conversion:
    meta: dict[str, Any] = {"name": "p", "namespace": NS}
    if group:
        meta["annotations"] = {"gpuclaim.io/sharing-group": group}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": count}}}]}}
    result = convert_pod(pod, config=config(), device_classes=nvidia_classes())
    assert result.objects and not result.refusals
    return result


def stored(double: RunningDouble, resource: Any) -> list[dict[str, Any]]:
    return double.store.list(resource, NS, lambda _: True)[0]


async def test_the_template_is_created_in_the_pods_namespace(double: RunningDouble, client: KubeClient) -> None:
    wanted = conversion()
    result = await create_objects(client, None, NS, wanted, dry_run=False)
    name = wanted.templates[0]["metadata"]["name"]
    assert result.created == [f"ResourceClaimTemplate {NS}/{name}"]
    (template,) = stored(double, TEMPLATES)
    assert template["metadata"]["name"] == name
    assert template["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuclaim"}
    assert template["spec"] == wanted.templates[0]["spec"]


async def test_dry_run_creates_nothing(double: RunningDouble, client: KubeClient) -> None:
    result = await create_objects(client, None, NS, conversion(), dry_run=True)
    assert result.created == [] and result.dry_run
    assert stored(double, TEMPLATES) == []


async def test_an_identical_existing_template_answering_409_is_fine(double: RunningDouble,
                                                                    client: KubeClient) -> None:
    await create_objects(client, None, NS, conversion(), dry_run=False)
    again = await create_objects(client, None, NS, conversion(), dry_run=False)
    assert len(again.created) == 1 and len(stored(double, TEMPLATES)) == 1


async def test_an_edited_template_answering_409_is_a_refusal_naming_the_field(client: KubeClient) -> None:
    wanted = conversion()
    edited = copy.deepcopy(wanted.templates[0])
    edited["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]["count"] = 3
    await client.create(resource_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace=NS), edited)
    with pytest.raises(CreationError) as info:
        await create_objects(client, None, NS, wanted, dry_run=False)
    assert info.value.is_refusal and info.value.reference == "object-differs"
    assert "already exists with a different spec" in info.value.message
    assert "spec.spec.devices.requests[0].firstAvailable[0].count: existing 3, wanted 2" in info.value.message


async def test_a_template_the_cluster_view_knows_needs_no_api_call(double: RunningDouble,
                                                                   client: KubeClient) -> None:
    cache = ClusterCache(client, registry=CollectorRegistry())
    await cache.start()
    try:
        await cache.wait_synced(10)
        wanted = conversion()
        await create_objects(client, cache, NS, wanted, dry_run=False)
        name = wanted.templates[0]["metadata"]["name"]
        for _ in range(100):
            if cache.template(NS, name) is not None:
                break
            await asyncio.sleep(0.05)
        double.faults.add(Fault(kind="status", verbs=frozenset({"create", "get"}), code=500, times=None))
        result = await create_objects(client, cache, NS, wanted, dry_run=False)
        assert result.known == [f"ResourceClaimTemplate {NS}/{name}"] and result.created == []
    finally:
        await cache.stop()


async def test_a_sharing_group_creates_one_claim_per_shape_named_after_its_content(double: RunningDouble,
                                                                                    client: KubeClient) -> None:
    first = conversion(1, group="chat")
    await create_objects(client, None, NS, first, dry_run=False)
    await create_objects(client, None, NS, conversion(1, group="chat"), dry_run=False)
    (claim,) = stored(double, CLAIMS)
    assert claim["metadata"]["name"] == "gpuclaim-shared-chat-" + spec_hash(claim["spec"])
    assert claim["metadata"]["annotations"] == {"gpuclaim.io/sharing-group": "chat"}
    await create_objects(client, None, NS, conversion(3, group="chat"), dry_run=False)
    assert len(stored(double, CLAIMS)) == 2


async def test_a_squatted_shared_claim_name_cannot_lock_the_groups_pods_out(double: RunningDouble,
                                                                           client: KubeClient) -> None:
    """Issue 14, finding 7: a forged review created the group's claim with another spec; the real pods of the
    group were then refused. Names carry the spec's hash: the squatter's claim has another name."""
    squatter = conversion(3, group="victim-group")
    await create_objects(client, None, NS, squatter, dry_run=False)
    real = conversion(1, group="victim-group")
    result = await create_objects(client, None, NS, real, dry_run=False)
    assert result.created == [f"ResourceClaim {NS}/{real.claims[0]['metadata']['name']}"]
    assert real.claims[0]["metadata"]["name"] != squatter.claims[0]["metadata"]["name"]


async def test_a_slow_api_is_a_clear_infrastructure_error(double: RunningDouble, client: KubeClient) -> None:
    double.faults.add(Fault(kind="delay", verbs=frozenset({"create"}), delay_seconds=5.0))
    with pytest.raises(CreationError) as info:
        await create_objects(client, None, NS, conversion(1, group="chat"), dry_run=False, time_limit=0.3)
    assert info.value.reference == "api-unavailable" and not info.value.is_refusal
    assert "did not answer within 0.3s" in info.value.message


async def test_a_missing_namespace_is_the_servers_clear_refusal(client: KubeClient) -> None:
    """Issue 22, item 2: a 4xx on the create is a refusal with the server's code, never "unavailable" (which
    internalErrorPolicy.mutate: allow answered by admitting the GPU pod unconverted)."""
    with pytest.raises(CreationError) as info:
        await create_objects(client, None, "nowhere", conversion(), dry_run=False)
    assert info.value.reference == "api-refused" and 'namespaces "nowhere" not found' in info.value.message
    assert info.value.is_refusal and info.value.status == (404, "NotFound")


@pytest.mark.parametrize(("code", "refusal"), [(403, True), (422, True), (429, True), (409, False), (500, False)],
                         ids=["quota-forbidden", "invalid", "too-many-requests", "conflict", "server-error"])
async def test_a_4xx_other_than_409_on_a_shared_claim_or_a_template_is_a_refusal(
        double: RunningDouble, client: KubeClient, code: int, refusal: bool) -> None:
    for wanted in (conversion(), conversion(1, group="chat")):
        double.faults.add(Fault(kind="status", verbs=frozenset({"create"}), code=code, times=1))
        with pytest.raises(CreationError) as info:
            await create_objects(client, None, NS, wanted, dry_run=False, time_limit=1.0)
        assert info.value.is_refusal is refusal
        assert info.value.status == ((code, info.value.status[1]) if refusal else None)


async def test_an_api_error_on_a_template_is_an_infrastructure_error(double: RunningDouble,
                                                                     client: KubeClient) -> None:
    double.faults.add(Fault(kind="status", verbs=frozenset({"create"}), code=503, times=None))
    with pytest.raises(CreationError) as info:
        await create_objects(client, None, NS, conversion(), dry_run=False, time_limit=1.0)
    assert not info.value.is_refusal and "ResourceClaimTemplate ml/gpuclaim-" in info.value.message
