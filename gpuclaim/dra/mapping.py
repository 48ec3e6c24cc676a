"""Which legacy extended resources gpuclaim converts, and into what (the webhook's conversion and the quota
controller read the same table).

A resource name maps to a DeviceClass through the first matching `conversion.mappings` entry (exact
names and `prefix*` wildcards, in file order). Two things can stop the conversion of a mapped name:
an in-tree KEP-5004 DeviceClass that already declares it as its `extendedResourceName` (then
`conversion.extendedResourceClasses` decides: convert, or leave it to the scheduler), and a target
DeviceClass that does not exist while `conversion.requireClassesExist` is on (a refusal).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuclaim.dra.api import DeviceClass, names
from gpuclaim.dra.config import ConversionConfig

# kubelet's own resources and the implicit KEP-5004 names are never legacy GPU names
_NEVER = frozenset({"cpu", "memory", "ephemeral-storage", "hugepages-1Gi", "hugepages-2Mi"})
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
MIG_PREFIX = "nvidia.com/mig-"
# a MIG profile as NVIDIA names them: `1g.10gb`, `1c.3g.40gb` (compute instance), and the `+me`-style variants
# (`1g.10gb+me`, `1g.12gb+gfx`, spelled with `.` in a resource name, where `+` is not allowed)
MIG_PROFILE = re.compile(r"(?:[1-9][0-9]?c\.)?[1-9][0-9]?g\.[1-9][0-9]{0,3}gb(?:[+.][a-z]{1,8}){0,3}")


@dataclass(frozen=True, slots=True)
class Target:
    """What one mapped resource name becomes."""

    resource: str
    device_class_name: str
    selectors: tuple[str, ...]
    #: the KEP-5004 DeviceClasses that also claim this resource name (sorted)
    in_tree_classes: tuple[str, ...] = ()
    #: the vendor domain, used to decide which node-label migrations apply (``nvidia.com``)
    domain: str = ""

    @property
    def short_name(self) -> str:
        return self.resource.partition("/")[2] or self.resource


class MappingTable:
    """Resolved mappings for one (config, DeviceClass set), built per conversion (the class set may change
    between two reviews); lookups are memoised per resource name for the pod's containers."""

    def __init__(self, config: ConversionConfig, device_classes: Mapping[str, DeviceClass]) -> None:
        self.config = config
        self.device_classes = device_classes
        self._in_tree: dict[str, list[str]] = {}
        for name, device_class in device_classes.items():
            if device_class.extended_resource_name:
                self._in_tree.setdefault(device_class.extended_resource_name, []).append(name)
        self._memo: dict[str, Target | None] = {}
        # the domains any mapping names: a resource of another domain is unmapped at the cost of a set lookup
        # (a pod of 35,000 unmapped limits spent 0.27 s in mapping lookups)
        self._domains = frozenset(m.resource.partition("/")[0] for m in config.mappings)

    def target(self, resource: str) -> Target | None:
        """The conversion target of a resource name, or None when gpuclaim does not map it."""
        try:
            return self._memo[resource]
        except KeyError:
            pass
        found: Target | None = None
        if resource.partition("/")[0] not in self._domains:
            return None  # not memoised either: such names are not worth the memory
        if resource not in _NEVER and "/" in resource and not resource.startswith(IMPLICIT_PREFIX):
            mapping = self.config.mapping_for(resource)
            if mapping is not None:
                found = Target(
                    resource=resource,
                    device_class_name=mapping.device_class_name,
                    selectors=mapping.selectors_for(resource),
                    in_tree_classes=tuple(sorted(self._in_tree.get(resource, ()))),
                    domain=resource.partition("/")[0],
                )
        self._memo[resource] = found
        return found

    def problem(self, resource: str) -> str | None:
        """Why a mapped resource name must not be converted (it reaches CEL and the template): not a valid
        Kubernetes extended resource name (the apiserver would refuse the pod, and the patch removes the name),
        or, under `nvidia.com/mig-`, a suffix that is not a MIG profile. None when it is fine."""
        if names.check_extended_resource_name(resource):
            return ("is not a valid extended resource name (domain/name, the name at most 63 characters of "
                    "letters, digits, '-', '_', '.')")
        if resource.startswith(MIG_PREFIX) and not MIG_PROFILE.fullmatch(resource[len(MIG_PREFIX):]):
            return ("does not name a MIG profile: expected nvidia.com/mig-<n>g.<m>gb, optionally with a compute "
                    "instance (<c>c.) or a variant (1g.10gb.me)")
        return None

    def class_missing(self, target: Target) -> bool:
        return self.config.require_classes_exist and target.device_class_name not in self.device_classes
