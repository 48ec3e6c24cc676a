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

__all__ = ["Registry", "observed", "registry", "shipped"]


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


def observed(devices: Iterable[api.Device], base: Registry) -> dict[str, Schema]:
    """What the devices publish, per driver: every attribute with the type of its values, every capacity, the
    device types (values of the driver's type attribute) and product names. MIG tables come from ``base``."""
    attrs: dict[str, dict[tuple[str, str], set[str]]] = {}
    caps: dict[str, set[tuple[str, str]]] = {}
    kinds: dict[str, set[str]] = {}
    products: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for device in devices:
        driver = device.driver
        counts[driver] = counts.get(driver, 0) + 1
        table = attrs.setdefault(driver, {})
        shipped_schema = base.get(driver)
        type_attribute = f"{driver}/{shipped_schema.type_attribute if shipped_schema else 'type'}"
        for name, value in device.attributes.items():
            domain, _, ident = name.partition("/")
            table.setdefault((domain, ident), set()).add(_type_of(value))
            if name == type_attribute and isinstance(value, str):
                kinds.setdefault(driver, set()).add(value)
            elif name == f"{driver}/productName" and isinstance(value, str):
                products.setdefault(driver, set()).add(value)
        caps.setdefault(driver, set()).update(tuple(n.partition("/")[::2]) for n in device.capacity)  # type: ignore[misc]
    out = {}
    for driver, table in attrs.items():
        shipped_schema = base.get(driver)
        out[driver] = Schema(
            driver=driver, origin="inventory", title=shipped_schema.title if shipped_schema else driver,
            source=f"{counts[driver]} devices of the inventory", releases=(),
            device_types=tuple(sorted(kinds.get(driver, ()))),
            # a name published with two types (never by one driver in practice) keeps no type: not checked
            attributes=tuple(
                Entry(domain, name, next(iter(types)) if len(types) == 1 else None,  # type: ignore[arg-type]
                      frozenset(), frozenset())
                for (domain, name), types in sorted(table.items())
            ),
            capacities=tuple(Entry(d, n, None, frozenset(), frozenset()) for d, n in sorted(caps[driver])),
            mig_profiles=shipped_schema.mig_profiles if shipped_schema else (),
            products=tuple(sorted(products.get(driver, ()))), devices=counts[driver],
            type_attribute=shipped_schema.type_attribute if shipped_schema else "type",
        )
    return out
