"""What the allocator takes besides objects (feature gates) and what it returns (outcomes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpuclaim.dra.api import AllocatedDevice, DeviceID, NodeSelector, NodeSelectorRequirement

Status = Literal["allocated", "unsatisfiable", "error", "budget"]


@dataclass(frozen=True, slots=True)
class Features:
    """The allocator features kube-scheduler enables from its feature gates.

    The default is what a 1.34 kube-scheduler passes with default gates: AdminAccess and PrioritizedList (beta,
    on) and DeviceStatus (beta, on; it changes nothing in the search, but it is why 1.34 runs the *experimental*
    allocator). PartitionableDevices and DeviceTaints are alpha (off). DeviceBinding and ConsumableCapacity are
    alpha features this simulation does not implement: enabling them raises ``ValueError``.
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = False
    device_taints: bool = False
    device_status: bool = True
    device_binding: bool = False
    consumable_capacity: bool = False

    def __post_init__(self) -> None:
        unsupported = [n for n in ("device_binding", "consumable_capacity") if getattr(self, n)]
        if unsupported:
            raise ValueError(f"allocator features not simulated: {', '.join(unsupported)}")


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
