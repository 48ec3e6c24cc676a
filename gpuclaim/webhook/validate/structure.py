"""Structure checks that ``dra.api`` leaves to the validator: older API versions, alpha fields, immutability.

- Objects written for ``resource.k8s.io/v1beta1`` / ``v1beta2`` (``gpuclaim lint`` of older manifests) are
  converted to v1 the way the apiserver converts them (v1beta1 requests get their ``exactly`` wrapper, slice
  devices lose ``basic``) and checked as v1, with a warning naming the version. The webhook always receives v1.
- Gated fields are judged for the Kubernetes version in use (``dra.versions``): where that version's gate is off
  the apiserver silently drops the field, which gets a warning naming the gate; where the gate is on (1.36+ for
  capacity, distinctAttribute, tolerations, extendedResourceName) nothing is said. A field the version does not
  have at all (derivedAttributes before 1.37) is an error in ``gpuclaim lint`` (strict field validation refuses
  it) and only a warning in the webhook, which never refuses what kube-apiserver admitted.
- ResourceClaim and ResourceClaimTemplate specs are immutable: an UPDATE that changes them is denied with
  the apiserver's ``field is immutable``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpuclaim.dra import api, versions
from gpuclaim.dra.fieldpath import FieldError, Path

from .verdict import Findings

__all__ = ["check_gated", "check_gated_class", "check_immutable", "check_slice", "to_v1"]

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
    note = (f"written for resource.k8s.io/{version}, which Kubernetes deprecates since 1.34 (served only where the "
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


def _gated(kubernetes: versions.KubernetesModel, kind: str, field: str, path: Path, findings: Findings, *,
           lint: bool, dropped: str = "the apiserver drops this field") -> str:
    """Report a gated field as ``kubernetes`` treats it; returns its state ("kept", "dropped", "unknown")."""
    state = kubernetes.field_state(kind, field)
    entry = kubernetes.gated_field(kind, field)
    if state == "kept" or entry is None:
        return state
    if state == "unknown":
        detail = (f"unknown field: resource.k8s.io/v1 has it from Kubernetes 1.{entry.since} ({entry.gate}); "
                  f"Kubernetes {kubernetes.name} refuses it (strict field validation) or drops it")
        if lint:
            findings.deny(FieldError.forbidden(path, detail))
        else:
            findings.warn(path, detail)
        return state
    spec = kubernetes.gate_spec(entry.gate)
    stage = spec.stage if spec is not None else "alpha"
    where = "off in this configuration" if kubernetes.overrides.get(entry.gate) is False else \
        f"off by default in Kubernetes {kubernetes.name}"
    findings.warn(path, f"needs the feature gate {entry.gate} ({stage}, {where}): unless the cluster enables it, "
                        f"{dropped}")
    return state


def check_gated(spec: api.DeviceClaim, findings: Findings, *, kubernetes: versions.KubernetesModel,
                lint: bool = False) -> None:
    for request in spec.requests:
        if request.first_available:
            _gated(kubernetes, "ResourceClaim", "requests[].firstAvailable", request.path.child("firstAvailable"),
                   findings, lint=lint)
        for alt in request.alternatives:
            if alt.admin_access:
                _gated(kubernetes, "ResourceClaim", "requests[].exactly.adminAccess", alt.path.child("adminAccess"),
                       findings, lint=lint)
            for field, present in (("tolerations", alt.tolerations), ("capacity", alt.capacity is not None),
                                   ("derivedAttributes", alt.derived_attributes)):
                if present:
                    _gated(kubernetes, "ResourceClaim", f"requests[].*.{field}", alt.path.child(field), findings,
                           lint=lint)
    for constraint in spec.constraints:
        if constraint.distinct_attribute is None:
            continue
        path = constraint.path.child("distinctAttribute")
        if kubernetes.minor == 34:
            # 1.34's drop is a no-op (pkg/registry/resource/resourceclaim/strategy.go:453-455 sets the field on the
            # range copy): the apiserver stores the field, and a scheduler with the gate off ignores it
            dropped = "the scheduler ignores this field (a 1.34 apiserver stores it anyway)"
        else:
            dropped = "the apiserver drops this field and then refuses the constraint (matchAttribute: Required value)"
        state = _gated(kubernetes, "ResourceClaim", "constraints[].distinctAttribute", path, findings, lint=lint,
                       dropped=dropped)
        if lint and state == "dropped" and kubernetes.minor >= 35 and constraint.match_attribute is None:
            findings.deny(FieldError.required(constraint.path.child("matchAttribute"),
                                              "distinctAttribute is dropped with DRAConsumableCapacity off"))


def check_gated_class(device_class: api.DeviceClass, findings: Findings, *, kubernetes: versions.KubernetesModel,
                      lint: bool = False) -> None:
    if device_class.extended_resource_name is not None:
        _gated(kubernetes, "DeviceClass", "spec.extendedResourceName", Path.root("spec", "extendedResourceName"),
               findings, lint=lint)


def check_slice(resource_slice: api.ResourceSlice, findings: Findings, *,
                kubernetes: versions.KubernetesModel) -> None:
    """``gpuclaim lint`` of a ResourceSlice (no webhook is registered for slices): the version's limits and the
    fields its gates drop."""
    limits = kubernetes.limits
    spec = Path.root("spec")
    if resource_slice.shared_counters and resource_slice.devices and not limits.counters_and_devices_in_one_slice:
        findings.deny(FieldError.forbidden(spec.child("sharedCounters"), (
            f"only one of sharedCounters or devices is allowed in Kubernetes {kubernetes.name} (from 1.35 the "
            "counters go in a slice of their own: remove 1.34-layout slices before upgrading)")))
    if len(resource_slice.shared_counters) > limits.counter_sets:
        findings.deny(FieldError.too_many(spec.child("sharedCounters"), len(resource_slice.shared_counters),
                                          limits.counter_sets))
    advanced = 0
    for i, device in enumerate(resource_slice.devices):
        path = spec.child("devices").index(i)
        if len(device.taints) > limits.device_taints:
            findings.deny(FieldError.too_many(path.child("taints"), len(device.taints), limits.device_taints))
        if limits.counter_consumptions_per_device is not None and \
                len(device.consumes_counters) > limits.counter_consumptions_per_device:
            findings.deny(FieldError.too_many(path.child("consumesCounters"), len(device.consumes_counters),
                                              limits.counter_consumptions_per_device))
        advanced += bool(device.taints or device.consumes_counters)
        for field, present in (("taints", device.taints), ("consumesCounters", device.consumes_counters),
                               ("bindingConditions", device.binding_conditions),
                               ("allowMultipleAllocations", device.allow_multiple_allocations)):
            if present:
                _gated(kubernetes, "ResourceSlice", f"devices[].{field}", path.child(field), findings, lint=True)
    if limits.slice_devices_advanced is not None and advanced and \
            len(resource_slice.devices) > limits.slice_devices_advanced:
        findings.deny(FieldError.too_many(spec.child("devices"), len(resource_slice.devices),
                                          limits.slice_devices_advanced))
    if resource_slice.shared_counters:
        _gated(kubernetes, "ResourceSlice", "spec.sharedCounters", spec.child("sharedCounters"), findings, lint=True)
    if resource_slice.per_device_node_selection:
        _gated(kubernetes, "ResourceSlice", "spec.perDeviceNodeSelection", spec.child("perDeviceNodeSelection"),
               findings, lint=True)


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
