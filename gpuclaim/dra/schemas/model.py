"""What a DRA driver publishes, per release: attribute names and types, capacity names, the device types that
carry each one, and (NVIDIA) the MIG profiles each product offers.

The same dataclasses read the shipped data files (``gpuclaim/dra/schemas/*.yaml``) and the ``schemas:`` key of
the config file, through the config loader: a field ``device_types`` is the key ``deviceTypes``. A name may end
in ``<N>`` for a numbered family (``memorySlice<N>`` matches ``memorySlice0``, ``memorySlice12``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

AttributeType = Literal["int", "bool", "string", "version"]
STANDARD_DOMAIN = "resource.kubernetes.io"
_NUMBERED = "<N>"


def _matches(pattern: str, name: str) -> bool:
    if pattern.endswith(_NUMBERED):
        stem = pattern[: -len(_NUMBERED)]
        return name.startswith(stem) and name[len(stem):].isdigit()
    return pattern == name


@dataclass(frozen=True, slots=True)
class AttributeSchema:
    """One attribute. ``name`` is bare (the driver's own domain) or qualified (``resource.kubernetes.io/pcieRoot``).
    Empty ``devices`` / ``releases``: every device type / every release of the driver."""

    name: str
    type: AttributeType
    devices: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()
    unique: bool = False  # a different value on every device (uuid): matchAttribute over two devices never holds
    note: str = ""


@dataclass(frozen=True, slots=True)
class CapacitySchema:
    name: str
    devices: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class MigProfileSet:
    """The MIG profiles of some products; a product matches when its ``productName`` starts with one of ``products``."""

    products: tuple[str, ...]
    profiles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DriverSchema:
    driver: str
    title: str = ""
    source: str = ""  # provenance: where the names come from (repository, path, tag or commit)
    releases: tuple[str, ...] = ()  # oldest first
    device_types: tuple[str, ...] = ()  # the values of the ``type`` attribute (``typeAttribute``)
    type_attribute: str = "type"
    attributes: tuple[AttributeSchema, ...] = ()
    capacities: tuple[CapacitySchema, ...] = ()
    mig_profiles: tuple[MigProfileSet, ...] = ()
    # config only: True replaces the shipped schema of this driver, False (default) adds to / overrides it by name
    replace: bool = False


def qualify(name: str, driver: str) -> tuple[str, str]:
    """``(domain, name)``: a bare name is in the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


@dataclass(frozen=True)
class Entry:
    """An attribute or capacity as a check sees it: where it is published, by which releases and device types."""

    domain: str
    name: str
    type: AttributeType | None  # None for a capacity
    releases: frozenset[str]  # empty: every release
    devices: frozenset[str]  # empty: every device type
    unique: bool = False
    note: str = ""


@dataclass(frozen=True)
class Schema:
    """The merged, queryable view of one driver (shipped + config), or of what an inventory's devices publish."""

    driver: str
    origin: str  # "shipped", "config", "shipped+config" or "inventory"
    title: str
    source: str
    releases: tuple[str, ...]
    device_types: tuple[str, ...]
    attributes: tuple[Entry, ...]
    capacities: tuple[Entry, ...]
    mig_profiles: tuple[MigProfileSet, ...] = ()
    products: tuple[str, ...] = ()  # inventory: the productName values seen
    devices: int = 0  # inventory: how many devices
    type_attribute: str = "type"

    @cached_property
    def _by_name(self) -> dict[tuple[str, str, str], list[Entry]]:
        out: dict[tuple[str, str, str], list[Entry]] = {}
        for kind, entries in (("attribute", self.attributes), ("capacity", self.capacities)):
            for e in entries:
                out.setdefault((kind, e.domain, e.name), []).append(e)
        return out

    def lookup(self, kind: Literal["attribute", "capacity"], domain: str, name: str) -> list[Entry]:
        """Every entry publishing ``domain/name`` (several when releases or device types differ)."""
        exact = self._by_name.get((kind, domain, name))
        if exact is not None:
            return exact
        entries = self.attributes if kind == "attribute" else self.capacities
        return [e for e in entries if e.domain == domain and _NUMBERED in e.name and _matches(e.name, name)]

    def names(self, kind: Literal["attribute", "capacity"], domain: str) -> list[str]:
        entries = self.attributes if kind == "attribute" else self.capacities
        return sorted({e.name for e in entries if e.domain == domain})

    def domains(self) -> set[str]:
        return {e.domain for e in (*self.attributes, *self.capacities)}

    def releases_of(self, entries: list[Entry]) -> frozenset[str]:
        """The releases publishing at least one of ``entries`` (all of them when one has no release list)."""
        if not self.releases or any(not e.releases for e in entries):
            return frozenset(self.releases)
        return frozenset().union(*(e.releases for e in entries))

    def releases_with(self, device_types: frozenset[str]) -> frozenset[str]:
        """The releases that have devices of these types: those of the entries naming one of the types (VFIO
        devices exist only since NVIDIA v25.12)."""
        out: set[str] = set()
        for e in (*self.attributes, *self.capacities):
            if e.devices & device_types:
                out.update(e.releases or self.releases)
        return frozenset(out) if out else frozenset(self.releases)

    def profiles_for(self, product: str) -> tuple[str, ...] | None:
        """The MIG profiles a product offers; None when the product is not in the table."""
        for group in self.mig_profiles:
            if any(product.startswith(p) for p in group.products):
                return group.profiles
        return None

    @cached_property
    def all_profiles(self) -> frozenset[str]:
        return frozenset(p for group in self.mig_profiles for p in group.profiles)


def entries_of(driver: DriverSchema) -> tuple[tuple[Entry, ...], tuple[Entry, ...]]:
    attributes = tuple(
        Entry(*qualify(a.name, driver.driver), a.type, frozenset(a.releases), frozenset(a.devices), a.unique, a.note)
        for a in driver.attributes
    )
    capacities = tuple(
        Entry(*qualify(c.name, driver.driver), None, frozenset(c.releases), frozenset(c.devices), note=c.note)
        for c in driver.capacities
    )
    return attributes, capacities


def closest(name: str, candidates: list[str]) -> str | None:
    """The candidate a typo most likely meant: same name ignoring case first, then the smallest edit distance
    (at most a third of the name, and at most 3)."""
    lowered = {c.lower(): c for c in candidates}
    if name.lower() in lowered:
        return lowered[name.lower()]
    best: tuple[int, str] | None = None
    for candidate in candidates:
        d = _distance(name.lower(), candidate.lower())
        if best is None or (d, candidate) < best:
            best = (d, candidate)
    if best is None or best[0] > min(3, max(1, len(name) // 3)):
        return None
    return best[1]


def _distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment): a swapped pair of letters is one edit."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


__all__ = [
    "STANDARD_DOMAIN", "AttributeSchema", "AttributeType", "CapacitySchema", "DriverSchema", "Entry",
    "MigProfileSet", "Schema", "closest", "entries_of", "qualify",
]
