"""Worst-case cost estimation, following cel-go's ``checker/cost.go`` with Kubernetes' estimator.

The apiserver refuses a selector whose estimated maximum cost exceeds 1,000,000. This is a port of
the parts that DRA selectors reach: cel-go's per-node rules, ``k8s.io/apiserver/pkg/cel/library``'s
``CostEstimator`` (quantity/semver/strings/lists/regex/IP/URL functions, O(1) equality of quantities
and versions - but not inequality, which falls back to cel-go's size-based rule and is why
``q != quantity('80Gi')`` costs 1844674407370955269), ext.Lists / ext.Sets estimators, and the DRA
size estimator (driver <= 63 characters, <= 32 domains and ids, attribute values <= 64 characters).

Where this port is conservative (estimates at least what cel-go does): a function with several
matching overloads takes the union of their ranges as cel-go does, but our ``_?._`` / ``optional``
calls and IP/URL helpers use cel-go's default cost of 1 which is also upstream's. Unported
estimators (two-variable comprehensions are not parsed at all) cannot be reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuclaim.dra.cel import ast
from gpuclaim.dra.cel import types as t
from gpuclaim.dra.cel.checker import Checked

U64 = 2**64 - 1
_TWO64 = math.ldexp(1.0, 64)
_STR = 0.1  # common.StringTraversalCostFactor
_REGEX = 0.25  # common.RegexStringLengthCostFactor
_LIST_BASE, _MAP_BASE = 10, 30


def _add(x: int, y: int) -> int:
    return min(x + y, U64)


def _mul(x: int, y: int) -> int:
    return min(x * y, U64)


def _factor(x: int, f: float) -> int:
    xf = float(x)
    if xf > 0 and f > 0 and xf > float(U64) / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= _TWO64 else int(c)


@dataclass(frozen=True, slots=True)
class R:
    """A [min, max] range: used for both sizes and costs."""

    lo: int
    hi: int

    def __add__(self, o: R) -> R:
        return R(_add(self.lo, o.lo), _add(self.hi, o.hi))

    def __mul__(self, o: R) -> R:
        return R(_mul(self.lo, o.lo), _mul(self.hi, o.hi))

    def f(self, factor: float) -> R:
        return R(_factor(self.lo, factor), _factor(self.hi, factor))

    def union(self, o: R) -> R:
        return R(min(self.lo, o.lo), max(self.hi, o.hi))


ZERO, ONE, UNKNOWN = R(0, 0), R(1, 1), R(0, U64)
_SCALARS = {"bool", "double", "int", "uint", "google.protobuf.Duration", "google.protobuf.Timestamp"}


def _scalar(ty: t.Type) -> bool:
    """cel-go checker/cost.go isScalar: size 1; an optional is as scalar as its value, at any depth."""
    while ty.name == "optional_type" and ty.params:
        ty = ty.params[0]
    return ty.name in _SCALARS


# The DRA size tree: (max elements, key node, element node, fields).
@dataclass(frozen=True, slots=True)
class _Node:
    max: int
    key: _Node | None = None
    elem: _Node | None = None
    fields: tuple[tuple[str, _Node], ...] = ()


_ATTR_VALUE = _Node(64)
_DOMAIN, _ID = _Node(63), _Node(32)
_DEVICE = _Node(0, fields=(
    ("driver", _Node(63)),
    ("allowMultipleAllocations", _Node(1)),
    ("attributes", _Node(32, _DOMAIN, _Node(32, _ID, _ATTR_VALUE))),
    ("capacity", _Node(32, _DOMAIN, _Node(32, _ID, _Node(0)))),
))


def _dra_size(path: list[str] | None) -> R | None:
    if not path or path[0] != "device":
        return None
    node = _DEVICE
    for name in path[1:]:
        if name in ("@items", "@values"):
            nxt = node.elem
        elif name == "@keys":
            nxt = node.key
        else:
            nxt = dict(node.fields).get(name)
            if nxt is None and node.elem is _ATTR_VALUE:
                nxt = _ATTR_VALUE
        if nxt is None:
            return None
        node = nxt
    return R(0, node.max)


@dataclass(slots=True)
class _Var:
    path: list[str] | None
    size: R | None
    entry: tuple[str, R, R] | None  # (container kind, key size, value size)


def estimate(checked: Checked) -> R:
    return _Coster(checked).cost(checked.expr)


class _Coster:
    def __init__(self, checked: Checked) -> None:
        self.c = checked
        self.paths: dict[int, list[str] | None] = {}
        self.sizes: dict[int, R] = {}
        self.entries: dict[int, tuple[str, R, R]] = {}
        self.locals: dict[str, list[_Var]] = {}

    # -- bookkeeping --------------------------------------------------------------------------------
    def type(self, e: ast.Expr) -> t.Type:
        return self.c.types.get(e.id, t.DYN)

    def path(self, e: ast.Expr) -> list[str] | None:
        if isinstance(e, ast.Ident) and self.locals.get(e.name):
            return self.locals[e.name][-1].path
        return self.paths.get(e.id)

    def size(self, e: ast.Expr) -> R | None:
        if e.id in self.sizes:
            return self.sizes[e.id]
        if isinstance(e, ast.Const):
            if e.kind == "string":
                return R(len(e.value), len(e.value))  # type: ignore[arg-type]
            if e.kind == "bytes":
                return R(len(e.value), len(e.value))  # type: ignore[arg-type]
            return ONE
        if isinstance(e, ast.ListExpr):
            return R(len(e.elements), len(e.elements))
        if isinstance(e, ast.MapExpr):
            return R(len(e.entries), len(e.entries))
        path = self.path(e)
        if path and path[0] in (ast.ACCU, "@__result__"):
            path = None
        dra = _dra_size(path)
        if dra is not None:
            self.sizes[e.id] = dra
            return dra
        ty = self.type(e)
        if _scalar(ty):
            return ONE
        if isinstance(e, ast.Ident) and self.locals.get(e.name):
            return self.locals[e.name][-1].size
        return None

    def size_or_unknown(self, e: ast.Expr) -> R:
        return self.size(e) or UNKNOWN

    def entry(self, e: ast.Expr) -> tuple[str, R, R] | None:
        if e.id in self.entries:
            return self.entries[e.id]
        if isinstance(e, ast.Ident) and self.locals.get(e.name):
            return self.locals[e.name][-1].entry
        return None

    def push(self, name: str, var: _Var) -> None:
        self.locals.setdefault(name, []).append(var)

    def pop(self, name: str) -> None:
        self.locals[name].pop()

    # -- nodes --------------------------------------------------------------------------------------
    def cost(self, e: ast.Expr) -> R:
        match e:
            case ast.Const():
                return ZERO
            case ast.Ident():
                var = self.locals.get(e.name)
                self.paths[e.id] = var[-1].path if var else [e.name]
                return ONE
            case ast.Select():
                if e.test_only:
                    return self.cost(e.operand)  # Kubernetes sets PresenceTestHasCost(false)
                total = self.cost(e.operand)
                if self.type(e.operand).name in ("map", "kubernetes.DRADevice") or self.type(e.operand).is_param:
                    total = total + ONE
                base = self.path(e.operand)
                self.paths[e.id] = (base or []) + [e.field] if base is not None else None
                return total
            case ast.ListExpr():
                total, item = ZERO, R(U64, 0) if e.elements else ZERO
                for x in e.elements:
                    total = total + self.cost(x)
                    item = item.union(self.size_or_unknown(x))
                self.entries[e.id] = ("list", ONE, item)
                return total + R(_LIST_BASE, _LIST_BASE)
            case ast.MapExpr():
                total = ZERO
                ks, vs = (R(U64, 0), R(U64, 0)) if e.entries else (ZERO, ZERO)
                for k, v in e.entries:
                    total = total + self.cost(k) + self.cost(v)
                    ks, vs = ks.union(self.size_or_unknown(k)), vs.union(self.size_or_unknown(v))
                self.entries[e.id] = ("map", ks, vs)
                return total + R(_MAP_BASE, _MAP_BASE)
            case ast.Comprehension():
                return self.bind(e) if e.macro == "bind" else self.comprehension(e)
            case ast.Call():
                return self.call(e)
        raise AssertionError(e)  # pragma: no cover

    def local_var(self, e: ast.Expr) -> _Var:
        return _Var(self.path(e), self.size(e), self.entry(e))

    def bind(self, e: ast.Comprehension) -> R:
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self.push(e.accu_var, self.local_var(e.accu_init))
        total = total + self.cost(e.result)
        self.pop(e.accu_var)
        if (s := self.size(e.result)) is not None:
            self.sizes[e.id] = s
        if (en := self.entry(e.result)) is not None:
            self.entries[e.id] = en
        return total

    def comprehension(self, e: ast.Comprehension) -> R:
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self.push(e.accu_var, self.local_var(e.accu_init))
        entry = self.entry(e.iter_range)
        kind = entry[0] if entry else self.type(e.iter_range).name
        base = self.path(e.iter_range)
        if kind == "list":
            size, sub = (entry[2] if entry else None), "@items"
        else:
            size, sub = (entry[1] if entry else None), "@keys"
        if e.iter_var2 is not None:
            # two-variable comprehensions: index/key and value; the value's size is the element's
            # cel-go pushIterKey / pushIterValue: sizes from the range's entry sizes, paths "@indices"/"@keys" and
            # "@items"/"@values". Both are `append(path, sub)` on the range's path: where that Go slice has spare
            # capacity (its length is not a power of two, as appends grow it), the value's append overwrites the
            # key's last element, so the key variable is sized as the value (`device.attributes["x"]`, length 3)
            ksub, vsub = ("@indices", "@items") if kind == "list" else ("@keys", "@values")
            kpath = None if base is None else [*base, ksub]
            vpath = None if base is None else [*base, vsub]
            if base is not None and len(base) & (len(base) - 1):
                kpath = vpath
            key = _Var(kpath, entry[1] if entry else None, None)
            val = _Var(vpath, entry[2] if entry else None, None)
            self.push(e.iter_var, key)
            self.push(e.iter_var2, val)
        else:
            self.push(e.iter_var, _Var(None if base is None else [*base, sub], size, None))
        loop = self.cost(e.loop_cond)
        step = self.cost(e.loop_step) if e.iter_var2 is None else ZERO
        if e.iter_var2 is not None:
            loop, step = self.two_variable_step(e)
            self.pop(e.iter_var2)
        self.pop(e.iter_var)
        total = total + self.cost(e.result)
        if e.macro == "existsOne2":
            total = total + ONE  # the result is `__result__ == 1` upstream, an ident here
        self.pop(e.accu_var)
        count = self.size_or_unknown(e.iter_range)
        total = total + count * (step + loop)
        if e.macro == "sortBy":
            return total + self.sort_by_expansion(e, count)
        if isinstance(e.accu_init, ast.Const):
            if (s := self.size(e.accu_init)) is not None:
                self.sizes[e.id] = s
        elif isinstance(e.accu_init, ast.ListExpr | ast.MapExpr):
            self.sizes[e.id] = count
            if e.macro == "transformMap" or e.macro == "transformMapEntry":
                self.entries.pop(e.id, None)  # cel.@mapInsert has no entry size
            if e.macro in ("map", "filter"):
                # the elements are what each step appends: the step is `__result__ + [x]`, under
                # `cond ? ... : __result__` with a filter; add_list's entry size is the union of the
                # accumulator's (`[]`: none) and `[x]`'s (not a list literal in the condition)
                add = e.loop_step
                if isinstance(add, ast.Call) and add.function == "_?_:_":
                    add = add.args[1]
                if isinstance(add, ast.Call) and add.function == "_+_" and add.args[1].id in self.entries:
                    kind, keys, vals = self.entries[add.args[1].id]
                    self.entries[e.id] = (kind, keys, R(0, vals.hi))
        return total

    def sort_by_expansion(self, e: ast.Comprehension, count: R) -> R:
        """What cel-go's sortBy expansion (ext/lists.go sortByMacro) costs beyond the comprehension above
        (range, `[]`, result ident, a key per element): ``cel.bind(@in, range, @in.@sortByAssociatedKeys(
        @in.map(x, key)))``: the bind's empty range (10), the map's range ident (1) and its step besides the key
        (accu + `[key]` + `_+_`: 12 a element), the receiver ident (1), and the call, estimated as sort() of the
        keys; its result size is the square of theirs, as cel-go's estimateAllocatingListCall reports it."""
        keys = self.type(e.loop_step)
        # a dyn key may be a string: cel-go estimates the call by every overload it may take, the costliest wins
        factor = 2.0 + (_STR if keys.name in ("string", "bytes") or keys.is_dyn else 0)
        size = count * count
        self.sizes[e.id] = size
        self.entries.pop(e.id, None)
        return R(_LIST_BASE, _LIST_BASE) + ONE + count * R(12, 12) + ONE + self._alloc(factor, size)

    def two_variable_step(self, e: ast.Comprehension) -> tuple[R, R]:
        """The (condition, step) costs of cel-go's expansion (ext/comprehensions.go) of a two-variable
        macro, whose user expression gpuclaim keeps as ``loop_step`` (and ``filter``) without the code around it:
        the accumulator ident costs 1, a list literal 10, a call 1, `&&`/`||` short-circuit."""
        body = self.cost(e.loop_step)
        accu = ONE
        if e.macro == "all2":  # @not_strictly_false(accu); accu && body
            return R(2, 2), R(accu.lo, (accu + body).hi)
        if e.macro == "exists2":  # @not_strictly_false(!accu); accu || body
            return R(3, 3), R(accu.lo, (accu + body).hi)
        if e.macro == "existsOne2":  # true; body ? accu + 1 : accu
            return ZERO, body + (accu + ONE).union(accu)
        if e.macro == "transformList":  # accu + [body]
            step = accu + body + R(_LIST_BASE, _LIST_BASE) + ONE
            # the result's elements: the union of `[]`'s (none) and `[body]`'s (add_list's entry size)
            self.entries[e.id] = ("list", ONE, R(0, self.size_or_unknown(e.loop_step).hi))
        elif e.macro == "transformMap":  # cel.@mapInsert(accu, k, body)
            step = accu + ONE + body + ONE
        else:  # cel.@mapInsert(accu, body)
            step = accu + body + ONE
        if e.filter is not None:  # filter ? step : accu
            step = self.cost(e.filter) + step.union(accu)
        return ZERO, step

    def call(self, e: ast.Call) -> R:
        if e.function == "dyn":
            total = ONE + self.cost(e.args[0])
            if (s := self.size(e.args[0])) is not None:
                self.sizes[e.id] = s
            return total
        arg_costs = [self.cost(a) for a in e.args]
        total = ZERO
        if e.target is not None:
            total = self.cost(e.target)
        fn: R | None = None
        result: R | None = None
        for o in self.c.overloads.get(e.id, []):
            est, rsize = self.function_cost(e, o.id, arg_costs)
            fn = est if fn is None else fn.union(est)
            if rsize is not None:
                result = rsize if result is None else result.union(rsize)
            if o.id in ("index_list", "index_map"):
                ent = self.entry(e.args[0])
                result = ent[2] if ent else None
                base = self.path(e.args[0])
                self.paths[e.id] = None if base is None else [*base, "@items" if o.id == "index_list" else "@values"]
        if result is None:
            result = self.size(e)
        if result is not None:
            self.sizes[e.id] = result
        return total + (fn or ZERO)

    def function_cost(self, e: ast.Call, oid: str, arg_costs: list[R]) -> tuple[R, R | None]:
        argsum = ZERO
        for a in arg_costs:
            argsum = argsum + a
        args, target = e.args, e.target
        name = e.function
        # ext.Lists / ext.Sets overload estimators come first, as in cel-go.
        if oid in ("list_distinct",) or oid.endswith("_sort"):
            sz = self.size_or_unknown(target)  # type: ignore[arg-type]
            factor = 2.0 + (_STR if oid in ("list_string_sort", "list_bytes_sort") else 0)
            # cel-go's estimateAllocatingListCall reports the size it was given, n * n, as the result's size
            return self._alloc(factor, sz * sz) + argsum, sz * sz
        if oid in ("list_reverse", "list_flatten", "list_flatten_int"):
            depth = 1 if oid != "list_flatten_int" else self._int_literal(args[0], U64)
            sz = self.size_or_unknown(target)  # type: ignore[arg-type]
            return self._alloc(float(depth), sz) + argsum, sz
        if oid == "list_slice":
            sz = self.size_or_unknown(target)  # type: ignore[arg-type]
            start, end = self._int_literal(args[0], 0), self._int_literal(args[1], sz.hi)
            n = max(end - start, 0)
            return self._alloc(1.0, R(n, n)) + argsum, R(n, n)
        if oid == "lists_range":
            n = self._int_literal(args[0], U64)
            return self._alloc(1.0, R(n, n)) + argsum, R(n, n)
        if name.startswith("sets."):
            # ext/sets.go estimateSetsCost: equivalent is charged twice (containment both ways)
            factor = 2.0 if name == "sets.equivalent" else 1.0
            return (self.size_or_unknown(args[0]) * self.size_or_unknown(args[1])).f(factor) + ONE + argsum, None
        k8s = self.kubernetes_cost(e, oid)
        if k8s is not None:
            return k8s[0] + argsum, k8s[1]
        if oid == "string_format" and target is not None:
            # cel-go: "ResultSize not calculated because we can't bound the max size"
            return self.size_or_unknown(target).f(_STR) + argsum, UNKNOWN
        if oid == "bytes_to_string":
            sz = self.size_or_unknown(args[0])
            return sz.f(_STR) + argsum, R(sz.lo // 4, sz.hi)
        if oid in ("string_to_bytes", "strings_quote"):
            sz = self.size_or_unknown(args[0])
            # checker/cost.go computes these sizes with Go's wrapping uint64 arithmetic (`sz.Max*2 + 2`): an
            # unbounded string quotes to a maximum size of 0, which later estimates build on
            if oid == "string_to_bytes":
                rs = R(sz.lo, sz.hi * 4 % 2**64)
            else:
                rs = R((sz.lo + 2) % 2**64, (sz.hi * 2 + 2) % 2**64)
            return sz.f(_STR) + argsum, rs
        if oid in ("starts_with_string", "ends_with_string"):
            return self.size_or_unknown(args[0]).f(_STR) + argsum, None
        if oid == "in_list":
            return self.size_or_unknown(args[1]).f(1) + argsum, None
        if oid == "matches_string" and target is not None:
            s = (self.size_or_unknown(target) + ONE).f(_STR)
            return s * self.size_or_unknown(args[0]).f(_REGEX) + argsum, None
        if oid == "contains_string" and target is not None:
            return self.size_or_unknown(target).f(_STR) * self.size_or_unknown(args[0]).f(_STR) + argsum, None
        if oid in ("logical_and", "logical_or"):
            return R(arg_costs[0].lo, (arg_costs[0] + arg_costs[1]).hi), None
        if oid == "conditional":
            size = self.size_or_unknown(args[1]).union(self.size_or_unknown(args[2]))
            e1, e2 = self.entry(args[1]), self.entry(args[2])
            if e1 and e2:
                self.entries[e.id] = (e1[0], e1[1].union(e2[1]), e1[2].union(e2[2]))
            return arg_costs[0] + arg_costs[1].union(arg_costs[2]), size
        if oid in ("add_string", "add_bytes", "add_list"):
            rs = self.size_or_unknown(args[0]) + self.size_or_unknown(args[1])
            e1, e2 = self.entry(args[0]), self.entry(args[1])
            if e1 and e2:
                self.entries[e.id] = (e1[0], e1[1].union(e2[1]), e1[2].union(e2[2]))
            if oid == "add_list":
                return ONE + argsum, rs
            return rs.f(_STR) + argsum, rs
        if oid in ("equals", "not_equals") or (oid.endswith(("_string", "_bytes")) and oid.startswith(
            ("less", "greater")
        )):
            small = min(self.size_or_unknown(args[0]).hi, self.size_or_unknown(args[1]).hi)
            return R(1 if small > 0 else 0, small).f(_STR) + argsum, None
        return ONE + argsum, None

    def _alloc(self, factor: float, size: R) -> R:
        return size.f(factor) + ONE + R(_LIST_BASE, _LIST_BASE)

    @staticmethod
    def _int_literal(e: ast.Expr, default: int) -> int:
        if isinstance(e, ast.Const) and e.kind == "int":
            return max(int(e.value), 0)  # type: ignore[call-overload, no-any-return]
        return default

    def kubernetes_cost(self, e: ast.Call, oid: str) -> tuple[R, R | None] | None:
        """k8s.io/apiserver/pkg/cel/library CostEstimator.EstimateCallCost (without argument costs)."""
        name, target, args = e.function, e.target, e.args
        if name == "includes" and target is not None and not self.type(target).params:
            return self.size_or_unknown(target), None  # a dyn target: up to n comparisons of cost 1
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes") and target is not None:
            tt = self.type(target)
            if tt.params:
                el = ONE
                if tt.params[0] in (t.STRING, t.BYTES):
                    base = self.path(target)
                    el_size = _dra_size(None if base is None else [*base, "@items"]) or UNKNOWN
                    el = el + el_size.f(_STR)
                return self.size_or_unknown(target) * el, None
            return self.size_or_unknown(target).f(_STR), None
        if name == "url" and len(args) == 1 and target is None:
            sz = self.size_or_unknown(args[0])
            return sz.f(_STR), sz
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = self.size_or_unknown(target)
            return sz.f(_STR), sz
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args)
        if name == "split" and target is not None:
            sz = self.size_or_unknown(target)
            top = sz.hi
            if len(args) > 1 and isinstance(args[1], ast.Const) and args[1].kind == "int":
                # k8s library/cost.go: `max = uint64(i)` of the literal, so split(',', -1) may yield 2^64-1 items
                top = int(args[1].value) % 2**64  # type: ignore[call-overload]
            return sz.f(2 * _STR), R(0, top)
        if name == "join" and target is not None:
            lst = self.size_or_unknown(target)
            base = self.path(target)
            el = _dra_size(None if base is None else [*base, "@items"]) or UNKNOWN
            sz = lst * el
            if args:
                sep = self.size_or_unknown(args[0])
                sz = sz + sep * R(max(lst.lo - 1, 0), max(lst.hi - 1, 0) if lst.hi < U64 else U64 - 1)
            return sz.f(_STR), sz
        if name in ("find", "findAll") and target is not None and args:
            sz = self.size_or_unknown(target)
            return (sz + ONE).f(_STR) * self.size_or_unknown(args[0]).f(_REGEX), R(0, sz.hi)
        if name in ("quantity", "isQuantity", "semver", "isSemver", "cidr", "isIP", "isCIDR") and args:
            return self.size_or_unknown(args[0]).f(_STR), None
        if name == "ip" and target is not None:
            return ONE, None
        if name in ("masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
                    "isLinkLocalUnicast", "isGlobalUnicast"):
            return ONE, None
        if name in ("containsIP", "containsCIDR") and target is not None and args:
            sz = R(4, 16)
            cost = (sz + sz).f(_STR)
            if name == "containsCIDR":
                cost = cost + sz.f(_STR) + ONE
            if oid.endswith("_string"):
                cost = cost + self.size_or_unknown(args[0]).f(_STR)
            return cost, None
        if name in ("sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
                    "compareTo", "add", "sub", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath",
                    "getQuery"):
            return ONE, None
        if name == "_==_" and len(args) == 2:
            lt, rt = self.type(args[0]), self.type(args[1])
            if lt == rt and lt in (t.IP, t.CIDR, t.QUANTITY, t.SEMVER, t.URL):
                return ONE, None
        return None

    def _replace(self, target: ast.Expr, args: list[ast.Expr]) -> tuple[R, R | None]:
        sz = self.size_or_unknown(target)
        old, new = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
        if old.lo == 0:
            cnt_hi, kept_hi = (sz.hi + 1 if sz.hi < U64 else sz.hi), sz.hi
        elif new.hi <= old.lo:
            cnt_hi, kept_hi = 0, sz.hi
        else:
            cnt_hi, kept_hi = math.ceil(sz.hi / old.lo), 0
        if old.hi == 0:
            cnt_lo, kept_lo = (sz.lo + 1 if sz.lo < U64 else sz.lo), sz.lo
        elif old.hi <= new.lo:
            cnt_lo, kept_lo = 0, sz.lo
        else:
            cnt_lo, kept_lo = math.ceil(sz.lo / old.hi), 0
        size = R(cnt_lo, cnt_hi) * new + R(kept_lo, kept_hi)
        return sz.f(2 * _STR), size
