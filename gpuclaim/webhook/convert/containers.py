"""Read the legacy device counts out of a pod's containers, refusing what cannot be converted faithfully.

Rules (each refusal names the container, the resource and the field):
- the count must be a whole number (`1.5`, `500m`, `-1` are refused); a count of zero (`nvidia.com/gpu: 0`,
  which charts template for CPU variants) asks for no device: the zero limit is removed and nothing is
  converted for it;
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
from typing import Any, TypeGuard

from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.dra.mapping import MappingTable, Target
from gpuclaim.dra.quantity import QuantityError, parse_quantity

APP, INIT = "containers", "initContainers"
#: a claim holds at most 32 requests (and 32 devices): past that many device-holding containers x resources the
#: pod is refused, and the rest of its limits is not read (finding 3: 40,000 limits in one container)
MAX_LONG_RUNNING = 32
#: past this many refusals the pod's answer is clear enough: the rest of its containers is not read
MAX_REFUSALS = 100


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
    #: reading stopped early (the pod is refused already)
    stopped: bool = False


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


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
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
            if out.stopped or len(out.refusals) >= MAX_REFUSALS:
                return out
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
        if len(out.refusals) >= MAX_REFUSALS:
            return
        target = table.target(resource) if isinstance(resource, str) else None
        if target is None:
            continue
        name = str(container.get("name", f"#{index}"))
        base = Path.root("spec").child(kind).index(index).child("resources")
        what = f"{resource} in container {name!r}"
        problem = table.problem(resource)
        if problem is not None:  # checked before anything reads the name into CEL or a template (finding 5)
            where = "limits" if resource in limits else "requests"
            out.refusals.append(FieldError.invalid(base.child(where).key(resource), resource,
                                                   f"resource name {problem}"))
            continue
        if target.in_tree_classes and _count(limits.get(resource)) != 0:  # a zero limit is only removed: no note
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
        if count is None or count < 0 or (isinstance(count, Fraction) and count.denominator != 1):
            out.refusals.append(FieldError.invalid(
                limit_path, limits[resource], f"{what}: the device count must be a whole number, zero or more"))
            continue
        if resource in requests and _count(requests[resource]) != count:
            out.refusals.append(FieldError.invalid(
                base.child("requests").key(resource), requests[resource],
                f"{what}: the request must equal the limit ({limits[resource]})"))
            continue
        if count == 0:  # no device: drop the legacy zero, make no request (the device plugin gives none either)
            converted.append(resource)
            continue
        if table.class_missing(target):
            out.refusals.append(FieldError.not_found(
                limit_path, target.device_class_name,
                f"{what}: the mapped DeviceClass {target.device_class_name} does not exist "
                "(conversion.requireClassesExist)"))
            continue
        out.demands.append(Demand(kind, index, name, kind == APP or _is_sidecar(container), target, int(count)))
        converted.append(resource)
        if sum(1 for d in out.demands if d.long_running) > MAX_LONG_RUNNING:
            out.refusals.append(FieldError.invalid(
                limit_path, limits[resource], f"{what}: the pod asks for more than {MAX_LONG_RUNNING} devices or "
                "device requests of resources gpuclaim converts, more than one ResourceClaim can hold; the rest was "
                "not read"))
            out.stopped = True
            return
    if converted:
        out.resources[(kind, index)] = _without(resources, converted)


def _without(resources: Mapping[str, Any], converted: list[str]) -> dict[str, Any] | None:
    """The container's resources minus the converted names; empty maps are dropped, as the apiserver would.
    A set: membership in the list made this quadratic (40,000 limits took 19 s, issue 14 finding 3)."""
    names = set(converted)
    kept: dict[str, Any] = {}
    for key, value in resources.items():
        if (key == "limits" or key == "requests") and _is_map(value):
            rest = {k: v for k, v in value.items() if k not in names}
            if rest:
                kept[key] = rest
        else:
            kept[key] = value
    return kept or None
