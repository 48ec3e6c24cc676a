"""DeviceClass: the selectors and config every request naming the class inherits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuclaim.dra.fieldpath import FieldError, Path

from . import names
from ._read import Reader, typename
from .meta import ObjectMeta, check_type_meta, parse_object_meta
from .selectors import DeviceConfiguration, Selector, parse_configs, parse_selectors

KIND = "DeviceClass"

_SPEC_FIELDS = frozenset({"selectors", "config", "extendedResourceName"})


@dataclass(frozen=True, slots=True)
class DeviceClass:
    meta: ObjectMeta
    selectors: tuple[Selector, ...]  # all must match
    config: tuple[DeviceConfiguration, ...]
    extended_resource_name: str | None = None  # alpha DRAExtendedResource (KEP-5004)

    @property
    def name(self) -> str:
        return self.meta.name


def parse_device_class(obj: object) -> tuple[DeviceClass | None, list[FieldError]]:
    r = Reader()
    if not isinstance(obj, Mapping):
        r.add(FieldError.invalid(Path.root("kind"), typename(obj), "expected a DeviceClass object"))
        return None, r.errors
    if not check_type_meta(obj, KIND, r):
        return None, r.errors
    meta = parse_object_meta(obj, r, namespaced=False)
    spec = r.top(obj, "spec")
    if spec is None:  # spec is optional: a class without selectors admits every device
        return DeviceClass(meta=meta, selectors=(), config=()), r.errors
    path = Path.root("spec")
    r.unknown_fields(spec, _SPEC_FIELDS, path)
    selectors = parse_selectors(spec, path, r)
    config = parse_configs(spec, path, r)
    ern = r.string(spec, "extendedResourceName", path)
    if ern is not None:
        r.check(path.child("extendedResourceName"), ern, names.check_extended_resource_name)
    return DeviceClass(meta=meta, selectors=selectors, config=config, extended_resource_name=ern), r.errors
