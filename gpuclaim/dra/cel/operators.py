"""CEL operators on runtime values: arithmetic with int64/uint64 overflow errors, ordering, field
selection, indexing and membership (plain and optional forms), with CEL's error messages."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from celpy.celtypes import UintType

from gpuclaim.dra.cel import timevalues as tv
from gpuclaim.dra.cel.errors import CelRuntimeError
from gpuclaim.dra.cel.values import (
    INT64_MIN,
    NONE,
    Optional,
    check_int,
    check_uint,
    contains_key,
    equals,
    fail,
    go_text,
    lookup,
    no_overload,
    type_name,
    unbroken,
)


class RuntimeDevice:
    """The ``device`` variable: what a selector sees of one device."""

    __slots__ = ("allowMultipleAllocations", "attributes", "capacity", "driver")

    def __init__(self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any]) -> None:
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allowMultipleAllocations = False


def arith(op: str) -> Callable[[Any, Any], Any]:
    def add(a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is tb:
            if ta is int:
                return check_int(a + b)
            if ta is float or ta is str or ta is bytes:
                return a + b
            if ta is UintType:
                return check_uint(int(a) + int(b))
            if ta is tv.Duration:
                return tv.add_duration(a, b)
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return [*a, *b]
        if ta is tv.Timestamp and tb is tv.Duration:
            return tv.add_time_duration(a, b.ns)
        if ta is tv.Duration and tb is tv.Timestamp:
            return tv.add_time_duration(b, a.ns)
        no_overload()

    def subtract(a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is tv.Duration and tb is tv.Duration:
            return tv.sub_duration(a, b)
        if ta is tv.Timestamp and tb is tv.Duration:
            return tv.sub_time_duration(a, b)
        if ta is tv.Timestamp and tb is tv.Timestamp:
            return tv.sub_times(a, b)
        return num(sub)(a, b)

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

    return {"_+_": add, "_-_": subtract, "_*_": num(mul), "_/_": num(div), "_%_": num(mod)}[op]


RELATIONAL: dict[str, Callable[[int], bool]] = {
    "_<_": lambda c: c < 0, "_<=_": lambda c: c <= 0, "_>_": lambda c: c > 0, "_>=_": lambda c: c >= 0,
}


def as_bool(v: Any) -> bool:
    if type(v) is not bool:
        no_overload()
    return v


def select(v: Any, field: str) -> Any:
    if isinstance(v, Mapping):
        found, value = lookup(v, field)
        if not found:
            fail(f"no such key: {field}")
        return unbroken(value)
    if type(v) is RuntimeDevice:
        return getattr(v, field)
    if type(v) is Optional:
        if not v.present:
            return NONE
        return optional_select(unbroken(v.value), field)
    return _unqualifiable(v, field, presence=False)


def _unqualifiable(v: Any, key: Any, *, presence: bool) -> Any:
    """A field or index of a value that is neither a map nor an optional, reached through dyn: cel-go's
    ``refQualify`` (interpreter/attributes.go) indexes a list, and finds nothing in anything else: absent for a
    presence test (``.?``, ``[?]``, ``has()``), "no such key" otherwise."""
    if isinstance(v, list | tuple):
        i = list_index(key)
        if 0 <= i < len(v):
            return Optional(v[i], True) if presence else v[i]
        if presence:
            return NONE
        fail(f"index out of bounds: {i}")
    if presence:
        return NONE
    fail(f"no such key: {go_text(key)}")


def has_field(v: Any, field: str) -> bool:
    """``has(v.field)`` where ``v`` is not ``device`` or one of its maps (those the runtime answers itself)."""
    if isinstance(v, Mapping):
        found, value = lookup(v, field)
        unbroken(value)  # cel-go's presence test reads the value: an error kept there fails it
        return found
    if type(v) is Optional:
        return v.present and has_field(unbroken(v.value), field)
    return bool(_unqualifiable(v, field, presence=True).present)


def optional_select(v: Any, field: str) -> Optional:
    if type(v) is Optional:
        return optional_select(unbroken(v.value), field) if v.present else NONE
    if isinstance(v, Mapping):
        found, value = lookup(v, field)
        return Optional(unbroken(value), True) if found else NONE
    if type(v) is RuntimeDevice:
        return Optional(getattr(v, field), True)
    return _unqualifiable(v, field, presence=True)  # type: ignore[no-any-return]


def index(c: Any, k: Any) -> Any:
    if type(c) is Optional:
        return optional_index(unbroken(c.value), k) if c.present else NONE
    if isinstance(c, list | tuple):
        i = list_index(k)
        if not 0 <= i < len(c):
            fail(f"index out of bounds: {i}")  # cel-go plans `_[_]` as an attribute: refQualify's missingIndex
        return unbroken(c[i])
    if isinstance(c, Mapping):
        found, value = lookup(c, k)
        if not found:
            fail(f"no such key: {go_text(k)}")
        return unbroken(value)
    return _unqualifiable(c, k, presence=False)


def list_index(k: Any) -> int:
    tk = type(k)
    if tk is int or tk is UintType:
        return int(k)
    if tk is float:
        if k == int(k) and -(2**63) <= k < 2**63:
            return int(k)
        fail(f"unsupported index value {go_text(k)} in list")  # cel-go common/types IndexOrError
    fail(f"unsupported index type '{type_name(k)}' in list")


def optional_index(c: Any, k: Any) -> Optional:
    if type(c) is Optional:
        return optional_index(unbroken(c.value), k) if c.present else NONE
    if isinstance(c, list | tuple):
        i = list_index(k)
        return Optional(unbroken(c[i]), True) if 0 <= i < len(c) else NONE
    if isinstance(c, Mapping):
        found, value = lookup(c, k)
        return Optional(unbroken(value), True) if found else NONE
    return NONE  # a presence test on a value that has no entries (refQualify): absent


def contains(x: Any, c: Any) -> bool:
    if isinstance(c, list | tuple):
        # the value is the receiver of Equal; an element it cannot compare with is not a match
        for y in c:
            try:
                if equals(x, y):
                    return True
            except CelRuntimeError:
                continue
        return False
    if isinstance(c, Mapping):
        return contains_key(c, x)
    no_overload()


def items(r: Any) -> Any:
    if isinstance(r, list | tuple):
        return r
    if isinstance(r, Mapping):
        return list(r.keys())
    no_overload()
