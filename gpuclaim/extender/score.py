"""One node's score for one pod, from the allocator's predicted pick: pure, no I/O.

quality = (wT * locality + wF * fragmentation) / (wT + wF)    (config ``extender.weights``, 0.6 / 0.4)
          or fragmentation alone when no group of two or more devices has topology information.

Groups whose locality counts: the devices of each request (two or more), and the devices of the requests a
``matchAttribute`` constraint ties together (when that is more than one request). Group localities are
averaged weighted by their number of device pairs.

Score bands make the ``firstAvailable`` alternative the first key: with n subrequests, the node where the
pod gets subrequest k scores in ``[hi(k+1)+1 .. hi(k)]``, ``hi(k) = round(10 * (1 - k/n))``, so two
subrequests give 6..10 (tight) and 1..5 (looser), three give 8..10, 4..7, 1..3. Without ``firstAvailable``
the band is 1..10. With several prioritized requests the loosest choice (largest k/n) decides the band.
Inside the band, ``score = lo + round((hi - lo) * quality)``. A node where the pod does not fit has no score
(``None``; 0 on the wire).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from gpuclaim.dra.allocator import AllocationOutcome
from gpuclaim.dra.api import DeviceID, ResourceClaim
from gpuclaim.dra.config import ExtenderWeights
from gpuclaim.dra.topology import Locality, NodeTopology

from .fragmentation import Fragmentation, Policy

#: ``strict`` of a verdict with no pick: one shared empty mapping, not a dict per unknown or unfit node
NO_DOMAINS: Mapping[str, bool] = MappingProxyType({})

#: What the per-node and group caches keep of a verdict (all its fields but the node): an exact tuple of strings,
#: numbers, bools and tuples of them, which the cycle collector untracks. Kept as objects of a class, 64 shapes
#: over 5,000 nodes are 320,000 objects each full collection walks: 100-400 ms pauses of the event loop while the
#: caches grow (issue 22); packed, the collector skips them. (A tuple holding any other container, even an empty
#: dict, stays tracked: hence ``domains`` as pairs.)
Packed = tuple[int | None, tuple[str, ...], str, tuple[tuple[str, bool], ...], bool, bool]


class _Verdict(NamedTuple):
    node: str
    score: int | None  # None: the pod does not fit (or the allocator would fail)
    devices: tuple[str, ...]  # driver/pool/device in pick order
    reason: str
    domains: tuple[tuple[str, bool], ...]  # ``strict`` as (topology source, bool) pairs
    error: bool = False  # the allocator would abort with an error (e.g. a CEL runtime error), not just "no fit"
    pinned: bool = False  # an allocated claim of the pod rules this node out (kube-scheduler's Filter does too)


class NodeVerdict(_Verdict):
    """One node's verdict. A named tuple: a cached verdict is read back for every node of every call (5,000 per
    call), and making one from its packed form is one tuple allocation (0.2 us; a frozen dataclass took 7 us).

    No encoded HostPriority entry is kept: every orjson.dumps result (orjson >= 3.12) holds a ~4 KB buffer, 4.4 KB
    per cached verdict (issue 22); one dumps of the whole answer costs 0.5 ms at 5,000 nodes."""

    __slots__ = ()

    def __new__(cls, node: str, score: int | None, devices: tuple[str, ...], reason: str,
                strict: Mapping[str, bool], error: bool = False, pinned: bool = False) -> NodeVerdict:
        if score is not None and not 0 <= score <= 10:
            raise ValueError(f"score {score} for {node} outside 0..10")
        return tuple.__new__(cls, (node, score, devices, reason, tuple(strict.items()), error, pinned))

    def __getnewargs__(self) -> tuple[object, ...]:  # copy and pickle call __new__ with these: ``strict`` a mapping
        return (self.node, self.score, self.devices, self.reason, self.strict, self.error, self.pinned)

    @property
    def strict(self) -> Mapping[str, bool]:
        """Per topology source: every group fully inside one domain."""
        return dict(self.domains)

    def packed(self) -> Packed:
        return (self.score, self.devices, self.reason, self.domains, self.error, self.pinned)

    @classmethod
    def unpack(cls, node: str, packed: Packed) -> NodeVerdict:
        return tuple.__new__(cls, (node, *packed))

    def satisfies(self, required: Sequence[str]) -> bool:
        strict = self.strict
        return self.score is not None and all(strict.get(name, False) for name in required)


@dataclass(frozen=True, slots=True)
class Choice:
    """Which firstAvailable alternative a request got: index k of n."""

    request: str
    sub: str
    index: int
    of: int


def choices(claims: Sequence[ResourceClaim], outcome: AllocationOutcome) -> list[Choice]:
    out = []
    for claim, allocation in zip(claims, outcome.claims, strict=True):
        for request in claim.spec.requests:
            if not request.first_available:
                continue
            subs = [s.name for s in request.first_available]
            for result in allocation.results:
                base, _, sub = result.request.partition("/")
                if base == request.name and sub in subs:
                    out.append(Choice(request=f"{claim.name}/{request.name}", sub=sub, index=subs.index(sub),
                                      of=len(subs)))  # fmt: skip
                    break
    return out


def groups(claims: Sequence[ResourceClaim], outcome: AllocationOutcome) -> list[list[DeviceID]]:
    """Per request (>= 2 devices) and per constraint spanning several requests; adminAccess picks included."""
    out: list[list[DeviceID]] = []
    for claim, allocation in zip(claims, outcome.claims, strict=True):
        by_request: dict[str, list[DeviceID]] = {}
        for result in allocation.results:
            by_request.setdefault(result.request.partition("/")[0], []).append(result.id)
        out.extend(ids for ids in by_request.values() if len(ids) >= 2)
        for constraint in claim.spec.constraints:
            names = {n.partition("/")[0] for n in constraint.requests} or set(by_request)
            covered = [name for name in by_request if name in names]
            if len(covered) >= 2:
                out.append([d for name in covered for d in by_request[name]])
    return out


def band(chosen: Sequence[Choice]) -> tuple[int, int]:
    if not chosen:
        return 1, 10
    loosest = max(chosen, key=lambda c: (c.index / c.of, -c.of))
    loose, step = loosest.index / loosest.of, 1 / loosest.of

    def hi(x: float) -> int:
        return int(10 * (1 - x) + 0.5)

    return max(1, hi(loose + step) + 1), max(1, hi(loose))


def combine(locality: float | None, frag: float, weights: ExtenderWeights) -> float:
    if locality is None:
        return frag
    total = weights.topology + weights.fragmentation
    if total == 0:
        return 0.5 * (locality + frag)
    return (weights.topology * locality + weights.fragmentation * frag) / total


def pooled_locality(topology: NodeTopology, picked_groups: Sequence[Sequence[DeviceID]]
                    ) -> tuple[float | None, dict[str, bool], list[Locality]]:
    total = pairs = 0.0
    strict: dict[str, bool] = {}
    found: list[Locality] = []
    for group in picked_groups:
        loc = topology.locality(group)
        if loc is None:
            continue
        found.append(loc)
        n = len(group) * (len(group) - 1) / 2
        total += loc.value * n
        pairs += n
        present = dict(loc.per_source)
        for source in topology.sources:
            ok = present.get(source.name) == 1.0
            strict[source.name] = strict.get(source.name, True) and ok
    return (total / pairs if pairs else None), strict, found


def verdict(
    *,
    node: str,
    claims: Sequence[ResourceClaim],
    outcome: AllocationOutcome,
    topology: NodeTopology,
    frag: Fragmentation,
    policy: Policy,
    weights: ExtenderWeights,
) -> NodeVerdict:
    """Score an allocated outcome (``outcome.ok``)."""
    picked_groups = groups(claims, outcome)
    locality, strict, found = pooled_locality(topology, picked_groups)
    if not picked_groups:
        strict = {s.name: True for s in topology.sources}  # one device is trivially inside any domain
    quality = combine(locality, frag.value, weights)
    chosen = choices(claims, outcome)
    lo, hi = band(chosen)
    score = lo + int((hi - lo) * quality + 0.5)
    devices = tuple(str(d) for d in outcome.device_ids())
    parts = [f"picks {', '.join(d.device for d in outcome.device_ids())}"]
    for c in chosen:
        parts.append(f"{c.request} gets subrequest {c.sub} ({_ordinal(c.index + 1)} of {c.of})")
    if locality is None:
        parts.append("locality n/a")
    else:
        detail = ", ".join(f"{_short(name)} {value:.2f}" for loc in found[:1] for name, value in loc.per_source)
        parts.append(f"locality {locality:.2f} ({detail})")
    parts.append(frag.describe(policy))
    return NodeVerdict(node=node, score=score, devices=devices, reason="; ".join(parts), strict=strict)


def unfit(node: str, outcome: AllocationOutcome) -> NodeVerdict:
    if outcome.status == "error":
        reason, error = f"allocation would fail with an error: {_with_request(outcome)}", True
    elif outcome.status == "budget":
        reason, error = f"no allocation found within the search budget ({outcome.steps} steps)", False
    else:
        reason, error = "the pod's claims do not fit on this node's free devices", False
    return NodeVerdict(node=node, score=None, devices=(), reason=reason, strict=NO_DOMAINS, error=error)


def _with_request(outcome: AllocationOutcome) -> str | None:
    """Upstream's error with the request named after the claim or class: `claim gpu, request gpu: selector #0: ...`."""
    if outcome.error is None or outcome.error_request is None:
        return outcome.error
    where, sep, rest = outcome.error.partition(": ")
    return f"{where}, request {outcome.error_request}{sep}{rest}"


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
