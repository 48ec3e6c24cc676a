"""ResourceSlice: a driver's pool of devices with typed attributes and capacities.

Attribute and capacity names are stored fully qualified (``gpu.nvidia.com/productName``), the form both the CEL
environment (``device.attributes["gpu.nvidia.com"].productName``) and ``matchAttribute`` need. The parser is
on the extender's hot path (tens of thousands of devices), so it avoids building field paths unless something
is wrong and shares interned names and parsed values between devices.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.dra.quantity import Quantity, QuantityError, parse_quantity
from gpuclaim.dra.semver import Semver, SemverError, parse_semver

from . import names
from ._read import EMPTY_MAP, Reader, typename
from .meta import ObjectMeta, check_type_meta, parse_object_meta
from .nodeselector import NodeSelector, parse_node_selector

KIND = "ResourceSlice"

AttributeValue = bool | int | str | Semver
"""A typed attribute: check ``bool`` before ``int`` (a Python bool is an int)."""


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    generation: int
    resource_slice_count: int


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """``capacity[name].requestPolicy`` (DRAConsumableCapacity): how a request for this capacity is rounded and
    what it may be. ``valid_range`` is (min, max or None, step or None)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] | None = None
    valid_range: tuple[Quantity | None, Quantity | None, Quantity | None] | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    """One capacity as the allocator's capacity arithmetic sees it: the name as written in the slice (upstream
    matches a claim's ``capacity.requests`` against it literally), the value, and the request policy."""

    name: str
    value: Quantity
    policy: CapacityPolicy | None = None


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    driver: str
    pool: str
    attributes: Mapping[str, AttributeValue]  # fully qualified names
    capacity: Mapping[str, Quantity]  # fully qualified names
    # alpha fields (gates off in 1.34): kept so a diagnosis can mention them, not used for allocation
    allow_multiple_allocations: bool = False
    taints: tuple[Mapping[str, Any], ...] = ()
    consumes_counters: tuple[Mapping[str, Any], ...] = ()
    # perDeviceNodeSelection (alpha): where this device is usable
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    # bindingConditions (alpha DRADeviceBindingConditions): with the gate off (1.34's default) the allocator
    # never selects such a device (allocator_experimental.go:1089, isSelectable)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()  # copied into the allocation result, as binding_conditions
    binds_to_node: bool = False  # an allocation of this device is pinned to the node it was made for
    # every capacity with its request policy, names as written (DRAConsumableCapacity's arithmetic)
    consumable: tuple[DeviceCapacity, ...] = ()

    @property
    def id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.name)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    meta: ObjectMeta
    driver: str
    pool: Pool
    devices: tuple[Device, ...]
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    shared_counters: tuple[Mapping[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name

    def available_on(self, *, node_name: str, node_labels: Mapping[str, str]) -> bool:
        """Whether the slice's devices can be used on this node (per-device selection: any of them)."""
        if self.node_name is not None:
            return self.node_name == node_name
        if self.node_selector is not None:
            return self.node_selector.matches(labels=node_labels, name=node_name)
        if self.all_nodes:
            return True
        if self.per_device_node_selection:
            return any(device_available_on(d, node_name=node_name, node_labels=node_labels) for d in self.devices)
        return False


def device_available_on(device: Device, *, node_name: str, node_labels: Mapping[str, str]) -> bool:
    """For slices with ``perDeviceNodeSelection``: the device's own node association."""
    if device.node_name is not None:
        return device.node_name == node_name
    if device.node_selector is not None:
        return device.node_selector.matches(labels=node_labels, name=node_name)
    return device.all_nodes


_SPEC_FIELDS = frozenset(
    {"driver", "pool", "nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection", "devices", "sharedCounters"}
)
_POOL_FIELDS = frozenset({"name", "generation", "resourceSliceCount"})
_DEVICE_FIELDS = frozenset(
    {
        "name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints",
        "bindsToNode", "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations",
    }
)  # fmt: skip
_CAPACITY_FIELDS = frozenset({"value", "requestPolicy"})
_ATTR_TYPES = frozenset({"int", "bool", "string", "version"})
_LIST_ATTR_TYPES = frozenset({"ints", "bools", "strings", "versions"})
_SPEC = Path.root("spec")


def parse_resource_slice(obj: object) -> tuple[ResourceSlice | None, list[FieldError]]:
    """Parse and validate a ResourceSlice. None when it is not a usable v1 ResourceSlice at all."""
    r = Reader()
    if not isinstance(obj, Mapping):
        r.add(FieldError.invalid(Path.root("kind"), typename(obj), "expected a ResourceSlice object"))
        return None, r.errors
    if not check_type_meta(obj, KIND, r):
        return None, r.errors
    meta = parse_object_meta(obj, r, namespaced=False)
    spec = r.top(obj, "spec", required=True)
    if spec is None:
        return None, r.errors
    r.unknown_fields(spec, _SPEC_FIELDS, _SPEC)
    driver = sys.intern(r.name(spec, "driver", _SPEC, names.check_driver_name))
    pool = _parse_pool(spec, r)
    node_name, node_selector, all_nodes, per_device = _parse_node_association(spec, _SPEC, r, per_slice=True)
    raw_devices = r.seq(spec, "devices", _SPEC, limit=names.RESOURCE_SLICE_MAX_DEVICES)
    devices = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_devices):
        device = _parse_device(raw, i, driver, pool.name, per_device, r)
        if device is None:
            continue
        if device.name in seen:
            r.add(FieldError.duplicate(_SPEC.child("devices").index(i), device.name))
        seen.add(device.name)
        devices.append(device)
    shared = r.objects(spec, "sharedCounters", _SPEC)
    slice_ = ResourceSlice(
        meta=meta,
        driver=driver,
        pool=pool,
        devices=tuple(devices),
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        per_device_node_selection=per_device,
        shared_counters=shared,
    )
    return slice_, r.errors


def _parse_pool(spec: Mapping[str, Any], r: Reader) -> Pool:
    path = _SPEC.child("pool")
    raw = r.obj(spec, "pool", _SPEC, required=True)
    if raw is None:
        return Pool("", 0, 0)
    r.unknown_fields(raw, _POOL_FIELDS, path)
    name = sys.intern(r.name(raw, "name", path, names.check_pool_name))
    generation = r.integer(raw, "generation", path)
    if generation is None:
        generation = 0
    elif generation < 0:
        r.add(FieldError.invalid(path.child("generation"), generation, "must be greater than or equal to zero"))
    count = r.integer(raw, "resourceSliceCount", path)
    if count is None or count <= 0:
        r.add(FieldError.invalid(path.child("resourceSliceCount"), count or 0, "must be greater than zero"))
        count = count or 0
    return Pool(name, generation, count)


def _parse_node_association(
    obj: Mapping[str, Any], path: Path, r: Reader, *, per_slice: bool
) -> tuple[str | None, NodeSelector | None, bool, bool]:
    """Exactly one of nodeName / nodeSelector / allNodes (/ perDeviceNodeSelection on the slice)."""
    set_fields = []
    node_name = r.string(obj, "nodeName", path)
    if node_name is not None:
        if node_name:
            set_fields.append("`nodeName`")
            r.check(path.child("nodeName"), node_name, names.check_dns1123_subdomain)
            node_name = sys.intern(node_name)
        else:
            r.add(FieldError.invalid(path.child("nodeName"), "", "must be either unset or set to a non-empty string"))
            node_name = None
    node_selector = None
    if obj.get("nodeSelector") is not None:
        set_fields.append("`nodeSelector`")
        node_selector = parse_node_selector(obj["nodeSelector"], path.child("nodeSelector"), r)
        if per_slice and node_selector is not None and len(node_selector.terms) > 1:
            r.add(
                FieldError.invalid(
                    path.child("nodeSelector").child("nodeSelectorTerms"),
                    len(node_selector.terms),
                    "must have exactly one node selector term",
                )
            )
    all_nodes = r.boolean(obj, "allNodes", path)
    if all_nodes is not None:
        if all_nodes:
            set_fields.append("`allNodes`")
        else:
            r.add(FieldError.invalid(path.child("allNodes"), False, "must be either unset or set to true"))
    per_device = r.boolean(obj, "perDeviceNodeSelection", path) if per_slice else None
    if per_device is not None:
        if per_device:
            set_fields.append("`perDeviceNodeSelection`")
        else:
            r.add(
                FieldError.invalid(path.child("perDeviceNodeSelection"), False, "must be either unset or set to true")
            )
    if per_slice:
        one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
        if not set_fields:
            r.add(FieldError.required(path, one_of))
        elif len(set_fields) > 1:
            r.add(FieldError.invalid(path, "{" + ", ".join(set_fields) + "}", one_of + ", but multiple fields are set"))
    elif len(set_fields) > 1:
        r.add(
            FieldError.invalid(
                path,
                "{" + ", ".join(set_fields) + "}",
                "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
                "is set to true in the ResourceSlice spec",
            )
        )
    return node_name, node_selector, bool(all_nodes), bool(per_device)


_BASIC_DEVICE_FIELDS = frozenset({"name", "attributes", "capacity"})


def _parse_device(raw: object, i: int, driver: str, pool: str, per_device: bool, r: Reader) -> Device | None:
    if type(raw) is not dict and not isinstance(raw, Mapping):
        r.wrong_type(_SPEC.child("devices").index(i), raw, "an object")
        return None
    if not raw.keys() <= _DEVICE_FIELDS:
        dpath = _SPEC.child("devices").index(i)
        if "basic" in raw:
            r.add(
                FieldError.forbidden(
                    dpath.child("basic"),
                    "unknown field: `basic` is the v1beta1 shape; in resource.k8s.io/v1 the device's attributes "
                    "and capacity sit directly on the device",
                )
            )
        r.unknown_fields({k: v for k, v in raw.items() if k != "basic"}, _DEVICE_FIELDS, dpath)
    name = raw.get("name")
    if not isinstance(name, str) or not name or names.check_dns1123_label(name):
        name = r.name(raw, "name", _SPEC.child("devices").index(i), names.check_dns1123_label)
    attributes = _parse_attributes(raw.get("attributes"), i, driver, r)
    capacity = _parse_capacity(raw.get("capacity"), i, driver, r)
    if len(attributes) + len(capacity) > names.RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
        r.add(
            FieldError.invalid(
                _SPEC.child("devices").index(i),
                len(attributes) + len(capacity),
                "the total number of attributes and capacities must not exceed "
                f"{names.RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE}",
            )
        )
    extras: dict[str, Any] = {}
    if per_device or not raw.keys() <= _BASIC_DEVICE_FIELDS:  # rare alpha features beyond the basic three
        extras = _parse_device_extras(raw, i, per_device, r)
    if capacity or isinstance(raw.get("capacity"), Mapping):  # a name refused above still takes part upstream
        extras["consumable"] = _consumable(raw["capacity"], i, r)
    return Device(name=name, driver=driver, pool=pool, attributes=attributes, capacity=capacity, **extras)


def _parse_device_extras(raw: Mapping[str, Any], i: int, per_device: bool, r: Reader) -> dict[str, Any]:
    dpath = _SPEC.child("devices").index(i)
    extras: dict[str, Any] = {}
    # binding conditions (alpha DRADeviceBindingConditions): kept, they make the device unusable with the gate off
    if r.boolean(raw, "bindsToNode", dpath):
        extras["binds_to_node"] = True
    binding_conditions = r.strings(raw, "bindingConditions", dpath, limit=names.BINDING_CONDITIONS_MAX_SIZE)
    if binding_conditions:
        extras["binding_conditions"] = binding_conditions
    failure_conditions = r.strings(raw, "bindingFailureConditions", dpath, limit=names.BINDING_CONDITIONS_MAX_SIZE)
    if failure_conditions:
        extras["binding_failure_conditions"] = failure_conditions
    amm = r.boolean(raw, "allowMultipleAllocations", dpath)
    if amm:
        extras["allow_multiple_allocations"] = True
    extras["taints"] = r.objects(raw, "taints", dpath, limit=names.DEVICE_TAINTS_MAX_LENGTH)
    extras["consumes_counters"] = r.objects(raw, "consumesCounters", dpath)
    has_node_fields = any(raw.get(k) is not None for k in ("nodeName", "nodeSelector", "allNodes"))
    if per_device:
        node_name, node_selector, all_nodes, _ = _parse_node_association(raw, dpath, r, per_slice=False)
        if node_name is None and node_selector is None and not all_nodes:
            r.add(
                FieldError.required(
                    dpath,
                    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
                )
            )
        extras.update(node_name=node_name, node_selector=node_selector, all_nodes=all_nodes)
    elif has_node_fields:
        r.add(
            FieldError.invalid(
                dpath,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to "
                "true in the ResourceSlice spec",
            )
        )
    return extras


def _parse_attributes(raw: object, i: int, driver: str, r: Reader) -> Mapping[str, AttributeValue]:
    if raw is None:
        return EMPTY_MAP
    if not isinstance(raw, Mapping):
        r.wrong_type(_SPEC.child("devices").index(i).child("attributes"), raw, "an object")
        return EMPTY_MAP
    qualified = _qualified_names(driver)
    max_len = names.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH
    out: dict[str, AttributeValue] = {}
    for name, attr in raw.items():
        fq = qualified.get(name) or _qualify_new(name, driver)
        if fq is None:
            _bad_name(name, i, "attributes", r)
            continue
        # fast path (exact types, no ABC checks): exactly one well-typed value
        if type(attr) is dict and len(attr) == 1:
            for kind, value in attr.items():
                vtype = type(value)
                if kind == "string":
                    if vtype is str and len(value) <= max_len:
                        out[fq] = _dedup(value)
                        break
                elif kind == "int":
                    if vtype is int and -(2**63) <= value < 2**63:
                        out[fq] = value
                        break
                elif kind == "bool":
                    if vtype is bool:
                        out[fq] = value
                        break
                elif kind == "version" and vtype is str and len(value) <= max_len:
                    version = _version(value)
                    if version is not None:
                        out[fq] = version
                        break
                _attribute_errors(attr, _SPEC.child("devices").index(i).child("attributes").key(name), r)
            continue
        _attribute_errors(attr, _SPEC.child("devices").index(i).child("attributes").key(name), r)
    return MappingProxyType(out)


def _attribute_errors(attr: object, path: Path, r: Reader) -> None:
    """The slow path: say exactly what is wrong with one attribute value."""
    if not isinstance(attr, Mapping):
        r.wrong_type(path, attr, "an object with exactly one of int, bool, string, version")
        return
    lists = sorted(k for k in attr if k in _LIST_ATTR_TYPES)
    if lists:
        r.add(
            FieldError.forbidden(
                path.child(lists[0]),
                "list-typed attributes (ints, bools, strings, versions) need the DRAListTypeAttributes feature "
                "(Kubernetes 1.36 alpha); a 1.34 apiserver accepts exactly one of int, bool, string, version",
            )
        )
    r.unknown_fields(attr, _ATTR_TYPES | _LIST_ATTR_TYPES, path)
    present = [k for k in ("int", "bool", "string", "version") if attr.get(k) is not None]
    if len(present) + len(lists) != 1 and not lists:
        value: object = "" if not present else dict(attr)
        r.add(FieldError.invalid(path, value, "exactly one value must be specified"))
    for kind in present:
        value = attr[kind]
        kpath = path.child(kind)
        if kind == "int":
            r.integer(attr, "int", path)
        elif kind == "bool":
            r.boolean(attr, "bool", path)
        elif not isinstance(value, str):
            r.wrong_type(kpath, value, "a string")
        else:
            if kind == "version" and not names.is_semver(value):
                r.add(FieldError.invalid(kpath, value, names.SEMVER_MSG))
            if len(value) > names.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
                r.add(FieldError.too_long(kpath, value, names.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))


def _parse_capacity(raw: object, i: int, driver: str, r: Reader) -> Mapping[str, Quantity]:
    if raw is None:
        return EMPTY_MAP
    if not isinstance(raw, Mapping):
        r.wrong_type(_SPEC.child("devices").index(i).child("capacity"), raw, "an object")
        return EMPTY_MAP
    qualified = _qualified_names(driver)
    out: dict[str, Quantity] = {}
    for name, cap in raw.items():
        fq = qualified.get(name) or _qualify_new(name, driver)
        if fq is None:
            _bad_name(name, i, "capacity", r)
            continue
        value = cap.get("value") if isinstance(cap, Mapping) else None
        quantity = _quantity(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
        if quantity is not None and len(cap) == 1:
            out[fq] = quantity
            continue
        path = _SPEC.child("devices").index(i).child("capacity").key(name)
        if not isinstance(cap, Mapping):
            r.wrong_type(path, cap, "an object with a value")
            continue
        r.unknown_fields(cap, _CAPACITY_FIELDS, path)
        if value is None:
            r.add(FieldError.required(path.child("value"), ""))
        elif quantity is None:
            r.add(FieldError.invalid(path.child("value"), value, _quantity_message(value)))
        else:
            out[fq] = quantity  # requestPolicy is alpha and only matters with allowMultipleAllocations
    return MappingProxyType(out)


def _consumable(raw: Any, i: int, r: Reader) -> tuple[DeviceCapacity, ...]:
    """Capacities with their request policies (validated here; the values were checked by _parse_capacity)."""
    out = []
    for name, cap in raw.items():
        raw_value = cap.get("value") if isinstance(cap, Mapping) else None
        ok = isinstance(raw_value, str | int | float) and not isinstance(raw_value, bool)
        value = _quantity(raw_value) if ok else None  # type: ignore[arg-type]
        if value is None:
            continue
        policy = None
        raw_policy = cap.get("requestPolicy")
        if raw_policy is not None:
            policy = _request_policy(raw_policy, _SPEC.child("devices").index(i).child("capacity").key(name)
                                     .child("requestPolicy"), r)  # fmt: skip
        out.append(DeviceCapacity(str(name), value, policy))
    return tuple(out)


_POLICY_FIELDS = frozenset({"default", "validValues", "validRange"})
_RANGE_FIELDS = frozenset({"min", "max", "step"})


def _request_policy(raw: object, path: Path, r: Reader) -> CapacityPolicy | None:
    if not isinstance(raw, Mapping):
        r.wrong_type(path, raw, "an object")
        return None
    r.unknown_fields(raw, _POLICY_FIELDS, path)

    def quantity(value: object, at: Path) -> Quantity | None:
        q = _quantity(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
        if q is None:
            r.add(FieldError.invalid(at, value, _quantity_message(value)))
        return q

    default = quantity(raw["default"], path.child("default")) if raw.get("default") is not None else None
    values: tuple[Quantity, ...] | None = None
    if raw.get("validValues") is not None:
        items = raw["validValues"]
        if not isinstance(items, list):
            r.wrong_type(path.child("validValues"), items, "a list")
        else:
            if len(items) > names.CAPACITY_POLICY_VALID_VALUES_MAX_SIZE:
                r.add(FieldError.too_many(path.child("validValues"), len(items),
                                          names.CAPACITY_POLICY_VALID_VALUES_MAX_SIZE))  # fmt: skip
            parsed = [quantity(v, path.child("validValues").index(k)) for k, v in enumerate(items)]
            values = tuple(q for q in parsed if q is not None)
    valid_range = None
    if raw.get("validRange") is not None:
        rng = raw["validRange"]
        rpath = path.child("validRange")
        if not isinstance(rng, Mapping):
            r.wrong_type(rpath, rng, "an object")
        else:
            r.unknown_fields(rng, _RANGE_FIELDS, rpath)
            bounds = [quantity(rng[k], rpath.child(k)) if rng.get(k) is not None else None
                      for k in ("min", "max", "step")]  # fmt: skip
            if bounds[0] is None:
                r.add(FieldError.required(rpath.child("min"), ""))
            elif bounds[2] is not None and bounds[2].value <= 0:
                r.add(FieldError.invalid(rpath.child("step"), str(bounds[2]), "must be positive"))
            else:
                valid_range = (bounds[0], bounds[1], bounds[2])
    if values is not None and valid_range is not None:
        r.add(FieldError.forbidden(path, "validValues and validRange are mutually exclusive"))
    return CapacityPolicy(default=default, valid_values=values, valid_range=valid_range)


def _qualified_names(driver: str) -> dict[str, str]:
    """The memo of valid names of one driver: unqualified or qualified name → interned fully qualified name."""
    memo = _QUALIFIED.get(driver)
    if memo is None:
        memo = {}
        if len(_QUALIFIED) < _QUALIFIED_MAX_DRIVERS:
            _QUALIFIED[driver] = memo
    return memo


def _qualify_new(name: object, driver: str) -> str | None:
    """Check a name not seen before for this driver; remember it when valid (bounded)."""
    if not isinstance(name, str) or names.check_qualified_name(name):
        return None
    fq = sys.intern(names.qualify(name, driver))
    memo = _qualified_names(driver)
    if len(memo) < _QUALIFIED_MAX_NAMES:
        memo[name] = fq
    return fq


# Module-owned memo of attribute/capacity names per driver. A fleet has a handful of drivers and a few dozen
# names each; the bounds keep hostile input from growing it (beyond them names are checked every time).
_QUALIFIED: dict[str, dict[str, str]] = {}
_QUALIFIED_MAX_DRIVERS = 256
_QUALIFIED_MAX_NAMES = 1024


def _bad_name(name: object, i: int, field: str, r: Reader) -> None:
    path = _SPEC.child("devices").index(i).child(field)
    if not isinstance(name, str):
        r.wrong_type(path, name, "an object with string keys")
        return
    r.check(path, name, names.check_qualified_name)


@functools.lru_cache(maxsize=65536)
def _dedup(value: str) -> str:
    # Identical attribute strings (product names, architectures, pcieRoots) share one object across devices.
    return value


@functools.lru_cache(maxsize=4096)
def _version(text: str) -> Semver | None:
    if not names.is_semver(text):
        return None
    try:
        return parse_semver(text)
    except SemverError:
        return None


@functools.lru_cache(maxsize=4096)
def _quantity_text(text: str) -> Quantity | None:
    try:
        return parse_quantity(text)
    except QuantityError:
        return None


def _quantity(value: str | int | float) -> Quantity | None:
    return _quantity_text(value if isinstance(value, str) else str(value))


def _quantity_message(value: object) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return f"must be a quantity string, got {typename(value)}"
    try:
        parse_quantity(value if isinstance(value, str) else str(value))
    except QuantityError as exc:
        return str(exc)
    return "invalid quantity"
