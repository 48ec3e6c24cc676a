"""The scheduler double on real slices: DRA feasibility from the allocator, extenders over TLS with the real wire
JSON and kube-scheduler's score arithmetic, ignorable failures, unschedulable reasons, claim allocation and binding."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from e2e_fleet import P4D, P5_A, P5_B, claim_pod, gpu_request, load_fleet, template
from e2e_servers import Cluster, TlsServer
from hypothesis import event, given, settings
from hypothesis import strategies as st
from official_schemas import assert_valid

from gpuclaim.double.controllers import ResourceClaimController
from gpuclaim.double.scheduler import (
    CANNOT_ALLOCATE,
    NODE_AFFINITY_REASON,
    ExtenderConfig,
    ExtenderConfigError,
    Scheduler,
)

TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
PODS = "/api/v1/namespaces/default/pods"
H100 = "device.attributes['gpu.nvidia.com'].productName.contains('H100')"


@pytest.fixture
async def fleet(cluster: Cluster) -> AsyncIterator[Cluster]:
    load_fleet(cluster.store)
    yield cluster


def extender(server: TlsServer, **overrides: Any) -> dict[str, Any]:
    return {"urlPrefix": server.url("/gpuclaim"), "prioritizeVerb": "prioritize", "weight": 2,
            "nodeCacheCapable": True, "enableHTTPS": True, "tlsConfig": {"caData": server.ca_bundle},
            "httpTimeout": "1s", **overrides}


async def submit(cluster: Cluster, name: str, spec: dict[str, Any], **pod_spec: Any) -> None:
    """A pod with one templated claim, its claim created by the controller as in a cluster."""
    await cluster.client.create(TEMPLATES, template(f"{name}-tmpl", spec))
    await cluster.client.create(PODS, claim_pod(name, {"gpu": f"{name}-tmpl"}, **pod_spec))
    await ResourceClaimController(cluster.client).sync_once()


async def hold(cluster: Cluster, node: str, count: int) -> None:
    """GPUs already in use on `node`: a claim allocated with its first `count` devices."""
    slices = (await cluster.client.list("/apis/resource.k8s.io/v1/resourceslices"))["items"]
    (gpu_slice,) = [s for s in slices if s["spec"].get("nodeName") == node and s["spec"]["driver"] == "gpu.nvidia.com"]
    results = [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": gpu_slice["spec"]["pool"]["name"],
                "device": d["name"]} for d in gpu_slice["spec"]["devices"][:count]]
    cluster.store.restore({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": f"held-{node[:12]}", "namespace": "default"},
                           "spec": gpu_request(count), "status": {"allocation": {"devices": {"results": results}}}})


async def test_feasibility_comes_from_the_allocator_and_the_claim_is_allocated(fleet: Cluster) -> None:
    await hold(fleet, P5_A, 6)
    await submit(fleet, "train", gpu_request(4, selector=H100))
    scheduler = Scheduler(fleet.client)
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert (decision.outcome, decision.node) == ("scheduled", P5_B)
    assert decision.reasons == {P5_A: CANNOT_ALLOCATE, P4D: CANNOT_ALLOCATE}
    assert len(decision.devices["gpu"]) == 4
    pod = await fleet.client.get(f"{PODS}/train")
    assert pod["spec"]["nodeName"] == P5_B
    claim = await fleet.client.get(f"{CLAIMS}/{pod['status']['resourceClaimStatuses'][0]['resourceClaimName']}")
    assert claim["status"]["allocation"]["devices"]["results"] == decision.devices["gpu"]
    assert claim["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [P5_B]}]}]}
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": pod["metadata"]["uid"]}]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert_valid(claim)
    assert [(c["type"], c["status"]) for c in pod["status"]["conditions"]] == [("PodScheduled", "True")]
    assert_valid(pod)


async def test_devices_allocated_in_one_pass_are_not_given_twice(fleet: Cluster) -> None:
    for name in ("a", "b", "c"):
        await submit(fleet, name, gpu_request(8))
    scheduler = Scheduler(fleet.client)
    decisions = await scheduler.schedule_pending()
    assert sorted(d.node for d in decisions if d.node) == sorted([P4D, P5_A, P5_B])
    await submit(fleet, "d", gpu_request(1))
    (late,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert late.outcome == "unschedulable"
    assert late.message == "0/3 nodes are available: 3 cannot allocate all claims."


async def test_extender_scores_decide_between_feasible_nodes(fleet: Cluster, tls_server: TlsServer) -> None:
    async def prioritize(args: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"Host": n, "Score": 10 if n == P5_B else 3} for n in args["NodeNames"]]

    tls_server.routes["/gpuclaim/prioritize"] = prioritize
    await submit(fleet, "train", gpu_request(1))
    scheduler = Scheduler(fleet.client, extenders=[extender(tls_server)])
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert decision.node == P5_B
    assert decision.scores == {P4D: 60, P5_A: 60, P5_B: 200}  # score * weight 2 * (100 / 10)
    ((path, args),) = tls_server.seen
    assert path == "/gpuclaim/prioritize" and args["Nodes"] is None and sorted(args["NodeNames"]) == sorted(
        [P4D, P5_A, P5_B])
    assert args["Pod"]["metadata"]["name"] == "train" and args["Pod"]["status"]["resourceClaimStatuses"]


async def test_extender_down_scheduling_still_happens(fleet: Cluster, tls_server: TlsServer) -> None:
    await tls_server.stop()
    await submit(fleet, "train", gpu_request(1))
    scheduler = Scheduler(fleet.client, extenders=[extender(tls_server, filterVerb="filter", ignorable=True)])
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert (decision.outcome, decision.node) == ("scheduled", P5_A)  # equal scores: the name sorting first
    assert len(decision.warnings) == 2 and "filter ignored" in decision.warnings[0]
    assert "prioritize ignored" in decision.warnings[1]


async def test_slow_prioritize_is_ignored_after_http_timeout(fleet: Cluster, tls_server: TlsServer) -> None:
    release = asyncio.Event()

    async def stuck(args: dict[str, Any]) -> list[dict[str, Any]]:
        await release.wait()  # answers only after the test is done with it
        return []

    tls_server.routes["/gpuclaim/prioritize"] = stuck
    await submit(fleet, "train", gpu_request(1))
    scheduler = Scheduler(fleet.client, extenders=[extender(tls_server, httpTimeout="300ms")])
    started = asyncio.get_running_loop().time()
    (decision,) = await scheduler.schedule_pending()
    release.set()
    await scheduler.close()
    assert asyncio.get_running_loop().time() - started < 4 and decision.outcome == "scheduled"
    assert "context deadline exceeded" in decision.warnings[0]


async def test_non_ignorable_filter_failure_fails_the_cycle(fleet: Cluster, tls_server: TlsServer) -> None:
    async def broken(args: dict[str, Any]) -> dict[str, Any]:
        return {"Nodes": None, "NodeNames": None, "FailedNodes": None, "FailedAndUnresolvableNodes": None,
                "Error": "internal error: resourceslice cache not synced"}

    tls_server.routes["/gpuclaim/filter"] = broken
    await submit(fleet, "train", gpu_request(1))
    scheduler = Scheduler(fleet.client, extenders=[extender(tls_server, filterVerb="filter")])
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert (decision.outcome, decision.message) == ("error", "internal error: resourceslice cache not synced")
    assert "nodeName" not in (await fleet.client.get(f"{PODS}/train"))["spec"]


async def test_extender_filter_reasons_reach_the_decision(fleet: Cluster, tls_server: TlsServer) -> None:
    async def only_p5(args: dict[str, Any]) -> dict[str, Any]:
        nodes = args["Nodes"]["items"]
        keep = [n["metadata"]["name"] for n in nodes if "H100" in n["metadata"]["labels"]["nvidia.com/gpu.product"]]
        return {"Nodes": {"metadata": {}, "items": [n for n in nodes if n["metadata"]["name"] in keep]},
                "NodeNames": None, "FailedNodes": {P4D: "not an H100"}, "FailedAndUnresolvableNodes": {}, "Error": ""}

    tls_server.routes["/gpuclaim/filter"] = only_p5
    await submit(fleet, "train", gpu_request(1))
    config = extender(tls_server, filterVerb="filter", prioritizeVerb="", nodeCacheCapable=False)
    scheduler = Scheduler(fleet.client, extenders=[config])
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert decision.node == P5_A and decision.reasons == {P4D: "not an H100"}


async def test_unschedulable_pods_say_why_per_node(fleet: Cluster) -> None:
    await submit(fleet, "big", gpu_request(9))
    await submit(fleet, "pinned", gpu_request(1), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-B200"})
    await fleet.client.create(PODS, claim_pod("orphan", {"gpu": "never-created"}))
    scheduler = Scheduler(fleet.client)
    decisions = {d.name: d for d in await scheduler.schedule_pending()}
    await scheduler.close()
    assert decisions["big"].reasons == dict.fromkeys((P4D, P5_A, P5_B), CANNOT_ALLOCATE)
    assert decisions["pinned"].message == f"0/3 nodes are available: 3 {NODE_AFFINITY_REASON}."
    assert (decisions["orphan"].outcome, decisions["orphan"].message) == (
        "waiting", 'pod "default/orphan": ResourceClaim not created yet')
    pinned = await fleet.client.get(f"{PODS}/pinned")
    (condition,) = pinned["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert condition["message"] == decisions["pinned"].message
    assert_valid(pinned)
    assert "conditions" not in (await fleet.client.get(f"{PODS}/orphan")).get("status", {})


def test_extender_configuration_errors_name_the_field() -> None:
    with pytest.raises(ExtenderConfigError, match=r"^extenders\[0\]\.weight: .*positive weight"):
        ExtenderConfig.from_dict({"urlPrefix": "http://x", "prioritizeVerb": "p"})
    with pytest.raises(ExtenderConfigError, match=r"^extenders\[3\]\.httpTimeout: Invalid value"):
        ExtenderConfig.from_dict({"urlPrefix": "http://x", "httpTimeout": "soon"}, 3)
    with pytest.raises(ExtenderConfigError, match=r"^extenders\[0\]\.urlPrefix: Required value"):
        ExtenderConfig.from_dict({})
    assert ExtenderConfig.from_dict({"urlPrefix": "http://x", "httpTimeout": "500ms"}).http_timeout == 0.5


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
_TRUTHY_NOT_STRING = st.integers(min_value=1) | st.lists(JSON, min_size=1, max_size=2) | st.just(True)
_SET_NOT_STRING = st.booleans() | st.integers() | st.floats(allow_nan=False) | st.lists(JSON, max_size=2)
_NOT_STRING = st.none() | _SET_NOT_STRING
# Each field of an extenders[] entry: values kube-scheduler accepts, and values it refuses for that field.
VALID: dict[str, st.SearchStrategy[Any]] = {
    "urlPrefix": st.text(min_size=1, max_size=12).map(lambda t: f"https://{t}"),
    "filterVerb": st.text(max_size=8),
    "prioritizeVerb": st.text(max_size=8),
    "weight": st.integers(1, 10**6),
    "nodeCacheCapable": st.booleans(),
    "ignorable": st.booleans(),
    "enableHTTPS": st.booleans(),
    "tlsConfig": st.fixed_dictionaries({}, optional={"insecure": st.booleans(), "serverName": st.text(max_size=8),
                                                     "caData": st.binary(max_size=12).map(
                                                         lambda b: base64.b64encode(b).decode())}),
    "httpTimeout": st.one_of(st.integers(1, 600).map(lambda n: f"{n}s"), st.integers(1, 9999).map(lambda n: f"{n}ms"),
                             st.integers(1, 10).map(lambda n: f"{n}m"), st.floats(0.001, 600)),
    "managedResources": st.lists(st.fixed_dictionaries({"name": st.text(max_size=12)}), max_size=3),
}
INVALID: dict[str, st.SearchStrategy[Any]] = {
    "urlPrefix": st.just("") | _NOT_STRING,
    "filterVerb": _SET_NOT_STRING,
    "prioritizeVerb": _SET_NOT_STRING,
    "weight": st.none() | st.booleans() | st.floats() | st.text(max_size=4) | st.lists(JSON, max_size=2),
    "tlsConfig": _TRUTHY_NOT_STRING | st.text(min_size=1, max_size=8)
    | st.just({"caData": "!not base64!"}) | st.fixed_dictionaries({"serverName": _TRUTHY_NOT_STRING}),
    "httpTimeout": st.text(max_size=6).filter(lambda t: not re.fullmatch(r"\d+(\.\d+)?(ms|s|m)", t))
    | st.integers(max_value=0) | st.booleans(),
    "managedResources": _TRUTHY_NOT_STRING | st.lists(st.fixed_dictionaries({"name": _NOT_STRING}), min_size=1,
                                                      max_size=2),
}


@given(st.fixed_dictionaries(VALID), st.sampled_from([None, *INVALID]), st.data(), st.integers(0, 5))
@settings(max_examples=300, deadline=None)
def test_any_extender_entry_is_accepted_or_refused_with_its_field(
    raw: dict[str, Any], broken: str | None, data: st.DataObject, index: int
) -> None:
    # built from valid fields, at most one replaced by a value that field refuses: both outcomes by construction
    if broken is None:
        event("valid entry")
        config = ExtenderConfig.from_dict(raw, index)
        assert config.url_prefix == raw["urlPrefix"] and config.http_timeout > 0
        assert config.weight == raw["weight"]
        assert config.managed_resources == tuple(m["name"] for m in raw["managedResources"])
        return
    event(f"invalid {broken}")
    raw[broken] = data.draw(INVALID[broken], label=broken)
    with pytest.raises(ExtenderConfigError) as refused:
        ExtenderConfig.from_dict(raw, index)
    assert str(refused.value).startswith(f"extenders[{index}].{broken}")


@pytest.mark.parametrize(("git_version", "tainted_is_free"), [("v1.37.2", False), ("v1.35.4", True)])
async def test_device_taint_rules_apply_as_the_control_planes_version_does(
        fleet: Cluster, git_version: str, tainted_is_free: bool) -> None:
    """1.37's scheduler taints devices with DeviceTaintRules before allocating; 1.35's reads none at default gates
    (and its apiserver serves none: the double keeps the stored rule but answers 404 for the v1 path)."""
    from gpuclaim.double.apiserver.app import SETTINGS

    await hold(fleet, P5_A, 6)
    await hold(fleet, P5_B, 8)
    await hold(fleet, P4D, 8)
    slices = (await fleet.client.list("/apis/resource.k8s.io/v1/resourceslices"))["items"]
    (gpu_slice,) = [s for s in slices if s["spec"].get("nodeName") == P5_A and s["spec"]["driver"] == "gpu.nvidia.com"]
    pool, free = gpu_slice["spec"]["pool"]["name"], [d["name"] for d in gpu_slice["spec"]["devices"][6:8]]
    fleet.store.restore({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "broken"},
                         "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": pool, "device": free[0]},
                                  "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}})
    fleet.double.app[SETTINGS].git_version = git_version
    await submit(fleet, "one", gpu_request(1))
    scheduler = Scheduler(fleet.client)
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert (decision.outcome, decision.node) == ("scheduled", P5_A)
    assert [r["device"] for r in decision.devices["gpu"]] == [free[0] if tainted_is_free else free[1]]


def _shared_gpu_node(store: Any) -> None:
    """One node whose one GPU allows multiple allocations (ConsumableCapacity, on by default from 1.36)."""
    store.restore({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": "shared-node", "labels": {"kubernetes.io/hostname": "shared-node"}}})
    store.restore({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
                   "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}})
    store.restore({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "shared-gpus"},
                   "spec": {"driver": "gpu.nvidia.com", "nodeName": "shared-node",
                            "pool": {"name": "shared-node", "generation": 1, "resourceSliceCount": 1},
                            "devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                                         "capacity": {"memory": {"value": "80Gi"}}}]}})


async def test_shares_of_one_device_are_given_until_its_capacity_is_used_up(cluster: Cluster) -> None:
    _shared_gpu_node(cluster.store)
    half = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": "40Gi"}}}}]}}
    for name in ("a", "b", "c"):
        await submit(cluster, name, half)
    scheduler = Scheduler(cluster.client)
    decisions = {d.name: d for d in await scheduler.schedule_pending()}
    await scheduler.close()
    placed = [d for d in decisions.values() if d.outcome == "scheduled"]
    assert len(placed) == 2 and {d.node for d in placed} == {"shared-node"}
    results = [r for d in placed for r in d.devices["gpu"]]
    assert {r["device"] for r in results} == {"gpu-0"}
    assert all(r.get("shareID") and r["consumedCapacity"] == {"memory": "40Gi"} for r in results)
    assert len({r["shareID"] for r in results}) == 2
    (left,) = [d for d in decisions.values() if d.outcome != "scheduled"]
    assert left.outcome == "unschedulable"


@pytest.mark.parametrize(("git_version", "device", "copies_tolerations", "copies_binding"), [
    ("v1.37.2", "gpu-0", True, True),  # taints and binding conditions on: the tolerated, binding device first
    ("v1.36.3", "gpu-0", True, True),
    ("v1.35.4", "gpu-1", True, False),  # both gates off: gpu-0 is not selectable; incubating copies tolerations
    ("v1.34.4", "gpu-1", False, False),  # no 0.34 implementation copies tolerations
])
async def test_allocation_results_carry_what_the_versions_allocator_copies(
        cluster: Cluster, git_version: str, device: str, copies_tolerations: bool, copies_binding: bool) -> None:
    """Each DeviceRequestAllocationResult gets the request's tolerations and the device's binding conditions where
    that version's allocator copies them (allocator.Features.results_carry_*; tests/dra/allocator_oracle compares
    the same fields with the upstream allocator of each version)."""
    from gpuclaim.double.apiserver.app import SETTINGS

    _shared_gpu_node(cluster.store)
    binding = {"bindingConditions": ["IsPrepared"], "bindingFailureConditions": ["PrepareFailed"]}
    cluster.store.restore({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                           "metadata": {"name": "shared-gpus"},
                           "spec": {"driver": "gpu.nvidia.com", "nodeName": "shared-node",
                                    "pool": {"name": "shared-node", "generation": 1, "resourceSliceCount": 1},
                                    "devices": [{"name": "gpu-0", "taints": [{"key": "k0", "effect": "NoSchedule"}],
                                                 **binding},
                                                {"name": "gpu-1"}]}})
    cluster.double.app[SETTINGS].git_version = git_version
    tolerations = [{"key": "k0", "operator": "Exists", "effect": "NoSchedule"}]
    await submit(cluster, "one", {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "tolerations": tolerations}}]}})
    scheduler = Scheduler(cluster.client)
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert decision.outcome == "scheduled"
    (result,) = decision.devices["gpu"]
    expected: dict[str, Any] = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "shared-node", "device": device}
    if copies_tolerations:
        expected["tolerations"] = tolerations
    if copies_binding:
        expected.update(binding)
    assert result == expected
    pod = await cluster.client.get(f"{PODS}/one")
    claim = await cluster.client.get(f"{CLAIMS}/{pod['status']['resourceClaimStatuses'][0]['resourceClaimName']}")
    assert claim["status"]["allocation"]["devices"]["results"] == [expected]
    assert_valid(claim)


def legacy_pod(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    """A pod that kept its device-plugin limit (the webhook was down, or its namespace opted out)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "cuda",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}], **spec}}


@pytest.mark.parametrize("git_version", ["v1.37.2", "v1.36.3"])
async def test_an_unconverted_gpu_pod_gets_the_schedulers_own_claim(fleet: Cluster, git_version: str) -> None:
    """KEP-5004 where DRAExtendedResource is on by default (1.36 beta, 1.37 GA): the double makes the claim the real
    scheduler makes (tests/realkube/test_realkube_extended.py sees it on 1.37): `<pod>-extended-resources-*`, owned
    by the pod, one ExactCount request per container, allocated and reserved, named in the pod's status."""
    from gpuclaim.double.apiserver.app import SETTINGS

    fleet.double.app[SETTINGS].git_version = git_version
    await hold(fleet, P5_A, 8)
    await hold(fleet, P5_B, 8)
    await fleet.client.create(PODS, legacy_pod("two", 2))
    scheduler = Scheduler(fleet.client)
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert (decision.outcome, decision.node) == ("scheduled", P4D), decision.message
    pod = await fleet.client.get(f"{PODS}/two")
    status = pod["status"]["extendedResourceClaimStatus"]
    name = status["resourceClaimName"]
    assert name.startswith("two-extended-resources-")
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                                          "requestName": "container-0-request-0"}]
    claim = await fleet.client.get(f"{CLAIMS}/{name}")
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "two",
                                                     "uid": pod["metadata"]["uid"], "controller": True}]
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2 and {r["request"] for r in results} == {"container-0-request-0"}
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "two", "uid": pod["metadata"]["uid"]}]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert_valid(claim)
    assert_valid(pod)
    # the devices it took are taken: a second pod of 8 finds no node
    await fleet.client.create(PODS, legacy_pod("eight", 8))
    scheduler = Scheduler(fleet.client)
    (late,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert late.outcome == "unschedulable" and late.message == "0/3 nodes are available: 3 cannot allocate all claims."


async def test_on_1_35_an_unconverted_gpu_pod_stays_pending_without_device_plugin_capacity(fleet: Cluster) -> None:
    """DRAExtendedResource is alpha and off in 1.35: NodeResourcesFit finds no nvidia.com/gpu anywhere, as the real
    1.35 control plane says (reference: 'Insufficient nvidia.com/gpu'), and no claim is made."""
    from gpuclaim.double.apiserver.app import SETTINGS

    fleet.double.app[SETTINGS].git_version = "v1.35.4"
    await fleet.client.create(PODS, legacy_pod("two", 2))
    scheduler = Scheduler(fleet.client)
    (decision,) = await scheduler.schedule_pending()
    await scheduler.close()
    assert decision.outcome == "unschedulable"
    assert decision.message == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    pod = await fleet.client.get(f"{PODS}/two")
    assert "extendedResourceClaimStatus" not in (pod.get("status") or {})
    assert (await fleet.client.list(CLAIMS))["items"] == []


@pytest.mark.parametrize("git_version", ["v1.37.2", "v1.35.4"])
async def test_a_node_with_device_plugin_capacity_serves_the_pod_without_a_claim(
        fleet: Cluster, git_version: str) -> None:
    """Per node: allocatable > 0 keeps the device plugin (every version), counted against what bound pods use."""
    from gpuclaim.double.apiserver.app import SETTINGS

    fleet.double.app[SETTINGS].git_version = git_version
    await hold(fleet, P5_A, 8)
    await hold(fleet, P5_B, 8)
    await hold(fleet, P4D, 8)  # no DRA device left anywhere
    fleet.store.restore({"apiVersion": "v1", "kind": "Node",
                         "metadata": {"name": "plugin-node", "labels": {"kubernetes.io/hostname": "plugin-node"}},
                         "status": {"allocatable": {"nvidia.com/gpu": "4"}}})
    for name in ("a", "b"):
        await fleet.client.create(PODS, legacy_pod(name, 3))
    scheduler = Scheduler(fleet.client)
    decisions = {d.name: d for d in await scheduler.schedule_pending()}
    await scheduler.close()
    placed = [d for d in decisions.values() if d.outcome == "scheduled"]
    assert [d.node for d in placed] == ["plugin-node"] and placed[0].devices == {}
    (left,) = [d for d in decisions.values() if d.outcome != "scheduled"]
    # 3 of 4 used: the device plugin cannot give 3 more; the DRA nodes have no free device (1.37) or no
    # nvidia.com/gpu at all (1.35)
    dra_reason = "cannot allocate all claims" if git_version == "v1.37.2" else "Insufficient nvidia.com/gpu"
    assert left.reasons == {"plugin-node": "Insufficient nvidia.com/gpu", P4D: dra_reason, P5_A: dra_reason,
                            P5_B: dra_reason}
    assert not [c for c in (await fleet.client.list(CLAIMS))["items"] if c["metadata"].get("annotations")]
