"""Checks every claim and request before the search, as upstream's ``Allocate`` does, and builds what the
search needs per request: the class, the device count, the candidates of an ``All`` request, the constraints
that apply, and lazily compiled selectors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuclaim.dra.api import DeviceClass, ExactRequest, ResourceClaim, Selector
from gpuclaim.dra.quantity import Quantity

from .capacity import NO_SHARES, CapacityError, QuantityError, SharedUsage, fits, parse_requests
from .model import Features
from .pools import MATCH_CACHE_KEYS, Candidate, NodePools

MAX_DEVICES_PER_CLAIM = 32  # resourceapi.AllocationResultsMaxSize


class AllocationError(Exception):
    """The allocation attempt fails (upstream returns an error, not "does not fit"). The message is upstream's;
    `request` names the request it is about when upstream's wording does not (a selector's CEL error)."""

    def __init__(self, message: str, *, request: str | None = None) -> None:
        super().__init__(message)
        self.request = request


class Evaluator(Protocol):
    def evaluate(self, device: Any) -> bool: ...


Compiler = Callable[[str], Evaluator]


def claim_ref(claim: ResourceClaim) -> str:
    """klog.KObj: ``namespace/name``, or the bare name without a namespace."""
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


class MatchAttribute:
    """All devices of the requests it covers carry the attribute with the same typed value."""

    __slots__ = ("count", "kind", "name", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.value: Any = None
        self.kind: type | None = None

    def add(self, candidate: Candidate, base: str = "") -> bool:
        value = candidate.device.attributes.get(self.name)
        if value is None:
            return False
        if self.count == 0:
            self.value, self.kind = value, type(value)
        elif type(value) is not self.kind or (value != self.value if self.kind is not _SEMVER else
                                              str(value) != str(self.value)):
            return False  # a version compares as its exact string, as upstream does
        self.count += 1
        return True

    def remove(self, base: str = "") -> None:
        self.count -= 1


class DistinctAttribute:
    """distinctAttribute: every device of the requests it covers carries the attribute, each with a value no
    other of them has (values of different types never clash; versions compare as their exact strings).

    As each library version does it (``constraint.go``): 0.37 keeps every added value. 0.35 and 0.36 keep one
    value per request (the request's last device: a third device of one request is compared with the second only),
    and removing a device forgets its request's value. 0.34 does the same but compares attribute pointers, so only
    the same device twice (a shared device) clashes."""

    __slots__ = ("count", "keyed", "name", "same_device", "values")

    def __init__(self, name: str, minor: int) -> None:
        self.name = name
        self.keyed = minor <= 36
        self.same_device = minor == 34
        self.values: list[tuple[str, Any]] = []  # (request, value or device id)
        self.count = 0

    def add(self, candidate: Candidate, base: str = "") -> bool:
        value = candidate.device.attributes.get(self.name)
        if value is None:
            return False
        key: Any = candidate.id if self.same_device else (type(value), str(value) if type(value) is _SEMVER else value)
        if not self.keyed:
            if any(v == key for _, v in self.values):
                return False
            self.values.append((base, key))
            return True
        if self.count and any(v == key for _, v in self.values):
            return False
        self.values = [(r, v) for r, v in self.values if r != base] + [(base, key)]
        self.count += 1
        return True

    def remove(self, base: str = "") -> None:
        if not self.keyed:
            self.values.pop()
            return
        self.values = [(r, v) for r, v in self.values if r != base]
        self.count -= 1


def _semver_type() -> type:
    from gpuclaim.dra.semver import Semver

    return Semver


_SEMVER = _semver_type()


@dataclass(slots=True, eq=False)
class Alternative:
    """One request with ``exactly``, or one subrequest of a ``firstAvailable`` request."""

    claim_index: int
    request: ExactRequest
    base: str  # the request's name
    sub: str  # the subrequest's name, "" for `exactly`
    ref: str  # how results name it
    klass: DeviceClass
    count: int
    all_devices: list[int] | None  # candidate indices for allocationMode All
    constraints: tuple[MatchAttribute | DistinctAttribute, ...] = ()
    admin: bool = False
    capacity: dict[str, Quantity] | None = None  # capacity.requests (DRAConsumableCapacity)
    order: tuple[int, ...] | None = None  # selected candidates (see Preparer.order); None: evaluate lazily
    class_outcomes: list[Any] | None = None  # per candidate, shared through NodePools.match_cache
    request_outcomes: list[Any] | None = None
    class_compiled: list[Evaluator | None] = field(default_factory=list)
    request_compiled: list[Evaluator | None] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class PreparedClaim:
    claim: ResourceClaim
    requests: list[list[Alternative]]  # per request: [exact] or its subrequests
    selected: list[int]  # per request: which alternative the solution used


class Preparer:
    """Holds what selector evaluation needs: the compiler and the CEL error types."""

    def __init__(self, *, pools: NodePools, classes: Mapping[str, DeviceClass], features: Features,
                 compiler: Compiler, errors: tuple[type[Exception], type[Exception]],
                 shared: SharedUsage = NO_SHARES) -> None:
        self.pools = pools
        self.shared = shared
        self.classes = classes
        self.features = features
        self.compiler = compiler
        self.compile_error, self.runtime_error = errors
        self.claims: Sequence[ResourceClaim] = ()
        # upstream's deviceMatchesRequest while it validates requests: per (claim, request, subrequest) key,
        # device -> selectable. Kept only to reproduce which key upstream files an answer under (see
        # _alternative); outcomes themselves are cached by expression in NodePools.
        self.memo: dict[tuple[int, int, int], dict[int, bool]] = {}

    def prepare(self, claims: Sequence[ResourceClaim]) -> list[PreparedClaim]:
        self.claims = claims
        out = []
        for index, claim in enumerate(claims):
            ref = claim_ref(claim)
            spec = claim.spec
            requests: list[list[Alternative]] = []
            minimum = 0
            for r, request in enumerate(spec.requests):
                subs = request.first_available
                if subs and not self.features.prioritized_list:
                    raise AllocationError(
                        f"claim {ref}, request {request.name}: has subrequests, but the DRAPrioritizedList "
                        "feature is disabled"
                    )
                for exact in request.alternatives:
                    if exact.capacity is not None and not self.features.consumable_capacity and \
                            self.features.capacity_code:
                        # 0.34 names the request, 0.35+ the subrequest (allocator_incubating.go:222-233)
                        sub = subs and self.features.minor >= 35
                        what = f"subrequest {exact.name}" if sub else f"request {request.name}"
                        raise AllocationError(
                            f"claim {ref}, {what}: has capacity requests, but the DRAConsumableCapacity feature "
                            "is disabled"
                        )
                alternatives = [self._alternative(index, ref, request.name, exact, bool(subs), (index, r, k))
                                for k, exact in enumerate(request.alternatives)]  # fmt: skip
                requests.append(alternatives)
                least = min((a.count for a in alternatives), default=0)
                if self.features.claim_limit_per_request and least > MAX_DEVICES_PER_CLAIM - minimum:
                    raise AllocationError(
                        f"claim {ref}, request {request.name}: adding {least} devices exceeds the claim limit of "
                        f"{MAX_DEVICES_PER_CLAIM}, with {minimum} already accounted for"
                    )
                minimum += least
            if minimum > MAX_DEVICES_PER_CLAIM:
                raise AllocationError(
                    f"claim {ref}: number of requested devices {minimum} exceeds the claim limit of "
                    f"{MAX_DEVICES_PER_CLAIM}"
                )
            constraints: list[tuple[frozenset[str], MatchAttribute | DistinctAttribute]] = []
            for i, constraint in enumerate(spec.constraints):
                if constraint.match_attribute:
                    constraints.append((frozenset(constraint.requests), MatchAttribute(constraint.match_attribute)))
                elif constraint.distinct_attribute and self.features.capacity_code:
                    constraints.append((frozenset(constraint.requests),
                                        DistinctAttribute(constraint.distinct_attribute, self.features.minor)))
                else:
                    raise AllocationError(
                        f"claim {ref}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
            for alternatives in requests:
                for alt in alternatives:
                    alt.constraints = tuple(
                        c for names, c in constraints if not names or alt.base in names or alt.ref in names
                    )
            out.append(PreparedClaim(claim=claim, requests=requests, selected=[0] * len(requests)))
        self.memo.clear()  # upstream starts the search with a fresh one (allocator_experimental.go:321)
        return out

    def _alternative(self, index: int, ref: str, base: str, exact: ExactRequest, is_sub: bool,
                     key: tuple[int, int, int]) -> Alternative:
        name = exact.name
        for i, selector in enumerate(exact.selectors):
            if not selector.expression:
                raise AllocationError(
                    f"claim {ref}, request {name}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if exact.admin_access and not self.features.admin_access:
            raise AllocationError(
                f"claim {ref}, request {name}: admin access is requested, but the feature is disabled"
            )
        if not exact.device_class_name:
            raise AllocationError(f"claim {ref}, request {name}: missing device class name (unsupported request type?)")
        klass = self.classes.get(exact.device_class_name)
        if klass is None:
            raise AllocationError(
                f"claim {ref}, request {name}: could not retrieve device class {exact.device_class_name}: "
                f'deviceclass.resource.k8s.io "{exact.device_class_name}" not found'
            )
        alt = Alternative(
            claim_index=index, request=exact, base=base, sub=name if is_sub else "", ref=exact.ref, klass=klass,
            count=exact.count, all_devices=None, admin=exact.admin_access,
            class_compiled=[None] * len(klass.selectors), request_compiled=[None] * len(exact.selectors),
        )  # fmt: skip
        if exact.capacity is not None and self.features.consumable_capacity:
            try:
                alt.capacity = parse_requests(exact.capacity)
            except QuantityError as err:
                raise AllocationError(f"claim {ref}, request {name}: capacity.requests: {err}") from err
        if exact.allocation_mode == "ExactCount":
            if self.pools.invalid_skipped or not self.pools.any_invalid:
                alt.order = self.order(alt)
            return alt
        if exact.allocation_mode != "All":
            raise AllocationError(f"claim {ref}, request {name}: unsupported count mode {exact.allocation_mode}")
        chosen: list[int] = []
        # Upstream's Allocate (allocator_experimental.go:230-236) sets requestKey.subRequestIndex only after
        # validating subrequest i, so subrequest i >= 1 reads and files its device matches under subrequest
        # i - 1's key: an "All" subrequest reuses the answers an "All" predecessor gave (its own selectors are not
        # run on those devices: it gets the predecessor's devices, and a runtime error its selectors would raise
        # never happens). The memo is reset before the search, so only "All" subrequests are affected.
        # Reproduced, because it is what a 1.34 or 1.35 scheduler picks; fixed in 0.36.
        prep_key = (key[0], key[1], max(key[2] - 1, 0)) if is_sub and not self.features.subrequests_keyed_apart else key
        for pool, (start, end) in zip(self.pools.pools, self.pools.pool_ranges, strict=True):
            if pool.incomplete:
                raise AllocationError(
                    f"claim {ref}, request {name}: asks for all devices, but resource pool {pool.id} is currently "
                    "being updated"
                )
            if pool.invalid is not None:
                raise AllocationError(
                    f"claim {ref}, request {name}: asks for all devices, but resource pool {pool.id} is currently "
                    "invalid"
                )
            for i in range(start, end):
                if self.keyed(alt, i, prep_key) and (not self.features.consumable_capacity or
                                                     self._static_fit(ref, alt, i)):  # fmt: skip
                    chosen.append(i)
        alt.all_devices = chosen
        alt.count = len(chosen)
        return alt

    def _static_fit(self, ref: str, alt: Alternative, index: int) -> bool:
        """Whether an "All" request's device has the capacity: 0.37 against its capacities alone (what is free is
        checked as it is taken, so a device short of it makes "All" fail), an error aborting; before, against what
        shares of other claims hold, an error skipping the device."""
        candidate = self.pools.candidates[index]
        if self.features.capacity_errors_abort:
            try:
                return fits(alt.capacity, candidate.device, None, None, True)
            except CapacityError as err:
                raise AllocationError(f"claim {ref}, request {alt.request.name}: checking capacity for device "
                                      f"{candidate.device.name}: {err}") from err  # fmt: skip
        return fits(alt.capacity, candidate.device, self.shared.consumed.get(candidate.id), None, False)

    def selectable(self, alt: Alternative, index: int) -> bool:
        """Class selectors, then request selectors, stopping at the first false; a runtime error aborts. A device
        with binding conditions the features do not allow is skipped before any selector runs (isSelectable)."""
        if self.pools.candidates[index].blocked:
            return False
        if alt.class_outcomes is None:
            alt.class_outcomes = self._outcomes(alt.klass.selectors)
            alt.request_outcomes = self._outcomes(alt.request.selectors) if alt.request.selectors else None
        candidate = self.pools.candidates[index]
        outcome = alt.class_outcomes[index]
        if outcome is None:
            outcome = alt.class_outcomes[index] = self._evaluate(alt.klass.selectors, alt.class_compiled, candidate)
        if outcome is not True:
            if outcome is False:
                return False
            raise self._failure(alt, outcome, True)
        if alt.request_outcomes is not None:
            outcome = alt.request_outcomes[index]
            if outcome is None:
                outcome = alt.request_outcomes[index] = self._evaluate(
                    alt.request.selectors, alt.request_compiled, candidate
                )
            if outcome is not True:
                if outcome is False:
                    return False
                raise self._failure(alt, outcome, False)
        return candidate.on_node

    def keyed(self, alt: Alternative, index: int, key: tuple[int, int, int]) -> bool:
        """``selectable`` through upstream's per-key memo (isSelectable): an answer already filed under ``key``
        wins, whichever alternative filed it; errors are not filed."""
        if self.pools.candidates[index].blocked:
            return False
        memo = self.memo.setdefault(key, {})
        answer = memo.get(index)
        if answer is None:
            answer = memo[index] = self.selectable(alt, index)
        return answer

    def order(self, alt: Alternative) -> tuple[int, ...] | None:
        """The candidates ``alt`` selects, in search order, when no selector fails on any device of the node."""
        key = (tuple(s.expression for s in alt.klass.selectors), tuple(s.expression for s in alt.request.selectors))
        cache = self.pools.order_cache
        if key in cache:
            return cache[key]
        chosen: list[int] | None = []
        for i in range(len(self.pools.candidates)):
            try:
                if self.selectable(alt, i):
                    chosen.append(i)  # type: ignore[union-attr]
            except AllocationError:
                chosen = None
                break
        if len(cache) >= MATCH_CACHE_KEYS:
            cache.clear()
        result = cache[key] = tuple(chosen) if chosen is not None else None
        return result

    def _outcomes(self, selectors: Sequence[Selector]) -> list[Any]:
        cache = self.pools.match_cache
        key = tuple(s.expression for s in selectors)
        outcomes = cache.get(key)
        if outcomes is None:
            if len(cache) >= MATCH_CACHE_KEYS:
                cache.clear()
            outcomes = cache[key] = [None] * len(self.pools.candidates)
        return outcomes

    def _evaluate(self, selectors: Sequence[Selector], compiled: list[Evaluator | None],
                  candidate: Candidate) -> bool | tuple[str, int, str, Any]:  # fmt: skip
        """True, False, or why the selector failed: ("compile" | "runtime", selector index, message, device id)."""
        for i, selector in enumerate(selectors):
            evaluator = compiled[i]
            if evaluator is None:
                try:
                    evaluator = self.compiler(selector.expression)
                except self.compile_error as err:
                    return ("compile", i, _message(err), None)
                compiled[i] = evaluator
            try:
                if not evaluator.evaluate(candidate.device):
                    return False
            except self.runtime_error as err:
                return ("runtime", i, _message(err), candidate.id)
        return True

    def _failure(self, alt: Alternative, why: tuple[str, int, str, Any], is_class: bool) -> AllocationError:
        where = f"class {alt.klass.name}" if is_class else f"claim {claim_ref(self.claims[alt.claim_index])}"
        kind, index, message, device = why
        if kind == "runtime" and self.features.device_in_cel_errors:
            if "no such key:" in message:  # cel.EnhanceRuntimeError (D37/cel/errors.go:40-55)
                message += (". consider using CEL optional chaining (.? followed by orValue()) or guarding the "
                            "check with has() for optional fields")
            return AllocationError(f"{where}: selector #{index} on device {device}: CEL runtime error: {message}",
                                   request=alt.ref)
        if kind == "runtime":
            message = f"{message} (device {device})"
        return AllocationError(f"{where}: selector #{index}: CEL {kind} error: {message}", request=alt.ref)


def _message(err: Exception) -> str:
    return str(getattr(err, "message", err))
