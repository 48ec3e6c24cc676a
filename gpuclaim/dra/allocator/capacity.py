"""Consumable capacity (DRAConsumableCapacity): what a request consumes of a device's capacities, whether it fits
beside what other claims and this attempt already consume, and what is held by shares other claims own.

As upstream's ``CmpRequestOverCapacity`` (D37/…/incubating/consumable_capacity.go): every capacity of the device
is consumed, requested or not (unrequested: the policy's default, else the whole value), so a device that allows
multiple allocations is shared only as far as its capacities and policies leave room. Capacity names are matched
literally, as the slice and the claim write them. The integer arithmetic of a ``validRange`` step reads each
quantity rounded up to an integer (``Quantity.Value``), as upstream's does while DRAFractionalCapacityRange is off
(its default in every supported version).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from gpuclaim.dra.api import Device, DeviceCapacity, DeviceID, ResourceClaim
from gpuclaim.dra.quantity import Quantity, QuantityError, parse_quantity

MAX_INT64 = 2**63 - 1


class CapacityError(Exception):
    """A request upstream refuses outright (0.37: not representable, or negative): the allocation fails."""


@dataclass(frozen=True, slots=True)
class SharedUsage:
    """What shares held by other claims take of devices that allow multiple allocations (the scheduler's
    ``AllocatedSharedDeviceIDs`` and ``AggregatedCapacity``): build it with :func:`shared_usage`."""

    devices: frozenset[DeviceID] = frozenset()  # devices with at least one share
    consumed: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)


NO_SHARES = SharedUsage()


def shared_usage(claims: Iterable[ResourceClaim]) -> SharedUsage:
    """Shares (results with a ``shareID``) in the claims' ``status.allocation``, adminAccess results left out."""
    devices: set[DeviceID] = set()
    consumed: dict[DeviceID, dict[str, Fraction]] = {}
    for claim in claims:
        for result in claim.status.results:
            if result.admin_access or result.share_id is None:
                continue
            devices.add(result.id)
            if result.consumed_capacity is not None:
                total = consumed.setdefault(result.id, {})
                for name, q in result.consumed_capacity.items():
                    total[name] = total.get(name, Fraction(0)) + q.value
    return SharedUsage(frozenset(devices), consumed)


def parse_requests(raw: Mapping[str, object] | None) -> dict[str, Quantity] | None:
    """``capacity.requests`` of a request: name -> quantity; None without one. Raises QuantityError."""
    if raw is None:
        return None
    requests = raw.get("requests")
    if not isinstance(requests, Mapping):
        return None
    return {str(name): parse_quantity(v if isinstance(v, str) else str(v)) for name, v in requests.items()}


def _value(q: Quantity) -> int:
    """Quantity.Value(): rounded up to an integer."""
    return math.ceil(q.value)


def _round_up_range(requested: Quantity, cap: DeviceCapacity, checked: bool) -> Quantity:
    assert cap.policy is not None and cap.policy.valid_range is not None
    low, _, step = cap.policy.valid_range
    assert low is not None
    if requested.value < low.value:
        return low
    if step is None:
        return requested
    if checked and requested.value > MAX_INT64:
        raise CapacityError(f"capacity {_go_quote(cap.name)}: capacity request cannot be represented in the device's "
                            f"range arithmetic: request {requested} exceeds MaxInt64")  # fmt: skip
    req_i, step_i, min_i = _value(requested), _value(step), _value(low)
    added = req_i - min_i
    n = abs(added) // step_i * (1 if added >= 0 else -1)  # Go's truncating division
    if added - n * step_i != 0:
        n += 1
    if checked and min_i >= 0 and n > (MAX_INT64 - min_i) // step_i:
        raise CapacityError(f"capacity {_go_quote(cap.name)}: capacity request cannot be represented in the device's "
                            f"range arithmetic: rounding request {requested} up to the next step passes MaxInt64")
    return Quantity(Fraction(min_i + step_i * n), step.format)


def consumed_by(requested: Quantity | None, cap: DeviceCapacity, checked: bool) -> Quantity:
    """calculateConsumedCapacity: what one request takes of one capacity."""
    policy = cap.policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range[0] is not None:
        return _round_up_range(requested, cap, checked)
    if policy.valid_values is not None:
        return next((v for v in policy.valid_values if requested.value <= v.value), requested)
    return requested


def _violates(consumed: Quantity, cap: DeviceCapacity) -> bool:
    policy = cap.policy
    if policy is None:
        return False
    if policy.default is not None and consumed.value == policy.default.value:
        return False
    if policy.valid_range is not None:
        low, high, step = policy.valid_range
        if high is not None and consumed.value > high.value:
            return True
        if step is not None and low is not None:
            diff = _value(consumed) - _value(low)
            step_i = _value(step)
            return abs(diff) % step_i != 0
        return False
    if policy.valid_values:
        return all(consumed.value != v.value for v in policy.valid_values)
    return False


def consumption(requests: Mapping[str, Quantity] | None, device: Device, checked: bool) -> dict[str, Quantity] | None:
    """What the request consumes of each capacity of ``device``; None when it names a capacity the device lacks
    (the device does not fit). ``checked`` (0.37): unrepresentable or negative amounts raise CapacityError."""
    if requests and any(name not in {c.name for c in device.consumable} for name in requests):
        return None
    out: dict[str, Quantity] = {}
    for cap in device.consumable:
        amount = consumed_by(requests.get(cap.name) if requests else None, cap, checked)
        if checked and amount.value < 0:
            raise CapacityError(f"capacity {_go_quote(cap.name)}: capacity value is negative")
        out[cap.name] = amount
    return out


def fits(requests: Mapping[str, Quantity] | None, device: Device, held: Mapping[str, Fraction] | None,
         allocating: Mapping[str, Fraction] | None, checked: bool) -> bool:  # fmt: skip
    """CmpRequestOverCapacity: the request's consumption respects each policy and, added to what shares already
    hold (``held``) and what this attempt is taking (``allocating``), stays within each capacity's value."""
    amounts = consumption(requests, device, checked)
    if amounts is None:
        return False
    for cap in device.consumable:
        amount = amounts[cap.name]
        if _violates(amount, cap):
            return False
        total = amount.value + (held or {}).get(cap.name, 0) + (allocating or {}).get(cap.name, 0)
        if total > cap.value.value:
            return False
    return True


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["NO_SHARES", "CapacityError", "QuantityError", "SharedUsage", "consumption", "fits", "parse_requests",
           "shared_usage"]  # fmt: skip
