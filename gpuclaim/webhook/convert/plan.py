"""Which device requests one pod's claim holds, and which of them each container references.

The init-container rule mirrors kubelet's device manager for legacy extended resources:
- app containers and restartable init containers (sidecars, `restartPolicy: Always`) run at the same
  time, so each gets its own request of exactly its count;
- a regular init container runs alone, before the app containers and the sidecars declared after it,
  while the sidecars declared before it are already running. Kubelet hands such an init container's
  devices on to the containers after it (its "reusable devices"), so the pod never needs more than
  max(init, app + sidecars) devices. gpuclaim keeps that footprint: the init container references
  existing requests of the same resource whose counts add up to exactly its own count (never one of an
  earlier sidecar, which is busy). When no subset adds up exactly, one more request is split in two
  (its owner references both pieces, so it still sees its count) and the init container takes the piece
  it needs; only when every eligible request is taken does a shortfall become a request of its own.
  Init 1 + app 2 asks for 2 devices, init 3 + apps 2 + 2 for 4 (issue 14, finding 9). The pieces of a
  split request are separate requests: each keeps the topology rendering of its own count.
So every container still sees exactly its legacy count of devices, and a pod that fitted a node with
the device plugin fits the same node under DRA.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field

from gpuclaim.dra.mapping import Target

from .containers import INIT, Demand

MAX_NAME = 63
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")


@dataclass(slots=True)
class PlannedRequest:
    name: str
    target: Target
    count: int
    #: position of the owning container in start order (init containers first), to exclude busy sidecars
    owner_order: int
    owner_is_sidecar: bool
    #: (kind, index) of the container that owns it (it references every piece when the request is split)
    owner: tuple[str, int] = ("", -1)
    #: the owner's container name, for naming a piece
    owner_name: str = ""


@dataclass(slots=True)
class Plan:
    requests: list[PlannedRequest] = field(default_factory=list)
    #: (kind, index) → the request names the container references, in order
    uses: dict[tuple[str, int], list[str]] = field(default_factory=dict)


@functools.lru_cache(maxsize=4096)
def label(text: str) -> str:
    return _NOT_LABEL.sub("-", text.lower()).strip("-")


def _request_name(container: str, target: Target, taken: set[str]) -> str:
    base = f"{label(container)}-{label(target.short_name)}".strip("-") or "gpu"
    if len(base) > MAX_NAME or base in taken:
        digest = hashlib.sha256(f"{container}\0{target.resource}".encode()).hexdigest()
        for n in range(56):
            candidate = f"{base[: MAX_NAME - 9].rstrip('-')}-{digest[n : n + 8]}"
            if candidate not in taken:
                base = candidate
                break
    taken.add(base)
    return base


def plan(demands: list[Demand]) -> Plan:
    out = Plan()
    taken: set[str] = set()
    for demand in (d for d in demands if d.long_running):
        key = (demand.kind, demand.index)
        request = PlannedRequest(_request_name(demand.container, demand.target, taken), demand.target, demand.count,
                                 _order(demand), demand.kind == INIT, key, demand.container)
        out.requests.append(request)
        out.uses.setdefault(key, []).append(request.name)
    for demand in (d for d in demands if not d.long_running):
        me = _order(demand)
        eligible = [r for r in out.requests
                    if r.target.resource == demand.target.resource and not (r.owner_is_sidecar and r.owner_order < me)]
        chosen, covered = _cover(eligible, demand.count)
        names = [r.name for r in chosen]
        if covered < demand.count:
            piece = _split(out, [r for r in eligible if r not in chosen], demand.count - covered, taken)
            if piece is not None:
                names.append(piece.name)
            else:
                own = PlannedRequest(_request_name(demand.container, demand.target, taken), demand.target,
                                     demand.count - covered, me, False, (demand.kind, demand.index), demand.container)
                out.requests.append(own)
                names.append(own.name)
        out.uses.setdefault((demand.kind, demand.index), []).extend(names)
    return out


def _split(out: Plan, unchosen: list[PlannedRequest], want: int, taken: set[str]) -> PlannedRequest | None:
    """Split the first request bigger than `want` into `want` + the rest; the piece of size `want` is returned.
    Every container that referenced it (its owner, earlier init containers) references both pieces (same total),
    so each still sees exactly its count."""
    for request in unchosen:
        if request.count > want:
            rest = PlannedRequest(_request_name(request.owner_name, request.target, taken), request.target,
                                  request.count - want, request.owner_order, request.owner_is_sidecar, request.owner,
                                  request.owner_name)
            request.count = want
            out.requests.insert(out.requests.index(request) + 1, rest)
            for uses in out.uses.values():
                if request.name in uses:
                    uses.insert(uses.index(request.name) + 1, rest.name)
            return request
    return None


def _order(demand: Demand) -> int:
    """Start order: init containers by index, then every app container (they start together, after them)."""
    return demand.index if demand.kind == INIT else 1 << 30


def _cover(candidates: list[PlannedRequest], want: int) -> tuple[list[PlannedRequest], int]:
    """The subset of candidates with the largest total not above ``want`` (fewest requests, earliest first)."""
    best: dict[int, tuple[int, ...]] = {0: ()}
    for i, request in enumerate(candidates):
        for total, picked in list(best.items()):
            new_total = total + request.count
            if new_total > want:
                continue
            new = (*picked, i)
            old = best.get(new_total)
            if old is None or (len(new), new) < (len(old), old):
                best[new_total] = new
    total = max(best)
    return [candidates[i] for i in best[total]], total
