"""The pools one node can draw from, flattened into the order the search visits devices.

Built once per node and reusable for every claim and pod until the node's slices or labels change, which is
what the extender caches (``kube.inventory.Inventory.slices_for_node`` hands over exactly the slices a node
sees, newest generation only; parse them with ``dra.api.parse_resource_slice`` and pass them here).

Order: upstream collects pools in a Go map, so the pool order differs from call to call (the fixtures' case
``devices-split-across-different-slices`` picks pool-2 before pool-1). A simulation must pick *one* order, and
a deterministic one, or the extender would score the same node differently on every call. Pools are sorted
by (driver, pool name) — the order ``kube.inventory`` lists slices in, so both agree — and inside a pool
slices keep the order they were given (upstream keeps listing order there) and devices keep slice order.
With at most 8 pools upstream's order is a rotation of the order pools first appear in the slice list (a Go
swiss-table map of one group), so for slices listed sorted, this order is one upstream really takes.

Binding conditions (pools_experimental.go:69-72, :121-133): the experimental implementation (the 1.34 default)
adds slices with a device that has bindingConditions after all other slices, and pools holding such devices
after all other pools, so plain devices are preferred; stable and incubating keep listing order. With the
DRADeviceBindingConditions gate off (1.34's default) those devices are never selected by any of the three.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, NamedTuple

from gpuclaim.dra.api import Device, DeviceID, NodeSelector, ResourceSlice, device_available_on
from gpuclaim.dra.quantity import QuantityError, parse_quantity

from .model import DEFAULT_FEATURES, Features

MATCH_CACHE_KEYS = 256


class NodeInfo(NamedTuple):
    name: str
    labels: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PoolInfo:
    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]
    incomplete: bool  # fewer slices of the newest generation than resourceSliceCount
    invalid: str | None  # why the pool cannot be used (duplicate device names), else None
    counters: Mapping[str, Mapping[str, Fraction]]  # sharedCounters: set -> counter -> value

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class Candidate:
    """One device as the search sees it, with what the hot loop needs precomputed."""

    device: Device
    id: DeviceID
    slice: ResourceSlice
    pool_index: int
    on_node: bool  # false only for perDeviceNodeSelection devices not usable on this node
    blocked: bool  # has bindingConditions while DeviceBinding or DeviceStatus is off: never selectable
    consumes: tuple[tuple[str, str, Fraction], ...]  # (counter set, counter, amount)
    taints: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class NodePools:
    node: NodeInfo
    pools: tuple[PoolInfo, ...]
    candidates: tuple[Candidate, ...]  # every device of every pool, in search order
    pool_ranges: tuple[tuple[int, int], ...] = field(default=())  # candidates[start:end] per pool
    # upstream's GatherPools failed (a slice's node selector nodeaffinity cannot parse): every allocation fails
    error: str | None = None
    # 0.35+: an invalid pool offers no device and fails the allocation only when nothing fits (Features.pools_apart);
    # 0.34: the search fails when it reaches one
    invalid_skipped: bool = False
    # Selector outcomes per candidate, keyed by the selector expressions: a device's match does not depend on
    # allocations, so every call for this node (every pod, every claim) reuses them. Owned by this object and
    # dropped with it; bounded by MATCH_CACHE_KEYS. Not thread-safe (the extender runs one event loop).
    match_cache: dict[tuple[str, ...], list[Any]] = field(default_factory=dict, compare=False, repr=False)
    # (class expressions, request expressions) -> indices of the candidates both select, or None when some
    # selector fails on some device (then the search evaluates lazily, so the error surfaces where upstream's does)
    order_cache: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[int, ...] | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def any_invalid(self) -> bool:
        return any(p.invalid is not None for p in self.pools)

    def __len__(self) -> int:
        return len(self.candidates)


def slice_visible(s: ResourceSlice, node: NodeInfo, features: Features) -> bool:
    if s.node_name is not None:
        return s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        return s.node_selector.matches(labels=node.labels, name=node.name)
    # perDeviceNodeSelection is part of DRAPartitionableDevices; without it such slices are ignored.
    return s.per_device_node_selection and features.partitionable_devices


def gather_pools(
    node: NodeInfo, slices: Iterable[ResourceSlice], *, features: Features = DEFAULT_FEATURES
) -> NodePools:
    """Pools visible to ``node`` (nodeName, nodeSelector, allNodes, per-device selection), newest generation."""
    slices = list(slices)
    error = _gather_error(slices, features)
    if features.pools_apart:
        built = _pools_apart(node, slices, features)
    else:
        built = _pools_together(node, slices, features)
    pools: list[PoolInfo] = []
    candidates: list[Candidate] = []
    ranges: list[tuple[int, int]] = []
    binding_ok = features.binding_allowed
    reorder = features.binding_last
    for pool, members in sorted(built, key=lambda pm: (reorder and any(_has_binding_conditions(s) for s in pm[1]),
                                                       (pm[0].driver, pm[0].name))):  # fmt: skip
        index = len(pools)
        pools.append(pool)
        start = len(candidates)
        for s in members:
            for device in s.devices:
                on_node = not s.per_device_node_selection or device_available_on(
                    device, node_name=node.name, node_labels=node.labels
                )
                candidates.append(
                    Candidate(
                        device=device,
                        id=DeviceID(s.driver, s.pool.name, device.name),
                        slice=s,
                        pool_index=index,
                        on_node=on_node,
                        blocked=bool(device.binding_conditions) and not binding_ok,
                        consumes=_consumption(device),
                        taints=tuple(device.taints),
                    )
                )
        ranges.append((start, len(candidates)))
    return NodePools(node=node, pools=tuple(pools), candidates=tuple(candidates), pool_ranges=tuple(ranges),
                     error=error, invalid_skipped=features.pools_apart)  # fmt: skip


def _newest(slices: Iterable[ResourceSlice]) -> dict[tuple[str, str], list[ResourceSlice]]:
    """Per pool, the slices of its newest generation among ``slices``, in their order."""
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        key = (s.driver, s.pool.name)
        current = by_pool.get(key)
        if current is None or s.pool.generation > current[0].pool.generation:
            by_pool[key] = [s]
        elif s.pool.generation == current[0].pool.generation:
            current.append(s)
    return by_pool


def _pools_together(node: NodeInfo, slices: list[ResourceSlice],
                    features: Features) -> list[tuple[PoolInfo, list[ResourceSlice]]]:  # fmt: skip
    """0.34: every visible slice's devices; an incomplete or invalid pool keeps them (the search decides)."""
    visible = [s for s in slices if slice_visible(s, node, features)]
    if features.binding_last:
        visible.sort(key=_has_binding_conditions)  # stable sort: listing order otherwise
    return [(_pool_info(key, members), members) for key, members in _newest(visible).items()]


def _pools_apart(node: NodeInfo, slices: list[ResourceSlice],
                 features: Features) -> list[tuple[PoolInfo, list[ResourceSlice]]]:  # fmt: skip
    """0.35+ (see ``Features.pools_apart``): devices only from complete, valid pools; counters from their own
    slices."""
    relevant = []
    for s in slices:
        if not features.partitionable_devices and (
            s.per_device_node_selection or (s.shared_counters and features.counter_slices_skipped)
        ):
            continue
        if s.per_device_node_selection and features.partitionable_devices:
            # relevant when one of its devices is for this node
            if any(device_available_on(d, node_name=node.name, node_labels=node.labels) for d in s.devices):
                relevant.append(s)
        elif slice_visible(s, node, features):
            relevant.append(s)
    if features.binding_last and not features.sorted_pools:
        relevant.sort(key=_has_binding_conditions)  # 0.35 experimental: such slices after the others
    out: list[tuple[PoolInfo, list[ResourceSlice]]] = []
    for key, members in _newest(relevant).items():
        generation, count = members[0].pool.generation, members[0].pool.resource_slice_count
        others: list[ResourceSlice] = []
        if len(members) != count:
            same_pool = [s for s in slices if (s.driver, s.pool.name) == key]
            if any(s.pool.generation > generation for s in same_pool):
                continue  # obsolete: the driver is replacing this generation
            whole = [s for s in same_pool if s.pool.generation == generation]
            if len(whole) != count:
                out.append((PoolInfo(key[0], key[1], generation, (), True, None, MappingProxyType({})), []))
                continue
            names = {s.name for s in members}
            others = [s for s in whole if s.name not in names]
        if features.sorted_pools:
            members = sorted(members, key=lambda s: s.name)

        def holds_counters(s: ResourceSlice) -> bool:
            return features.partitionable_devices and bool(s.shared_counters)

        devices = [s for s in members if not holds_counters(s)]
        counter_slices = [s for s in (*members, *others) if holds_counters(s)]
        invalid = _duplicate_device(devices)
        counters: dict[str, dict[str, Fraction]] = {}
        if invalid is None and features.partitionable_devices:
            invalid = _counter_sets(counter_slices, counters) or _unknown_counters(
                counters, (*devices, *(s for s in others if not holds_counters(s))))
        pool = PoolInfo(key[0], key[1], generation, tuple(members), False, invalid,
                        MappingProxyType({k: MappingProxyType(v) for k, v in counters.items()}))  # fmt: skip
        out.append((pool, devices if invalid is None else []))
    return out


def _duplicate_device(slices: Iterable[ResourceSlice]) -> str | None:
    seen: set[str] = set()
    for s in slices:
        for device in s.devices:
            if device.name in seen:
                return f"duplicate device name {device.name}"
            seen.add(device.name)
    return None


def _counter_sets(slices: Iterable[ResourceSlice], into: dict[str, dict[str, Fraction]]) -> str | None:
    for s in slices:
        for counter_set in s.shared_counters:
            name = str(counter_set.get("name", ""))
            if name in into:
                return f"duplicate counter set name {name}"
            into[name] = dict(_counter_values(counter_set.get("counters")))
    return None


def _unknown_counters(counters: Mapping[str, Mapping[str, Fraction]], slices: Iterable[ResourceSlice]) -> str | None:
    for s in slices:
        for device in s.devices:
            for entry in device.consumes_counters:
                set_name = str(entry.get("counterSet", ""))
                if set_name not in counters:
                    return f"counter set {set_name} not found"
                for name, _ in _counter_values(entry.get("counters")):
                    if name not in counters[set_name]:
                        return f"counter {name} not found in counter set {set_name}"
    return None


def _gather_error(slices: list[ResourceSlice], features: Features) -> str | None:
    """GatherPools (pools_experimental.go:58-67) parses the node selector of every slice, whichever node it is
    for, in listing order, and fails on the first nodeaffinity refuses."""
    for s in slices:
        if not features.partitionable_devices and (
            s.per_device_node_selection or (features.counter_slices_skipped and s.shared_counters)
        ):
            continue  # skipped before its selector is looked at
        if s.node_name is None and not s.all_nodes and s.node_selector is not None:
            problem = s.node_selector.parse_error()
            if problem is not None:
                return (f"gather pool information: failed to perform node selection for slice {s.name}: "
                        f"failed to parse node selector: {problem}")  # fmt: skip
    return None


def _has_binding_conditions(s: ResourceSlice) -> bool:
    return any(d.binding_conditions for d in s.devices)


def _pool_info(key: tuple[str, str], members: list[ResourceSlice]) -> PoolInfo:
    first = members[0]
    seen: set[str] = set()
    invalid = None
    counters: dict[str, dict[str, Fraction]] = {}
    for s in members:
        for device in s.devices:
            if device.name in seen and invalid is None:
                invalid = f"duplicate device name {device.name}"
            seen.add(device.name)
        for counter_set in s.shared_counters:
            name = str(counter_set.get("name", ""))
            values = counters.setdefault(name, {})
            for cname, value in _counter_values(counter_set.get("counters")):
                values[cname] = value
    return PoolInfo(
        driver=key[0],
        name=key[1],
        generation=first.pool.generation,
        slices=tuple(members),
        incomplete=len(members) != first.pool.resource_slice_count,
        invalid=invalid,
        counters=MappingProxyType({k: MappingProxyType(v) for k, v in counters.items()}),
    )


def _counter_values(raw: object) -> list[tuple[str, Fraction]]:
    """``counters: {name: {value: quantity}}``; unparsable values count as zero (the apiserver refuses them)."""
    out: list[tuple[str, Fraction]] = []
    if not isinstance(raw, Mapping):
        return out
    for name, counter in raw.items():
        value = counter.get("value") if isinstance(counter, Mapping) else None
        try:
            amount = parse_quantity(str(value)).value if value is not None else Fraction(0)
        except QuantityError:
            amount = Fraction(0)
        out.append((str(name), amount))
    return out


def _consumption(device: Device) -> tuple[tuple[str, str, Fraction], ...]:
    out: list[tuple[str, str, Fraction]] = []
    for entry in device.consumes_counters:
        set_name = str(entry.get("counterSet", ""))
        for name, amount in _counter_values(entry.get("counters")):
            out.append((set_name, name, amount))
    return tuple(out)


def device_node_binding(candidate: Candidate) -> tuple[str | None, NodeSelector | None]:
    """The node association that decides the allocation's node selector (the device's own when per-device)."""
    if candidate.slice.per_device_node_selection:
        return candidate.device.node_name, candidate.device.node_selector
    return candidate.slice.node_name, candidate.slice.node_selector


# the fleet view (gpuclaim/fleet/model.py) reads counters as the allocator does
counter_values = _counter_values
consumption = _consumption
