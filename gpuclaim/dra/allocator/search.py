"""Depth-first, first-fit search with backtracking across devices, requests and claims (upstream's
``allocateOne``), plus the allocate() entry points.

Like upstream since 1.35 (PR #133678), devices of one request are tried as combinations in search order, not
permutations: the first solution found is the same set (constraints and counters do not depend on the order
inside a request), and the search stays small on 8-GPU nodes. 1.34 explores permutations too, which only
costs time.
"""

from __future__ import annotations

import uuid
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from fractions import Fraction
from typing import Any

from gpuclaim.dra.api import (
    AllocatedDevice,
    Device,
    DeviceClass,
    DeviceID,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
    ResourceSlice,
)
from gpuclaim.dra.quantity import Quantity

from .capacity import NO_SHARES, CapacityError, SharedUsage, consumption, fits
from .model import DEFAULT_FEATURES, AllocationOutcome, ClaimAllocation, Features
from .pools import Candidate, NodeInfo, NodePools, device_node_binding, gather_pools
from .prepare import (
    MAX_DEVICES_PER_CLAIM,
    AllocationError,
    Alternative,
    Compiler,
    DistinctAttribute,
    PreparedClaim,
    Preparer,
)

DEFAULT_MAX_STEPS = 200_000
_NO_SET: frozenset[int] = frozenset()


class _MaxSize(Exception):
    """More than 32 devices would be needed for a claim on this path: backtrack further."""


class _Budget(Exception):
    pass


class _Search:
    def __init__(self, prep: Preparer, claims: list[PreparedClaim], allocated: AbstractSet[DeviceID],
                 max_steps: int, shared: SharedUsage = NO_SHARES) -> None:
        self.prep = prep
        self.claims = claims
        self.candidates = prep.pools.candidates
        self.pools = prep.pools.pools
        self.allocated = allocated
        self.features = prep.features
        self.max_steps = max_steps
        self.steps = 0
        self.allocating: dict[DeviceID, set[int]] = {}  # device -> claims it is being allocated for
        # per claim, the picks: (request, device, what a share consumes; None for a dedicated device)
        self.results: list[list[tuple[Alternative, Candidate, dict[str, Quantity] | None]]] = [[] for _ in claims]
        self.shared = shared
        self.consumable = self.features.consumable_capacity
        self.rescan = self.features.rescans_from_first_device
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}  # shares this attempt takes
        self.available: dict[int, dict[tuple[str, str], Fraction]] = {}  # pool -> counters left before this call
        self.consumed: dict[int, dict[tuple[str, str], Fraction]] = {}  # pool -> counters taken by this call
        self.counted: list[bool] = []  # per pick, in pick order: whether it reserved counters

    def one(self, c: int, r: int, s: int, d: int, in_sub: bool, start: int) -> bool:
        self.steps += 1
        if self.steps > self.max_steps:
            raise _Budget
        if c >= len(self.claims):
            return True
        claim = self.claims[c]
        if r >= len(claim.requests):
            try:
                return self.one(c + 1, 0, 0, 0, False, 0)
            except _MaxSize:
                return False
        alternatives = claim.requests[r]
        if not in_sub and alternatives[0].sub:
            all_exceeded = True
            for k in range(len(alternatives)):
                try:
                    ok = self.one(c, r, k, 0, True, 0)
                except _MaxSize:
                    continue
                all_exceeded = False
                if ok:
                    claim.selected[r] = k
                    return True
            if all_exceeded:
                raise _MaxSize
            return False
        alt = alternatives[s]
        if alt.all_devices is not None and not alt.all_devices:
            return False  # "All" with no matching device
        if d >= alt.count:
            return self.one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + alt.count - d > MAX_DEVICES_PER_CLAIM:
            raise _MaxSize
        if alt.all_devices is not None:
            candidate = self.candidates[alt.all_devices[d]]
            if not self.take(c, alt, candidate, must=True, d=d):
                return False  # every device is needed: one in use means no solution
            try:
                # Upstream continues an "All" request at subrequest 0, not s (allocator_experimental.go:983 drops
                # subRequestIndex): after the first device of an All subrequest s >= 1, the rest comes from
                # subrequest 0's data. A 1.34 and 1.35 bug (fixed in 0.36), reproduced because it decides what the
                # scheduler picks.
                done = self.one(c, r, s if self.features.subrequests_keyed_apart else 0, d + 1, in_sub, 0)
            except BaseException:
                self.release(c, alt, candidate)
                raise
            if not done:
                self.release(c, alt, candidate)
            return done
        candidates = self.candidates
        allocated = self.allocated
        allocating = self.allocating
        admin = alt.admin
        order = alt.order
        if order is not None:  # selectors already known to pass: only the selected devices, no errors possible
            indices: Iterable[int] = order[bisect_left(order, start):] if start else order
        else:
            indices = range(start, len(candidates))
        for i in indices:
            candidate = candidates[i]
            if order is None:
                pool = self.pools[candidate.pool_index]
                if pool.invalid is not None:
                    raise AllocationError(f"pool {pool.name} is invalid: {pool.invalid}")
            dev_id = candidate.id
            if admin:
                if c in allocating.get(dev_id, _NO_SET):
                    continue
            elif dev_id in allocated or allocating.get(dev_id):
                continue
            if order is None and not self.prep.selectable(alt, i):
                continue
            if self.consumable and not self._capacity_fits(c, alt, candidate):
                continue
            if not self.take(c, alt, candidate, must=False, d=d):
                continue
            # Where upstream rescans from the first device (0.34, 0.35), the next depth does too when the order of
            # picks can matter: a shared device may take a second share, and under 0.35's distinctAttribute (one
            # value per request, the last added) a device passed over here may fit after a later pick. Otherwise
            # every device before i was tried at this depth already and failed the same way in any order, and
            # rescanning would only try the permutations of what failed (an unsatisfiable search grows from
            # n-choose-k to n!/(n-k)!).
            after = 0 if self.rescan and (self._multi(candidate) or _order_bound(alt)) else i + 1
            try:
                done = self.one(c, r, s, d + 1, in_sub, after)
            except BaseException:
                self.release(c, alt, candidate)
                raise
            if done:
                return True
            self.release(c, alt, candidate)
        return False

    def _multi(self, candidate: Candidate) -> bool:
        return self.consumable and candidate.device.allow_multiple_allocations

    def _capacity_fits(self, c: int, alt: Alternative, candidate: Candidate, device: Device | None = None) -> bool:
        """CmpRequestOverCapacity against what shares of other claims hold and this attempt takes; 0.37 aborts on a
        request it cannot represent, earlier versions skip the device. ``device``: the one checked, when not the
        candidate (0.34's re-check, see take)."""
        device = device or candidate.device
        dev_id = candidate.id if device is candidate.device else DeviceID(candidate.id.driver, candidate.id.pool,
                                                                         device.name)  # fmt: skip
        held = self.shared.consumed.get(dev_id)
        allocating = self.allocating_capacity.get(dev_id)
        if not self.features.capacity_errors_abort:
            return fits(alt.capacity, device, held, allocating, False)
        try:
            return fits(alt.capacity, device, held, allocating, True)
        except CapacityError as err:
            raise AllocationError(f"claim {_ref(self.claims[c])}, request {alt.request.name}: checking capacity for "
                                  f"device {dev_id}: {err}") from err  # fmt: skip

    def _capacity_in_use(self, dev_id: DeviceID) -> bool:
        return dev_id in self.shared.consumed or dev_id in self.shared.devices or dev_id in self.allocating_capacity

    def take(self, c: int, alt: Alternative, candidate: Candidate, *, must: bool, d: int = 0) -> bool:
        """Check availability, counters, taints, constraints and capacity; on success record the device as picked.
        A device that allows multiple allocations is never marked in use: each pick takes a share of it."""
        dev_id = candidate.id
        multi = self._multi(candidate)
        users = self.allocating.get(dev_id)
        if alt.admin:
            if not multi and users and c in users:
                return False
        elif users or dev_id in self.allocated:
            return False
        counted = False
        if candidate.consumes:
            if not self.features.partitionable_devices:
                return False
            # a shared device already in use has its counters accounted for: a further share does not charge them
            if not (multi and self._capacity_in_use(dev_id)):
                if not self._reserve_counters(candidate):
                    return False
                counted = True
        if self.features.device_taints and _taint_blocks(candidate, alt.request.tolerations):
            if counted:
                self._release_counters(candidate)
            return False
        for added, constraint in enumerate(alt.constraints):
            if not constraint.add(candidate, alt.base):
                for undo in alt.constraints[:added]:
                    undo.remove(alt.base)
                if counted:
                    self._release_counters(candidate)
                if must:
                    raise AllocationError(
                        f"claim {_ref(self.claims[c])}, request {alt.request.name}: cannot add device "
                        f"{dev_id} because a claim constraint would not be satisfied"
                    )
                return False
        consumed: dict[str, Quantity] | None = None
        if self.consumable:
            recheck: Device | None = candidate.device
            if self.features.capacity_recheck_by_request_index:
                # 0.34 re-checks the slice's device at the request's device index (r.deviceIndex), not the
                # candidate (allocator_experimental.go:1286); past the slice's end upstream panics
                devices = candidate.slice.devices
                recheck = devices[d] if d < len(devices) else None
            if recheck is None or not self._capacity_fits(c, alt, candidate, recheck):
                for constraint in alt.constraints:
                    constraint.remove(alt.base)
                if counted:
                    self._release_counters(candidate)
                return False
            if multi:
                consumed = consumption(alt.capacity, candidate.device, self.features.capacity_errors_abort) or {}
                taking = self.allocating_capacity.setdefault(dev_id, {})
                for name, q in consumed.items():
                    taking[name] = taking.get(name, Fraction(0)) + q.value
        if not multi:
            self.allocating.setdefault(dev_id, set()).add(c)
        self.results[c].append((alt, candidate, consumed if multi else None))
        self.counted.append(counted)
        return True

    def release(self, c: int, alt: Alternative, candidate: Candidate) -> None:
        _, _, consumed = self.results[c].pop()
        counted = self.counted.pop()
        if consumed is not None:
            taking = self.allocating_capacity[candidate.id]
            for name, q in consumed.items():
                taking[name] -= q.value
            if all(v == 0 for v in taking.values()) and self._share_count(candidate.id) == 0:
                del self.allocating_capacity[candidate.id]
        else:
            self.allocating[candidate.id].discard(c)
        for constraint in alt.constraints:
            constraint.remove(alt.base)
        if counted:
            self._release_counters(candidate)

    def _share_count(self, dev_id: DeviceID) -> int:
        """Shares of ``dev_id`` still picked by this attempt (upstream keeps an emptied entry while one is)."""
        return sum(1 for picks in self.results for _, cand, consumed in picks
                   if consumed is not None and cand.id == dev_id)  # fmt: skip

    def _reserve_counters(self, candidate: Candidate) -> bool:
        index = candidate.pool_index
        available = self.available.get(index)
        if available is None:
            available = self.available[index] = self._pool_counters(index)
        consumed = self.consumed.setdefault(index, {})
        for set_name, name, amount in candidate.consumes:
            key = (set_name, name)
            consumed[key] = consumed.get(key, 0) + amount
        # as upstream: every counter of the pool must stay covered, not only the ones this device uses
        if any(value < consumed.get(key, 0) for key, value in available.items()):
            self._release_counters(candidate)
            return False
        return True

    def _release_counters(self, candidate: Candidate) -> None:
        consumed = self.consumed[candidate.pool_index]
        for set_name, name, amount in candidate.consumes:
            consumed[(set_name, name)] -= amount

    def _pool_counters(self, index: int) -> dict[tuple[str, str], Fraction]:
        """The pool's counters minus what devices allocated to other claims already consume."""
        pool = self.pools[index]
        left = {(set_name, name): value for set_name, values in pool.counters.items() for name, value in values.items()}
        start, end = self.prep.pools.pool_ranges[index]
        for candidate in self.candidates[start:end]:
            if candidate.id in self.allocated:
                for set_name, name, amount in candidate.consumes:
                    key = (set_name, name)
                    if key in left:
                        left[key] -= amount
        return left


def _ref(claim: PreparedClaim) -> str:
    c = claim.claim
    return f"{c.namespace}/{c.name}" if c.namespace else c.name


def _taint_blocks(candidate: Candidate, tolerations: Sequence[Mapping[str, Any]]) -> bool:
    for taint in candidate.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            _tolerates(t, taint) for t in tolerations
        ):
            return True
    return False


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """resourceclaim.ToleratesTaint: effect and key must match when set; Exists ignores the value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def _node_selector(picks: list[tuple[Alternative, Candidate, dict[str, Quantity] | None]],
                   node_name: str, features: Features) -> NodeSelector | None:  # fmt: skip
    """upstream createNodeSelector: a node-local device (or one that binds to its node) pins the node; else merge
    the slices' single terms."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for _, candidate, _ in picks:
        name, selector = device_node_binding(candidate)
        if name is not None or (candidate.device.binds_to_node and features.binding_code):
            pin = NodeSelectorRequirement(key="metadata.name", operator="In", values=(node_name,))
            return NodeSelector(terms=(NodeSelectorTerm(match_fields=(pin,)),))
        if selector is not None and len(selector.terms) == 1:
            term = selector.terms[0]
            fields.extend(req for req in term.match_fields if req not in fields)
            expressions.extend(req for req in term.match_expressions if req not in expressions)
    if not fields and not expressions:
        return None
    return NodeSelector(terms=(NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),))


def _default_compiler() -> tuple[Compiler, tuple[type[Exception], type[Exception]]]:
    from gpuclaim.dra import cel  # the CEL engine; imported here so the allocator's API does not depend on it

    def compile_stored(expression: str) -> cel.CompiledSelector:
        # the scheduler compiles stored expressions: what the apiserver once accepted must keep working
        return cel.compile_selector(expression, mode="stored")

    return compile_stored, (cel.CelCompileError, cel.CelRuntimeError)


def allocate_on(
    pools: NodePools,
    claims: Sequence[ResourceClaim],
    *,
    classes: Mapping[str, DeviceClass],
    allocated: AbstractSet[DeviceID] = frozenset(),
    features: Features = DEFAULT_FEATURES,
    max_steps: int = DEFAULT_MAX_STEPS,
    compiler: Compiler | None = None,
    compile_errors: tuple[type[Exception], type[Exception]] | None = None,
    shared: SharedUsage = NO_SHARES,
) -> AllocationOutcome:
    """Simulate kube-scheduler's allocator for ``claims`` (in pod order) on the node ``pools`` was gathered for.

    ``allocated``: devices other claims hold (see :func:`allocated_devices`). ``compiler``/``compile_errors``
    replace the CEL engine (a callable expression -> object with ``evaluate(device) -> bool``, and the
    (compile error, runtime error) exception types it raises); the default is ``dra.cel`` in stored mode.
    ``shared``: what shares of devices that allow multiple allocations other claims hold (see
    :func:`~gpuclaim.dra.allocator.capacity.shared_usage`; with ConsumableCapacity, pass
    ``allocated_devices(claims, shares_apart=True)`` as ``allocated``). A share this call picks gets a
    ``shareID`` derived from the node, the claim and the device (upstream draws a random UUID).
    """
    if pools.error is not None:
        return AllocationOutcome(status="error", error=pools.error)
    if compiler is None:
        compiler, default_errors = _default_compiler()
        compile_errors = compile_errors or default_errors
    prep = Preparer(pools=pools, classes=classes, features=features, compiler=compiler,
                    errors=compile_errors or (Exception, Exception), shared=shared)  # fmt: skip
    search: _Search | None = None
    try:
        prepared = prep.prepare(claims)
        search = _Search(prep, prepared, allocated, max_steps, shared)
        done = search.one(0, 0, 0, 0, False, 0)
    except AllocationError as err:
        return AllocationOutcome(status="error", error=str(err), steps=search.steps if search else 0,
                                 error_request=err.request)
    except _Budget:
        assert search is not None
        return AllocationOutcome(status="budget", error="search budget exhausted", steps=search.steps)
    except _MaxSize:
        done = False
    except RecursionError:  # one frame per picked device: only pods with hundreds of devices get here
        assert search is not None
        return AllocationOutcome(status="budget", error="search budget exhausted (recursion depth)", steps=search.steps)
    assert search is not None  # _MaxSize comes only from inside the search
    if not done and pools.invalid_skipped and pools.any_invalid:
        # upstream wraps ErrFailedAllocationOnNode, whose text is empty (allocator_incubating.go:286-289)
        return AllocationOutcome(status="error", error="invalid resource pools were encountered", steps=search.steps)
    if not done:
        return AllocationOutcome(status="unsatisfiable", steps=search.steps)
    tolerations, binding = features.results_carry_tolerations, features.results_carry_binding_conditions
    out = []
    for index, picks in enumerate(search.results):
        results = tuple(
            AllocatedDevice(request=alt.ref, driver=cand.id.driver, pool=cand.id.pool, device=cand.id.device,
                            admin_access=alt.admin,
                            share_id=None if consumed is None else _share_id(pools.node.name, claims[index], k, cand),
                            consumed_capacity=consumed or None,
                            tolerations=alt.request.tolerations if tolerations else (),
                            binding_conditions=cand.device.binding_conditions if binding else (),
                            binding_failure_conditions=cand.device.binding_failure_conditions if binding else ())
            for k, (alt, cand, consumed) in enumerate(picks)
        )  # fmt: skip
        out.append(ClaimAllocation(results=results, node_selector=_node_selector(picks, pools.node.name, features)))
    return AllocationOutcome(status="allocated", claims=tuple(out), steps=search.steps)


def allocate(
    node: NodeInfo,
    claims: Sequence[ResourceClaim],
    *,
    slices: Iterable[ResourceSlice],
    classes: Mapping[str, DeviceClass],
    allocated: AbstractSet[DeviceID] = frozenset(),
    features: Features = DEFAULT_FEATURES,
    max_steps: int = DEFAULT_MAX_STEPS,
    compiler: Compiler | None = None,
    compile_errors: tuple[type[Exception], type[Exception]] | None = None,
    shared: SharedUsage = NO_SHARES,
) -> AllocationOutcome:
    """:func:`allocate_on` from raw slices (every slice of the cluster; those the node cannot see are skipped)."""
    pools = gather_pools(node, slices, features=features)
    return allocate_on(pools, claims, classes=classes, allocated=allocated, features=features,
                       max_steps=max_steps, compiler=compiler, compile_errors=compile_errors,
                       shared=shared)  # fmt: skip


def _share_id(node: str, claim: ResourceClaim, index: int, candidate: Candidate) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuclaim:{node}/{claim.namespace}/{claim.name}/{index}/{candidate.id}"))


def allocated_devices(claims: Iterable[ResourceClaim], *, shares_apart: bool = False) -> set[DeviceID]:
    """Devices held by claims' ``status.allocation`` (adminAccess results excluded, as the scheduler does).
    ``shares_apart`` (a scheduler with ConsumableCapacity): results with a ``shareID`` are shares, not dedicated
    devices, and are left out too (pass them with :func:`~gpuclaim.dra.allocator.capacity.shared_usage`)."""
    out: set[DeviceID] = set()
    for claim in claims:
        for result in claim.status.results:
            if shares_apart and result.share_id is not None:
                continue
            if not result.admin_access:
                out.add(result.id)
    return out


def _order_bound(alt: Alternative) -> bool:
    """A constraint of ``alt`` whose verdict depends on the order of picks: 0.35's distinctAttribute."""
    return any(isinstance(c, DistinctAttribute) and c.keyed and not c.same_device for c in alt.constraints)
