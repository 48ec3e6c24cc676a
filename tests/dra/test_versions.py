"""The version model: parsing, supported range, gates and overrides, allocator choice, CEL environments, limits,
gated fields, KEP-5004 and quota names, each pinned to the reference's table for 1.34-1.37."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuclaim.dra import versions as v
from gpuclaim.dra.versions import facts, gates

MINORS = (34, 35, 36, 37)


# -- parsing ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "minor", "patch"), [
    ("1.37", 37, None), ("v1.37", 37, None), ("1.37.2", 37, 2), ("v1.37.2", 37, 2), ("v1.37.2-eks-abc", 37, 2),
    ("v1.35.4+k3s1", 35, 4), ("v1.36.0-rc.1", 36, 0), (" 1.34 ", 34, None), ("1.36+", 36, None),
], ids=["minor", "v-minor", "patch", "git-version", "eks-suffix", "k3s-build", "rc", "spaces", "gke-minor"])
def test_versions_are_read_as_users_and_version_endpoints_write_them(text: str, minor: int, patch: int | None) -> None:
    parsed = v.parse_version(text)
    assert (parsed.minor, parsed.patch) == (minor, patch)


@pytest.mark.parametrize("text", ["", "37", "1", "2.1", "v1.x", "latest", "1.37.2.1", "1..3"])
def test_a_malformed_version_is_refused_naming_it(text: str) -> None:
    with pytest.raises(v.VersionError, match="is not a Kubernetes version"):
        v.parse_version(text)


@given(minor=st.integers(0, 200), patch=st.integers(0, 500),
       suffix=st.sampled_from(["", "-eks-1a2b", "+k3s1", "-gke.100"]))
def test_every_git_version_maps_to_a_model_a_warning_or_a_clear_error(minor: int, patch: int, suffix: str) -> None:
    text = f"v1.{minor}.{patch}{suffix}"
    if minor < 34:
        with pytest.raises(v.VersionError) as info:
            v.resolve(text)
        assert f"1.{minor}.{patch}" in str(info.value) and "1.34 to 1.37" in str(info.value)
        return
    resolved = v.resolve(text)
    assert resolved.read.minor == minor and resolved.read.patch == patch
    if minor > 37:
        assert resolved.model.minor == 37
        (warning,) = resolved.warnings
        assert f"1.{minor}.{patch}" in warning and "1.37 model" in warning
    else:
        assert resolved.model.minor == minor and resolved.warnings == ()


def test_no_version_means_the_newest_supported() -> None:
    assert v.resolve(None).model == v.NEWEST_MODEL and v.NEWEST_MODEL.name == "1.37"
    assert v.SUPPORTED == ("1.34", "1.35", "1.36", "1.37")


def test_models_are_equal_when_minor_and_gates_are() -> None:
    assert v.model_for("1.37.1") == v.model_for("v1.37.2-eks") and len({v.model_for(37), v.model_for("1.37.0")}) == 1
    assert v.model_for(37) != v.model_for(37, feature_gates={"DRAConsumableCapacity": False})


# -- gates -----------------------------------------------------------------------------------------------

# (gate, defaults in 1.34, 1.35, 1.36, 1.37; None = no such gate): section 1 of the reference
GATE_DEFAULTS = [
    ("DRAAdminAccess", True, True, True, True),
    ("DRAPrioritizedList", True, True, True, True),
    ("DRAExtendedResource", False, False, True, True),
    ("DRAConsumableCapacity", False, False, True, True),
    ("DRAPartitionableDevices", False, False, True, True),
    ("DRADeviceTaints", False, False, True, True),
    ("DRADeviceTaintRules", None, False, False, True),
    ("DRADeviceBindingConditions", False, False, True, True),
    ("DRAResourceClaimDeviceStatus", True, True, True, True),
    ("DRAListTypeAttributes", None, None, False, False),
    ("DRAWorkloadResourceClaims", None, None, False, False),
    ("DRADerivedAttributes", None, None, None, False),
    ("DRAFractionalCapacityRange", None, None, None, False),
    ("DRAResourceClaimGranularStatusAuthorization", None, None, True, True),
]


@pytest.mark.parametrize("row", GATE_DEFAULTS, ids=[r[0] for r in GATE_DEFAULTS])
def test_each_version_has_its_releases_gate_defaults(row: tuple[str, bool | None, ...]) -> None:
    name, *defaults = row
    for minor, default in zip(MINORS, defaults, strict=True):
        model = v.model_for(minor)
        assert (name in model.gates) is (default is not None), (name, minor)
        assert model.gate(name) is bool(default), (name, minor)


def test_locked_gates_follow_the_releases() -> None:
    assert gates.spec("DRAExtendedResource", 37) == gates.GateSpec(37, "ga", True, locked=True)
    assert not gates.spec("DRADeviceTaints", 37).locked  # type: ignore[union-attr]
    assert gates.spec("DynamicResourceAllocation", 34).locked is False  # type: ignore[union-attr]


def test_an_override_makes_a_derived_model_and_leaves_the_original() -> None:
    base = v.model_for(37)
    off = base.with_gates({"DRAConsumableCapacity": False})
    assert base.gate("DRAConsumableCapacity") and not off.gate("DRAConsumableCapacity")
    assert off.overrides == {"DRAConsumableCapacity": False}
    assert not off.cel_new.allow_multiple_allocations and base.cel_new.allow_multiple_allocations
    assert "DRAConsumableCapacity" not in off.allocator.features


def test_an_unknown_gate_is_an_error_naming_it_and_the_version() -> None:
    with pytest.raises(v.GateError, match=r"'DRADerivedAttributes' does not exist in Kubernetes 1.36"):
        v.model_for(36, feature_gates={"DRADerivedAttributes": True})
    with pytest.raises(v.GateError, match=r"'DRAConsumableCapacit' does not exist"):
        v.model_for(37, feature_gates={"DRAConsumableCapacit": True})


def test_a_locked_gate_cannot_be_flipped() -> None:
    with pytest.raises(v.GateError, match=r"'DRAExtendedResource' is locked to true in Kubernetes 1\.37"):
        v.model_for(37, feature_gates={"DRAExtendedResource": False})
    assert v.model_for(36, feature_gates={"DRAExtendedResource": False}).gate("DRAExtendedResource") is False
    assert v.model_for(37, feature_gates={"DRAExtendedResource": True}).gate("DRAExtendedResource")


@given(overrides=st.dictionaries(st.sampled_from(gates.names_at(37)), st.booleans()))
def test_any_override_set_gives_a_consistent_model_or_a_gate_error(overrides: dict[str, bool]) -> None:
    try:
        model = v.model_for(37, feature_gates=overrides)
    except v.GateError as err:
        assert any(gates.spec(n, 37).locked and b != gates.spec(n, 37).default  # type: ignore[union-attr]
                   for n, b in overrides.items()), err
        return
    for name, value in overrides.items():
        assert model.gate(name) is value
    # the allocator always exists, and covers what the scheduler asks for
    supported = dict(facts.ALLOCATORS[37])[model.allocator.implementation]
    assert model.allocator.features <= supported


# -- allocator ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("minor", "implementation", "features"), [
    (34, "experimental", {"DRAAdminAccess", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"}),
    (35, "incubating", {"DRAAdminAccess", "DRAPrioritizedList"}),
    (36, "incubating", {"DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints",
                        facts.BINDING_AND_STATUS, "DRAConsumableCapacity"}),
    (37, "incubating", {"DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints",
                        facts.BINDING_AND_STATUS, "DRAConsumableCapacity"}),
], ids=["1.34", "1.35", "1.36", "1.37"])
def test_the_allocator_at_default_gates_is_the_references(minor: int, implementation: str, features: set[str]) -> None:
    allocator = v.model_for(minor).allocator
    assert allocator.implementation == implementation and allocator.features == features


def test_an_alpha_gate_of_1_37_switches_to_the_experimental_allocator() -> None:
    for gate in ("DRAListTypeAttributes", "DRADerivedAttributes", "DRADeviceCompatibilityGroups",
                 "DRAOptionalNodeOperations"):
        assert v.model_for(37, feature_gates={gate: True}).allocator.implementation == "experimental", gate
    # 1.36 does not pass ListTypeAttributes to the allocator
    assert v.model_for(36, feature_gates={"DRAListTypeAttributes": True}).allocator.implementation == "incubating"
    assert v.model_for(37, feature_gates={"DRAFractionalCapacityRange": True}).allocator.implementation == "incubating"


def test_allocator_behaviour_switches_per_version() -> None:
    a34, a35, a36 = (v.model_for(m).allocator for m in (34, 35, 36))
    assert not a34.sorted_pools and not a35.sorted_pools and a36.sorted_pools and a36.combinations_only
    assert (a34.score_weight, a35.score_weight) == (0, 2)
    assert a35.binding_timeout_seconds is None and a36.binding_timeout_seconds == 600
    stable = v.model_for(37, feature_gates={"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False})
    assert stable.allocator.implementation == "stable" and not stable.allocator.sorted_pools


# -- CEL environments ----------------------------------------------------------------------------------------


def test_new_expressions_get_ext_lists_from_1_35_and_allow_multiple_allocations_with_consumable_capacity() -> None:
    new = {m: v.model_for(m).cel_new for m in MINORS}
    assert [new[m].compatibility for m in MINORS] == [33, 34, 35, 36]
    assert [new[m].ext_lists for m in MINORS] == [0, 3, 3, 3]
    assert [new[m].allow_multiple_allocations for m in MINORS] == [False, False, True, True]
    assert not any(new[m].includes for m in MINORS)
    assert v.model_for(34, feature_gates={"DRAConsumableCapacity": True}).cel_new.allow_multiple_allocations


def test_includes_needs_list_type_attributes_in_new_expressions_but_not_in_the_scheduler() -> None:
    on = v.model_for(37, feature_gates={"DRAListTypeAttributes": True})
    assert on.cel_new.includes and on.cel_new.list_attributes
    assert v.model_for(37).cel_stored.includes and not v.model_for(35).cel_stored.includes
    assert v.model_for(37).cel_stored.list_attributes and not v.model_for(36).cel_stored.list_attributes
    assert all(v.model_for(m).cel_stored.ext_lists == 3 and v.model_for(m).cel_stored.allow_multiple_allocations
               for m in MINORS)


# -- API limits and fields ------------------------------------------------------------------------------------


def test_limits_per_version() -> None:
    l34, l35, l37 = (v.model_for(m).limits for m in (34, 35, 37))
    assert (l34.device_taints, l35.device_taints) == (4, 16)
    assert l34.counters_and_devices_in_one_slice and not l35.counters_and_devices_in_one_slice
    assert (l34.slice_devices_advanced, l35.slice_devices_advanced) == (None, 64)
    assert l37.derived_attributes == 32 and v.model_for(36).limits.derived_attributes is None


@pytest.mark.parametrize(("kind", "field", "states"), [
    ("ResourceClaim", "requests[].*.capacity", ("dropped", "dropped", "kept", "kept")),
    ("ResourceClaim", "constraints[].distinctAttribute", ("dropped", "dropped", "kept", "kept")),
    ("ResourceClaim", "requests[].*.tolerations", ("dropped", "dropped", "kept", "kept")),
    ("DeviceClass", "spec.extendedResourceName", ("dropped", "dropped", "kept", "kept")),
    ("ResourceClaim", "requests[].*.derivedAttributes", ("unknown", "unknown", "unknown", "dropped")),
    ("ResourceClaim", "requests[].exactly.deviceClassName", ("kept", "kept", "kept", "kept")),
], ids=["capacity", "distinctAttribute", "tolerations", "extendedResourceName", "derivedAttributes", "ungated"])
def test_gated_fields_are_kept_dropped_or_unknown_per_version(kind: str, field: str, states: tuple[str, ...]) -> None:
    assert tuple(v.model_for(m).field_state(kind, field) for m in MINORS) == states


def test_every_gated_field_names_a_gate_of_its_first_version() -> None:
    for entry in facts.GATED_FIELDS:
        assert gates.spec(entry.gate, entry.since) is not None, entry


# -- KEP-5004 and quota ---------------------------------------------------------------------------------------


def test_quota_names_per_version() -> None:
    assert v.model_for(35).quota_names("gpu.nvidia.com", "nvidia.com/gpu") == (
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",)
    assert v.model_for(36).quota_names("gpu.nvidia.com", "nvidia.com/gpu") == (
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
        "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com", "requests.nvidia.com/gpu")
    assert v.model_for(37).quota_names("mig") == (
        "mig.deviceclass.resource.k8s.io/devices", "requests.deviceclass.resource.kubernetes.io/mig")
    # 1.34 has no claim-side extended-resource quota even with the gate on
    assert len(v.model_for(34, feature_gates={"DRAExtendedResource": True}).quota_names("gpu", "x.io/gpu")) == 1
    assert len(v.model_for(35, feature_gates={"DRAExtendedResource": True}).quota_names("gpu", "x.io/gpu")) == 3


def test_extended_resources_per_version() -> None:
    e34, e35, e36, e37 = (v.model_for(m).extended_resources for m in MINORS)
    assert not e34.scheduler_claims and not e35.scheduler_claims and e36.scheduler_claims and e37.scheduler_claims
    assert e37.locked and not e36.locked
    assert (e34.device_plugin_when, e35.device_plugin_when) == ("present", "nonzero")
    assert e36.implicit_class_names and not e35.implicit_class_names
