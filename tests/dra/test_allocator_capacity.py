"""Shared devices and capacity requests (DRAConsumableCapacity) through the allocator's public API: a device that
allows multiple allocations is given to several claims until its capacity is used up, each share records what it
consumes, request policies round requests, shares other claims hold count, and the model parses the fields.
The upstream allocator judges the same semantics in test_allocator_oracle_{upstream,random}.py."""

from __future__ import annotations

from typing import Any

from allocator_fleet import claim, exact, klass, slice_
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import api, versions
from gpuclaim.dra.allocator import NodeInfo, allocate, allocated_devices, features_for, shared_usage

N1 = NodeInfo("n1")
CLASSES = {"gpu": klass()}
V137 = features_for(versions.model_for(37))
V135 = features_for(versions.model_for(35))


def shared_gpu(name: str, memory: str = "40Gi", policy: dict[str, Any] | None = None) -> dict[str, Any]:
    cap: dict[str, Any] = {"value": memory}
    if policy is not None:
        cap["requestPolicy"] = policy
    return {"name": name, "allowMultipleAllocations": True, "capacity": {"memory": cap}}


def wants(memory: str, name: str = "r") -> dict[str, Any]:
    return exact(name, 1, "gpu", capacity={"requests": {"memory": memory}})


def test_a_shared_device_serves_claims_until_its_capacity_is_used_up() -> None:
    slices = [slice_("n1", [shared_gpu("g0")])]
    claims = [claim(wants("16Gi"), name=f"c{i}") for i in range(3)]
    two = allocate(N1, claims[:2], slices=slices, classes=CLASSES, features=V137)
    assert two.status == "allocated"
    results = [c.to_dict()["devices"]["results"][0] for c in two.claims]
    assert [r["device"] for r in results] == ["g0", "g0"]
    assert [r["consumedCapacity"] for r in results] == [{"memory": "16Gi"}, {"memory": "16Gi"}]
    assert results[0]["shareID"] != results[1]["shareID"]  # one share each, deterministic (no randomness)
    assert allocate(N1, claims[:2], slices=slices, classes=CLASSES, features=V137) == two
    # 3 x 16Gi > 40Gi
    assert allocate(N1, claims, slices=slices, classes=CLASSES, features=V137).status == "unsatisfiable"


def test_shares_other_claims_hold_count_and_are_not_dedicated_devices() -> None:
    slices = [slice_("n1", [shared_gpu("g0")])]
    first = allocate(N1, [claim(wants("30Gi"), name="a")], slices=slices, classes=CLASSES, features=V137)
    assert first.status == "allocated"
    holder = api.parse_resource_claim({
        "apiVersion": api.API_VERSION, "kind": "ResourceClaim", "metadata": {"name": "a", "namespace": "ns"},
        "spec": {"devices": {"requests": [wants("30Gi")]}},
        "status": {"allocation": first.claims[0].to_dict()}})[0]  # fmt: skip
    assert holder is not None
    assert holder.status.results[0].share_id is not None
    assert allocated_devices([holder], shares_apart=True) == set()
    held = shared_usage([holder])
    assert held.consumed[api.DeviceID("gpu.example.com", "n1", "g0")] == {"memory": 30 * 2**30}
    ten, twenty = claim(wants("10Gi"), name="b"), claim(wants("20Gi"), name="b")
    assert allocate(N1, [ten], slices=slices, classes=CLASSES, features=V137, shared=held).status == "allocated"
    assert allocate(N1, [twenty], slices=slices, classes=CLASSES, features=V137,
                    shared=held).status == "unsatisfiable"  # fmt: skip


def test_a_range_policy_rounds_a_request_up_to_its_step_and_fills_a_missing_one_with_the_default() -> None:
    policy = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "40Gi", "step": "10Gi"}}
    slices = [slice_("n1", [shared_gpu("g0", "80Gi", policy)])]
    outcome = allocate(N1, [claim(wants("15Gi", "a"), exact("b", 1, "gpu"))], slices=slices, classes=CLASSES,
                       features=V137)  # fmt: skip
    consumed = [r["consumedCapacity"] for r in outcome.claims[0].to_dict()["devices"]["results"]]
    assert consumed == [{"memory": "20Gi"}, {"memory": "10Gi"}]
    # 50Gi rounds to 50Gi, over the policy's max: the device does not fit
    over = allocate(N1, [claim(wants("50Gi"))], slices=slices, classes=CLASSES, features=V137)
    assert over.status == "unsatisfiable"


def test_a_request_for_a_capacity_the_device_lacks_does_not_fit_and_a_dedicated_device_is_used_whole() -> None:
    slices = [slice_("n1", [shared_gpu("g0"), {"name": "g1", "capacity": {"memory": {"value": "80Gi"}}}])]
    other = exact("r", 1, "gpu", capacity={"requests": {"cores": "1"}})
    assert allocate(N1, [claim(other)], slices=slices, classes=CLASSES, features=V137).status == "unsatisfiable"
    # two claims of 40Gi: the shared device takes one, the dedicated one the other, without consumedCapacity
    outcome = allocate(N1, [claim(wants("40Gi"), name="a"), claim(wants("40Gi"), name="b")], slices=slices,
                       classes=CLASSES, features=V137)  # fmt: skip
    results = [c.to_dict()["devices"]["results"][0] for c in outcome.claims]
    assert [r["device"] for r in results] == ["g0", "g1"]
    assert "shareID" not in results[1] and "consumedCapacity" not in results[1]


def test_with_the_gate_off_capacity_requests_are_refused_or_ignored_as_each_implementation_does() -> None:
    slices = [slice_("n1", [shared_gpu("g0")])]
    # 1.35's default scheduler runs the incubating allocator, which knows nothing of capacity: ignored
    assert allocate(N1, [claim(wants("16Gi"))], slices=slices, classes=CLASSES, features=V135).status == "allocated"
    off = features_for(versions.model_for(37, feature_gates={"DRAConsumableCapacity": False}))
    refused = allocate(N1, [claim(wants("16Gi"))], slices=slices, classes=CLASSES, features=off)
    assert refused.error == ("claim ns/c, request r: has capacity requests, but the DRAConsumableCapacity feature "
                             "is disabled")  # fmt: skip


def test_distinct_attribute_picks_devices_with_different_values() -> None:
    slices = [slice_("n1", [shared_gpu("g0") | {"attributes": {"numa": {"int": 0}}},
                            shared_gpu("g1") | {"attributes": {"numa": {"int": 0}}},
                            shared_gpu("g2") | {"attributes": {"numa": {"int": 1}}}])]  # fmt: skip
    outcome = allocate(N1, [claim(exact("r", 2, "gpu"), constraints=[{"distinctAttribute": "gpu.example.com/numa"}])],
                       slices=slices, classes=CLASSES, features=V137)  # fmt: skip
    assert [r.device for r in outcome.claims[0].results] == ["g0", "g2"]


def test_request_policy_errors_name_the_field() -> None:
    bad = shared_gpu("g0", policy={"validValues": [f"{i}Gi" for i in range(11)], "validRange": "x"})
    obj = {"apiVersion": api.API_VERSION, "kind": "ResourceSlice", "metadata": {"name": "s"},
           "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "nodeName": "n1", "devices": [bad]}}  # fmt: skip
    _, errors = api.parse_resource_slice(obj)
    fields = sorted(str(e.path) for e in errors)
    assert fields == ["spec.devices[0].capacity[memory].requestPolicy.validRange",
                      "spec.devices[0].capacity[memory].requestPolicy.validValues"], errors  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(requests=st.lists(st.integers(1, 50), min_size=1, max_size=6), memory=st.integers(1, 100))
def test_shares_never_take_more_than_the_capacity(requests: list[int], memory: int) -> None:
    slices = [slice_("n1", [shared_gpu("g0", f"{memory}Gi"), shared_gpu("g1", f"{memory}Gi")])]
    claims = [claim(wants(f"{gi}Gi"), name=f"c{i}") for i, gi in enumerate(requests)]
    outcome = allocate(N1, claims, slices=slices, classes=CLASSES, features=V137)
    if outcome.status == "allocated":
        used: dict[str, int] = {}
        for c in outcome.claims:
            for r in c.results:
                assert r.consumed_capacity is not None
                used[r.device] = used.get(r.device, 0) + int(r.consumed_capacity["memory"].value)
        assert all(v <= memory * 2**30 for v in used.values())
    else:  # first-fit over two bins is exhaustive here: unsatisfiable means no split of the requests fits
        assert outcome.status == "unsatisfiable"
        assert not any(sum(g for g, side in zip(requests, mask, strict=True) if side) <= memory and
                       sum(g for g, side in zip(requests, mask, strict=True) if not side) <= memory
                       for mask in _masks(len(requests)))  # fmt: skip


def _masks(n: int) -> list[tuple[bool, ...]]:
    return [tuple(bool(m >> k & 1) for k in range(n)) for m in range(2**n)]
