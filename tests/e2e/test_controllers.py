"""The resourceclaim controller against the double: claims from templates, pod status, retries, cleanup."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from e2e_fleet import claim_pod, gpu_request, template
from e2e_servers import Cluster
from official_schemas import assert_valid

from gpuclaim.double.controllers import POD_CLAIM_ANNOTATION, ResourceClaimController, generate_name

TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
PODS = "/api/v1/namespaces/default/pods"


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 20.0) -> Any:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = await check()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.05)


def test_generate_name_cuts_both_parts_in_proportion_like_upstream() -> None:
    assert generate_name("train", "gpu") == "train-gpu-"
    long = generate_name("p" * 60, "c" * 20)
    # Go integer arithmetic: 60 * 57 // 82 = 41 and 20 * 57 // 82 = 13, and no trailing hyphen
    assert long == "p" * 41 + "-" + "c" * 13


async def test_pod_with_a_template_gets_its_claim_and_status(cluster: Cluster) -> None:
    await cluster.client.create(TEMPLATES, template("one-gpu", gpu_request(), labels={"team": "ml"},
                                                    annotations={"note": "from template"}))
    pod = await cluster.client.create(PODS, claim_pod("train", {"gpu": "one-gpu"}))
    controller = ResourceClaimController(cluster.client)
    await controller.start()
    try:
        async def status() -> Any:
            got = await cluster.client.get(f"{PODS}/train")
            return (got.get("status") or {}).get("resourceClaimStatuses")

        statuses = await eventually(status)
    finally:
        await controller.stop()
    assert [s["name"] for s in statuses] == ["gpu"]
    claim = await cluster.client.get(f"{CLAIMS}/{statuses[0]['resourceClaimName']}")
    assert claim["metadata"]["name"].startswith("train-gpu-") and len(claim["metadata"]["name"]) == 15
    assert claim["metadata"]["annotations"] == {"note": "from template", POD_CLAIM_ANNOTATION: "gpu"}
    assert claim["metadata"]["labels"] == {"team": "ml"}
    assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "train",
                                                      "uid": pod["metadata"]["uid"], "controller": True,
                                                      "blockOwnerDeletion": True}]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert_valid(claim)
    # a second pass changes nothing: one claim per pod claim, ever
    await controller.sync_once()
    assert len((await cluster.client.list(CLAIMS))["items"]) == 1


async def test_missing_template_is_reported_and_retried_until_it_exists(cluster: Cluster) -> None:
    await cluster.client.create(PODS, claim_pod("train", {"gpu": "later"}))
    controller = ResourceClaimController(cluster.client, backoff_initial=0.05, backoff_cap=0.2)
    await controller.start()
    try:
        assert await eventually(lambda: asyncio.sleep(0, len(controller.events) >= 2))
        (event, *_) = controller.events
        assert (event.type, event.reason, event.name) == ("Warning", "FailedResourceClaimCreation", "train")
        assert event.message == ('PodResourceClaim gpu: resource claim template "later": '
                                 'resourceclaimtemplates.resource.k8s.io "later" not found')
        await cluster.client.create(TEMPLATES, template("later", gpu_request()))

        async def claims() -> Any:
            return (await cluster.client.list(CLAIMS))["items"]

        assert len(await eventually(claims)) == 1
    finally:
        await controller.stop()


async def test_claims_of_a_deleted_pod_are_released_and_deleted(cluster: Cluster) -> None:
    await cluster.client.create(TEMPLATES, template("one-gpu", gpu_request()))
    pod = await cluster.client.create(PODS, claim_pod("train", {"gpu": "one-gpu"}))
    controller = ResourceClaimController(cluster.client)
    await controller.sync_once()
    (claim,) = (await cluster.client.list(CLAIMS))["items"]
    path = f"{CLAIMS}/{claim['metadata']['name']}"
    claim = await cluster.client.update(path, {**claim, "metadata": {
        **claim["metadata"], "finalizers": ["resource.kubernetes.io/delete-protection"]}})
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n",
                                           "device": "gpu-0"}]}}
    reserved = [{"resource": "pods", "name": "train", "uid": pod["metadata"]["uid"]}]
    await cluster.client.update(f"{path}/status", {**claim, "status": {"allocation": allocation,
                                                                       "reservedFor": reserved}})
    await controller.sync_once()
    assert (await cluster.client.get(path))["status"]["reservedFor"] == reserved  # still in use
    await cluster.client.delete(f"{PODS}/train")
    await controller.sync_once()
    assert (await cluster.client.list(CLAIMS))["items"] == []


async def test_a_shared_claim_is_deallocated_when_its_last_consumer_is_done(cluster: Cluster) -> None:
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "shared", "finalizers": ["resource.kubernetes.io/delete-protection"]},
              "spec": gpu_request()}
    claim = await cluster.client.create(CLAIMS, shared)
    a = await cluster.client.create(PODS, {**claim_pod("a", {}), "spec": {
        "containers": [{"name": "m", "image": "x"}], "resourceClaims": [{"name": "g", "resourceClaimName": "shared"}]}})
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n",
                                           "device": "gpu-0"}]}}
    await cluster.client.update(f"{CLAIMS}/shared/status", {**claim, "status": {
        "allocation": allocation, "reservedFor": [{"resource": "pods", "name": "a", "uid": a["metadata"]["uid"]}]}})
    await cluster.client.patch(f"{PODS}/a/status", {"status": {"phase": "Succeeded"}})
    await ResourceClaimController(cluster.client).sync_once()
    after = await cluster.client.get(f"{CLAIMS}/shared")
    assert "allocation" not in after.get("status", {}) and "reservedFor" not in after.get("status", {})
    assert not after["metadata"].get("finalizers")  # not generated for a pod: kept, but deallocated
