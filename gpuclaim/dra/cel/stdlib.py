"""Runtime of CEL's standard functions, conversions and the strings extension (v2, with format).

Each implementation takes the target (for member calls) and the arguments positionally and checks
types itself, because ``dyn``/``any`` values (device attributes) are only known at evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from celpy.celtypes import UintType

from gpuclaim.dra.cel import regex
from gpuclaim.dra.cel.values import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    TypeValue,
    check_int,
    fail,
    format_double,
    no_overload,
    type_name,
)

Impl = Callable[..., Any]
FUNCS: dict[tuple[str, bool], Impl] = {}
_F = TypeVar("_F", bound=Impl)


def impl(name: str, *, member: bool) -> Callable[[_F], _F]:
    def register(fn: _F) -> _F:
        FUNCS[(name, member)] = fn
        return fn

    return register


def _str(v: object) -> str:
    if type(v) is not str:
        no_overload()
    return v


def _int(v: object) -> int:
    if type(v) is not int:
        no_overload()
    return v


# -- size, string predicates ---------------------------------------------------------------------------
def size(v: object) -> int:
    if isinstance(v, str | bytes | list | tuple | Mapping):
        return len(v)
    no_overload()


FUNCS[("size", False)] = FUNCS[("size", True)] = size


@impl("contains", member=True)
def _contains(s: object, sub: object) -> bool:
    return _str(sub) in _str(s)


@impl("startsWith", member=True)
def _starts(s: object, p: object) -> bool:
    return _str(s).startswith(_str(p))


@impl("endsWith", member=True)
def _ends(s: object, p: object) -> bool:
    return _str(s).endswith(_str(p))


def _matches(s: object, pattern: object) -> bool:
    try:
        return regex.matches(_str(s), _str(pattern))
    except regex.RegexError as exc:
        fail(f"error parsing regexp: {exc}")


FUNCS[("matches", True)] = FUNCS[("matches", False)] = _matches


# -- conversions --------------------------------------------------------------------------------------
@impl("int", member=False)
def to_int(v: object) -> int:
    if type(v) is int:
        return v
    if type(v) is UintType:
        if v > INT64_MAX:
            fail("integer overflow")
        return int(v)
    if type(v) is float:
        if math.isnan(v) or not -9.223372036854775e18 <= v < 9.223372036854775807e18:
            fail("integer overflow")
        return int(v)
    if type(v) is str:
        try:
            return check_int(int(v, 10))
        except ValueError:
            fail(f"cannot convert '{v}' to int")
    no_overload()


@impl("uint", member=False)
def to_uint(v: object) -> UintType:
    if type(v) is int or type(v) is UintType:
        if not 0 <= v <= UINT64_MAX:
            fail("unsigned integer overflow")
        return UintType(v)
    if type(v) is float:
        if math.isnan(v) or not 0 <= v < 1.8446744073709552e19:
            fail("unsigned integer overflow")
        return UintType(int(v))
    if type(v) is str:
        try:
            n = int(v, 10)
        except ValueError:
            fail(f"cannot convert '{v}' to uint")
        return to_uint(n)
    no_overload()


@impl("double", member=False)
def to_double(v: object) -> float:
    t = type(v)
    if t is float:
        return v  # type: ignore[return-value]
    if t is int or t is UintType:
        return float(v)  # type: ignore[arg-type]
    if t is str:
        try:
            return float(v)  # type: ignore[arg-type]
        except ValueError:
            fail(f"cannot convert '{v}' to double")
    no_overload()


@impl("string", member=False)
def to_string(v: object) -> str:
    t = type(v)
    if t is str:
        return v  # type: ignore[return-value]
    if t is bool:
        return "true" if v else "false"
    if t is int or t is UintType:
        return str(int(v))  # type: ignore[call-overload]
    if t is float:
        return format_double(v)  # type: ignore[arg-type]
    if type(v) is bytes:
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            fail("invalid UTF-8 in bytes, cannot convert to string")
    if t is TypeValue:
        return str(v)
    if hasattr(v, "cel_type") or type_name(v).startswith("kubernetes."):
        return str(v)
    no_overload()


@impl("bool", member=False)
def to_bool(v: object) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str:
        if v in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if v in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        fail("type conversion error from 'string' to 'bool'")
    no_overload()


@impl("bytes", member=False)
def to_bytes(v: object) -> bytes:
    if type(v) is bytes:
        return v
    return _str(v).encode("utf-8")


FUNCS[("dyn", False)] = lambda v: v
FUNCS[("type", False)] = lambda v: TypeValue(type_name(v))


# -- ext.Strings v2 -----------------------------------------------------------------------------------
@impl("charAt", member=True)
def _char_at(s: object, i: object) -> str:
    text, idx = _str(s), _int(i)
    if idx < 0 or idx > len(text):
        fail(f"index out of range: {idx}")
    return text[idx : idx + 1]


def _offset(text: str, i: int) -> int:
    if i < 0 or i > len(text):
        fail(f"index out of range: {i}")
    return i


@impl("indexOf", member=True)
def _index_of(s: object, sub: object, start: object = 0) -> int:
    if isinstance(s, list | tuple):
        from gpuclaim.dra.cel.values import equals

        return next((i for i, x in enumerate(s) if equals(x, sub)), -1)
    text, pattern = _str(s), _str(sub)
    return text.find(pattern, _offset(text, _int(start)))


@impl("lastIndexOf", member=True)
def _last_index_of(s: object, sub: object, *start: object) -> int:
    if isinstance(s, list | tuple):
        from gpuclaim.dra.cel.values import equals

        return next((i for i in range(len(s) - 1, -1, -1) if equals(s[i], sub)), -1)
    text, pattern = _str(s), _str(sub)
    end = _offset(text, _int(start[0])) if start else len(text)
    return text.rfind(pattern, 0, end + len(pattern))


_ASCII_UPPER = {c: c + 32 for c in range(65, 91)}
_ASCII_LOWER = {c: c - 32 for c in range(97, 123)}


@impl("lowerAscii", member=True)
def _lower(s: object) -> str:
    return _str(s).translate(_ASCII_UPPER)


@impl("upperAscii", member=True)
def _upper(s: object) -> str:
    return _str(s).translate(_ASCII_LOWER)


@impl("replace", member=True)
def _replace(s: object, old: object, new: object, n: object = -1) -> str:
    count = _int(n)
    return _str(s).replace(_str(old), _str(new), count if count >= 0 else -1)


@impl("split", member=True)
def _split(s: object, sep: object, n: object = -1) -> list[str]:
    text, separator, limit = _str(s), _str(sep), _int(n)
    if limit == 0:
        return []
    if separator == "":
        chars = list(text)
        if 0 < limit < len(chars):
            return [*chars[:limit - 1], "".join(chars[limit - 1:])]
        return chars
    return text.split(separator, limit - 1 if limit > 0 else -1)


@impl("substring", member=True)
def _substring(s: object, start: object, *end: object) -> str:
    text = _str(s)
    a = _int(start)
    b = _int(end[0]) if end else len(text)
    if a < 0 or a > len(text):
        fail(f"index out of range: {a}")
    if b < 0 or b > len(text):
        fail(f"index out of range: {b}")
    if a > b:
        fail(f"invalid substring range. start: {a}, end: {b}")
    return text[a:b]


@impl("trim", member=True)
def _trim(s: object) -> str:
    return _str(s).strip()


@impl("join", member=True)
def _join(lst: object, sep: object = "") -> str:
    if not isinstance(lst, list | tuple):
        no_overload()
    return _str(sep).join(_str(x) for x in lst)


_QUOTE = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
          "\\": "\\\\", '"': '\\"'}


@impl("strings.quote", member=False)
def _quote(s: object) -> str:
    return '"' + "".join(_QUOTE.get(c, c) for c in _str(s)) + '"'


@impl("format", member=True)
def _format(fmt: object, args: object) -> str:
    text = _str(fmt)
    if not isinstance(args, list | tuple):
        no_overload()
    out: list[str] = []
    i, n = 0, 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        i += 1
        if i < len(text) and text[i] == "%":
            out.append("%")
            i += 1
            continue
        prec = None
        if i < len(text) and text[i] == ".":
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            prec, i = int(text[i + 1 : j] or 0), j
        if i >= len(text):
            fail("could not parse formatting clause: unexpected end of string")
        verb = text[i]
        i += 1
        if n >= len(args):
            fail(f"index {n} out of range")
        arg = args[n]
        n += 1
        out.append(_format_one(verb, arg, prec))
    return "".join(out)


def _format_one(verb: str, arg: object, prec: int | None) -> str:
    t = type(arg)
    if verb == "s":
        if isinstance(arg, list | tuple):
            return "[" + ", ".join(_format_one("s", x, None) for x in arg) + "]"
        return to_string(arg)
    if verb == "d":
        if t in (int, UintType):
            return str(int(arg))  # type: ignore[call-overload]
        fail(f"error during formatting: decimal clause can only be used on integers, was given {type_name(arg)}")
    if verb in "fe":
        if t in (int, UintType, float):
            return f"{float(arg):.{6 if prec is None else prec}{verb}}"  # type: ignore[arg-type]
        fail(f"error during formatting: fixed-point clause can only be used on doubles, was given {type_name(arg)}")
    if verb in "xXob":
        if t in (int, UintType):
            return format(int(arg), verb)  # type: ignore[call-overload]
        if type(arg) in (str, bytes) and verb in "xX":
            raw = arg.encode() if isinstance(arg, str) else cast(bytes, arg)
            return raw.hex() if verb == "x" else raw.hex().upper()
        fail("error during formatting: only integers, byte buffers, and strings can be formatted as hex")
    fail(f"could not parse formatting clause: unrecognized formatting clause \"{verb}\"")


def int64_range(v: int) -> int:
    return v if INT64_MIN <= v <= INT64_MAX else fail("integer overflow")
