"""Runtime of CEL's standard functions, conversions and the strings extension (v2, with format).

Each implementation takes the target (for member calls) and the arguments positionally and checks
types itself, because ``dyn``/``any`` values (device attributes) are only known at evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar

from celpy.celtypes import UintType

from gpuclaim.dra.cel import regex
from gpuclaim.dra.cel import timevalues as tv
from gpuclaim.dra.cel.values import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    TypeValue,
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
            n = int(v, 10)
        except ValueError:
            n = None
        if n is None or not INT64_MIN <= n <= INT64_MAX:
            fail("type conversion error from 'string' to 'int'")  # cel-go's wording, overflow included
        return n
    if type(v) is tv.Duration:
        return v.ns  # nanoseconds
    if type(v) is tv.Timestamp:
        return v.sec  # Unix seconds (Go's t.Unix())
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
            fail("type conversion error from 'string' to 'uint'")
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
            fail("type conversion error from 'string' to 'double'")
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
    if t is tv.Duration:
        return tv.duration_to_string(v)  # type: ignore[arg-type]
    if t is tv.Timestamp:
        return tv.rfc3339(v)  # type: ignore[arg-type]
    if type_name(v) == "kubernetes.Semver":
        fail("no such overload: string(kubernetes.Semver)")  # the semver library has no string conversion
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


@impl("timestamp", member=False)
def to_timestamp(v: object) -> tv.Timestamp:
    """cel-go's timestamp(): RFC 3339 strings (Go's time.Parse) and Unix seconds, in years 0001..9999."""
    if type(v) is tv.Timestamp:
        return v
    if type(v) is str:
        return tv.to_timestamp_from_string(v)
    if type(v) is int:
        return tv.to_timestamp_from_int(v)
    no_overload()


@impl("duration", member=False)
def to_duration(v: object) -> tv.Duration:
    """cel-go's duration(): Go's time.ParseDuration syntax. duration(int) is declared upstream but its binding
    (Int.ConvertToType) has no duration case: always a conversion error there, as here."""
    if type(v) is tv.Duration:
        return v
    if type(v) is str:
        return tv.to_duration_from_string(v)
    if type(v) is int:
        fail("type conversion error from 'int' to 'google.protobuf.Duration'")
    no_overload()


def _time_accessor(name: str) -> Impl:
    def get(target: object, *tz: object) -> int:
        if type(target) is tv.Timestamp:
            if tz and type(tz[0]) is not str:
                no_overload()
            return tv.accessor(name, target, tz[0] if tz else None)  # type: ignore[arg-type]
        if type(target) is tv.Duration and not tz and name in ("getHours", "getMinutes", "getSeconds",
                                                              "getMilliseconds"):
            return tv.duration_accessor(name, target)
        no_overload()

    return get


for _accessor in ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours",
                  "getMinutes", "getSeconds", "getMilliseconds"):
    FUNCS[(_accessor, True)] = _time_accessor(_accessor)

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
    text, pattern, i = _str(s), _str(sub), _int(start)
    if pattern == "":
        return i  # cel-go v0.26 ext/strings.go indexOfOffset: the offset as it is, unchecked
    if i > len(text):
        return -1  # cel-go: a start beyond the end finds nothing (a negative one is an error)
    return text.find(pattern, _offset(text, i))


@impl("lastIndexOf", member=True)
def _last_index_of(s: object, sub: object, *start: object) -> int:
    if isinstance(s, list | tuple):
        from gpuclaim.dra.cel.values import equals

        return next((i for i in range(len(s) - 1, -1, -1) if equals(s[i], sub)), -1)
    text, pattern = _str(s), _str(sub)
    if not start:
        return len(text) if pattern == "" else text.rfind(pattern)
    i = _int(start[0])
    if pattern == "":
        return i  # cel-go v0.26 ext/strings.go lastIndexOfOffset: the offset as it is, unchecked
    if i < 0:
        fail(f"index out of range: {i}")
    if i >= len(text):
        return -1  # lastIndexOfOffset: an offset at or past the end finds nothing
    return text.rfind(pattern, 0, min(i, len(text) - len(pattern)) + len(pattern))


def _empty_at_offset(function: str) -> Any:
    """cel-go v0.29's ext/strings.go indexOfOffset / lastIndexOfOffset: the empty string is found at the offset,
    which must not be negative, clamped to the end (v0.26 returns any offset as it is)."""
    older = FUNCS[(function, True)]

    def newer(s: object, sub: object, start: object) -> Any:
        if isinstance(s, str) and sub == "" and type(sub) is str:
            i = _int(start)
            if i < 0:
                fail(f"index out of range: {i}")
            return min(i, len(s))
        return older(s, sub, start)

    return newer


FUNCS[("indexOf@v0.29", True)] = _empty_at_offset("indexOf")
FUNCS[("lastIndexOf@v0.29", True)] = _empty_at_offset("lastIndexOf")


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
    if end and a > b:  # cel-go ext/strings.go substrRange checks the order first
        fail(f"invalid substring range. start: {a}, end: {b}")
    if a < 0 or a > len(text):
        fail(f"index out of range: {a}")
    if b < 0 or b > len(text):
        fail(f"index out of range: {b}")
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
    """ext.Strings v2's format() (cel-go ``ext/formatting.go``), as the 1.34 environment has it."""
    from gpuclaim.dra.cel.validators import clauses

    text = _str(fmt)
    if not isinstance(args, list | tuple):
        no_overload()
    try:
        found = iter(clauses(text))
    except ValueError as exc:
        fail(str(exc))
    out: list[str] = []
    i, n = 0, 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if text[i + 1 : i + 2] == "%":
            out.append("%")
            i += 2
            continue
        verb, prec = next(found)
        i = text.index(verb, i + 1) + 1
        if n >= len(args):
            fail(f"index {n} out of range")
        out.append(_format_one(verb, args[n], prec))
        n += 1
    return "".join(out)


def _format_error(what: str, arg: object) -> NoReturn:
    fail(f"error during formatting: {what}, was given {type_name(arg)}")


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _locale_float(arg: object, what: str) -> float:
    if isinstance(arg, float):
        return arg
    if type(arg) is str and arg in ("NaN", "Infinity", "-Infinity"):
        return float(arg.replace("Infinity", "inf"))
    _format_error(what, arg)


def _special(f: float) -> str | None:
    if f != f:
        return "NaN"
    if f in (math.inf, -math.inf):
        return "∞" if f > 0 else "-∞"
    return None


def _format_one(verb: str, arg: object, prec: int | None) -> str:
    from gpuclaim.dra.cel.validators import STRING_CLAUSE

    t = type(arg)
    if verb == "s":
        return _format_string(arg, STRING_CLAUSE)
    if verb == "d":
        if t in (int, UintType):
            return str(int(arg))  # type: ignore[call-overload]
        _format_error("decimal clause can only be used on integers", arg)
    if verb == "f":
        f = _locale_float(arg, "fixed-point clause can only be used on doubles")
        # golang.org/x/text's printer (locale en_US) groups thousands
        return _special(f) or f"{f:,.{6 if prec is None else prec}f}"
    if verb == "e":
        f = _locale_float(arg, "scientific clause can only be used on doubles")
        # cel-go passes the precision as a width ("%<p>e") to x/text, which writes ×10 and a superscript exponent
        special = _special(f)
        if special is None:
            mantissa, _, exponent = f"{f:.6e}".partition("e")
            digits = str(abs(int(exponent))).rjust(2, "0")
            special = mantissa + "×10" + (("-" if int(exponent) < 0 else "") + digits).translate(_SUPERSCRIPT)
        return special.rjust(6 if prec is None else prec)
    if verb in "xX":
        if t in (int, UintType):
            v = int(arg)  # type: ignore[call-overload]
            s = format(abs(v), "x") if verb == "x" else format(abs(v), "X")
            return ("-" if v < 0 else "") + s
        if isinstance(arg, str | bytes):
            raw = arg.encode() if isinstance(arg, str) else arg
            return raw.hex() if verb == "x" else raw.hex().upper()
        _format_error("only integers, byte buffers, and strings can be formatted as hex", arg)
    if verb == "o":
        if t in (int, UintType):
            v = int(arg)  # type: ignore[call-overload]
            return ("-" if v < 0 else "") + format(abs(v), "o")
        _format_error("octal clause can only be used on integers", arg)
    if verb == "b":
        if t is bool:
            return "1" if arg else "0"
        if t in (int, UintType):
            v = int(arg)  # type: ignore[call-overload]
            return ("-" if v < 0 else "") + format(abs(v), "b")
        _format_error("only integers and bools can be formatted as binary", arg)
    fail(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')


def _format_string(arg: object, what: str) -> str:
    """FormatString: %s of one value; lists and maps print their members as CEL literals."""
    t = type(arg)
    if isinstance(arg, list | tuple):
        return "[" + ", ".join(_quoted(x, what) for x in arg) + "]"
    if isinstance(arg, Mapping):
        pairs = []
        for k, v in arg.items():
            if type(k) in (str, bool):
                key = _quoted(k, what)
            elif type(k) in (int, UintType):
                key = str(int(k))
            else:
                fail(f"no formatting function for map key of type {type_name(k)}")
            pairs.append((key, _quoted(v, what)))
        pairs.sort(key=lambda kv: kv[0])
        return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"
    if arg is None:
        return "null"
    if t is tv.Duration:
        return tv.duration_to_string(arg)  # type: ignore[arg-type]
    if t is tv.Timestamp:
        return tv.rfc3339(arg)  # type: ignore[arg-type]  # ext/formatting.go: ConvertToType(StringType)
    if t in (int, UintType, float, bool, str, bytes, TypeValue):
        return to_string(arg)
    _format_error(what, arg)


def _quoted(v: object, what: str) -> str:
    """A member of a formatted list or map (cel-go ``clauseForType`` + ``quoteForCEL``)."""
    t = type(v)
    if t is float:
        f: float = v  # type: ignore[assignment]
        if f != f or f in (math.inf, -math.inf):
            return '"' + format_double(f) + '"'
        return f"{f:.6f}"
    if t is str:
        return _go_quote(v)  # type: ignore[arg-type]
    if t is bytes:
        return "b" + _go_quote(to_string(v))
    if t is TypeValue:
        return f"type({v})"
    if t is tv.Duration:
        return f'duration("{tv.duration_to_string(v)}")'  # type: ignore[arg-type]  # quoteForCEL
    if t is tv.Timestamp:
        return f'timestamp("{tv.rfc3339(v)}")'  # type: ignore[arg-type]
    if t in (int, UintType, bool) or v is None or isinstance(v, list | tuple | Mapping):
        return _format_string(v, what)
    fail(f"no formatting function for {type_name(v)}")


def _go_quote(s: str) -> str:
    """Go's %q for printable text: double quotes, backslash escapes."""
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _QUOTE:
            out.append(_QUOTE[ch])
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) > 0xFF else f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)
