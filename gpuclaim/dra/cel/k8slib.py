"""Runtime of the Kubernetes CEL libraries DRA selectors use: quantity, semver, lists, regex, URL,
IP/CIDR, plus cel-go's ext.Sets, ext.Lists v3 and optional types."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from celpy.celtypes import UintType

from gpuclaim.dra.cel import regex
from gpuclaim.dra.cel.errors import CelRuntimeError
from gpuclaim.dra.cel.stdlib import FUNCS as FUNCS  # the table with this library registered
from gpuclaim.dra.cel.stdlib import _int, _str, impl
from gpuclaim.dra.cel.timevalues import Duration, Timestamp
from gpuclaim.dra.cel.values import (
    NONE,
    Optional,
    check_int,
    compare,
    equals,
    fail,
    no_overload,
    type_name,
    unbroken,
)
from gpuclaim.dra.quantity import Quantity, QuantityError, is_quantity, parse_quantity
from gpuclaim.dra.semver import Semver, SemverError, is_semver, parse_semver


# -- quantity -----------------------------------------------------------------------------------------
def _q(v: object) -> Quantity:
    if type(v) is not Quantity:
        no_overload()
    return v


@impl("quantity", member=False)
def _quantity(s: object) -> Quantity:
    try:
        return parse_quantity(_str(s))
    except QuantityError as exc:
        fail(str(exc))


FUNCS[("isQuantity", False)] = lambda s: is_quantity(_str(s))
FUNCS[("sign", False)] = lambda q: _q(q).sign()


def _qs_compare(a: object, b: object) -> int:
    if type(a) is Quantity and type(b) is Quantity:
        return a.compare(b)
    if type(a) is Semver and type(b) is Semver:
        return a.compare(b)
    no_overload()


FUNCS[("compareTo", True)] = _qs_compare
FUNCS[("isGreaterThan", True)] = lambda a, b: _qs_compare(a, b) > 0
FUNCS[("isLessThan", True)] = lambda a, b: _qs_compare(a, b) < 0


def _arith(q: object, other: object, sign: int) -> Quantity:
    if type(other) is not Quantity:
        other = _int(other)
    return _q(q).add(other) if sign > 0 else _q(q).sub(other)


FUNCS[("add", True)] = lambda q, o: _arith(q, o, 1)
FUNCS[("sub", True)] = lambda q, o: _arith(q, o, -1)


@impl("asInteger", member=True)
def _as_integer(q: object) -> int:
    value = _q(q).as_int64()
    if value is None:
        fail("cannot convert value to integer")
    return value


FUNCS[("isInteger", True)] = lambda q: _q(q).as_int64() is not None
FUNCS[("asApproximateFloat", True)] = lambda q: _q(q).as_approximate_float()


# -- semver -------------------------------------------------------------------------------------------
def _sv(v: object) -> Semver:
    if type(v) is not Semver:
        no_overload()
    return v


@impl("semver", member=False)
def _semver(s: object, normalize: object = False) -> Semver:
    if type(normalize) is not bool:
        no_overload()
    try:
        return parse_semver(_str(s), normalize=normalize)
    except SemverError as exc:
        fail(str(exc))


def _is_semver(s: object, normalize: object = False) -> bool:
    if type(normalize) is not bool:
        no_overload()
    return is_semver(_str(s), normalize=normalize)


FUNCS[("isSemver", False)] = _is_semver
FUNCS[("major", True)] = lambda v: _sv(v).major
FUNCS[("minor", True)] = lambda v: _sv(v).minor
FUNCS[("patch", True)] = lambda v: _sv(v).patch


# -- Kubernetes lists ---------------------------------------------------------------------------------
def _list(v: object) -> list[Any] | tuple[Any, ...]:
    if not isinstance(v, list | tuple):
        no_overload()
    return v


# library/lists.go isSorted/min/max: every element must be a traits.Comparer (`[null].min()` has no overload)
_COMPARABLE = frozenset({int, UintType, float, str, bytes, bool, Duration, Timestamp})


def _comparable(items: list[Any] | tuple[Any, ...]) -> None:
    if any(type(x) not in _COMPARABLE for x in items):
        no_overload()


@impl("includes", member=True)
def _includes(target: object, arg: object) -> bool:
    """library/lists.go includes: a list holds an element Equal to arg, or a scalar is Equal to it. Equal is
    cel-go's ref.Val.Equal, which answers false (not an error) for values of other types."""
    items = target if isinstance(target, list | tuple) else (target,)
    for item in items:
        try:
            if equals(item, arg, top=False):
                return True
        except CelRuntimeError:
            continue
    return False


@impl("isSorted", member=True)
def _is_sorted(lst: object) -> bool:
    items = _list(lst)
    _comparable(items)
    return all(compare(items[i], items[i + 1]) <= 0 for i in range(len(items) - 1))


@impl("sum", member=True)
def _sum(lst: object) -> object:
    items = _list(lst)
    if not items:
        return 0
    kinds = {type(x) for x in items}
    if kinds == {int}:
        return check_int(sum(items))
    if kinds == {UintType}:
        total = sum(int(x) for x in items)
        return UintType(total) if total < 2**64 else fail("unsigned integer overflow")
    if kinds == {float}:
        return float(sum(items))
    if kinds == {Duration}:
        total = 0
        for x in items:
            total = check_int(total + x.ns)  # Duration.Add one at a time, each overflow checked
        return Duration(total)
    no_overload()


def _extreme(lst: object, sign: int, name: str) -> object:
    items = _list(lst)
    if not items:
        fail(f"{name} called on empty list")
    _comparable(items)
    best = items[0]
    for x in items[1:]:
        if compare(x, best) * sign > 0:
            best = x
    return best


FUNCS[("min", True)] = lambda lst: _extreme(lst, -1, "min")
FUNCS[("max", True)] = lambda lst: _extreme(lst, 1, "max")


# -- regex --------------------------------------------------------------------------------------------
@impl("find", member=True)
def _find(s: object, pattern: object) -> str:
    try:
        return regex.find(_str(s), _str(pattern))
    except regex.RegexError as exc:
        fail(f"error parsing regexp: {exc}")


@impl("findAll", member=True)
def _find_all(s: object, pattern: object, limit: object = -1) -> list[str]:
    try:
        return regex.find_all(_str(s), _str(pattern), _int(limit))
    except regex.RegexError as exc:
        fail(f"error parsing regexp: {exc}")


# -- URL, IP, CIDR ------------------------------------------------------------------------------------
class URL(str):
    cel_type = "kubernetes.URL"


def _parse_url(s: str) -> URL | None:
    # Go's url.ParseRequestURI: an absolute URL or an absolute path, no fragment.
    if not s or "#" in s or any(c.isspace() for c in s):
        return None
    parts = urlsplit(s)
    if not (parts.scheme and (parts.netloc or parts.path.startswith("/") or parts.path)) and not s.startswith("/"):
        return None
    return URL(s)


@impl("url", member=False)
def _url(s: object) -> URL:
    parsed = _parse_url(_str(s))
    return parsed if parsed is not None else fail("URL parse error during conversion from string: " + str(s))


FUNCS[("isURL", False)] = lambda s: _parse_url(_str(s)) is not None
FUNCS[("getScheme", True)] = lambda u: urlsplit(u).scheme
FUNCS[("getHost", True)] = lambda u: urlsplit(u).netloc.rsplit("@", 1)[-1]
FUNCS[("getHostname", True)] = lambda u: urlsplit(u).hostname or ""
FUNCS[("getPort", True)] = lambda u: "" if urlsplit(u).port is None else str(urlsplit(u).port)
FUNCS[("getEscapedPath", True)] = lambda u: urlsplit(u).path


class IP:
    cel_type = "net.IP"
    __slots__ = ("addr",)

    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and other.addr == self.addr

    def __hash__(self) -> int:
        return hash(self.addr)

    def __str__(self) -> str:
        return str(self.addr)


class CIDR:
    cel_type = "net.CIDR"
    __slots__ = ("iface",)

    def __init__(self, iface: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> None:
        self.iface = iface

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and other.iface == self.iface

    def __hash__(self) -> int:
        return hash(self.iface)

    def __str__(self) -> str:
        return str(self.iface)


def _parse_ip(s: str) -> IP | None:
    if "%" in s:  # zones are refused by Kubernetes' ip()
        return None
    try:
        addr = ipaddress.ip_address(s)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return None
    return IP(addr)


def _parse_cidr(s: str) -> CIDR | None:
    if "/" not in s or "%" in s:
        return None
    try:
        return CIDR(ipaddress.ip_interface(s))
    except ValueError:
        return None


FUNCS[("ip", False)] = lambda s: _parse_ip(_str(s)) or fail(
    f"IP Address '{s}' parse error during conversion from string"
)
FUNCS[("isIP", False)] = lambda s: _parse_ip(_str(s)) is not None
FUNCS[("family", True)] = lambda ip: ip.addr.version
FUNCS[("isUnspecified", True)] = lambda ip: ip.addr.is_unspecified
FUNCS[("isLoopback", True)] = lambda ip: ip.addr.is_loopback
FUNCS[("isLinkLocalMulticast", True)] = lambda ip: ip.addr.is_multicast and ip.addr.is_link_local
FUNCS[("isLinkLocalUnicast", True)] = lambda ip: ip.addr.is_link_local and not ip.addr.is_multicast
FUNCS[("isGlobalUnicast", True)] = lambda ip: not (
    ip.addr.is_unspecified or ip.addr.is_loopback or ip.addr.is_multicast or ip.addr.is_link_local
    or ip.addr == ipaddress.ip_address("255.255.255.255")
)
FUNCS[("cidr", False)] = lambda s: _parse_cidr(_str(s)) or fail(
    f"network address parse error during conversion from string: {s}"
)
FUNCS[("isCIDR", False)] = lambda s: _parse_cidr(_str(s)) is not None
FUNCS[("ip", True)] = lambda c: IP(c.iface.ip)
FUNCS[("masked", True)] = lambda c: CIDR(ipaddress.ip_interface(str(c.iface.network)))
FUNCS[("prefixLength", True)] = lambda c: c.iface.network.prefixlen


@impl("containsIP", member=True)
def _contains_ip(c: CIDR, other: object) -> bool:
    ip = other if isinstance(other, IP) else _parse_ip(_str(other))
    if ip is None:
        fail(f"IP Address '{other}' parse error during conversion from string")
    return ip.addr in c.iface.network


@impl("containsCIDR", member=True)
def _contains_cidr(c: CIDR, other: object) -> bool:
    sub = other if isinstance(other, CIDR) else _parse_cidr(_str(other))
    if sub is None:
        fail(f"network address parse error during conversion from string: {other}")
    net, inner = c.iface.network, sub.iface.network
    return inner.version == net.version and inner.subnet_of(net)  # type: ignore[arg-type]


# -- ext.Sets -----------------------------------------------------------------------------------------
def _has(items: list[Any] | tuple[Any, ...], x: object) -> bool:
    return any(equals(y, x) for y in items)


FUNCS[("sets.contains", False)] = lambda a, b: all(_has(_list(a), x) for x in _list(b))
FUNCS[("sets.equivalent", False)] = lambda a, b: all(_has(_list(a), x) for x in _list(b)) and all(
    _has(_list(b), x) for x in _list(a)
)
FUNCS[("sets.intersects", False)] = lambda a, b: any(_has(_list(a), x) for x in _list(b))


# -- ext.Lists v3 (StoredExpressions only) ------------------------------------------------------------
@impl("distinct", member=True)
def _distinct(lst: object) -> list[Any]:
    out: list[Any] = []
    for x in _list(lst):
        if not _has(out, x):
            out.append(x)
    return out


@impl("flatten", member=True)
def _flatten(lst: object, depth: object = 1) -> list[Any]:
    d = _int(depth)
    if d < 0:
        fail("level must be non-negative")
    out: list[Any] = []
    for x in _list(lst):
        if isinstance(x, list | tuple) and d > 0:
            out.extend(_flatten(x, d - 1))
        else:
            out.append(x)
    return out


FUNCS[("reverse", True)] = lambda lst: list(reversed(_list(lst)))
FUNCS[("first", True)] = lambda lst: Optional(_list(lst)[0], True) if _list(lst) else NONE
FUNCS[("last", True)] = lambda lst: Optional(_list(lst)[-1], True) if _list(lst) else NONE


@impl("slice", member=True)
def _slice(lst: object, start: object, end: object) -> list[Any]:
    items, a, b = _list(lst), _int(start), _int(end)
    if a < 0 or b < 0:
        fail(f"cannot slice({a}, {b}), negative indexes not supported")
    if a > b:
        fail(f"cannot slice({a}, {b}), start index must be less than or equal to end index")
    if b > len(items):
        fail(f"cannot slice({a}, {b}), list is length {len(items)}")
    return list(items[a:b])


@impl("sort", member=True)
def _sort(lst: object) -> list[Any]:
    import functools

    return sorted(_list(lst), key=functools.cmp_to_key(compare))


@impl("lists.range", member=False)
def _range(n: object) -> list[int]:
    return list(range(_int(n)))


# -- optional types -----------------------------------------------------------------------------------
def _opt(v: object) -> Optional:
    if type(v) is not Optional:
        no_overload()
    return v


def _zero(v: object) -> bool:
    """cel-go's ``IsZeroValue``: null, 0, "", false, empty lists and maps, a zero duration, and the timestamp
    0001-01-01T00:00:00Z (Go's zero time.Time); quantities, semvers, types and optionals never are."""
    if type(v) is Duration:
        return v.ns == 0
    if type(v) is Timestamp:
        return v.sec == _GO_ZERO_TIME and v.nsec == 0
    if v is None:
        return True
    if type(v) in (int, UintType, float, bool):
        return v == 0  # -0.0 too; never `in` a tuple: a uint refuses str equality
    if type(v) in (str, bytes) or isinstance(v, list | tuple | Mapping):
        return len(v) == 0  # type: ignore[arg-type]
    return False


_GO_ZERO_TIME = -62135596800  # 0001-01-01T00:00:00Z in Unix seconds


FUNCS[("optional.of", False)] = lambda v: Optional(v, True)
FUNCS[("optional.none", False)] = lambda: NONE
FUNCS[("optional.ofNonZeroValue", False)] = lambda v: NONE if _zero(v) else Optional(v, True)
def _receiver(v: object, function: str) -> Optional:
    """The optional a method is called on; cel-go's overload dispatch (common/decls) names what it got instead."""
    if type(v) is not Optional:
        fail(f"no such overload: {function}({type_name(v)})")
    return v


def _value(o: object) -> Any:
    opt = _receiver(o, "value")
    return unbroken(opt.value) if opt.present else fail("optional.none() dereference")


FUNCS[("hasValue", True)] = lambda o: _receiver(o, "hasValue").present
FUNCS[("value", True)] = _value
FUNCS[("orValue", True)] = lambda o, d: _opt(o).value if _opt(o).present else d
FUNCS[("or", True)] = lambda o, other: o if _opt(o).present else _opt(other)
