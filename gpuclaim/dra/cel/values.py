"""Runtime values of the DRA CEL environment and CEL's equality, ordering and type names.

Values are plain Python objects for speed: ``int`` (int64), ``celpy.celtypes.UintType`` (uint64),
``float``, ``bool``, ``str``, ``bytes``, ``None``, ``list``, ``dict``, ``dra.quantity.Quantity``,
``dra.semver.Semver``, plus :class:`Optional` and :class:`TypeValue` defined here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn, cast

from celpy.celtypes import UintType

from gpuclaim.dra.cel.errors import CelRuntimeError
from gpuclaim.dra.cel.timevalues import Duration, Timestamp
from gpuclaim.dra.quantity import Quantity
from gpuclaim.dra.semver import Semver

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def fail(message: str) -> NoReturn:
    raise CelRuntimeError(message)


def no_overload() -> NoReturn:
    raise CelRuntimeError("no such overload")


class Broken:
    """An error held as a value. cel-go v0.26 can put a ``*types.Err`` inside an optional (``runtime``'s
    ``read_variable``), and cel-go keeps such a value as an optional list element or map entry: the optional or
    container has it, and the error surfaces only where that value is read (``unbroken``)."""

    __slots__ = ("error",)

    def __init__(self, error: CelRuntimeError) -> None:
        self.error = error


def unbroken(v: object) -> object:
    """``v``, or its error raised if it is :class:`Broken`."""
    if type(v) is Broken:
        raise v.error
    return v


class Optional:
    """CEL ``optional_type``: a value or none."""

    __slots__ = ("present", "value")

    def __init__(self, value: object = None, present: bool = False) -> None:
        self.value = value
        self.present = present

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = Optional()


class TypeValue:
    """A CEL type used as a value (``type(x) == int``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name


class DomainMap(dict[str, Any]):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map."""

    def __missing__(self, key: str) -> dict[str, Any]:
        return {}


def type_name(v: object) -> str:
    t = type(v)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is UintType:
        return "uint"
    if t is float:
        return "double"
    if t is str:
        return "string"
    if t is bytes:
        return "bytes"
    if v is None:
        return "null_type"
    if isinstance(v, list | tuple):
        return "list"
    if isinstance(v, Mapping):
        return "map"
    if t is Quantity:
        return "kubernetes.Quantity"
    if t is Semver:
        return "kubernetes.Semver"
    if t is Optional:
        return "optional_type"
    if t is TypeValue:
        return "type"
    return getattr(v, "cel_type", t.__name__)


_NUMERIC = (int, UintType, float)


def equals(a: object, b: object, *, top: bool = True) -> bool:
    """CEL ``==`` (``top``: the operator itself; inside lists and maps values compare without errors)."""
    ta, tb = type(a), type(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        if ta is tb or (ta is not float and tb is not float):
            return a == b  # int/uint compare exactly (cel-go compareIntUint)
        if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):  # type: ignore[arg-type]
            return False
        return _numeric_cmp(a, b) == 0
    if (ta is Quantity or ta is Semver) and b is None:
        return False  # their Equal(null) is false, not an error
    if ta is Quantity or ta is Semver:
        # apiserver's Quantity.Equal / Semver.Equal return no-such-overload for another type, and
        # Quantity.Equal for the *Quantity that add()/sub() return (k8s.io/apiserver pkg/cel/quantity.go:63).
        if tb is not ta or (top and tb is Quantity and b.arith):  # type: ignore[attr-defined]
            no_overload()
        return a == b
    both_maps = isinstance(a, Mapping) and isinstance(b, Mapping)
    if ta is not tb and not both_maps and not (isinstance(a, list | tuple) and isinstance(b, list | tuple)):
        return False
    if isinstance(a, list | tuple):
        other_items = cast("list[Any] | tuple[Any, ...]", b)  # same type as a, or both sequences (checked above)
        return len(a) == len(other_items) and all(_kept_equal(x, y) for x, y in zip(a, other_items, strict=False))
    if isinstance(a, Mapping):
        if len(a) != len(b):  # type: ignore[arg-type]
            return False
        for k, v in a.items():
            found, other = lookup(b, k)  # type: ignore[arg-type]
            if not found or not _kept_equal(v, other, top=False):
                return False
        return True
    if type(a) is Optional and type(b) is Optional:
        return a.present == b.present and (not a.present or equals(unbroken(a.value), unbroken(b.value)))
    return a == b


def _kept_equal(a: object, b: object, *, top: bool = True) -> bool:
    """Elements of two lists or maps: cel-go's list and map Equal stop only at an element comparison that is
    false (common/types/list.go, map.go), so one that is an error (a semver against an int, an error kept as an
    element, `Broken`) does not make them unequal."""
    if type(a) is Broken or type(b) is Broken:
        return True
    try:
        return equals(a, b, top=top)
    except CelRuntimeError:
        return True


def contains_key(m: Mapping[Any, Any], key: object) -> bool:
    if type(key) is str:
        return key in m
    return lookup(m, key)[0]


def lookup(m: Mapping[Any, Any], key: object) -> tuple[bool, object]:
    """A map lookup with CEL key semantics (numeric keys compare across int/uint/double, bool is not 1)."""
    tk = type(key)
    if tk is str:
        if key in m:
            return True, m[key]
        if type(m) is DomainMap:
            return True, {}  # upstream's mapper: Find of an unknown domain yields the empty map
        return False, None
    for k, v in m.items():
        tk2 = type(k)
        if (tk2 is tk or (tk in _NUMERIC and tk2 in _NUMERIC)) and k == key:
            return True, v
    return False, None


def _double_vs_integer(d: float, i: int) -> int:
    """cel-go common/types/compare.go compareDoubleInt / compareDoubleUint: the integer is converted to a
    double (so `double(9223372036854775807) > 9223372036854775807` is false: both are 2^63)."""
    if type(i) is UintType:
        if d < 0:
            return -1
        if d > 18446744073709551615.0:
            return 1
    else:
        if d < -9223372036854775808.0:
            return -1
        if d > 9223372036854775807.0:
            return 1
    f = float(i)
    return (d > f) - (d < f)


def _numeric_cmp(a: Any, b: Any) -> int:
    if type(a) is float and type(b) is not float:
        return _double_vs_integer(a, b)
    if type(b) is float and type(a) is not float:
        return -_double_vs_integer(b, a)
    return (a > b) - (a < b)  # type: ignore[no-any-return]


def compare(a: object, b: object) -> int:
    ta, tb = type(a), type(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):  # type: ignore[arg-type]
            no_overload()  # CEL: NaN is unordered; cel-go's comparisons then yield false, handled by callers
        return _numeric_cmp(a, b)
    if ta is tb and ta in (str, bytes, bool):
        return (a > b) - (a < b)  # type: ignore[operator, no-any-return]
    if isinstance(a, Duration) and isinstance(b, Duration):
        return (a.ns > b.ns) - (a.ns < b.ns)
    if isinstance(a, Timestamp) and isinstance(b, Timestamp):
        return (a.key() > b.key()) - (a.key() < b.key())
    no_overload()


def check_int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        fail("integer overflow")
    return v


def check_uint(v: int) -> UintType:
    if not 0 <= v <= UINT64_MAX:
        fail("unsigned integer overflow")
    return UintType(v)


def go_text(v: object) -> str:
    """A CEL value as Go's ``%v`` prints cel-go's value in an error message (the scalars; others by type)."""
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) in (int, UintType, str):
        return str(v) if type(v) is str else str(int(v))  # type: ignore[call-overload]
    if type(v) is float:
        return format_double(v)  # fmt's %v of a float64 is strconv's shortest 'g'
    if v is None:
        return "0"  # types.Null is structpb.NullValue, an int32 enum: %v prints its number
    return type_name(v)


def format_double(f: float) -> str:
    """Go's ``strconv.FormatFloat(f, 'g', -1, 64)``, which cel-go's ``string(double)`` uses."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    digits, exp = _shortest(abs(f))
    sign = "-" if f < 0 else ""
    x = exp - 1  # exponent of the first digit
    if x < -4 or x >= 6:  # Go's %g switches to an exponent at precision 6 for the shortest form
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if exp <= 0:
        return f"{sign}0.{'0' * -exp}{digits}"
    if exp >= len(digits):
        return f"{sign}{digits}{'0' * (exp - len(digits))}"
    return f"{sign}{digits[:exp]}.{digits[exp:]}"


def _shortest(f: float) -> tuple[str, int]:
    r = repr(f)
    # repr gives the shortest round-tripping digits; take them and the decimal exponent.
    if "e" in r:
        m, _, ee = r.partition("e")
        digits, exp = m.replace(".", ""), int(ee) + 1
    else:
        whole, _, frac = r.partition(".")
        frac = "" if frac == "0" else frac
        digits = (whole + frac).lstrip("0")
        exp = len(whole) if whole != "0" else -(len(frac) - len(frac.lstrip("0")))
    return digits.rstrip("0") or "0", exp
