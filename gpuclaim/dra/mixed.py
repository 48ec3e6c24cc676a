"""Mixed nodes (issue 25, docs/migration.md): where the device plugin and a DRA driver both hand out the same GPUs.

A node is *mixed* when its ``status.allocatable`` has a device-plugin resource gpuclaim maps (``nvidia.com/gpu:
8``) and ResourceSlices of the driver behind that mapping's DeviceClass. Neither side sees the other's
allocations, so an unconverted pod (opted out, created before gpuclaim, admitted while the webhook was down) and a
converted one can get the same GPU. The driver of a class is read from its selectors (``device.driver ==
'gpu.nvidia.com'``, as every NVIDIA, AMD and example-driver class writes it); a class that names none is taken to
be its driver's own name (``gpu.nvidia.com``).

Pure: the caller passes the node's allocatable and the drivers of its slices (kube/mixed.py reads the cluster
view; ``gpuclaim audit --cluster`` a dump).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gpuclaim.dra.api import DeviceClass
from gpuclaim.dra.mapping import MappingTable
from gpuclaim.dra.quantity import parse_quantity

_DRIVER = re.compile(r"""device\.driver\s*==\s*(?:'([^'\\]+)'|"([^"\\]+)")""")
#: the resourceClaims entry and the names the conversion gives a converted pod (webhook/convert/pod.py)
CONVERTED_PREFIX = "gpuclaim-"


@dataclass(frozen=True, slots=True)
class Overlap:
    """One device-plugin resource of a node that a DRA driver with slices on the same node also serves."""

    resource: str  # nvidia.com/gpu
    allocatable: str  # "8"
    device_class: str  # gpu.nvidia.com
    driver: str  # gpu.nvidia.com

    def __str__(self) -> str:
        return (f"the device plugin advertises {self.resource}={self.allocatable} and driver {self.driver} "
                f"publishes ResourceSlices (DeviceClass {self.device_class})")


def class_drivers(name: str, device_class: DeviceClass | None) -> frozenset[str]:
    """The drivers a DeviceClass's selectors name; the class name itself when they name none."""
    found = {m.group(1) or m.group(2) for s in (device_class.selectors if device_class else ())
             for m in _DRIVER.finditer(s.expression)}
    return frozenset(found) if found else frozenset({name})


def overlaps(allocatable: Mapping[str, Any], drivers: Collection[str], table: MappingTable,
             classes: Mapping[str, DeviceClass]) -> tuple[Overlap, ...]:
    """What makes a node mixed: each mapped resource with a count above zero in ``allocatable`` whose class's
    driver is among ``drivers`` (those with ResourceSlices on the node). Empty: the node is not mixed."""
    out: list[Overlap] = []
    for resource, value in sorted(allocatable.items()):
        if not isinstance(resource, str) or "/" not in resource:
            continue
        target = table.target(resource)
        if target is None:
            continue
        try:
            if parse_quantity(str(value)).sign() <= 0:
                continue
        except ValueError:
            continue
        cls = target.device_class_name
        for driver in sorted(class_drivers(cls, classes.get(cls)) & set(drivers)):
            out.append(Overlap(resource, str(value), cls, driver))
    return tuple(out)


def describe(node: str, found: tuple[Overlap, ...]) -> str:
    return f"node {node} is mixed: " + "; ".join(str(o) for o in found)


def is_converted(pod: Mapping[str, Any]) -> bool:
    """The pod references a template or a sharing-group claim gpuclaim's conversion made."""
    for entry in ((pod.get("spec") or {}).get("resourceClaims")) or ():
        if not isinstance(entry, Mapping):
            continue
        for key in ("resourceClaimTemplateName", "resourceClaimName"):
            value = entry.get(key)
            if isinstance(value, str) and value.startswith(CONVERTED_PREFIX):
                return True
    return False
