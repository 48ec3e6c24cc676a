"""The wording of dry-run findings: which guard to add, and what the devices do offer.

A user who wrote a selector that matches nothing needs to see the values the fleet publishes for exactly
the attributes and capacities the selector reads, and the classic trap spelled out (an H100 sold as 80 GB
publishes ``81559Mi``, less than ``80Gi``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from gpuclaim.dra import api, cel
from gpuclaim.dra.quantity import Quantity, QuantityError, parse_quantity
from gpuclaim.dra.semver import Semver

__all__ = ["describe_offers", "guard_hint", "plural", "quantity_traps"]

_NO_SUCH_KEY = re.compile(r"no such key: ([A-Za-z_][A-Za-z0-9_]*)")
_QUANTITY_LITERAL = re.compile(r"""quantity\(\s*(?:"([^"]*)"|'([^']*)')\s*\)""")
_MAX_VALUES = 3


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def guard_hint(error: str, selector: cel.CompiledSelector) -> str:
    """The guard that turns this runtime error into a plain non-match."""
    missing = _NO_SUCH_KEY.search(error)
    if missing is not None:
        name = missing.group(1)
        for read in sorted(selector.reads):
            if read.name == name and read.domain is not None and read.kind in ("attribute", "capacity"):
                kind = "attributes" if read.kind == "attribute" else "capacity"
                domain = read.domain
                return (
                    f"guard the lookup: '{name}' in device.{kind}[\"{domain}\"] && ..., "
                    f"or device.{kind}[\"{domain}\"].?{name}.orValue(<default>)"
                )
        return f"guard the lookup of {name!r} with `'{name}' in ...` or `has(...)`, or `.?{name}.orValue(<default>)`"
    if "no such overload" in error or "no matching overload" in error:
        return (
            "the value on this device has another type than the expression expects (e.g. a version compared "
            "with a string): compare versions with .compareTo(semver(\"...\")), quantities with "
            ".compareTo(quantity(\"...\"))"
        )
    if "converted to bool" in error:
        return "the expression must produce a bool on every device (compare the attribute with a value)"
    return "make the selector total: guard every lookup so that a device it cannot judge yields false"


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Quantity | Semver):
        return str(value)
    return str(value)


def _lookup(device: api.Device, kind: str, domain: str, name: str) -> object:
    source = device.attributes if kind == "attribute" else device.capacity
    value = source.get(f"{domain}/{name}")
    if value is None and domain == device.driver:
        value = source.get(name)
    return value


def describe_offers(devices: Sequence[api.Device], selector: cel.CompiledSelector) -> str:
    """``gpu.nvidia.com/memory: 81559Mi (16 devices); ...`` for what ``selector`` reads, over ``devices``."""
    parts: list[str] = []
    for read in sorted(selector.reads):
        if read.kind == "driver":
            drivers = Counter(d.driver for d in devices)
            parts.append("driver: " + _top(drivers))
            continue
        if read.kind not in ("attribute", "capacity") or read.domain is None or read.name is None:
            continue
        values: Counter[str] = Counter()
        for device in devices:
            value = _lookup(device, read.kind, read.domain, read.name)
            values["absent" if value is None else _render(value)] += 1
        label = "capacity " if read.kind == "capacity" else ""
        parts.append(f"{label}{read.domain}/{read.name}: {_top(values)}")
    return "; ".join(parts)


def _top(values: Counter[str]) -> str:
    shown = [f"{v} ({plural(n, 'device')})" for v, n in values.most_common(_MAX_VALUES)]
    rest = len(values) - _MAX_VALUES
    if rest > 0:
        shown.append(f"and {plural(rest, 'other value')}")
    return ", ".join(shown)


def quantity_traps(devices: Iterable[api.Device], selector: cel.CompiledSelector) -> list[str]:
    """Published capacities just below a quantity literal of the selector (within 10%): the marketing-size trap."""
    literals: list[tuple[str, Quantity]] = []
    for match in _QUANTITY_LITERAL.finditer(selector.expression):
        text = match.group(1) if match.group(1) is not None else match.group(2)
        try:
            literals.append((text, parse_quantity(text)))
        except QuantityError:
            continue
    if not literals:
        return []
    offered: set[Quantity] = set()
    for read in selector.reads:
        if read.kind == "capacity" and read.domain is not None and read.name is not None:
            for device in devices:
                value = _lookup(device, "capacity", read.domain, read.name)
                if isinstance(value, Quantity):
                    offered.add(value)
    notes = []
    for text, literal in literals:
        for value in sorted(offered, key=str):
            # exact arithmetic: a float overflowed on quantity('1e400') (issue 14, finding 8)
            if value.compare(literal) < 0 and value.value * 10 >= literal.value * 9:
                notes.append(
                    f"{value} is less than {text} ({text} = {literal.as_integer()} bytes, {value} = "
                    f"{value.as_integer()}): devices publish their exact size, below the marketing size"
                )
    return notes
