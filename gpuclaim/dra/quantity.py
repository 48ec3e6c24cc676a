"""Kubernetes `resource.Quantity`, as k8s.io/apimachinery parses, compares and prints it.

Capacities in ResourceSlices and the CEL `quantity()` library both use these semantics:
values are exact (a Fraction here, inf.Dec there), parsing rounds *up* to the nano scale,
BinarySI values are capped at 2^63-1, and equality is by value (`1Gi == 1024Mi`).
`str()` gives Kubernetes' canonical form (`81559Mi`, `1536`, `500m`, `1k`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

__all__ = ["Quantity", "QuantityError", "is_quantity", "parse_quantity"]

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

# apimachinery's error texts, verbatim: the CEL library surfaces them to users.
_ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ERR_NUMERIC = "unable to parse quantity's numeric part"
_ERR_SUFFIX = "unable to parse quantity's suffix"
_ERR_INTEGER = "cannot convert value to integer"

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_NANO = Fraction(1, 10**9)

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {0: "", **{v: k for k, v in _BINARY_SUFFIXES.items()}}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_MAX_DIGITS = 200
_MAX_EXPONENT = 400


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or a value that does not fit what was asked."""


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    value: Fraction
    format: Format = "DecimalSI"
    # apimachinery's int64Amount (value, scale) when the quantity has that fast representation, None when it is
    # an inf.Dec: only the CEL library sees the difference (asInteger/isInteger succeed only on an int64Amount
    # with scale >= 0).
    amount: tuple[int, int] | None = None
    # produced by the CEL library's add()/sub(): a *Quantity in Go, which Quantity.Equal refuses as its argument
    arith: bool = False

    # Equality and hashing by value only: Kubernetes' Quantity.Equal ignores the format.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def add(self, other: Quantity | int) -> Quantity:
        return self._combine(other, 1)

    def sub(self, other: Quantity | int) -> Quantity:
        return self._combine(other, -1)

    def _combine(self, other: Quantity | int, sign: int) -> Quantity:
        if isinstance(other, Quantity):
            other_value, other_format, other_amount = other.value, other.format, other.amount
        else:
            other_value, other_format, other_amount = Fraction(other), "DecimalExponent", (other, 0)
        # apimachinery keeps the receiver's format, except that a zero receiver takes the other's
        fmt: Format = other_format if self.value == 0 else self.format
        amount = None
        value = self.value + sign * other_value
        if self.amount is not None and other_amount is not None:
            negated = sign * other_amount[0]
            if negated > _INT64_MAX:
                negated = _INT64_MIN  # Go's int64Amount.Sub negates in int64: -MinInt64 wraps to MinInt64
            amount = _amount_add(self.amount, (negated, other_amount[1]))
            if amount is not None:
                value = Fraction(amount[0]) * Fraction(10) ** amount[1]  # what the int64 fast path computed
        return Quantity(value, fmt, amount, True)

    def as_int64(self) -> int | None:
        """``Quantity.AsInt64``: the value when it is an int64Amount of scale >= 0 that fits, else None."""
        if self.amount is None:
            return None
        value, scale = self.amount
        if scale < 0:
            return None
        return _scaled(value, scale)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_integer(self) -> bool:
        return self.value.denominator == 1 and _INT64_MIN <= self.value.numerator <= _INT64_MAX

    def as_integer(self) -> int:
        if not self.is_integer():
            raise QuantityError(_ERR_INTEGER)
        return self.value.numerator

    def as_approximate_float(self) -> float:
        try:
            return float(self.value)
        except OverflowError:  # apimachinery: float64(value) * math.Pow10(scale) is ±Inf
            return math.inf if self.value > 0 else -math.inf

    def __str__(self) -> str:
        return _canonical(self.value, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _fits(v: int) -> bool:
    return _INT64_MIN <= v <= _INT64_MAX


def _scaled(value: int, scale: int) -> int | None:
    """positiveScaleInt64: value * 10^scale, None on int64 overflow."""
    if scale > 18 and value != 0:
        return None
    out = value * 10**scale
    return out if _fits(out) else None


def _amount_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """int64Amount.Add: None where apimachinery falls back to inf.Dec."""
    (av, asc), (bv, bsc) = a, b
    if not _fits(bv):
        return None
    if bv == 0:
        return a
    if av == 0:
        return b
    if asc == bsc:
        c: int | None = av + bv
        scale = asc
    elif asc > bsc:
        c, scale = _scaled(av, asc - bsc), bsc
        c = None if c is None else c + bv
    else:
        c, scale = _scaled(bv, bsc - asc), asc
        c = None if c is None else av + c
    return (c, scale) if c is not None and _fits(c) else None


def _int64_amount(text: str, negative: bool, integer: str, fraction: str, fmt: Format,
                  exponent: int) -> tuple[int, int] | None:
    """ParseQuantity's fast path (apimachinery quantity.go): the int64Amount, or None for an inf.Dec."""
    if text == "0":
        return (0, 0)
    mantissa = 1
    if fmt == "BinarySI":
        scale = 0
        if exponent >= 0 and not fraction:
            mantissa = 1 << exponent
            precision = 15 - len(integer) - int(exponent * 3 / 10) - 1
        else:
            precision = -1
    else:
        scale, precision = exponent, 18 - (len(integer) + len(fraction))
    if precision < 0:
        return None
    scale -= len(fraction)
    shifted = integer + fraction
    if scale < -9 or not shifted:
        return None
    result = int(shifted) * mantissa
    if not _fits(result):
        return None
    return (-result if negative else result, scale)


def parse_quantity(text: str) -> Quantity:
    """Parse like `resource.ParseQuantity`; raise QuantityError with apimachinery's message."""
    if not isinstance(text, str) or not text:
        raise QuantityError(_ERR_FORMAT)
    # a bare sign ("+", "-") is zero: parseQuantityString's zero-stripping loop reaches the end and sets num "0"
    # (apimachinery v0.34.4-v0.37.2 pkg/api/resource/quantity.go; the CEL oracle of each version agrees)
    negative, number, suffix = _split(text)
    fmt, base, exponent = _interpret(suffix)
    integer, _, fraction = number.partition(".")
    if len(integer) + len(fraction) > _MAX_DIGITS or abs(exponent) > _MAX_EXPONENT:
        # apimachinery's inf.Dec takes these; exact rational arithmetic on them would let one
        # admission request burn the CPU, so refuse them by name instead
        raise QuantityError(f"quantity {text[:40]!r} is too large to handle (more than {_MAX_DIGITS} digits "
                            f"or an exponent beyond {_MAX_EXPONENT})")
    digits = (integer or "0") + fraction
    if not digits.isdigit():
        raise QuantityError(_ERR_NUMERIC)
    value = Fraction(int(digits), 10 ** len(fraction))
    value *= Fraction(base) ** exponent
    if value.denominator != 1 and (value / _NANO).denominator != 1:
        # round away from zero to the nano scale: "if you want some resources, you should get some"
        value = Fraction(math.ceil(value / _NANO)) * _NANO
    amount = _int64_amount(text, negative, integer, fraction, fmt, exponent)
    if fmt == "BinarySI" and value > _INT64_MAX:
        value = Fraction(_INT64_MAX)
    if amount is None and fmt == "BinarySI" and 0 < value < 1:
        fmt = "DecimalSI"  # apimachinery: a BinarySI fraction below one becomes DecimalSI
    return Quantity(-value if negative else value, fmt, amount)


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _split(text: str) -> tuple[bool, str, str]:
    """apimachinery's parseQuantityString: sign, number (digits[.digits]) and suffix."""
    pos, end = 0, len(text)
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end and text[pos] == ".":
        pos += 1
        while pos < end and text[pos] in _DIGITS:
            pos += 1
    number = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(_ERR_FORMAT)
    return negative, number, text[suffix_start:]


def _interpret(suffix: str) -> tuple[Format, int, int]:
    if suffix in _DECIMAL_SUFFIXES:
        return "DecimalSI", 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return "BinarySI", 2, _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        rest = suffix[1:]
        body = rest[1:] if rest[0] in "+-" else rest
        if body.isdigit():
            return "DecimalExponent", 10, int(rest)
    raise QuantityError(_ERR_SUFFIX)


def _remove_factors(value: int, factor: int) -> tuple[int, int]:
    times = 0
    while value != 0 and value % factor == 0:
        value //= factor
        times += 1
    return value, times


def _canonical(value: Fraction, fmt: Format) -> str:
    """Quantity.CanonicalizeBytes: BinarySI only for exact integers outside (-1024, 1024)."""
    if value == 0:
        return "0"
    if fmt == "BinarySI" and not (-1024 < value < 1024) and value.denominator == 1:
        mantissa, times = _remove_factors(value.numerator, 1024)
        return f"{mantissa}{_BINARY_BY_EXPONENT[times * 10]}"
    if fmt == "BinarySI":
        fmt = "DecimalSI"
    # exact decimal mantissa * 10^exponent: parsed values are multiples of 1e-9, sums of them too
    scaled = value * 10**9
    if scaled.denominator == 1:
        mantissa, exponent = scaled.numerator, -9
    else:  # values built by arithmetic with non-decimal fractions cannot occur; keep a faithful fallback
        return f"{float(value)!r}"
    mantissa, times = _remove_factors(mantissa, 10)
    exponent += times
    while exponent % 3 != 0:
        mantissa *= 10
        exponent -= 1
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    suffix = _DECIMAL_BY_EXPONENT.get(exponent)
    if suffix is None:  # beyond exa: apimachinery has no SI suffix there
        return f"{mantissa}e{exponent}"
    return f"{mantissa}{suffix}"
