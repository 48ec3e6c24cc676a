"""Compile and evaluate DRA device selectors: the API the validator, allocator and extender use.

``compile_selector(expr, mode=...)`` checks an expression as kube-apiserver (``"new"``) or
kube-scheduler (``"stored"``) does and returns a :class:`CompiledSelector`. ``mode`` is either an
:class:`~gpuclaim.dra.cel.environment.Environment` (a Kubernetes version's, from ``gpuclaim.dra.versions``) or
one of the two strings, which name 1.34's environments (the ones the CEL oracle pins); compiled selectors are
kept in a bounded LRU :class:`SelectorCache` (``DEFAULT_CACHE`` is the process-wide one, a cache and
nothing else). A compiled selector caches its results by the projection of a device on what it reads
(driver, the attributes and capacities it names, "absent" included), so identical GPUs cost one
evaluation.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

from gpuclaim.dra.cel import cost, parser, reads, validators
from gpuclaim.dra.cel import types as t
from gpuclaim.dra.cel.checker import check
from gpuclaim.dra.cel.environment import NEW_1_34, STORED_1_34, Environment
from gpuclaim.dra.cel.errors import CelCompileError, CelRuntimeError
from gpuclaim.dra.cel.operators import RuntimeDevice
from gpuclaim.dra.cel.runtime import BUDGET, compile_checked
from gpuclaim.dra.cel.values import Broken, DomainMap, Optional, type_name
from gpuclaim.dra.quantity import Quantity, parse_quantity
from gpuclaim.dra.semver import Semver

# An accepted selector can be ~250 levels deep (cel-go's parser limits) and a `!`/`-` chain of a 10 KiB
# expression ~5,000 levels: the checker, estimator and evaluator recurse once per level, a few frames each.
# Python 3.11's Python-to-Python calls use no C stack, so a higher limit is safe; it is only ever raised.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 40_000))

Mode = Literal["new", "stored"] | Environment
MAX_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
MAX_COST = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost, also the runtime limit
_RESULTS_PER_SELECTOR = 4096
_DEVICES_PER_CHAIN = 200_000
_CHAINS_PER_SELECTOR = 16
_ABSENT = ("<absent>",)


class Device(Protocol):
    """What a selector sees of a device; names are fully qualified (``gpu.nvidia.com/productName``).

    An unqualified name is read under the driver's domain, as upstream's ``parseQualifiedName`` does.
    """

    @property
    def driver(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, int | bool | str | Semver]: ...

    @property
    def capacity(self) -> Mapping[str, Quantity]: ...


@dataclass(frozen=True, slots=True)
class PlainDevice:
    """A minimal :class:`Device` (tests, the CLI without a slice)."""

    driver: str = ""
    attributes: Mapping[str, int | bool | str | Semver] = None  # type: ignore[assignment]
    capacity: Mapping[str, Quantity] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.attributes is None:
            object.__setattr__(self, "attributes", {})
        if self.capacity is None:
            object.__setattr__(self, "capacity", {})


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def runtime_device(device: Device) -> RuntimeDevice:
    attrs: DomainMap = DomainMap()
    for name, value in device.attributes.items():
        domain, ident = _split(name, device.driver)
        attrs.setdefault(domain, {})[ident] = value
    caps: DomainMap = DomainMap()
    for name, q in device.capacity.items():
        domain, ident = _split(name, device.driver)
        if q.amount is None or q.amount[1] < 0:
            # the scheduler receives capacities from the apiserver in canonical form and parses that
            q = _canonical_quantity(q)
        caps.setdefault(domain, {})[ident] = q
    rd = RuntimeDevice(device.driver, attrs, caps)
    # Only the StoredExpressions env (or DRAConsumableCapacity) declares the field; false unless set.
    rd.allowMultipleAllocations = bool(getattr(device, "allow_multiple_allocations", False))
    return rd


@lru_cache(maxsize=4096)
def _canonical_quantity(q: Quantity) -> Quantity:
    return parse_quantity(str(q))


class CompiledSelector:
    """A checked, compiled expression. ``reads`` is what it reads of a device (see :mod:`reads`)."""

    def __init__(self, expression: str, env: Environment, fn: Any, estimated_cost: int, track: bool,
                 reads_: frozenset[reads.Read], result_type: t.Type) -> None:
        self.expression = expression
        self.env = env
        self.mode = env.kind
        self.estimated_cost = estimated_cost
        self.reads = reads_
        self.result_type = result_type
        self._fn = fn
        self._track = track
        self._results: dict[Any, bool | CelRuntimeError] = {}
        self._chains: dict[tuple[CompiledSelector, ...], dict[int, tuple[Device, Outcome]]] = {}
        self._key = _projector(reads_)

    def value(self, device: Device | None) -> Any:
        """Evaluate to a plain value (any type), raising :class:`CelRuntimeError`."""
        env: dict[str, Any] = {"device": runtime_device(device or PlainDevice())}
        if self._track:
            env[BUDGET] = [MAX_COST]
        return self._fn(env)

    def evaluate(self, device: Device) -> bool:
        """Whether the device matches; raises :class:`CelRuntimeError` as the scheduler would fail."""
        result = self.outcome(device)
        if result is True or result is False:
            return result
        raise result

    def outcome(self, device: Device) -> bool | CelRuntimeError:
        """Like :meth:`evaluate` but returns the error instead of raising it (cached by projection)."""
        key = self._key(device)
        result = self._results.get(key)
        if result is None:
            result = self._evaluate_uncached(device)
            if len(self._results) >= _RESULTS_PER_SELECTOR:
                self._results.clear()
            self._results[key] = result
        return result

    def chain_cache(self, before: tuple[CompiledSelector, ...]) -> dict[int, tuple[Device, Outcome]]:
        """Outcomes of ``before + (self,)`` by device object, owned by the last selector of the chain.

        Devices are immutable; an entry keeps its device alive so that its ``id`` cannot be reused.
        """
        chain = self._chains.get(before)
        if chain is None or len(chain) >= _DEVICES_PER_CHAIN:
            if len(self._chains) >= _CHAINS_PER_SELECTOR:
                self._chains.clear()
            chain = self._chains[before] = {}
        return chain

    def _evaluate_uncached(self, device: Device) -> bool | CelRuntimeError:
        try:
            v = self.value(device)
        except CelRuntimeError as err:
            return err
        except RecursionError:
            return CelRuntimeError("max recursion depth exceeded")
        except (OverflowError, ValueError, ZeroDivisionError) as exc:
            # never a crash (a 500 in the webhook): a Python limit the CEL runtime did not foresee
            return CelRuntimeError(f"evaluation error: {type(exc).__name__}: {exc}")
        if type(v) is bool:
            return v
        outer, reason = type_name(v), None
        while type(v) is Optional:  # Optional.ConvertToNative converts its value
            if not v.present:
                reason = "optional.none() dereference"
                break
            v = v.value
        if type(v) is bool:
            return v
        if type(v) is Broken:
            return v.error
        tn = type_name(v)
        reason = reason or _NOT_BOOL.get(tn, f"type conversion error from '{tn}' to 'bool'")
        # k8s.io/dynamic-resource-allocation cel/compile.go: the result's ConvertToNative(bool) error, wrapped
        return CelRuntimeError(f"CEL result of type {outer} could not be converted to bool: {reason}")


# each cel-go type's ConvertToNative(reflect.TypeOf(true)) error (common/types/*.go; apiserver pkg/cel)
_NOT_BOOL = {
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "double": "type conversion error from Double to 'bool'",
    "string": "unsupported native conversion from string to 'bool'",
    "bytes": "type conversion error from Bytes to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "type conversion error from map to 'bool'",
    "type": "type conversion not supported for 'type'",
    "google.protobuf.Duration": "type conversion error from 'Duration' to 'bool'",
    "google.protobuf.Timestamp": "type conversion error from 'Timestamp' to 'bool'",
    "kubernetes.Quantity": "type conversion error from 'Quantity' to 'bool'",
    "kubernetes.Semver": "type conversion error from 'Semver' to 'bool'",
}


def _tagged(v: object) -> tuple[type, object]:
    return (type(v), v)  # True and 1 hash alike; the type keeps them apart


def _projector(rs: frozenset[reads.Read]) -> Any:
    """A function device -> hashable key of exactly what the selector reads ("absent" included).

    Generated as straight-line code: it runs once per device and selector on a first pass.
    Values carry their type where equality would mix them up (``True == 1`` in Python).
    """
    items = sorted(rs, key=lambda r: (r.kind, r.domain or "", r.name or ""))  # None (a whole domain) sorts first
    if any(r.domain is None and r.kind in ("attribute", "capacity") for r in items):
        return _everything
    lines = ["def key(device):", "    d = device.driver", "    a = device.attributes", "    c = device.capacity"]
    parts = ["d"] if any(r.kind == "driver" for r in items) else []
    if any(r.kind == "allowMultipleAllocations" for r in items):
        parts.append("bool(getattr(device, 'allow_multiple_allocations', False))")
    consts: dict[str, Any] = {"_A": _ABSENT, "_Q": Quantity, "_domain_items": _domain_items}
    for n, r in enumerate(items):
        src = "a" if r.kind == "attribute" else "c"
        if r.name is not None:
            consts[f"k{n}"], consts[f"n{n}"], consts[f"m{n}"] = f"{r.domain}/{r.name}", r.name, r.domain
            lines += [
                f"    v{n} = {src}.get(k{n}, _A)",
                f"    if v{n} is _A and d == m{n}:",
                f"        v{n} = {src}.get(n{n}, _A)",
            ]
            if r.kind == "capacity":
                # A Quantity hashes through Fraction.__hash__ (a modular inverse, ~1.6 us); its reduced
                # ratio is equal exactly when the values are, and hashes as two ints.
                lines.append(f"    q{n} = v{n}.value.as_integer_ratio() if v{n}.__class__ is _Q else v{n}")
                parts += [f"q{n}", f"v{n}.__class__"]
            else:
                parts += [f"v{n}", f"v{n}.__class__"]
            if "d" not in parts:
                parts.insert(0, "d")  # the driver decides what an unqualified name means
        elif r.domain is not None:
            consts[f"m{n}"] = r.domain
            parts.append(f"_domain_items({src}, d, m{n})")
    lines.append(f"    return ({', '.join(parts)},)" if parts else "    return ()")
    namespace: dict[str, Any] = dict(consts)
    exec("\n".join(lines), namespace)
    return namespace["key"]


def projection(selectors: Iterable[CompiledSelector]) -> Any:
    """A function device -> hashable key of what any of ``selectors`` reads: two devices with equal keys get
    the same outcome from every one of them (and so from the chain), whatever else they carry."""
    union: frozenset[reads.Read] = frozenset().union(*(s.reads for s in selectors))
    if any(r.domain is None and r.kind in ("attribute", "capacity") for r in union):
        return _everything
    return _projector(union)


def _domain_items(source: Mapping[str, Any], driver: str, domain: str) -> tuple[Any, ...]:
    return tuple(sorted((k, _tagged(v)) for k, v in source.items() if _split(k, driver)[0] == domain))


def _everything(device: Device) -> tuple[Any, ...]:
    return (
        device.driver,
        bool(getattr(device, "allow_multiple_allocations", False)),
        tuple(sorted((k, _tagged(v)) for k, v in device.attributes.items())),
        tuple(sorted((k, _tagged(v)) for k, v in device.capacity.items())),
    )


def environment(mode: Mode) -> Environment:
    """The environment ``mode`` names ("new" / "stored": 1.34's)."""
    if isinstance(mode, Environment):
        return mode
    return STORED_1_34 if mode == "stored" else NEW_1_34


def compile_uncached(expression: str, *, mode: Mode = "new", any_result: bool = False) -> CompiledSelector:
    """Compile without a cache. ``any_result`` lifts the bool-result rule (for ``gpuclaim cel``)."""
    env = environment(mode)
    if len(expression.encode("utf-8")) > MAX_LENGTH:
        raise CelCompileError(f"Too long: may not be more than {MAX_LENGTH} bytes", kind="too_long")
    checked = check(expression, parser.parse(expression), env=env)
    validators.validate(expression, checked)  # cel-go's AST validators and constant folding
    out = checked.type_of(checked.expr)
    if not any_result and out not in (t.BOOL, t.ANY):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {out}")
    estimated = cost.estimate(checked).hi
    if env.kind == "new" and estimated > MAX_COST:
        hint = None
        if "!=" in expression:
            hint = "'!=' on quantities is estimated at the maximum cost; write !(a == b) or a.compareTo(b) != 0"
        raise CelCompileError("too complex, exceeds cost limit", kind="too_complex", cost=estimated, hint=hint)
    fn = compile_checked(checked, track_cost=estimated > MAX_COST, cel_go=env.cel_go)
    return CompiledSelector(expression, env, fn, estimated, estimated > MAX_COST, reads.analyse(checked.expr), out)


class SelectorCache:
    """A bounded LRU of compiled selectors (and of compile errors), keyed by (expression, environment)."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[tuple[str, Environment], CompiledSelector | CelCompileError] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def compile(self, expression: str, *, mode: Mode = "new") -> CompiledSelector:
        env = environment(mode)
        key = (expression, env)
        entry = self._entries.get(key)
        if entry is None:
            try:
                entry = compile_uncached(expression, mode=env)
            except CelCompileError as err:
                entry = err
            self._entries[key] = entry
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        if isinstance(entry, CelCompileError):
            raise entry
        return entry


#: The process-wide compile cache (only a cache: dropping it changes nothing but speed).
DEFAULT_CACHE = SelectorCache(maxsize=256)


def compile_selector(expression: str, *, mode: Mode = "new", cache: SelectorCache | None = None) -> CompiledSelector:
    return (cache or DEFAULT_CACHE).compile(expression, mode=mode)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One device against an ordered list of selectors (class selectors first, then the request's)."""

    matched: bool
    error: str | None = None
    selector_index: int | None = None  # the selector that said false or failed


def match_devices(selectors: Sequence[CompiledSelector], devices: Iterable[Device]) -> list[Outcome]:
    """Evaluate in order, stopping at the first false or error, as the allocator does.

    Outcomes are cached per device object for this exact chain of selectors (the next scheduling
    cycle sees the same immutable devices), and each selector caches by device projection.
    """
    devs = devices if isinstance(devices, list) else list(devices)
    if not selectors:
        return [_YES] * len(devs)
    no = [Outcome(False, None, i) for i in range(len(selectors))]
    checks = [(i, sel.outcome) for i, sel in enumerate(selectors)]
    chain = selectors[-1].chain_cache(tuple(selectors[:-1]))
    # The repeat pass is a few C-level sweeps; only misses run Python per device.
    hits = list(map(chain.get, map(id, devs)))
    out: list[Outcome | None] = [h[1] if h is not None and h[0] is d else None for h, d in zip(hits, devs, strict=True)]
    for n in [n for n, o in enumerate(out) if o is None]:
        device = devs[n]
        outcome = _YES
        for i, check_one in checks:
            result = check_one(device)
            if result is True:
                continue
            outcome = no[i] if result is False else Outcome(False, result.message, i)
            break
        chain[id(device)] = (device, outcome)
        out[n] = outcome
    return out  # type: ignore[return-value]


def evaluate_expression(expression: str, device: Device | None = None, *, mode: Mode = "stored") -> Any:
    """Compile (any result type) and evaluate once; raises CelCompileError / CelRuntimeError."""
    return compile_uncached(expression, mode=mode, any_result=True).value(device)


_YES = Outcome(True)
