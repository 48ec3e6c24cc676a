"""Read the legacy device counts out of a pod's containers, refusing what cannot be converted faithfully.

Rules (each refusal names the container, the resource and the field):
- the count must be a whole number greater than zero (`1.5`, `500m`, `0`, `-1` are refused);
- an extended resource needs a limit, and a request, if present, must equal the limit (Kubernetes'
  own rule for resources that cannot be overcommitted);
- the mapped DeviceClass must exist when `conversion.requireClassesExist` is on.
A resource that an in-tree KEP-5004 DeviceClass declares is left alone under
`extendedResourceClasses: leave` (with a warning), converted otherwise (also with a warning).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.dra.quantity import QuantityError, parse_quantity

from .mapping import MappingTable, Target

APP, INIT = "containers", "initContainers"


@dataclass(frozen=True, slots=True)
class Demand:
    """One container's legacy count of one mapped resource."""

    kind: str  # "containers" | "initContainers"
    index: int
    container: str
    #: runs alongside the app containers: an app container or a restartable init container (sidecar)
    long_running: bool
    target: Target
    count: int


@dataclass(slots=True)
class Collected:
    demands: list[Demand]
    refusals: list[FieldError]
    warnings: list[str]
    #: (kind, index) → the container's resources with the converted names removed (None: the field goes)
    resources: dict[tuple[str, int], dict[str, Any] | None]


def _count(value: object) -> int | Fraction | None:
    if type(value) is int:  # the usual YAML `nvidia.com/gpu: 1`; bool is an int subclass and falls through
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, float | str):
        try:
            return parse_quantity(str(value)).value
        except QuantityError:
            return None
    return None


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def _is_map(value: object) -> bool:
    return isinstance(value, (dict, Mapping))  # dict is tried first: the ABC check is slow


def collect(spec: Mapping[str, Any], table: MappingTable) -> Collected:
    out = Collected([], [], [], {})
    warned: set[str] = set()
    for kind in (INIT, APP):
        containers = spec.get(kind)
        if not isinstance(containers, list):
            continue
        for index, container in enumerate(containers):
            if _is_map(container):
                _collect_container(kind, index, container, table, out, warned)
    return out


def _collect_container(kind: str, index: int, container: Mapping[str, Any], table: MappingTable,
                       out: Collected, warned: set[str]) -> None:
    resources = container.get("resources")
    if not _is_map(resources):
        return
    limits = resources.get("limits")
    requests = resources.get("requests")
    limits = limits if _is_map(limits) else {}
    requests = requests if _is_map(requests) else {}
    converted: list[str] = []
    for resource in (*limits, *(r for r in requests if r not in limits)):
        target = table.target(resource) if isinstance(resource, str) else None
        if target is None:
            continue
        name = str(container.get("name", f"#{index}"))
        base = Path.root("spec").child(kind).index(index).child("resources")
        what = f"{resource} in container {name!r}"
        if target.in_tree_classes:
            classes = ", ".join(target.in_tree_classes)
            if table.config.extended_resource_classes == "leave":
                if resource not in warned:
                    out.warnings.append(f"gpuclaim left {resource} to the scheduler: DeviceClass {classes} declares it "
                                        "as extendedResourceName (KEP-5004); conversion.extendedResourceClasses=leave")
                    warned.add(resource)
                continue
            if resource not in warned:
                out.warnings.append(f"gpuclaim converted {resource} to a ResourceClaimTemplate although DeviceClass "
                                    f"{classes} declares it as extendedResourceName (KEP-5004); the legacy limit "
                                    "is removed so the scheduler allocates only once")
                warned.add(resource)
        limit_path = base.child("limits").key(resource)
        if resource not in limits:
            out.refusals.append(FieldError.required(
                limit_path, f"{what}: a limit equal to the request is required for an extended resource"))
            continue
        count = _count(limits[resource])
        if count is None or count <= 0 or (isinstance(count, Fraction) and count.denominator != 1):
            out.refusals.append(FieldError.invalid(
                limit_path, limits[resource], f"{what}: the device count must be a whole number greater than zero"))
            continue
        if resource in requests and _count(requests[resource]) != count:
            out.refusals.append(FieldError.invalid(
                base.child("requests").key(resource), requests[resource],
                f"{what}: the request must equal the limit ({limits[resource]})"))
            continue
        if table.class_missing(target):
            out.refusals.append(FieldError.not_found(
                limit_path, target.device_class_name,
                f"{what}: the mapped DeviceClass {target.device_class_name} does not exist "
                "(conversion.requireClassesExist)"))
            continue
        out.demands.append(Demand(kind, index, name, kind == APP or _is_sidecar(container), target, int(count)))
        converted.append(resource)
    if converted:
        out.resources[(kind, index)] = _without(resources, converted)


def _without(resources: Mapping[str, Any], names: list[str]) -> dict[str, Any] | None:
    """The container's resources minus the converted names; empty maps are dropped, as the apiserver would."""
    kept: dict[str, Any] = {}
    for key, value in resources.items():
        if (key == "limits" or key == "requests") and _is_map(value):
            rest = {k: v for k, v in value.items() if k not in names}
            if rest:
                kept[key] = rest
        else:
            kept[key] = value
    return kept or None
