"""The claim kube-scheduler makes itself for an unconverted pod's extended resources (KEP-5004, DRAExtendedResource).

A pod that still asks for ``nvidia.com/gpu`` (the webhook was down with failurePolicy Ignore, or its namespace is
opted out) is scheduled natively where the gate is on (1.36 beta, 1.37 GA): for each node, kube-scheduler allocates
through DRA every mapped resource the node does not offer through a device plugin, in one claim of its own
(K37/pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go). This module builds that claim
exactly as upstream does, so the extender predicts and scores it like any other:

- a resource qualifies when it is an extended resource name or ``deviceclass.resource.kubernetes.io/<class>``
  (``IsDRAExtendedResourceName``) and a DeviceClass answers to it: the class whose ``extendedResourceName`` it is
  (when two do, the newer class wins, then the lower name; extendedresourcecache.go:157-208), or the implicit name
  of every class (1.35+);
- per node, a qualifying resource goes to DRA when the node's allocatable for it is 0 or absent
  (``isBackedByDRA && allocatable == 0``); otherwise the device plugin serves it;
- one ExactCount request per container (init containers first, then containers: index ``i``) and resource, named
  ``container-<i>-request-<j>`` where ``j`` is the resource's index among the container's sorted request names, with
  the container's integer request as count; a non-sidecar init container first reuses the requests of later
  long-lived containers, and the largest of the init containers' own requests is kept
  (``createRequestsAndMappings``); requests sorted by name.

A pod whose ``status.extendedResourceClaimStatus`` is set already has its claim (the scheduler made it): nothing
is built for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuclaim.dra.api import DeviceClass
from gpuclaim.dra.api.names import check_extended_resource_name
from gpuclaim.dra.mapping import IMPLICIT_PREFIX
from gpuclaim.dra.quantity import QuantityError, parse_quantity
from gpuclaim.dra.versions import KubernetesModel

#: the name the scheduler's claim goes by in predictions and reasons (upstream's in-memory claim is
#: "<extended-resources>", an invalid name on purpose; its real one is generated: ``<pod>-extended-resources-*``)
CLAIM_NAME = "extended-resources"


def is_dra_extended_name(name: str) -> bool:
    """``schedutil.IsDRAExtendedResourceName``."""
    return name.startswith(IMPLICIT_PREFIX) or not check_extended_resource_name(name)


def may_have_extended(pod: Mapping[str, Any]) -> bool:
    """The fast path: whether any container asks for a resource name with a domain (no cache access)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for field in ("requests", "limits"):
                values = resources.get(field)
                if isinstance(values, Mapping) and any(isinstance(k, str) and "/" in k for k in values):
                    return True
    return False


class ClassResolver:
    """``DeviceClassResolver.GetDeviceClass``: resource name -> class name, as the scheduler's cache keeps it."""

    def __init__(self, classes: Mapping[str, DeviceClass], created: Mapping[str, str], model: KubernetesModel
                 ) -> None:
        self._by_name: dict[str, str] = {}
        explicit: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, class name)
        for name, cls in classes.items():
            if model.extended_resources.implicit_class_names:
                self._by_name[IMPLICIT_PREFIX + name] = name
            wanted = cls.extended_resource_name
            if not wanted:
                continue
            stamp = created.get(name, "")
            held = explicit.get(wanted)
            # the newer class wins; at the same time the lower name (RFC 3339 UTC stamps order as text)
            if held is None or stamp > held[0] or (stamp == held[0] and name < held[1]):
                explicit[wanted] = (stamp, name)
        for resource, (_, name) in explicit.items():
            self._by_name[resource] = name

    def get(self, resource: str) -> str | None:
        return self._by_name.get(resource)


@dataclass(frozen=True, slots=True)
class _Container:
    index: int
    name: str
    requests: Mapping[str, Any]  # resource name -> raw quantity
    short_lived: bool  # a non-sidecar init container


Mapping_ = dict[str, str]  # one of ``status.extendedResourceClaimStatus.requestMappings``


@dataclass(frozen=True, slots=True)
class Plan:
    """What the scheduler's claim is made of for one pod; :meth:`spec` gives it for the resources a node serves
    through DRA."""

    classes: Mapping[str, str]  # qualifying resource -> class name
    containers: tuple[_Container, ...]

    @property
    def resources(self) -> tuple[str, ...]:
        return tuple(sorted(self.classes))

    def via_dra(self, allocatable: Mapping[str, Any]) -> frozenset[str]:
        """The resources a node with this allocatable serves through DRA (device plugin: allocatable > 0)."""
        return frozenset(r for r in self.classes if _count(allocatable.get(r)) in (None, 0))

    def spec(self, resources: frozenset[str]) -> dict[str, Any]:
        """The claim spec for ``resources`` (``createRequestsAndMappings``)."""
        return self.claim(resources)[0]

    def claim(self, resources: frozenset[str]) -> tuple[dict[str, Any], list[Mapping_]]:
        """The claim spec for ``resources`` and which of its requests serves each container's resource (what
        kube-scheduler writes to ``status.extendedResourceClaimStatus.requestMappings``), as
        ``createRequestsAndMappings`` builds both: per resource, the long-lived containers' mappings, then the
        short-lived ones', whose requests all go by the name of the largest of them."""
        requests: list[dict[str, Any]] = []
        mappings: list[Mapping_] = []
        for resource in sorted(resources):
            class_name = self.classes[resource]
            long_lived: dict[int, dict[str, Any]] = {}
            long_maps: list[Mapping_] = []
            for c in self.containers:
                if not c.short_lived:
                    request, maps = _request(c, resource, class_name, [])
                    if request is not None:
                        long_lived[c.index] = request
                    long_maps.extend(maps)
            biggest: dict[str, Any] | None = None
            short_names: set[str] = set()
            short_maps: list[Mapping_] = []
            for c in self.containers:
                if c.short_lived:
                    later = [long_lived[i] for i in sorted(long_lived) if i >= c.index]
                    request, maps = _request(c, resource, class_name, later)
                    if request is not None:
                        short_names.add(request["name"])
                        if biggest is None or biggest["exactly"]["count"] < request["exactly"]["count"]:
                            biggest = request
                    short_maps.extend(maps)
            if biggest is not None:
                requests.append(biggest)
                for m in short_maps:
                    if m["requestName"] in short_names:
                        m["requestName"] = biggest["name"]
            requests.extend(long_lived[i] for i in sorted(long_lived))
            mappings.extend(long_maps + short_maps)
        requests.sort(key=lambda r: r["name"])
        return {"devices": {"requests": requests}}, mappings


def _count(raw: Any) -> int | None:
    """A quantity as ``AsInt64`` reads it; None when absent or not an integer."""
    if raw is None:
        return None
    try:
        return parse_quantity(str(raw)).as_int64()
    except QuantityError:
        return None


def _request(container: _Container, resource: str, class_name: str, reusable: Sequence[dict[str, Any]]
             ) -> tuple[dict[str, Any] | None, list[Mapping_]]:
    """``createResourceRequestAndMappings``: this container's request for ``resource`` beyond what it reuses, and
    the mappings of the container's resource to the requests it reuses and to its own."""
    wanted = _count(container.requests.get(resource))
    if not wanted:
        return None, []
    maps: list[Mapping_] = []
    reused = 0
    for request in reusable:
        reused += request["exactly"]["count"]
        maps.append({"containerName": container.name, "resourceName": resource, "requestName": request["name"]})
        if reused >= wanted:
            return None, maps
    j = sorted(container.requests).index(resource)
    name = f"container-{container.index}-request-{j}"
    maps.append({"containerName": container.name, "resourceName": resource, "requestName": name})
    return {"name": name,
            "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": wanted - reused}}, maps


def _requests(container: Mapping[str, Any]) -> Mapping[str, Any]:
    """The container's requests as the apiserver stores them: an extended resource given only as a limit is
    defaulted to a request of the same amount."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}
    requests = dict(resources.get("requests") or {}) if isinstance(resources.get("requests"), Mapping) else {}
    limits = resources.get("limits")
    if isinstance(limits, Mapping):
        for name, value in limits.items():
            requests.setdefault(name, value)
    return {k: v for k, v in requests.items() if isinstance(k, str)}


def plan(pod: Mapping[str, Any], resolver: ClassResolver, model: KubernetesModel) -> Plan | None:
    """The scheduler's claim plan for ``pod``, or None: the gate is off in ``model``, the scheduler already made
    the pod's claim (``status.extendedResourceClaimStatus``), or no requested resource maps to a class."""
    if not model.extended_resources.scheduler_claims:
        return None
    status = pod.get("status")
    if isinstance(status, Mapping) and status.get("extendedResourceClaimStatus"):
        return None
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return None
    init = [c for c in spec.get("initContainers") or () if isinstance(c, Mapping)]
    regular = [c for c in spec.get("containers") or () if isinstance(c, Mapping)]
    containers = tuple(
        _Container(i, str(c.get("name", "")), _requests(c), i < len(init) and c.get("restartPolicy") != "Always")
        for i, c in enumerate([*init, *regular]))
    classes: dict[str, str] = {}
    for container in containers:
        for name in container.requests:
            if name in classes or not is_dra_extended_name(name) or not _count(container.requests[name]):
                continue
            class_name = resolver.get(name)
            if class_name is not None:
                classes[name] = class_name
    return Plan(classes, containers) if classes else None
