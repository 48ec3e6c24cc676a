"""The schemas a check consults: the shipped data files, merged with the config's ``schemas:``, and what the
devices of an inventory publish (which wins over both, driver by driver).

``shipped()`` reads and checks this package's ``*.yaml`` once per process (the function's cache owns them: they are
part of the installed package and never change). ``registry(config.schemas)`` merges them with the admin's entries,
cached by that (immutable, hashable) tuple. ``observed(devices)`` describes an inventory; callers cache it on
the inventory's index, which owns it for as long as those devices are current.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache, lru_cache
from importlib import resources

import yaml

from gpuclaim.dra import api
from gpuclaim.dra.config import ConfigError, load_config
from gpuclaim.dra.schemas.model import STANDARD_DOMAIN, DriverSchema, Entry, Schema, entries_of
from gpuclaim.dra.semver import Semver

__all__ = ["Published", "Registry", "observed", "published", "registry", "shipped"]


class Registry:
    """The merged schemas by driver name; ``standard`` is the ``resource.kubernetes.io`` one."""

    def __init__(self, schemas: dict[str, Schema]) -> None:
        self.schemas = schemas
        self.standard = schemas.get(STANDARD_DOMAIN)

    def get(self, driver: str) -> Schema | None:
        return self.schemas.get(driver)

    def __iter__(self) -> Iterator[Schema]:
        return iter(self.schemas.values())


@cache
def shipped() -> tuple[DriverSchema, ...]:
    """Every data file of this package, each checked by the config loader (a broken file is a packaging bug)."""
    out = []
    for item in sorted(resources.files(__package__).iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".yaml"):
            continue
        data = yaml.safe_load(item.read_text())
        try:
            (schema,) = load_config({"schemas": [data]}).schemas
        except ConfigError as exc:
            raise RuntimeError(f"shipped schema {item.name}: {exc}") from None
        out.append(schema)
    return tuple(out)


def _merge(base: DriverSchema, extra: DriverSchema) -> DriverSchema:
    """``extra``'s attributes and capacities replace the base's entries of the same name; releases, device types
    and MIG profile sets are added (``extra``'s MIG sets first, so they win for a product both list)."""
    if extra.replace:
        return extra
    names = {a.name for a in extra.attributes}
    capacities = {c.name for c in extra.capacities}
    return DriverSchema(
        driver=base.driver,
        title=extra.title or base.title,
        source="; ".join(s for s in (base.source, extra.source) if s),
        releases=base.releases + tuple(r for r in extra.releases if r not in base.releases),
        device_types=base.device_types + tuple(t for t in extra.device_types if t not in base.device_types),
        type_attribute=extra.type_attribute if extra.type_attribute != "type" else base.type_attribute,
        attributes=tuple(a for a in base.attributes if a.name not in names) + extra.attributes,
        capacities=tuple(c for c in base.capacities if c.name not in capacities) + extra.capacities,
        mig_profiles=extra.mig_profiles + base.mig_profiles,
    )


def _schema(driver: DriverSchema, origin: str) -> Schema:
    attributes, capacities = entries_of(driver)
    return Schema(
        driver=driver.driver, origin=origin, title=driver.title, source=driver.source, releases=driver.releases,
        device_types=driver.device_types, attributes=attributes, capacities=capacities,
        mig_profiles=driver.mig_profiles, type_attribute=driver.type_attribute,
    )


@lru_cache(maxsize=8)
def registry(extra: tuple[DriverSchema, ...] = ()) -> Registry:
    """The shipped schemas with the config's ``schemas:`` applied."""
    merged = {s.driver: (s, "shipped") for s in shipped()}
    for schema in extra:
        if schema.driver in merged:
            base, _ = merged[schema.driver]
            merged[schema.driver] = (_merge(base, schema), "config" if schema.replace else "shipped+config")
        else:
            merged[schema.driver] = (schema, "config")
    return Registry({name: _schema(s, origin) for name, (s, origin) in merged.items()})


def _type_of(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, Semver):
        return "version"
    return "string"


# What one group of devices (a slice) publishes, per driver: (driver, attributes as (domain, name, type), capacities
# as (domain, name), device types, product names, number of devices). Hashable, so that the slices of one GPU
# model (equal but for their count) merge once.
Published = tuple[str, frozenset[tuple[str, str, str]], frozenset[tuple[str, str]], frozenset[str], frozenset[str], int]


def published(devices: Iterable[api.Device], base: Registry) -> tuple[Published, ...]:
    """What ``devices`` publish, per driver (computed once per slice by the caller, kept while the slice is)."""
    acc: dict[str, _Acc] = {}
    for device in devices:
        driver = device.driver
        entry = acc.get(driver)
        if entry is None:
            entry = acc[driver] = _Acc(driver, base)
        entry.count += 1
        attributes = device.attributes
        # Devices of one model repeat every name: only new names are looked at (a set difference in C); a name's
        # type is its value's on the first device of the slice that publishes it.
        for name in attributes.keys() - entry.seen:
            entry.seen.add(name)
            domain, _, ident = name.partition("/")
            entry.attrs.add((domain, ident, _type_of(attributes[name])))
        kind, product = attributes.get(entry.type_name), attributes.get(entry.product_name)
        if kind.__class__ is str:
            entry.kinds.add(kind)
        if product.__class__ is str:
            entry.products.add(product)
        for name in device.capacity.keys() - entry.seen_caps:
            entry.seen_caps.add(name)
            domain, _, ident = name.partition("/")
            entry.caps.add((domain, ident))
    return tuple((e.driver, frozenset(e.attrs), frozenset(e.caps), frozenset(e.kinds), frozenset(e.products), e.count)
                 for e in acc.values())


class _Acc:
    __slots__ = ("attrs", "caps", "count", "driver", "kinds", "product_name", "products", "seen", "seen_caps",
                 "type_name")

    def __init__(self, driver: str, base: Registry) -> None:
        shipped_schema = base.get(driver)
        self.driver = driver
        self.type_name = f"{driver}/{shipped_schema.type_attribute if shipped_schema else 'type'}"
        self.product_name = f"{driver}/productName"
        self.attrs: set[tuple[str, str, str]] = set()
        self.caps: set[tuple[str, str]] = set()
        self.kinds: set[str] = set()
        self.products: set[str] = set()
        self.seen: set[str] = set()
        self.seen_caps: set[str] = set()
        self.count = 0


def observed(parts: Iterable[tuple[Published, ...]], base: Registry) -> dict[str, Schema]:
    """Merge what groups of devices publish into one schema per driver: every attribute with the type of its
    values, every capacity, the device types and product names. MIG tables come from ``base``."""
    counts: dict[str, int] = {}
    unique: set[tuple[str, frozenset[tuple[str, str, str]], frozenset[tuple[str, str]], frozenset[str],
                      frozenset[str]]] = set()
    for part in parts:
        for driver, attrs, caps, kinds, products, count in part:
            counts[driver] = counts.get(driver, 0) + count
            unique.add((driver, attrs, caps, kinds, products))
    types: dict[str, dict[tuple[str, str], set[str]]] = {}
    capacities: dict[str, set[tuple[str, str]]] = {}
    kinds_of: dict[str, set[str]] = {}
    products_of: dict[str, set[str]] = {}
    for driver, attrs, caps, kinds, products in unique:
        table = types.setdefault(driver, {})
        for domain, name, kind in attrs:
            table.setdefault((domain, name), set()).add(kind)
        capacities.setdefault(driver, set()).update(caps)
        kinds_of.setdefault(driver, set()).update(kinds)
        products_of.setdefault(driver, set()).update(products)
    out = {}
    for driver, table in types.items():
        shipped_schema = base.get(driver)
        out[driver] = Schema(
            driver=driver, origin="inventory", title=shipped_schema.title if shipped_schema else driver,
            source=f"{counts[driver]} devices of the inventory", releases=(),
            device_types=tuple(sorted(kinds_of[driver])),
            # a name published with two types (never by one driver in practice) keeps no type: not type-checked
            attributes=tuple(
                Entry(domain, name, next(iter(kinds)) if len(kinds) == 1 else None,  # type: ignore[arg-type]
                      frozenset(), frozenset())
                for (domain, name), kinds in sorted(table.items())
            ),
            capacities=tuple(Entry(d, n, None, frozenset(), frozenset()) for d, n in sorted(capacities[driver])),
            mig_profiles=shipped_schema.mig_profiles if shipped_schema else (),
            products=tuple(sorted(products_of[driver])), devices=counts[driver],
            type_attribute=shipped_schema.type_attribute if shipped_schema else "type",
        )
    return out
