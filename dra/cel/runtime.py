"""Compile a checked CEL AST into nested Python closures (cel-python's tree walker is too slow).

Each node becomes ``f(env) -> value`` where ``env`` maps variable names to values. CEL errors are
:class:`CelRuntimeError` exceptions; ``&&``/``||`` catch them to give CEL's commutative,
error-absorbing logic (``error || true`` is true, ``error || false`` is the error).

When the estimated cost of an expression exceeds the runtime limit (possible only in the scheduler's
stored mode) every identifier, selection and call is charged one unit against ``env["$budget"]``,
an approximation of cel-go's actual cost that stops runaway comprehensions with cel-go's message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from celpy.celtypes import UintType

from dra.cel import ast
from dra.cel import types as t
from dra.cel.checker import Checked
from dra.cel.errors import CelCostLimitError, CelRuntimeError
from dra.cel.k8slib import FUNCS
from dra.cel.values import (
    INT64_MIN,
    NONE,
    Optional,
    TypeValue,
    check_int,
    check_uint,
    compare,
    contains_key,
    equals,
    fail,
    lookup,
    no_overload,
)

Fn = Callable[[dict[str, Any]], Any]
BUDGET = "$budget"


class RuntimeDevice:
    """The ``device`` variable: what a selector sees of one device."""

    __slots__ = ("allowMultipleAllocations", "attributes", "capacity", "driver")

    def __init__(self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any]) -> None:
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allowMultipleAllocations = False


class _Deferred:
    """A ``cel.bind`` value whose initialiser failed: the error surfaces only if the name is used."""

    __slots__ = ("error",)

    def __init__(self, error: CelRuntimeError) -> None:
        self.error = error


def compile_checked(checked: Checked, *, track_cost: bool) -> Fn:
    return _Compiler(checked, track_cost).build(checked.expr)


def _arith(op: str) -> Callable[[Any, Any], Any]:
    def add(a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is tb:
            if ta is int:
                return check_int(a + b)
            if ta is float or ta is str or ta is bytes:
                return a + b
            if ta is UintType:
                return check_uint(int(a) + int(b))
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return [*a, *b]
        no_overload()

    def num(f: Callable[[Any, Any, type], Any]) -> Callable[[Any, Any], Any]:
        def g(a: Any, b: Any) -> Any:
            ta = type(a)
            if ta is not type(b) or ta not in (int, float, UintType):
                no_overload()
            return f(a, b, ta)

        return g

    def sub(a: Any, b: Any, ta: type) -> Any:
        return check_int(a - b) if ta is int else a - b if ta is float else check_uint(int(a) - int(b))

    def mul(a: Any, b: Any, ta: type) -> Any:
        return check_int(a * b) if ta is int else a * b if ta is float else check_uint(int(a) * int(b))

    def div(a: Any, b: Any, ta: type) -> Any:
        if ta is float:
            if b == 0:  # IEEE 754, as Go divides doubles
                return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
        if b == 0:
            fail("division by zero")
        if ta is int and a == INT64_MIN and b == -1:
            fail("integer overflow")
        q = abs(int(a)) // abs(int(b))
        q = q if (a >= 0) == (b > 0) else -q
        return q if ta is int else UintType(q)

    def mod(a: Any, b: Any, ta: type) -> Any:
        if ta is float:
            no_overload()
        if b == 0:
            fail("modulus by zero")
        if ta is int and a == INT64_MIN and b == -1:
            fail("integer overflow")
        r = abs(int(a)) % abs(int(b))
        r = r if a >= 0 else -r
        return r if ta is int else UintType(r)

    return {"_+_": add, "_-_": num(sub), "_*_": num(mul), "_/_": num(div), "_%_": num(mod)}[op]


_RELATIONAL: dict[str, Callable[[int], bool]] = {
    "_<_": lambda c: c < 0, "_<=_": lambda c: c <= 0, "_>_": lambda c: c > 0, "_>=_": lambda c: c >= 0,
}


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        no_overload()
    return v  # type: ignore[no-any-return]


def _select(v: Any, field: str) -> Any:
    if isinstance(v, Mapping):
        found, value = lookup(v, field)
        if not found:
            fail(f"no such key: {field}")
        return value
    if type(v) is RuntimeDevice:
        return getattr(v, field)
    if type(v) is Optional:
        if not v.present:
            return NONE
        return _optional_select(v.value, field)
    no_overload()


def _optional_select(v: Any, field: str) -> Optional:
    if type(v) is Optional:
        return _optional_select(v.value, field) if v.present else NONE
    if isinstance(v, Mapping):
        found, value = lookup(v, field)
        return Optional(value, True) if found else NONE
    if type(v) is RuntimeDevice:
        return Optional(getattr(v, field), True)
    no_overload()


def _index(c: Any, k: Any) -> Any:
    if type(c) is Optional:
        return _optional_index(c.value, k) if c.present else NONE
    if isinstance(c, list | tuple):
        i = _list_index(k)
        if not 0 <= i < len(c):
            fail(f"index '{i}' out of range in list size '{len(c)}'")
        return c[i]
    if isinstance(c, Mapping):
        found, value = lookup(c, k)
        if not found:
            fail(f"no such key: {k}")
        return value
    no_overload()


def _list_index(k: Any) -> int:
    tk = type(k)
    if tk is int or tk is UintType:
        return int(k)
    if tk is float and k == int(k):
        return int(k)
    no_overload()


def _optional_index(c: Any, k: Any) -> Optional:
    if type(c) is Optional:
        return _optional_index(c.value, k) if c.present else NONE
    if isinstance(c, list | tuple):
        i = _list_index(k)
        return Optional(c[i], True) if 0 <= i < len(c) else NONE
    if isinstance(c, Mapping):
        found, value = lookup(c, k)
        return Optional(value, True) if found else NONE
    no_overload()


def _contains(x: Any, c: Any) -> bool:
    if isinstance(c, list | tuple):
        return any(equals(y, x) for y in c)
    if isinstance(c, Mapping):
        return contains_key(c, x)
    no_overload()


def _items(r: Any) -> Any:
    if isinstance(r, list | tuple):
        return r
    if isinstance(r, Mapping):
        return list(r.keys())
    no_overload()


class _Compiler:
    def __init__(self, checked: Checked, track_cost: bool) -> None:
        self.c = checked
        self.track = track_cost
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
                v = UintType(e.value) if e.kind == "uint" else e.value  # type: ignore[arg-type]
                return lambda env: v
            case ast.Ident():
                name = e.name
                if name in self.binds:

                    def bound(env: dict[str, Any]) -> Any:
                        v = env[name]
                        if type(v) is _Deferred:
                            raise v.error
                        return v

                    return bound
                if name in t.TYPE_NAMES and name != "device" and self.c.type_of(e).name == "type":
                    tv = TypeValue(str(t.TYPE_NAMES[name]).split("(")[0])
                    return lambda env: tv
                return lambda env: env[name]
            case ast.Select():
                o, field = self.build(e.operand), e.field
                if e.test_only:

                    def has(env: dict[str, Any]) -> bool:
                        v = o(env)
                        if isinstance(v, Mapping):
                            return contains_key(v, field)
                        if type(v) is RuntimeDevice:
                            return True
                        no_overload()

                    return has
                if self.c.type_of(e.operand) == t.DEVICE:
                    return lambda env: getattr(o(env), field)
                return lambda env: _select(o(env), field)
            case ast.ListExpr():
                items = [self.build(x) for x in e.elements]
                return lambda env: [f(env) for f in items]
            case ast.MapExpr():
                pairs = [(self.build(k), self.build(v)) for k, v in e.entries]

                def make_map(env: dict[str, Any]) -> dict[Any, Any]:
                    out: dict[Any, Any] = {}
                    for kf, vf in pairs:
                        k = kf(env)
                        if type(k) not in (str, int, UintType, bool):
                            fail(f"unsupported map key type: {type(k).__name__}")
                        if lookup(out, k)[0]:
                            fail(f"Failed with repeated key: {k}")
                        out[k] = vf(env)
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
                    lv = _bool(left(env))
                except CelCostLimitError:
                    raise
                except CelRuntimeError as err:
                    rv = _bool(right(env))
                    if rv is decisive:
                        return rv
                    raise err from None
                if lv is decisive:
                    return lv
                return _bool(right(env))

            return logic
        if fn == "_?_:_":
            c, y, n = args
            return lambda env: y(env) if _bool(c(env)) else n(env)
        if fn == "!_":
            a = args[0]
            return lambda env: not _bool(a(env))
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
            return lambda env: not equals(a(env), b(env))
        if fn in _RELATIONAL:
            a, b, test = args[0], args[1], _RELATIONAL[fn]

            def relational(env: dict[str, Any]) -> bool:
                x, y = a(env), b(env)
                if (type(x) is float and x != x) or (type(y) is float and y != y):
                    return False
                return test(compare(x, y))

            return relational
        if fn in ("_+_", "_-_", "_*_", "_/_", "_%_"):
            a, b, op = args[0], args[1], _arith(fn)
            return lambda env: op(a(env), b(env))
        if fn == "-_":
            a = args[0]

            def negate(env: dict[str, Any]) -> Any:
                v = a(env)
                if type(v) is int:
                    return check_int(-v)
                if type(v) is float:
                    return -v
                no_overload()

            return negate
        if fn == "@in":
            a, b = args
            return lambda env: _contains(a(env), b(env))
        if fn == "_[_]":
            a, b = args
            return lambda env: _index(a(env), b(env))
        if fn == "_[?_]":
            a, b = args
            return lambda env: _optional_index(a(env), b(env))
        if fn == "_?._":
            a, field = args[0], e.args[1].value  # type: ignore[union-attr]
            return lambda env: _optional_select(a(env), field)  # type: ignore[arg-type]
        impl = FUNCS[(fn, e.target is not None)]
        if e.target is not None:
            args.insert(0, self.build(e.target))
        if len(args) == 1:
            a0 = args[0]
            return lambda env: impl(a0(env))
        if len(args) == 2:
            a0, a1 = args
            return lambda env: impl(a0(env), a1(env))
        return lambda env: impl(*[f(env) for f in args])

    def comprehension(self, e: ast.Comprehension) -> Fn:
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
                items = _items(rng(env))
                saved = env.get(var, _MISSING)
                first_error: CelRuntimeError | None = None
                try:
                    for x in items:
                        env[var] = x
                        try:
                            if _bool(pred(env)) is decisive:
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
                items = _items(rng(env))
                saved, n = env.get(var, _MISSING), 0
                try:
                    for x in items:
                        env[var] = x
                        if _bool(pred(env)):
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
            items = _items(rng(env))
            saved, out = env.get(var, _MISSING), []
            try:
                for x in items:
                    env[var] = x
                    if cond is None or _bool(cond(env)):
                        out.append(item(env))
            finally:
                _restore(env, var, saved)
            return out

        return transform


_MISSING = object()


def _restore(env: dict[str, Any], name: str, saved: object) -> None:
    if saved is _MISSING:
        env.pop(name, None)
    else:
        env[name] = saved
