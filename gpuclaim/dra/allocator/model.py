"""What the allocator takes besides objects (feature gates) and what it returns (outcomes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpuclaim.dra.api import AllocatedDevice, DeviceID, NodeSelector, NodeSelectorRequirement
from gpuclaim.dra.versions import KubernetesModel, facts

Status = Literal["allocated", "unsatisfiable", "error", "budget"]


@dataclass(frozen=True, slots=True)
class Features:
    """The allocator features kube-scheduler enables from its feature gates, and the DRA library minor that runs.

    Together they pick upstream's implementation as ``structured.NewAllocator`` does (``implementation``): the first
    of stable, incubating, experimental whose supported features cover the requested ones, per the library's own
    table (``gpuclaim.dra.versions``). The implementation and the minor decide the semantics the search follows
    (``sorted_pools``, ``binding_last``, how invalid pools are treated). Build them for a cluster with
    :func:`features_for`; the default is a 1.34 kube-scheduler with default gates: AdminAccess, PrioritizedList and
    DeviceStatus (the experimental allocator). From 0.35 on, DeviceBinding and DeviceStatus are one upstream flag
    (DeviceBindingAndStatus): here both set. ConsumableCapacity shares devices that allow multiple allocations
    and applies capacity requests (``allocator.capacity``).
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = False
    device_taints: bool = False
    device_status: bool = True
    device_binding: bool = False
    consumable_capacity: bool = False
    minor: int = 34

    def __post_init__(self) -> None:
        if self.minor not in facts.ALLOCATORS:
            raise ValueError(f"no allocator model for Kubernetes 1.{self.minor}")

    @property
    def upstream_set(self) -> frozenset[str]:
        """``Features.Set()`` of this minor's library: the gate names the flags stand for."""
        names = {"DRAAdminAccess": self.admin_access, "DRAPrioritizedList": self.prioritized_list,
                 "DRAPartitionableDevices": self.partitionable_devices, "DRADeviceTaints": self.device_taints,
                 "DRAConsumableCapacity": self.consumable_capacity}  # fmt: skip
        if self.minor == 34:
            names["DRADeviceBindingConditions"] = self.device_binding
            names["DRAResourceClaimDeviceStatus"] = self.device_status
        else:
            names[facts.BINDING_AND_STATUS] = self.device_binding and self.device_status
        return frozenset(name for name, on in names.items() if on)

    @property
    def implementation(self) -> facts.Implementation:
        return facts.pick_allocator(self.minor, self.upstream_set)

    @property
    def binding_allowed(self) -> bool:
        """Devices with bindingConditions are selectable (isSelectable): DeviceBinding and DeviceStatus both on."""
        return self.device_binding and self.device_status

    @property
    def sorted_pools(self) -> bool:
        """Pools in (driver, pool) order and slices by name, pools with binding conditions last: 0.36+ incubating
        and experimental (D37/…/incubating/pools_incubating.go:192-219). Before that, and in stable, listing order
        (upstream: Go map order, of which gpuclaim's (driver, pool) order is one)."""
        return self.minor >= 36 and self.implementation != "stable"

    @property
    def binding_last(self) -> bool:
        """Pools with binding conditions after the others: 0.34 and 0.35 experimental (pools_experimental.go:69-76,
        126-131; slices with them after the others too) and every sorting implementation from 0.36."""
        return self.sorted_pools or (self.minor <= 35 and self.implementation == "experimental")


    # What the library versions do differently, beside the implementation (read from each version's
    # internal/{stable,incubating,experimental}; the three share these within one version).

    @property
    def pools_apart(self) -> bool:
        """0.35+ GatherPools: a slice with sharedCounters holds counters only (its devices are not offered); slices
        with sharedCounters or perDeviceNodeSelection are skipped without DRAPartitionableDevices; an incomplete
        pool offers no device; an obsolete one is dropped; an invalid one is skipped, and only when nothing fits
        does the allocation fail with "invalid resource pools were encountered" (D35/…/incubating/
        pools_incubating.go:54-160, allocator_incubating.go:280-290). 0.34 offered devices of incomplete pools and
        failed as soon as the search reached an invalid one."""
        return self.minor >= 35

    @property
    def counter_slices_skipped(self) -> bool:
        """Without DRAPartitionableDevices, a slice with sharedCounters is skipped whole: 0.35+, except 0.35's
        stable implementation, which predates the rule and offers its devices (D35/…/stable/pools_stable.go:58)."""
        return self.pools_apart and not (self.minor == 35 and self.implementation == "stable")

    @property
    def subrequests_keyed_apart(self) -> bool:
        """0.36+: a ``firstAvailable`` subrequest is validated under its own key and an ``All`` subrequest continues
        with its own data (D36/…/incubating/allocator_incubating.go:244-247, 1051). 0.34 and 0.35 file subrequest
        i's device answers under i - 1's key and continue an ``All`` subrequest with subrequest 0's data."""
        return self.minor >= 36

    @property
    def rescans_from_first_device(self) -> bool:
        """0.34 and 0.35: each further device of a request is searched from the first device of the first pool,
        so a device that allows multiple allocations can take a second share in the same request, and a device
        passed over can be picked after a later one (D35/…/
        experimental/allocator_experimental.go:1024-1032). 0.36+ go on after the device just picked
        (``startLocation``, D36/…/experimental/allocator_experimental.go:1017-1033, 1191-1217)."""
        return self.minor <= 35

    @property
    def device_in_cel_errors(self) -> bool:
        """0.37: a selector's runtime error names the device before "CEL runtime error:" ("selector #0 on device
        d: ..."; D37/…/incubating/allocator_incubating.go:1301-1303); before, gpuclaim's wording appends it."""
        return self.minor >= 37

    @property
    def capacity_code(self) -> bool:
        """The implementation that runs knows DRAConsumableCapacity (whether or not it is on): it refuses capacity
        requests while the feature is off and supports distinctAttribute. One that does not know it ignores
        capacity requests and allowMultipleAllocations, and calls distinctAttribute an empty constraint (0.35's
        stable and incubating, 0.36-0.37's stable)."""
        return "DRAConsumableCapacity" in dict(facts.ALLOCATORS[self.minor])[self.implementation]

    @property
    def binding_code(self) -> bool:
        """The implementation that runs knows binding conditions: a device with ``bindsToNode`` pins the allocation
        to the node (createNodeSelector, D37/…/incubating/allocator_incubating.go:1751); 0.35's incubating and
        every stable implementation ignore the field."""
        supported = dict(facts.ALLOCATORS[self.minor])[self.implementation]
        return facts.BINDING_AND_STATUS in supported or "DRADeviceBindingConditions" in supported

    @property
    def results_carry_tolerations(self) -> bool:
        """Each result copies its request's (or subrequest's) tolerations, whatever DeviceTaints says: 0.35's
        incubating and experimental and every implementation from 0.36 (D35/…/incubating/allocator_incubating.go:307,
        D36/…/stable/allocator_stable.go:307); no 0.34 implementation, nor 0.35's stable, copies them."""
        return self.minor >= 36 or (self.minor == 35 and self.implementation != "stable")

    @property
    def results_carry_binding_conditions(self) -> bool:
        """Each result copies its device's bindingConditions and bindingFailureConditions: the implementations that
        know binding conditions, with the flag on (0.34: DeviceBinding; 0.35+: DeviceBindingAndStatus;
        D34/…/experimental/allocator_experimental.go:377-380, D37/…/incubating/allocator_incubating.go:387-390)."""
        return self.binding_code and self.device_binding and (self.minor == 34 or self.device_status)

    @property
    def capacity_errors_abort(self) -> bool:
        """0.37: a capacity request that cannot be represented (or a negative amount) aborts the allocation, and
        an "All" request checks its devices' capacities alone (D37/…/incubating/allocator_incubating.go:590-605,
        1133-1145); before, such a device was skipped, and "All" left out devices that shares had filled."""
        return self.minor >= 37

    @property
    def capacity_recheck_by_request_index(self) -> bool:
        """0.34: allocateDevice re-checks capacity on the slice's device at the request's device index, not on the
        device being allocated (D34/…/experimental/allocator_experimental.go:1286, ``r.deviceIndex``)."""
        return self.minor == 34

    @property
    def claim_limit_per_request(self) -> bool:
        """0.37: the 32-device claim limit is checked as each request is added ("claim c, request r: adding n
        devices exceeds the claim limit of 32, with m already accounted for"; D37/…/incubating/
        allocator_incubating.go:262-265), not once for the claim."""
        return self.minor >= 37


def features_for(model: KubernetesModel) -> Features:
    """What ``model``'s kube-scheduler passes to its allocator (its gates), and the library minor."""
    on = model.allocator.features
    binding = facts.BINDING_AND_STATUS in on or "DRADeviceBindingConditions" in on
    status = facts.BINDING_AND_STATUS in on or "DRAResourceClaimDeviceStatus" in on
    return Features(admin_access="DRAAdminAccess" in on, prioritized_list="DRAPrioritizedList" in on,
                    partitionable_devices="DRAPartitionableDevices" in on, device_taints="DRADeviceTaints" in on,
                    device_status=status, device_binding=binding, consumable_capacity="DRAConsumableCapacity" in on,
                    minor=model.minor)  # fmt: skip


DEFAULT_FEATURES = Features()


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """The allocation of one claim: devices in pick order and the node selector upstream derives."""

    results: tuple[AllocatedDevice, ...]
    node_selector: NodeSelector | None

    def to_dict(self) -> dict[str, Any]:
        """``status.allocation`` as JSON (devices.results and nodeSelector; class/claim config is not copied)."""
        out: dict[str, Any] = {"devices": {"results": [r.to_dict() for r in self.results]}}
        if self.node_selector is not None:
            out["nodeSelector"] = node_selector_to_dict(self.node_selector)
        return out


@dataclass(frozen=True, slots=True)
class AllocationOutcome:
    """``allocated``: one ClaimAllocation per claim, in claim order. ``unsatisfiable``: the node does not fit (no
    error: the scheduler marks the node unschedulable). ``error``: the attempt fails (the scheduler reports an
    error for the pod), ``error`` says why as upstream words it. ``budget``: the search gave up after ``steps``
    (upstream gives up at its filter timeout and treats the node as unschedulable). ``error_request``: the request
    an error is about, where upstream's wording leaves it out (``claim ns/name: selector #0: ...``)."""

    status: Status
    claims: tuple[ClaimAllocation, ...] = ()
    error: str | None = None
    steps: int = 0
    error_request: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "allocated"

    def device_ids(self) -> list[DeviceID]:
        return [r.id for claim in self.claims for r in claim.results]


def node_selector_to_dict(selector: NodeSelector) -> dict[str, Any]:
    """As the scheduler writes it: ``values`` is omitempty in core/v1, so Exists/DoesNotExist carry none."""
    terms = []
    for term in selector.terms:
        t: dict[str, Any] = {}
        if term.match_expressions:
            t["matchExpressions"] = [_requirement(r) for r in term.match_expressions]
        if term.match_fields:
            t["matchFields"] = [_requirement(r) for r in term.match_fields]
        terms.append(t)
    return {"nodeSelectorTerms": terms}


def _requirement(r: NodeSelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out
