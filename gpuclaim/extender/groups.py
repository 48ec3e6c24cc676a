"""Nodes that look the same to a pod share one simulation.

Thousands of nodes of one instance type differ, as far as a pod's claims can tell, only in what is held on
them. A node's *signature* for a pod is everything the allocator and the score read, with per-node
identifiers replaced by their pattern:

- the allocator's features (the cluster's Kubernetes version);
- per device, in search order: driver, device name, pool index, usable on the node, held or free, binding
  conditions (selectable or not in this version), and the
  outcome of every alternative's selector chain (class selectors, then request selectors, as dra.cel
  evaluates them, cached per device projection);
- per ``matchAttribute`` name and per topology source: which devices share a value (values renumbered by first
  appearance, so root ``pci0000:10`` on one node and ``pci0000:44`` on another are the same pattern);
- per pool: driver, complete, valid; and where each pool's devices start and end.

Two nodes with one signature get the same allocation (same device positions) and the same score, so the
first node's verdict is reused with the second node's device names. Anything that would make the answer
depend on more than this (a selector error, devices with counters or taints, a device other claims hold shares
of) gets no signature: that node is simulated on its own. The cache needs no invalidation: a changed node has a
changed signature.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from gpuclaim.dra import cel
from gpuclaim.dra.api import DeviceClass, ResourceClaim

from .score import NodeVerdict, Packed

Chain = tuple[cel.CompiledSelector, ...]
_MAX_GROUPS = 20_000


def chains(claims: Sequence[ResourceClaim], classes: Mapping[str, DeviceClass]) -> list[Chain] | None:
    """One selector chain per alternative of every request; None when a class is missing or a selector does not
    compile (the allocator reports an error then, and errors are not shared)."""
    out: list[Chain] = []
    for claim in claims:
        for request in claim.spec.requests:
            for alt in request.alternatives:
                klass = classes.get(alt.device_class_name)
                if klass is None:
                    return None
                try:
                    out.append(tuple(cel.compile_selector(s.expression, mode="stored")
                                     for s in (*klass.selectors, *alt.selectors)))  # fmt: skip
                except cel.CelCompileError:
                    return None
    return out


def constraint_attributes(claims: Sequence[ResourceClaim]) -> tuple[str, ...]:
    return tuple(sorted({c.match_attribute for claim in claims for c in claim.spec.constraints if c.match_attribute}))


def _pattern(values: list[Any]) -> tuple[int | None, ...]:
    seen: dict[tuple[type, Any], int] = {}
    return tuple(None if v is None else seen.setdefault((type(v), v), len(seen)) for v in values)


def signature(state: Any, key: bytes, selector_chains: Sequence[Chain], attributes: Sequence[str]
              ) -> Hashable | None:
    """``state`` is a predict.NodeState (typed loosely to keep this module free of an import cycle). What does not
    depend on the pod (``base``) is made once per node state: a new pod shape over 5,000 nodes computed it for
    every node again, a fifth of the loop's time while the bench's 64 new shapes arrived (issue 22)."""
    common = state.signature_base
    if common is None:
        common = state.signature_base = base(state)
    if common is False:
        return None
    outcomes = []
    for candidate in state.pools.candidates:
        device = candidate.device
        row = []
        for chain in selector_chains:
            ok = True
            for selector in chain:
                result = selector.outcome(device)
                if result is not True:
                    if result is not False:
                        return None  # a runtime error: the allocator's message names this node's device
                    ok = False
                    break
            row.append(ok)
        outcomes.append(tuple(row))
    candidates = state.pools.candidates
    attribute_patterns = tuple(_pattern([c.device.attributes.get(a) for c in candidates]) for a in attributes)
    return (key, common, tuple(outcomes), attribute_patterns)


def base(state: Any) -> tuple[Any, ...] | bool:
    """The part of a node's signature every pod shares, or False when the node gets none (a device that consumes
    capacity, carries taints, or is shared by other claims: simulated on its own)."""
    pools = state.pools
    held = state.held
    shared = state.shared.devices  # what shares left of a device's capacity is per node
    rows = []
    for candidate in pools.candidates:
        if candidate.consumes or candidate.taints or candidate.id in shared:
            return False
        dev_id = candidate.id
        rows.append((dev_id.driver, dev_id.device, candidate.pool_index, candidate.on_node, dev_id in held,
                     candidate.blocked, bool(candidate.device.binding_conditions)))  # fmt: skip
    ids = [c.id for c in pools.candidates]
    keys = state.topology.keys
    topology_patterns = tuple(_pattern([keys[d][k] for d in ids]) for k in range(len(state.topology.sources)))
    pool_shape = tuple((p.driver, p.incomplete, p.invalid is None) for p in pools.pools)
    return (state.features, pool_shape, pools.pool_ranges, tuple(rows), topology_patterns)


class GroupCache:
    """Verdicts by signature, with the picked devices as positions in the node's search order."""

    def __init__(self, max_entries: int = _MAX_GROUPS) -> None:
        self.max_entries = max_entries
        self._entries: dict[Hashable, tuple[Packed, tuple[int, ...]]] = {}  # packed: see score.Packed
        self.hits = 0
        self.misses = 0

    def get(self, sig: Hashable, state: Any) -> NodeVerdict | None:
        entry = self._entries.get(sig)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        (score, _, reason, domains, error, _), positions = entry
        names = state.device_names
        return NodeVerdict.unpack(state.name, (score, tuple(names[i] for i in positions), reason, domains, error,
                                               False))  # fmt: skip

    def put(self, sig: Hashable, state: Any, verdict: NodeVerdict) -> None:
        if verdict.error or self.max_entries == 0:
            return  # error messages name pools and devices of one node
        index = {str(c.id): i for i, c in enumerate(state.pools.candidates)}
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[sig] = (verdict.packed(), tuple(index[d] for d in verdict.devices))
