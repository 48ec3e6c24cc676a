"""Compile a checked CEL AST into nested Python closures (cel-python's tree walker is too slow).

Each node becomes ``f(env) -> value`` where ``env`` maps variable names to values. CEL errors are
:class:`CelRuntimeError` exceptions; ``&&``/``||`` catch them to give CEL's commutative,
error-absorbing logic (``error || true`` is true, ``error || false`` is the error).

When the estimated cost of an expression exceeds the runtime limit (possible only in the scheduler's
stored mode) every identifier, selection and call is charged one unit against ``env["$budget"]``,
an approximation of cel-go's actual cost that stops runaway comprehensions with cel-go's message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from celpy.celtypes import UintType

from gpuclaim.dra.cel import ast
from gpuclaim.dra.cel import operators as ops
from gpuclaim.dra.cel import timevalues as tvals
from gpuclaim.dra.cel import types as t
from gpuclaim.dra.cel.checker import Checked
from gpuclaim.dra.cel.errors import CelCostLimitError, CelRuntimeError
from gpuclaim.dra.cel.k8slib import FUNCS
from gpuclaim.dra.cel.operators import RuntimeDevice
from gpuclaim.dra.cel.values import (
    Broken,
    DomainMap,
    Optional,
    TypeValue,
    check_int,
    compare,
    equals,
    fail,
    go_text,
    lookup,
    no_overload,
    type_name,
    unbroken,
)
from gpuclaim.dra.quantity import Quantity
from gpuclaim.dra.semver import Semver

Fn = Callable[[dict[str, Any]], Any]
BUDGET = "$budget"


class _Deferred:
    """A ``cel.bind`` value whose initialiser failed: the error surfaces only if the name is used."""

    __slots__ = ("error",)

    def __init__(self, error: CelRuntimeError) -> None:
        self.error = error


def _go_round_trip(v: Any) -> Any:
    """cel-go v0.26's ``NativeToValue(v.Value())`` of an optional's value (see ``_Compiler.read_variable``)."""
    while type(v) is Optional:  # Optional.Value() is its value's Value(); none's is nil, which converts to null
        if not v.present:
            return None
        v = v.value
    if type(v) is TypeValue:
        return v.name  # *types.Type.Value() is its name, a string
    # NativeToValue of apimachinery's *resource.Quantity or blang's semver.Version is an error value, which
    # OptionalOf keeps: hasValue() is true, value() fails
    if type(v) is Quantity:
        return Broken(CelRuntimeError(f"unsupported conversion to ref.Val: (*resource.Quantity){v}"))
    if type(v) is Semver:
        return Broken(CelRuntimeError(f"unsupported conversion to ref.Val: (semver.Version){v}"))
    return v


# cel-go dispatches these operators on a trait of the left operand's type (interpreter/interpretable.go
# evalBinary/evalUnary): without it the error names the operator; with it the type's own method answers a wrong
# right operand with a bare "no such overload"
_COMPARER = (bool, bytes, float, int, UintType, str, tvals.Duration, tvals.Timestamp)
_ADDER = (bytes, float, int, UintType, str, list, tuple, tvals.Duration, tvals.Timestamp)
_SUBTRACTOR = (float, int, UintType, tvals.Duration, tvals.Timestamp)
_ARITH_TRAITS = {"_+_": _ADDER, "_-_": _SUBTRACTOR, "_*_": (float, int, UintType), "_/_": (float, int, UintType),
                 "_%_": (int, UintType)}
_SIZER = (bytes, str, list, tuple)  # and maps
_CONVERSION_FUNCTIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp"})


def _taken_apart(value: Fn) -> Fn:
    """`value`, with a present optional's value passed through cel-go v0.26's applyQualifiers (``_go_round_trip``)."""

    def resolve(env: dict[str, Any]) -> Any:
        v = value(env)
        if type(v) is Optional and v.present:
            return Optional(_go_round_trip(v.value), True)
        return v

    return resolve


def _is_attribute(e: ast.Expr) -> bool:
    """Whether cel-go plans `e` as an attribute (interpreter/planner.go): a name, or a selection of one."""
    return isinstance(e, ast.Ident | ast.Select) or (
        isinstance(e, ast.Call) and e.target is None and e.function in ("_[_]", "_[?_]", "_?._"))


def _has_trait(v: Any, types: tuple[type, ...]) -> bool:
    return type(v) in types or (types is _SIZER and isinstance(v, Mapping))


def compile_checked(checked: Checked, *, track_cost: bool, cel_go: int = 26) -> Fn:
    """``cel_go``: the cel-go minor whose interpreter to follow where releases differ (``Environment.cel_go``)."""
    return _Compiler(checked, track_cost, cel_go).build(checked.expr)


class _Compiler:
    def __init__(self, checked: Checked, track_cost: bool, cel_go: int) -> None:
        self.c = checked
        self.track = track_cost
        self.cel_go = cel_go
        self.binds: set[str] = set()

    def build(self, e: ast.Expr) -> Fn:
        f = self.node(e)
        if self.track and not isinstance(e, ast.Const | ast.ListExpr | ast.MapExpr | ast.Comprehension):
            inner = f

            def f(env: dict[str, Any]) -> Any:
                budget = env[BUDGET]
                budget[0] -= 1
                if budget[0] < 0:
                    raise CelCostLimitError("operation cancelled: actual cost limit exceeded")
                return inner(env)

        return f

    def node(self, e: ast.Expr) -> Fn:
        match e:
            case ast.Const():
                v = UintType(e.value) if e.kind == "uint" else e.value
                return lambda env: v
            case ast.Ident():
                name = e.name
                if name in self.binds:

                    def bound(env: dict[str, Any]) -> Any:
                        v = env[name]
                        if type(v) is _Deferred:
                            raise v.error
                        return v

                    return self.read_variable(bound)
                if name in t.TYPE_NAMES and name != "device" and self.c.type_of(e).name == "type":
                    tv = TypeValue(str(t.TYPE_NAMES[name]).split("(")[0])
                    return lambda env: tv
                if name == "device":
                    return lambda env: env[name]
                return self.read_variable(lambda env: unbroken(env[name]))  # a macro's variable (an element)
            case ast.Select():
                o, field = self.build(e.operand), e.field
                if e.test_only:

                    def has(env: dict[str, Any]) -> bool:
                        v = o(env)
                        if type(v) is DomainMap:
                            return True  # upstream's mapper finds every domain (an unknown one is empty)
                        if type(v) is RuntimeDevice:
                            return True
                        return ops.has_field(v, field)

                    return has
                if self.c.type_of(e.operand) == t.DEVICE:
                    return lambda env: getattr(o(env), field)
                o = self.qualified(e.operand, o)
                return lambda env: ops.select(o(env), field)
            case ast.ListExpr():
                items = [self.build(x) for x in e.elements]
                if e.optional:
                    opt = [i in e.optional for i in range(len(items))]

                    def make_list(env: dict[str, Any]) -> list[Any]:
                        out: list[Any] = []
                        for f, is_opt in zip(items, opt, strict=True):
                            v = f(env)
                            if not is_opt:
                                out.append(v)
                            elif type(v) is not Optional:
                                fail(f"cannot initialize optional list element from non-optional value {go_text(v)}")
                            elif v.present:
                                out.append(v.value)  # cel-go keeps an error as the element: it fails where read
                        return out

                    return make_list
                return lambda env: [f(env) for f in items]
            case ast.MapExpr():
                pairs = [(self.build(k), self.build(v), i in e.optional) for i, (k, v) in enumerate(e.entries)]

                def make_map(env: dict[str, Any]) -> dict[Any, Any]:
                    out: dict[Any, Any] = {}
                    for kf, vf, is_opt in pairs:
                        k = kf(env)
                        if type(k) not in _MAP_KEYS:
                            # cel-go builds a Go map of any comparable value (evalMap.Eval): doubles, null, types and
                            # optionals are keys there too; lists and maps (pointers there) are not supported here
                            fail(f"unsupported map key type: {type(k).__name__}")
                        v = vf(env)
                        if is_opt:
                            if type(v) is not Optional:
                                fail(f"cannot initialize optional entry '{go_text(k)}' from non-optional value "
                                     f"{go_text(v)}")
                            if not v.present:
                                out.pop(k, None)  # cel-go deletes the key (evalMap.Eval)
                                continue
                            v = v.value  # cel-go keeps an error as the entry's value: it fails where read
                        out[k] = v  # a repeated key: the last one wins, as in cel-go
                    return out

                return make_map
            case ast.Comprehension():
                return self.comprehension(e)
            case ast.Call():
                return self.call(e)
        raise AssertionError(e)  # pragma: no cover

    def call(self, e: ast.Call) -> Fn:
        fn = e.function
        args = [self.build(a) for a in e.args]
        if fn in ("_&&_", "_||_"):
            left, right = args
            decisive = fn == "_||_"  # the value that decides the result

            def logic(env: dict[str, Any]) -> bool:
                try:
                    lv = ops.as_bool(left(env))
                except CelCostLimitError:
                    raise
                except CelRuntimeError as err:
                    try:
                        rv = ops.as_bool(right(env))
                    except CelCostLimitError:
                        raise
                    except CelRuntimeError:
                        raise err from None  # cel-go's evalOr/evalAnd keep the first error
                    if rv is decisive:
                        return rv
                    raise err from None
                if lv is decisive:
                    return lv
                return ops.as_bool(right(env))

            return logic
        if fn == "_?_:_":
            c, y, n = args
            return lambda env: y(env) if ops.as_bool(c(env)) else n(env)
        if fn == "!_":
            a = args[0]
            return lambda env: not ops.as_bool(a(env))
        if fn == "@not_strictly_false":
            a = args[0]

            def not_strictly_false(env: dict[str, Any]) -> bool:
                try:
                    v = a(env)
                except CelCostLimitError:
                    raise
                except CelRuntimeError:
                    return True
                return v is not False

            return not_strictly_false
        if fn in ("_==_", "_!=_"):
            a, b = args
            if fn == "_==_":
                return lambda env: equals(a(env), b(env))

            def not_equals(env: dict[str, Any]) -> bool:
                x, y = a(env), b(env)
                try:
                    return not equals(x, y)
                except CelRuntimeError:
                    return True  # cel-go: Equal(x, y) != true

            return not_equals
        if fn in ops.RELATIONAL:
            a, b, test = args[0], args[1], ops.RELATIONAL[fn]

            def relational(env: dict[str, Any]) -> bool:
                x, y = a(env), b(env)
                if not _has_trait(x, _COMPARER):
                    fail(f"no such overload: {fn}")
                if (type(x) is float and x != x) or (type(y) is float and y != y):
                    fail("NaN values cannot be ordered")  # cel-go's wording
                return test(compare(x, y))

            return relational
        if fn in ("_+_", "_-_", "_*_", "_/_", "_%_"):
            a, b, op, trait = args[0], args[1], ops.arith(fn), _ARITH_TRAITS[fn]

            def arithmetic(env: dict[str, Any]) -> Any:
                x, y = a(env), b(env)
                if not _has_trait(x, trait):
                    fail(f"no such overload: {fn}")
                return op(x, y)

            return arithmetic
        if fn == "-_":
            a = args[0]

            def negate(env: dict[str, Any]) -> Any:
                v = a(env)
                if type(v) is int:
                    return check_int(-v)
                if type(v) is float:
                    return -v
                if type(v) is tvals.Duration:
                    return tvals.Duration(check_int(-v.ns))  # cel-go's Negater, reached through dyn
                fail("no such overload: -_")

            return negate
        if fn == "@in" and isinstance(e.args[1], ast.ListExpr) and not e.args[1].elements:
            return lambda env: False  # cel-go's set-membership optimisation: `x in []` never evaluates x
        if fn == "@in" and _constant_primitives(e.args[1]):
            a, b = args

            def in_set(env: dict[str, Any]) -> bool:
                # cel-go's set-membership optimisation (interpreter/decorators.go maybeOptimizeSetMembership) looks
                # the value up in a Go map: a value of an unhashable Go type makes it panic, which cel-go reports
                v = a(env)
                unhashable = _UNHASHABLE.get(type(v))
                if unhashable is not None:
                    fail(f"internal error: runtime error: hash of unhashable type {unhashable}")
                return ops.contains(v, b(env))

            return in_set
        if fn == "@in":
            a, b = args
            return lambda env: ops.contains(a(env), b(env))
        if fn == "_[_]":
            a, b = self.qualified(e.args[0], args[0]), args[1]
            return lambda env: ops.index(a(env), b(env))
        if fn == "_[?_]":
            a, b = self.qualified(e.args[0], args[0]), args[1]
            return lambda env: ops.optional_index(a(env), b(env))
        if fn == "_?._":
            a, field = self.qualified(e.args[0], args[0]), e.args[1].value  # type: ignore[union-attr]
            return lambda env: ops.optional_select(a(env), field)  # type: ignore[arg-type]
        if fn in ("or", "orValue") and e.target is not None and len(args) == 1:
            # cel-go evaluates optional or/orValue lazily (cel/library.go evalOptionalOr, evalOptionalOrValue): the
            # alternative only when the optional is empty, and returned as it is, an optional or not
            target, other, lazy = self.build(e.target), args[0], fn == "orValue"
            strict = self.cel_go >= 29

            def or_else(env: dict[str, Any]) -> Any:
                o = target(env)
                if type(o) is not Optional:
                    # a receiver typed dyn or null that is not an optional at run time: v0.26 returns it as the
                    # result, v0.29 answers "no such overload"
                    if strict:
                        no_overload()
                    return o
                if o.present:
                    return unbroken(o.value) if lazy else o
                return other(env)

            return or_else
        if fn == "sum" and e.target is not None and not e.args:
            # k8s library/lists.go binds a zero per overload: an empty list's sum has the list's element type
            zero = {"uint": UintType(0), "double": 0.0, "google.protobuf.Duration": tvals.Duration(0)}.get(
                self.c.type_of(e).name)
            if zero is not None:
                items, total = self.build(e.target), FUNCS[("sum", True)]

                def typed_sum(env: dict[str, Any]) -> Any:
                    lst = items(env)
                    return zero if isinstance(lst, list | tuple) and not lst else total(lst)

                return typed_sum
        impl = FUNCS[(fn, e.target is not None)]
        if self.cel_go >= 29 and fn in ("indexOf", "lastIndexOf") and e.target is not None and len(args) == 2:
            impl = FUNCS[(fn + "@v0.29", True)]
        if e.target is not None:
            args.insert(0, self.build(e.target))
        if fn == "size" and len(args) == 1:
            arg, size = args[0], impl

            def sized(env: dict[str, Any]) -> Any:
                v = arg(env)
                if not _has_trait(v, _SIZER):
                    fail("no such overload: size")
                return size(v)

            return sized
        if fn in _CONVERSION_FUNCTIONS and e.target is None and len(args) == 1:
            arg, convert = args[0], impl

            def conversion(env: dict[str, Any]) -> Any:
                v = arg(env)
                try:
                    return convert(v)
                except CelRuntimeError as err:
                    if err.message != "no such overload":
                        raise
                    # no overload of the conversion takes this runtime type: cel-go's dispatch names it
                    raise CelRuntimeError(f"no such overload: {fn}({type_name(v)})") from None

            return conversion
        if len(args) == 1:
            a0 = args[0]
            return lambda env: impl(a0(env))
        if len(args) == 2:
            a0, a1 = args
            return lambda env: impl(a0(env), a1(env))
        return lambda env: impl(*[f(env) for f in args])

    def read_variable(self, read: Fn) -> Fn:
        """cel-go v0.26 resolves a variable (cel.bind's, a macro's) as an attribute, and ``applyQualifiers``
        (interpreter/attributes.go) takes a present optional apart as ``GetValue().Value()``, the Go value, which
        ``OptionalOf(NativeToValue(...))`` wraps again: a nested optional flattens, a type becomes its name, and a
        quantity or semver cannot be converted back. v0.29 keeps the value (``GetValue()``)."""
        if self.cel_go >= 29:
            return read
        return _taken_apart(read)

    def qualified(self, operand: ast.Expr, value: Fn) -> Fn:
        """The operand of a field or index selection. cel-go v0.26 plans a selection of a value that is not an
        attribute itself (a call's result: ``optional.of(x).?a``) as a relative attribute, whose applyQualifiers
        takes a present optional apart as ``read_variable`` describes: a quantity or semver inside fails with
        cel-go's conversion error. A selection of an attribute (a variable, a field, an index) goes on within the
        same attribute, and a variable is taken apart where it is read."""
        if self.cel_go >= 29 or _is_attribute(operand):
            return value
        return _taken_apart(value)

    def two_variable(self, e: ast.Comprehension) -> Fn:
        rng, v1, v2, macro = self.build(e.iter_range), e.iter_var, e.iter_var2 or "", e.macro
        step = self.build(e.loop_step)
        filt = self.build(e.filter) if e.filter is not None else None

        def pairs(r: Any) -> Any:
            if isinstance(r, list | tuple):
                return list(enumerate(r))
            if isinstance(r, Mapping):
                return list(r.items())
            no_overload()

        def run(env: dict[str, Any]) -> Any:
            items = pairs(rng(env))
            saved = env.get(v1, _MISSING), env.get(v2, _MISSING)
            first_error: CelRuntimeError | None = None
            count = 0
            out_list: list[Any] = []
            out_map: dict[Any, Any] = {}
            try:
                for a, b in items:
                    env[v1], env[v2] = a, b
                    if macro in ("all2", "exists2"):
                        decisive = macro == "exists2"
                        try:
                            if ops.as_bool(step(env)) is decisive:
                                return decisive
                        except CelCostLimitError:
                            raise
                        except CelRuntimeError as err:
                            first_error = first_error or err
                        continue
                    if filt is not None and not ops.as_bool(filt(env)):
                        continue
                    if macro == "existsOne2":
                        count += ops.as_bool(step(env))
                    elif macro == "transformList":
                        out_list.append(step(env))
                    elif macro == "transformMap":
                        out_map[a] = step(env)
                    else:
                        entry = step(env)
                        if not isinstance(entry, Mapping):
                            no_overload()
                        for k, v in entry.items():
                            if lookup(out_map, k)[0]:
                                fail(f"insert failed: key {k} already exists")
                            out_map[k] = v
            finally:
                _restore(env, v1, saved[0])
                _restore(env, v2, saved[1])
            if macro in ("all2", "exists2"):
                if first_error is not None:
                    raise first_error
                return macro == "all2"
            if macro == "existsOne2":
                return count == 1
            return out_list if macro == "transformList" else out_map

        return run

    def sort_by(self, e: ast.Comprehension) -> Fn:
        rng, var, key = self.build(e.iter_range), e.iter_var, self.build(e.loop_step)

        def sort_by(env: dict[str, Any]) -> list[Any]:
            items = rng(env)
            if not isinstance(items, list | tuple):
                no_overload()
            saved = env.get(var, _MISSING)
            keyed: list[tuple[Any, Any]] = []
            try:
                for x in items:
                    env[var] = x
                    keyed.append((key(env), x))
            finally:
                _restore(env, var, saved)
            kinds = {type(k) for k, _ in keyed}
            if keyed and (len(kinds) > 1 or not kinds <= {int, UintType, float, str, bytes, bool}):
                fail("sortBy: keys must be of one comparable type")  # cel-go: a key type error
            def by_key(a: tuple[Any, Any], b: tuple[Any, Any]) -> int:
                return compare(a[0], b[0])

            return [x for _, x in sorted(keyed, key=functools.cmp_to_key(by_key))]

        return sort_by

    def comprehension(self, e: ast.Comprehension) -> Fn:
        if e.macro == "sortBy":
            return self.sort_by(e)
        if e.iter_var2 is not None:
            return self.two_variable(e)
        if e.macro == "bind":
            name = e.accu_var
            init = self.build(e.accu_init)
            self.binds.add(name)
            result = self.build(e.result)

            def bind(env: dict[str, Any]) -> Any:
                saved = env.get(name, _MISSING)
                try:
                    env[name] = init(env)
                except CelCostLimitError:
                    raise
                except CelRuntimeError as err:
                    env[name] = _Deferred(err)
                try:
                    return result(env)
                finally:
                    _restore(env, name, saved)

            return bind
        rng, var = self.build(e.iter_range), e.iter_var
        if e.macro in ("all", "exists"):
            pred = self.build(e.loop_step.args[1])  # type: ignore[union-attr]
            decisive = e.macro == "exists"

            def quantifier(env: dict[str, Any]) -> bool:
                items = ops.items(rng(env))
                saved = env.get(var, _MISSING)
                first_error: CelRuntimeError | None = None
                try:
                    for x in items:
                        env[var] = x
                        try:
                            if ops.as_bool(pred(env)) is decisive:
                                return decisive
                        except CelCostLimitError:
                            raise
                        except CelRuntimeError as err:
                            first_error = first_error or err
                finally:
                    _restore(env, var, saved)
                if first_error is not None:
                    raise first_error
                return not decisive

            return quantifier
        step_e = e.loop_step
        if e.macro == "exists_one":
            pred = self.build(step_e.args[0])  # type: ignore[union-attr]

            def exists_one(env: dict[str, Any]) -> bool:
                items = ops.items(rng(env))
                saved, n = env.get(var, _MISSING), 0
                try:
                    for x in items:
                        env[var] = x
                        if ops.as_bool(pred(env)):
                            n += 1
                finally:
                    _restore(env, var, saved)
                return n == 1

            return exists_one
        # map(x, t), map(x, p, t), filter(x, p)
        if isinstance(step_e, ast.Call) and step_e.function == "_?_:_":
            cond = self.build(step_e.args[0])
            appended = step_e.args[1]
        else:
            cond, appended = None, step_e
        item = self.build(appended.args[1].elements[0])  # type: ignore[union-attr]

        def transform(env: dict[str, Any]) -> list[Any]:
            items = ops.items(rng(env))
            saved, out = env.get(var, _MISSING), []
            try:
                for x in items:
                    env[var] = x
                    if cond is None or ops.as_bool(cond(env)):
                        out.append(item(env))
            finally:
                _restore(env, var, saved)
            return out

        return transform


_MISSING = object()


_UNHASHABLE = {Semver: "cel.Semver", bytes: "types.Bytes"}
_PRIMITIVE_CONSTS = frozenset({"int", "uint", "double", "string", "bool"})
_CONVERSIONS = frozenset({"int", "uint", "double", "string", "bool", "dyn"})


def _constant_primitives(e: ast.Expr) -> bool:
    """A non-empty list literal the planner makes a constant of only primitives (not bytes, not null)."""
    if not isinstance(e, ast.ListExpr) or not e.elements or e.optional:
        return False
    for x in e.elements:
        if isinstance(x, ast.Call) and x.target is None and x.function in _CONVERSIONS and len(x.args) == 1:
            # a folded conversion of a constant: its value's kind is the conversion's (dyn keeps the argument's)
            inner = x.args[0]
            if not isinstance(inner, ast.Const) or (x.function == "dyn" and inner.kind not in _PRIMITIVE_CONSTS):
                return False
            continue
        if not isinstance(x, ast.Const) or x.kind not in _PRIMITIVE_CONSTS:
            return False
    return True


_MAP_KEYS = frozenset({str, int, UintType, bool, float, type(None), TypeValue, Optional, tvals.Duration,
                       tvals.Timestamp})


def _restore(env: dict[str, Any], name: str, saved: object) -> None:
    if saved is _MISSING:
        env.pop(name, None)
    else:
        env[name] = saved
