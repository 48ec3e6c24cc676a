"""Structure checks that ``dra.api`` leaves to the validator: older API versions, alpha fields, immutability.

- Objects written for ``resource.k8s.io/v1beta1`` / ``v1beta2`` (``gpuclaim lint`` of older manifests) are
  converted to v1 the way the apiserver converts them (v1beta1 requests get their ``exactly`` wrapper, slice
  devices lose ``basic``) and checked as v1, with a warning naming the version. The webhook always receives v1.
- Alpha fields (off by default in 1.34) are accepted with a warning naming the feature gate: the apiserver
  silently drops them unless the cluster enables the gate, and gpuclaim cannot see the cluster's gates.
- ResourceClaim and ResourceClaimTemplate specs are immutable: an UPDATE that changes them is denied with
  the apiserver's ``field is immutable``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpuclaim.dra import api
from gpuclaim.dra.fieldpath import FieldError, Path

from .verdict import Findings

__all__ = ["check_gated", "check_gated_class", "check_immutable", "to_v1"]

_OLDER = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2")
_V1BETA1_EXACT = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")


def to_v1(obj: object) -> tuple[object, str | None]:
    """The object as v1 and a note when it was written for an older version (other objects unchanged)."""
    if not isinstance(obj, Mapping) or obj.get("apiVersion") not in _OLDER or obj.get("kind") not in api.KINDS:
        return obj, None
    version = str(obj["apiVersion"]).rpartition("/")[2]
    converted: dict[str, Any] = json.loads(json.dumps(obj, default=str))
    converted["apiVersion"] = api.API_VERSION
    if version == "v1beta1":
        kind = converted.get("kind")
        if kind == "ResourceClaim":
            _wrap_requests(converted.get("spec"))
        elif kind == "ResourceClaimTemplate":
            inner = converted.get("spec")
            _wrap_requests(inner.get("spec") if isinstance(inner, dict) else None)
        elif kind == "ResourceSlice":
            _unwrap_basic(converted.get("spec"))
    note = (f"written for resource.k8s.io/{version}, which Kubernetes 1.34 deprecates (served only where the "
            "cluster still enables it); checked as its resource.k8s.io/v1 conversion")
    return converted, note


def _wrap_requests(spec: object) -> None:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for request in requests if isinstance(requests, list) else ():
        if isinstance(request, dict) and "firstAvailable" not in request and "exactly" not in request:
            exact = {k: request.pop(k) for k in _V1BETA1_EXACT if k in request}
            request["exactly"] = exact


def _unwrap_basic(spec: object) -> None:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    for device in devices if isinstance(devices, list) else ():
        if isinstance(device, dict) and isinstance(device.get("basic"), dict):
            device.update(device.pop("basic"))


def _gate(name: str, consequence: str = "the apiserver drops this field") -> str:
    return (f"uses the alpha feature {name} (off by default in Kubernetes 1.34): unless the cluster enables "
            f"that feature gate, {consequence}")


def check_gated(spec: api.DeviceClaim, findings: Findings) -> None:
    for request in spec.requests:
        for alt in request.alternatives:
            if alt.tolerations:
                findings.warn(alt.path.child("tolerations"), _gate("DRADeviceTaints"))
            if alt.capacity is not None:
                findings.warn(alt.path.child("capacity"), _gate("DRAConsumableCapacity"))
    for constraint in spec.constraints:
        if constraint.distinct_attribute is not None:
            findings.warn(
                constraint.path.child("distinctAttribute"),
                _gate("DRAConsumableCapacity", "the apiserver drops this field and then refuses the constraint "
                      "(matchAttribute: Required value)"),
            )


def check_gated_class(device_class: api.DeviceClass, findings: Findings) -> None:
    if device_class.extended_resource_name is not None:
        findings.warn(Path.root("spec", "extendedResourceName"), _gate("DRAExtendedResource"))


def _short(value: object) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def check_immutable(obj: Mapping[str, Any], old: Mapping[str, Any] | None, findings: Findings) -> bool:
    """Deny a changed spec on UPDATE; True when the spec is unchanged (nothing new to check in it)."""
    if old is None:
        return False
    if obj.get("spec") == old.get("spec"):
        return True
    findings.deny(FieldError.invalid(Path.root("spec"), _short(obj.get("spec")), "field is immutable"))
    return False
