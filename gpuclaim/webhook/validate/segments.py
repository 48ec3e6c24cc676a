"""Per-slice dry-run summaries, so that a ResourceSlice change re-evaluates only that slice's devices.

- :class:`Segment`: one ResourceSlice's usable devices and the node scope of each. Immutable; the live
  inventory keeps the segment of an unchanged slice (same parsed model, or same name and resourceVersion)
  from one device index to the next, and with it every summary remembered on it.
- :class:`SliceSummary`: a selector chain over one segment, per device: where the chain stopped (``-1``:
  matched) and with which error. Computed once per (chain, segment), remembered by the segment.
- :class:`SummaryCache`: what outlives an index: per chain, the projection of a device on what the chain
  reads, and the summaries by *signature* (the tuple of the segment's device projections). Slices of the
  same GPU model differ only in what no selector reads (uuid, bus id), so they share one summary and the
  CEL work is done once for the whole fleet; each segment still costs one projection per device, once.
  ``stats`` counts the work done, the seam the tests use to see that an unchanged slice is not re-evaluated.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuclaim.dra import api, cel

__all__ = ["ALL_NODES", "DryRunStats", "Segment", "SliceSummary", "SummaryCache"]

ALL_NODES = "all nodes"
MATCHED = -1
Scope = tuple[str, bool]  # (scope name, whether it is one named node)
Chain = tuple[cel.CompiledSelector, ...]


def _scope_of(node_name: str | None, selector: object, all_nodes: bool, slice_name: str) -> Scope | None:
    if node_name:
        return node_name, True
    if selector is not None:
        return f"nodes selected by ResourceSlice {slice_name}", False
    if all_nodes:
        return ALL_NODES, False
    return None


class Segment:
    """The devices of one slice usable somewhere, in slice order; ``scope`` is set when all share one."""

    __slots__ = ("_memo", "devices", "name", "schemas", "scope", "scopes", "source", "version")
    MEMO_SIZE = 32

    def __init__(self, source: api.ResourceSlice) -> None:
        self.source = source
        self.name = source.name
        self.version = source.meta.resource_version
        slice_scope = _scope_of(source.node_name, source.node_selector, source.all_nodes, source.name)
        devices: list[api.Device] = []
        scopes: list[Scope] = []
        for device in source.devices:
            where = slice_scope
            if source.per_device_node_selection:
                where = _scope_of(device.node_name, device.node_selector, device.all_nodes, source.name)
            if where is not None:
                devices.append(device)
                scopes.append(where)
        self.devices: tuple[api.Device, ...] = tuple(devices)
        self.scopes: tuple[Scope, ...] = tuple(scopes)
        self.scope: Scope | None = scopes[0] if scopes and scopes.count(scopes[0]) == len(scopes) else None
        self._memo: dict[Chain, SliceSummary] = {}
        # What these devices publish (webhook.validate.schemas), with the registry it was computed for.
        self.schemas: Any = None

    def same_as(self, source: api.ResourceSlice) -> bool:
        """Whether ``source`` is the slice this segment was built from (a relist re-parses unchanged slices)."""
        return source is self.source or (bool(self.version) and source.name == self.name
                                         and source.meta.resource_version == self.version)

    def __len__(self) -> int:
        return len(self.devices)

    def __repr__(self) -> str:
        return f"Segment({self.name}@{self.version}, {len(self.devices)} devices)"


@dataclass(frozen=True, slots=True, eq=False)
class SliceSummary:
    """One chain over one segment. Compared by identity: identical slices share one object."""

    stops: tuple[int, ...]  # per device: MATCHED, or the index of the selector that said false or failed
    matched: int
    rejected: tuple[tuple[int, int], ...]  # (selector index, devices it said false on)
    errors: tuple[tuple[int, int, int, str], ...]  # (selector index, devices, first device, its error)

    @classmethod
    def of(cls, stops: Sequence[int], failures: dict[int, str]) -> SliceSummary:
        """``failures``: device -> error message, for the devices whose stop is a runtime error."""
        rejected: dict[int, int] = {}
        errors: dict[int, list[Any]] = {}
        for n, stop in enumerate(stops):
            if stop == MATCHED:
                continue
            message = failures.get(n)
            if message is None:
                rejected[stop] = rejected.get(stop, 0) + 1
            elif stop in errors:
                errors[stop][1] += 1
            else:
                errors[stop] = [stop, 1, n, message]
        return cls(tuple(stops), stops.count(MATCHED), tuple(sorted(rejected.items())),
                   tuple(tuple(e) for _, e in sorted(errors.items())))


@dataclass(slots=True)
class DryRunStats:
    """Work done by a :class:`SummaryCache`, cumulative."""

    segments_evaluated: int = 0  # (chain, segment) pairs summarised: each projects every device once
    devices_projected: int = 0
    signatures_evaluated: int = 0  # summaries built through CEL (the rest were shared with an identical slice)


@dataclass(slots=True)
class _ChainState:
    projection: Callable[[Any], Any]
    by_signature: dict[tuple[Any, ...], SliceSummary]


class SummaryCache:
    """Per-chain state shared by successive device indexes of one inventory (a cache: dropping it only costs
    time). Chains are tuples of compiled selectors, which the compile cache keeps as the same objects."""

    def __init__(self, max_chains: int = 64, max_signatures: int = 4096) -> None:
        self.max_chains = max_chains
        self.max_signatures = max_signatures
        self.stats = DryRunStats()
        self._chains: OrderedDict[Chain, _ChainState] = OrderedDict()

    def summarise(self, segments: Iterable[Segment], chain: Chain) -> list[SliceSummary]:
        """The summary of ``chain`` over each segment, in order; only segments never seen with it cost work."""
        state = self._chains.get(chain)
        if state is None:
            state = self._chains[chain] = _ChainState(cel.projection(chain), {})
            if len(self._chains) > self.max_chains:
                self._chains.popitem(last=False)
        else:
            self._chains.move_to_end(chain)
        out: list[SliceSummary] = []
        append = out.append
        for segment in segments:
            found = segment._memo.get(chain)
            if found is None:
                found = self._evaluate(segment, chain, state)
                if len(segment._memo) >= Segment.MEMO_SIZE:
                    segment._memo.clear()
                segment._memo[chain] = found
            append(found)
        return out

    def _evaluate(self, segment: Segment, chain: Chain, state: _ChainState) -> SliceSummary:
        devices = segment.devices
        signature = tuple(map(state.projection, devices))
        self.stats.segments_evaluated += 1
        self.stats.devices_projected += len(devices)
        summary = state.by_signature.get(signature)
        if summary is not None:
            return summary
        self.stats.signatures_evaluated += 1
        by_key: dict[Any, tuple[int, str | None]] = {}
        stops: list[int] = []
        failures: dict[int, str] = {}
        for n, key in enumerate(signature):
            outcome = by_key.get(key)
            if outcome is None:
                outcome = by_key[key] = _run_chain(chain, devices[n])
            stops.append(outcome[0])
            if outcome[1] is not None:
                failures[n] = outcome[1]
        summary = SliceSummary.of(stops, failures)
        if len(state.by_signature) >= self.max_signatures:
            state.by_signature.clear()
        state.by_signature[signature] = summary
        return summary


def _run_chain(chain: Chain, device: api.Device) -> tuple[int, str | None]:
    """In order, stopping at the first false or error, as the allocator does; each selector caches by its
    own projection, so a device identical on what it reads to one seen before costs no CEL evaluation."""
    for i, selector in enumerate(chain):
        result = selector.outcome(device)
        if result is True:
            continue
        if result is False:
            return i, None
        return i, result.message
    return MATCHED, None
