"""Per-version facts other than gates: the allocator implementations, API fields behind gates, size limits.

Evidence references use the short names of ``../shared/reference/kubernetes-versions.md``: D3x is
k8s.io/dynamic-resource-allocation v0.3x, A3x k8s.io/api v0.3x, K3x k8s.io/kubernetes v1.3x.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Implementation = Literal["stable", "incubating", "experimental"]

# Upstream ``structured.Features.Set()`` names (D37/structured/internal/types.go:99-135): gate names, except
# DeviceBindingAndStatus (0.35+), one flag for two gates. 0.34 had the two as separate flags.
BINDING_AND_STATUS = "DRADeviceBindingConditions+DRAResourceClaimDeviceStatus"
_BASE4 = frozenset({"DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints"})

#: minor -> the implementations ``structured.NewAllocator`` walks, in its order, with their SupportedFeatures
ALLOCATORS: Mapping[int, tuple[tuple[Implementation, frozenset[str]], ...]] = MappingProxyType({
    # D34/structured/internal/{stable/allocator_stable.go:55, incubating/allocator_incubating.go:52-57,
    # experimental/allocator_experimental.go:78-86}
    34: (("stable", frozenset()), ("incubating", _BASE4),
         ("experimental", _BASE4 | {"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus",
                                    "DRAConsumableCapacity"})),
    # D35/…/stable/allocator_stable.go:55, incubating/allocator_incubating.go:52-57, experimental/…:78-85
    35: (("stable", frozenset()), ("incubating", _BASE4),
         ("experimental", _BASE4 | {BINDING_AND_STATUS, "DRAConsumableCapacity"})),
    # D36/…/stable/allocator_stable.go:52-57, incubating/allocator_incubating.go:77-84, experimental/…:77-85
    36: (("stable", _BASE4), ("incubating", _BASE4 | {BINDING_AND_STATUS, "DRAConsumableCapacity"}),
         ("experimental", _BASE4 | {BINDING_AND_STATUS, "DRAConsumableCapacity", "DRAListTypeAttributes"})),
    # D37/…/stable/allocator_stable.go:53-58, incubating/allocator_incubating.go:77-85, experimental/…:78-90
    37: (("stable", _BASE4),
         ("incubating", _BASE4 | {BINDING_AND_STATUS, "DRAConsumableCapacity", "DRAFractionalCapacityRange"}),
         ("experimental", _BASE4 | {BINDING_AND_STATUS, "DRAConsumableCapacity", "DRAFractionalCapacityRange",
                                    "DRAListTypeAttributes", "DRAOptionalNodeOperations", "DRADerivedAttributes",
                                    "DRADeviceCompatibilityGroups"})),
})

# The gates kube-scheduler turns into allocator flags: K34/pkg/scheduler/framework/plugins/dynamicresources/
# dynamicresources.go:712-720 (gate mapping :203-213), K35/…:577-585, K36/…:671-679 (ListTypeAttributes reaches
# only CEL there, :210), K37/…:835-848 (all 11 flags).
_PASSED_35 = ("DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints",
              "DRAConsumableCapacity")
_PASSED: Mapping[int, tuple[str, ...]] = MappingProxyType({
    34: (*_PASSED_35, "DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
    35: _PASSED_35,
    36: _PASSED_35,
    37: (*_PASSED_35, "DRAFractionalCapacityRange", "DRAListTypeAttributes", "DRAOptionalNodeOperations",
         "DRADerivedAttributes", "DRADeviceCompatibilityGroups"),
})


def allocator_features(minor: int, gates: Mapping[str, bool]) -> frozenset[str]:
    """The ``Features.Set()`` kube-scheduler 1.``minor`` passes to the allocator at these gates."""
    out = {name for name in _PASSED[minor] if gates.get(name, False)}
    if minor >= 35 and gates.get("DRADeviceBindingConditions", False) and gates.get(
            "DRAResourceClaimDeviceStatus", False):
        out.add(BINDING_AND_STATUS)
    return frozenset(out)


def pick_allocator(minor: int, features: frozenset[str]) -> Implementation:
    """``structured.NewAllocator``: the first implementation whose supported features cover the requested ones
    (D37/structured/allocator.go:127-172)."""
    for name, supported in ALLOCATORS[minor]:
        if features <= supported:
            return name
    # upstream: "internal error: no allocator available for feature set" (cannot happen at any gate setting)
    raise ValueError(f"no allocator in Kubernetes 1.{minor} supports {sorted(features)}")


@dataclass(frozen=True, slots=True)
class GatedField:
    """A resource.k8s.io/v1 field the apiserver drops unless ``gate`` is on; unknown before 1.``since``."""

    kind: str  # DeviceClass, ResourceClaim (claim and template specs), ResourceSlice
    field: str  # the field's place, json names: requests[].exactly.tolerations
    gate: str
    since: int = 34


GATED_FIELDS: tuple[GatedField, ...] = (
    GatedField("DeviceClass", "spec.extendedResourceName", "DRAExtendedResource"),
    GatedField("ResourceClaim", "requests[].exactly.adminAccess", "DRAAdminAccess"),
    GatedField("ResourceClaim", "requests[].firstAvailable", "DRAPrioritizedList"),
    GatedField("ResourceClaim", "requests[].*.tolerations", "DRADeviceTaints"),
    GatedField("ResourceClaim", "requests[].*.capacity", "DRAConsumableCapacity"),
    GatedField("ResourceClaim", "constraints[].distinctAttribute", "DRAConsumableCapacity"),
    # A37/resource/v1/types.go:1477, 1622
    GatedField("ResourceClaim", "requests[].*.derivedAttributes", "DRADerivedAttributes", 37),
    GatedField("ResourceSlice", "spec.sharedCounters", "DRAPartitionableDevices"),
    GatedField("ResourceSlice", "spec.perDeviceNodeSelection", "DRAPartitionableDevices"),
    GatedField("ResourceSlice", "devices[].consumesCounters", "DRAPartitionableDevices"),
    GatedField("ResourceSlice", "devices[].taints", "DRADeviceTaints"),
    GatedField("ResourceSlice", "devices[].bindingConditions", "DRADeviceBindingConditions"),
    GatedField("ResourceSlice", "devices[].allowMultipleAllocations", "DRAConsumableCapacity"),
    # A36/resource/v1/types.go:736-772
    GatedField("ResourceSlice", "devices[].attributes[].{ints,bools,strings,versions}", "DRAListTypeAttributes", 36),
    # A37/resource/v1/types.go:542 (1.36's nodeAllocatableResourceMappings was renamed, :525-526)
    GatedField("ResourceSlice", "devices[].nodeAllocatableResources", "DRANodeAllocatableResources", 37),
    GatedField("ResourceSlice", "spec.partitionTypeAttribute", "DRAPartitionableDevicesType", 37),  # :230
    GatedField("ResourceSlice", "spec.skipNodeOperations", "DRAOptionalNodeOperations", 37),  # :251
    GatedField("ResourceSlice", "devices[].consumesCounters[].compatibilityGroups",
               "DRADeviceCompatibilityGroups", 37),  # :688
)


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits of resource.k8s.io/v1 that differ between versions (A3x/resource/v1/types.go)."""

    device_taints: int  # DeviceTaintsMaxLength: A34 :605 = 4, A35+ = 16
    slice_devices: int  # ResourceSliceMaxDevices
    #: ResourceSliceMaxDevicesWithTaintsOrConsumesCounters (A35) / …WithAdvancedFeatures (A36+, list attributes
    #: count too); None where 1.34 has no such rule
    slice_devices_advanced: int | None
    #: 1.34: sharedCounters and devices may share a slice; 1.35+: "Only one of Devices and SharedCounters can be
    #: set" (A37 :177, 200-202; K35 CHANGELOG-1.35.md:616)
    counters_and_devices_in_one_slice: bool
    counter_sets: int  # A34: 32 shared counters per slice (:255); A35+: ResourceSliceMaxCounterSets = 8
    counters_per_set: int  # A35+ ResourceSliceMaxCountersPerCounterSet
    counter_consumptions_per_device: int | None  # A35+ ResourceSliceMaxDeviceCounterConsumptionsPerDevice
    counters_per_slice: int | None  # A34: 1024 counters over all devices of a slice (:540); gone in A35
    attribute_values_per_device: int | None  # A36+ ResourceSliceMaxAttributeValuesPerDevice = 48
    derived_attributes: int | None  # A37 DeviceDerivedAttributesMaxSize = 32
    device_tolerations: int = 16
    cel_expression_bytes: int = 10 * 1024
    cel_cost: int = 1_000_000


#: minor -> the cel-go minor its DRA library and apiserver pin (D34-D36/go.mod: v0.26.0; D37/go.mod:12: v0.29.2).
#: Both environments of a release run on it: kube-apiserver and kube-scheduler are built from the same go.mod.
CEL_GO: Mapping[int, int] = MappingProxyType({34: 26, 35: 26, 36: 26, 37: 29})


LIMITS: Mapping[int, Limits] = MappingProxyType({
    34: Limits(4, 128, None, True, 32, 32, None, 1024, None, None),
    35: Limits(16, 128, 64, False, 8, 32, 2, None, None, None),
    36: Limits(16, 128, 64, False, 8, 32, 2, None, 48, None),
    37: Limits(16, 128, 64, False, 8, 32, 2, None, 48, 32),
})
