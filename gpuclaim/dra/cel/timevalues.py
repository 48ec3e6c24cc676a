"""CEL's ``google.protobuf.Timestamp`` and ``google.protobuf.Duration`` values, as cel-go v0.26 has them.

cel-go wraps Go's ``time.Time`` and ``time.Duration`` (common/types/timestamp.go, duration.go): a duration is
an int64 count of nanoseconds, parsed by Go's ``time.ParseDuration``; a timestamp is an instant (seconds and
nanoseconds) in a location, parsed by ``time.Parse(time.RFC3339, s)`` and limited to years 0001..9999. The
location is kept because cel-go keeps it: ``string(timestamp("2024-01-01T00:00:00+01:00"))`` prints the
offset back, and the accessors without a time zone read the fields in it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NoReturn

from gpuclaim.dra.cel.errors import CelRuntimeError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NS = 1_000_000_000
MIN_UNIX, MAX_UNIX = -62135596800, 253402300799  # 0001-01-01T00:00:00Z, 9999-12-31T23:59:59Z


def _fail(message: str) -> NoReturn:
    raise CelRuntimeError(message)


class Duration:
    __slots__ = ("ns",)
    cel_type = "google.protobuf.Duration"

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def __eq__(self, other: object) -> bool:
        return type(other) is Duration and other.ns == self.ns

    def __hash__(self) -> int:
        return hash(("duration", self.ns))

    def __repr__(self) -> str:
        return f"duration({go_duration_string(self.ns)!r})"

    def __str__(self) -> str:
        return go_duration_string(self.ns)


class Timestamp:
    """An instant: ``sec`` since the Unix epoch, ``nsec`` in [0, 1e9), and the UTC ``offset`` (seconds east) of
    its location (None: UTC itself, which Go prints as ``Z`` / ``UTC``)."""

    __slots__ = ("nsec", "offset", "sec")
    cel_type = "google.protobuf.Timestamp"

    def __init__(self, sec: int, nsec: int, offset: int | None = None) -> None:
        self.sec, self.nsec, self.offset = sec, nsec, offset

    def __eq__(self, other: object) -> bool:
        return type(other) is Timestamp and (other.sec, other.nsec) == (self.sec, self.nsec)

    def __hash__(self) -> int:
        return hash(("timestamp", self.sec, self.nsec))

    def key(self) -> tuple[int, int]:
        return self.sec, self.nsec

    def __repr__(self) -> str:
        return f"timestamp({rfc3339(self)!r})"

    def __str__(self) -> str:
        """Go's ``time.Time.String()`` (what fmt prints): ``2006-01-02 15:04:05.999999999 -0700 MST``."""
        y, mo, d, h, mi, s = civil(self.sec + (self.offset or 0))
        frac = _fraction(self.nsec)
        off = self.offset or 0
        sign = "-" if off < 0 else "+"
        zone = f"{sign}{abs(off) // 3600:02d}{abs(off) % 3600 // 60:02d}"
        name = "UTC" if self.offset is None else zone
        return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}{frac} {zone} {name}"


def check_int64(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        _fail("integer overflow")
    return v


# -- calendar ----------------------------------------------------------------------------------------------
def _days_to_civil(z: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (H. Hinnant's civil_from_days)."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil(local: int) -> tuple[int, int, int, int, int, int]:
    days, rem = divmod(local, 86400)
    y, mo, d = _days_to_civil(days)
    return y, mo, d, rem // 3600, rem % 3600 // 60, rem % 60


def _is_leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def _days_in(m: int, y: int) -> int:
    if m == 2:
        return 29 if _is_leap(y) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _fraction(nsec: int) -> str:
    return ("." + f"{nsec:09d}".rstrip("0")) if nsec else ""


# -- parsing (Go's time.Parse with layout time.RFC3339) ------------------------------------------------------
def _digits(s: str, i: int, n: int) -> int | None:
    part = s[i : i + n]
    return int(part) if len(part) == n and part.isascii() and part.isdigit() else None


def parse_rfc3339(s: str) -> Timestamp | None:
    """Go's ``time.Parse(time.RFC3339, s)``: its strict fast path (format_rfc3339.go ``parseRFC3339``) and the
    general parser's leniencies it falls back to (a one-digit hour, a comma before the fraction)."""
    if not s.isascii():
        return None
    year = _digits(s, 0, 4)
    if year is None or s[4:5] != "-":
        return None
    month = _digits(s, 5, 2)
    if month is None or s[7:8] != "-":
        return None
    day = _digits(s, 8, 2)
    if day is None or s[10:11] != "T":
        return None
    i = 11
    hour = _digits(s, i, 2)
    if hour is None:  # stdHour ("15") takes one digit too in the general parser
        hour = _digits(s, i, 1)
        i += 1
    else:
        i += 2
    if hour is None or s[i : i + 1] != ":":
        return None
    minute = _digits(s, i + 1, 2)
    if minute is None or s[i + 3 : i + 4] != ":":
        return None
    second = _digits(s, i + 4, 2)
    if second is None:
        return None
    i += 6
    nsec = 0
    if len(s) >= i + 2 and s[i] in ".," and s[i + 1].isdigit():
        j = i + 1
        while j < len(s) and s[j].isdigit():
            j += 1
        nsec = int(s[i + 1 : min(j, i + 10)].ljust(9, "0"))
        i = j
    if not (1 <= month <= 12) or not (1 <= day <= _days_in(month, year)) or hour > 23 or minute > 59 or second > 59:
        return None
    rest = s[i:]
    offset: int | None
    if rest == "Z":
        offset = None
    else:
        if len(rest) != 6 or rest[0] not in "+-" or rest[3] != ":":
            return None
        oh, om = _digits(rest, 1, 2), _digits(rest, 4, 2)
        if oh is None or om is None or oh > 24 or om > 60:  # the general parser allows 24 hours, 60 minutes
            return None
        offset = (oh * 60 + om) * 60 * (-1 if rest[0] == "-" else 1)
    local = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    # an offset of zero is the local zone of a UTC process (Go's Parse prefers Local when it has that offset)
    return Timestamp(local - (offset or 0), nsec, offset or None)


def to_timestamp_from_string(s: str) -> Timestamp:
    t = parse_rfc3339(s)
    if t is None:
        _fail("type conversion error from 'string' to 'google.protobuf.Timestamp'")
    if not MIN_UNIX <= t.sec <= MAX_UNIX:
        _fail("timestamp overflow")
    return t


def to_timestamp_from_int(n: int) -> Timestamp:
    if not MIN_UNIX <= n <= MAX_UNIX:
        _fail("timestamp overflow")
    return Timestamp(n, 0)


# -- Go's time.ParseDuration ----------------------------------------------------------------------------------
_UNITS = {b"ns": 1, b"us": 1000, "µs".encode(): 1000, "μs".encode(): 1000, b"ms": 1_000_000, b"s": NS,
          b"m": 60 * NS, b"h": 3600 * NS}


def parse_go_duration(text: str) -> int | None:
    """Nanoseconds, or None where Go's ``time.ParseDuration`` returns an error (it works on bytes)."""
    s = text.encode("utf-8")
    neg = False
    if s[:1] in (b"-", b"+"):
        neg = s[:1] == b"-"
        s = s[1:]
    if s == b"0":
        return 0
    if not s:
        return None
    d = 0
    while s:
        if not (s[0] == 0x2E or 0x30 <= s[0] <= 0x39):
            return None
        i, v = 0, 0
        while i < len(s) and 0x30 <= s[i] <= 0x39:
            if v > (1 << 63) // 10:
                return None
            v = v * 10 + s[i] - 0x30
            if v > 1 << 63:
                return None
            i += 1
        pre = i > 0
        s = s[i:]
        f, scale, post = 0, 1.0, False
        if s[:1] == b".":
            s = s[1:]
            i, overflow = 0, False
            while i < len(s) and 0x30 <= s[i] <= 0x39:
                if not overflow:
                    if f > ((1 << 63) - 1) // 10:
                        overflow = True
                    else:
                        y = f * 10 + s[i] - 0x30
                        if y > 1 << 63:
                            overflow = True
                        else:
                            f, scale = y, scale * 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            return None
        i = 0
        while i < len(s) and not (s[i] == 0x2E or 0x30 <= s[i] <= 0x39):
            i += 1
        if i == 0:
            return None
        unit = _UNITS.get(s[:i])
        if unit is None:
            return None
        s = s[i:]
        if v > (1 << 63) // unit:
            return None
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))  # Go: uint64(float64(f) * (float64(unit) / scale))
            if v > 1 << 63:
                return None
        d += v
        if d > 1 << 63:
            return None
    if neg:
        return -d
    return None if d > (1 << 63) - 1 else d


def to_duration_from_string(s: str) -> Duration:
    ns = parse_go_duration(s)
    if ns is None:
        _fail("type conversion error from 'string' to 'google.protobuf.Duration'")
    return Duration(ns)


# -- formatting -------------------------------------------------------------------------------------------------
def _frac_digits(v: int, prec: int) -> tuple[str, int]:
    """Go's fmtFrac: the fraction of v / 10**prec without trailing zeros, and the integer part."""
    digits = ""
    printed = False
    for _ in range(prec):
        digit = v % 10
        printed = printed or digit != 0
        if printed:
            digits = str(digit) + digits
        v //= 10
    return ("." + digits if printed else ""), v


def go_duration_string(ns: int) -> str:
    """Go's ``time.Duration.String()`` ("1h0m0s", "1.5s", "300ms", "1µs", "0s")."""
    u = abs(ns)
    sign = "-" if ns < 0 else ""
    if u < NS:
        if u == 0:
            return "0s"
        if u < 1000:
            return f"{sign}{u}ns"
        prec, unit = (3, "µs") if u < 1_000_000 else (6, "ms")
        frac, whole = _frac_digits(u, prec)
        return f"{sign}{whole}{frac}{unit}"
    frac, whole = _frac_digits(u, 9)
    out = f"{whole % 60}{frac}s"
    whole //= 60
    if whole:
        out = f"{whole % 60}m" + out
        whole //= 60
        if whole:
            out = f"{whole}h" + out
    return sign + out


def duration_to_string(d: Duration) -> str:
    """cel-go: ``strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"``."""
    sec, nsec = int(d.ns / NS), d.ns - int(d.ns / NS) * NS  # Go truncates toward zero
    seconds = float(sec) + float(nsec) / 1e9
    text = format(Decimal(repr(seconds)).normalize(), "f")
    return ("0" if text in ("0", "-0") else text) + "s"


def rfc3339(t: Timestamp, *, utc: bool = False) -> str:
    """Go's ``t.Format(time.RFC3339Nano)`` in the timestamp's own location (or in UTC)."""
    off = 0 if utc else t.offset or 0
    y, mo, d, h, mi, s = civil(t.sec + off)
    zone = "Z" if off == 0 else f"{'-' if off < 0 else '+'}{abs(off) // 3600:02d}:{abs(off) % 3600 // 60:02d}"
    return f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{_fraction(t.nsec)}{zone}"


# -- arithmetic (cel-go common/types/overflow.go) -----------------------------------------------------------------
def add_duration(a: Duration, b: Duration) -> Duration:
    return Duration(check_int64(a.ns + b.ns))


def sub_duration(a: Duration, b: Duration) -> Duration:
    return Duration(check_int64(a.ns - b.ns))


def add_time_duration(t: Timestamp, ns: int) -> Timestamp:
    """addTimeDurationChecked: seconds and nanoseconds added apart; the result must stay in years 1..9999."""
    sec2 = int(ns / NS)  # Go's integer division truncates toward zero
    nsec2 = ns - sec2 * NS
    sec = check_int64(t.sec + sec2)
    nsec = t.nsec + nsec2
    if nsec < 0 or nsec >= NS:
        sec = check_int64(sec + int(nsec / NS))
        nsec -= int(nsec / NS) * NS
        if nsec < 0:
            sec = check_int64(sec - 1)
            nsec += NS
    if not MIN_UNIX <= sec <= MAX_UNIX:
        _fail("timestamp overflow")
    return Timestamp(sec, nsec, t.offset)


def sub_time_duration(t: Timestamp, d: Duration) -> Timestamp:
    return add_time_duration(t, check_int64(-d.ns))


def sub_times(a: Timestamp, b: Timestamp) -> Duration:
    """subtractTimeChecked: the seconds' difference scaled to nanoseconds, overflow checked."""
    sec = check_int64(a.sec - b.sec)
    return Duration(check_int64(check_int64(sec * NS) + (a.nsec - b.nsec)))


# -- accessors ----------------------------------------------------------------------------------------------------
def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def _go_atoi(s: str) -> int:
    """Go's ``strconv.Atoi`` (base 10, optional sign), with its error text."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not body.isascii() or not body.isdigit():
        _fail(f'strconv.Atoi: parsing "{s}": invalid syntax')
    v = int(s)
    if not INT64_MIN <= v <= INT64_MAX:
        _fail(f'strconv.Atoi: parsing "{s}": value out of range')
    return v


def zone_offset(t: Timestamp, tz: str) -> int:
    """Seconds east of UTC of the zone named by cel-go's ``timeZone`` argument at the instant ``t``."""
    if ":" not in tz:
        if tz in ("", "UTC"):
            return 0
        if tz == "Local":
            return 0  # the apiserver and scheduler run with UTC as their local zone
        if ".." in tz or tz[0] in "/\\":
            _fail("time: invalid location name")
        import posixpath
        from zoneinfo import ZoneInfo

        if tz.rsplit("/", 1)[-1] in ("", "."):
            _fail(f"unknown time zone {tz}")  # Go opens <zoneinfo dir>/<name>: a directory path is no zone file
        try:
            # Go joins the name to the zone directory as it is (`Europe//Paris`, `./UTC` open fine); zoneinfo
            # wants the normalised key
            zone = ZoneInfo(posixpath.normpath(tz))
        except (ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError subclass, handled below
            _fail(f"unknown time zone {tz}")
        except KeyError:
            _fail(f"unknown time zone {tz}")
        try:
            instant = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=t.sec)
            off = instant.astimezone(zone).utcoffset()
        except OverflowError:
            off = zone.utcoffset(datetime(1 if t.sec < 0 else 9999, 1 if t.sec < 0 else 12, 15))
        return int(off.total_seconds()) if off is not None else 0
    ind = tz.index(":")
    hr, mins = _go_atoi(tz[:ind]), _go_atoi(tz[ind + 1 :])
    offset = _wrap64(hr * 60 - mins) if tz[0] == "-" else _wrap64(hr * 60 + mins)
    d = _wrap64(offset * 60 * NS)
    return int(int(d / NS) + (d - int(d / NS) * NS) / 1e9)  # int((Duration(offset) * Minute).Seconds())


def fields(t: Timestamp, tz: str | None) -> tuple[int, int, int, int, int, int]:
    off = 0 if tz is None else zone_offset(t, tz)  # without a zone: UTC, whatever the timestamp's own offset
    return civil(t.sec + off)


def accessor(name: str, t: Timestamp, tz: str | None) -> int:
    y, mo, d, h, mi, s = fields(t, tz)
    if name == "getFullYear":
        return y
    if name == "getMonth":
        return mo - 1
    if name == "getDayOfYear":
        return sum(_days_in(m, y) for m in range(1, mo)) + d - 1
    if name == "getDayOfMonth":
        return d - 1
    if name == "getDate":
        return d
    if name == "getDayOfWeek":
        off = 0 if tz is None else zone_offset(t, tz)
        return ((t.sec + off) // 86400 + 4) % 7  # 1970-01-01 was a Thursday
    if name == "getHours":
        return h
    if name == "getMinutes":
        return mi
    if name == "getSeconds":
        return s
    return t.nsec // 1_000_000  # getMilliseconds


def duration_accessor(name: str, d: Duration) -> int:
    """cel-go DurationGet*: Go's ``int64(d.Hours())`` etc. (whole units plus the remainder as a float, then
    truncated: the float sum can round up near the int64 limit, as in Go) and ``d.Milliseconds()``."""
    if name == "getMilliseconds":
        return _trunc_div(d.ns, 1_000_000)
    unit = {"getHours": 3600 * NS, "getMinutes": 60 * NS, "getSeconds": NS}[name]
    whole = _trunc_div(d.ns, unit)
    return int(float(whole) + float(d.ns - whole * unit) / float(unit))


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // b
    return q if a >= 0 else -q
