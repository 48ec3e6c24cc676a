"""resource.k8s.io/v1 objects (Kubernetes 1.34) as typed, immutable views.

``parse_*`` functions never raise on bad input: they return ``(model | None, errors)`` where errors are
``dra.fieldpath.FieldError`` with Kubernetes field paths, as kube-apiserver 1.34 would report them (structure,
names and limits; CEL compilation is ``dra.cel``'s job). The model is a best-effort view even when there are
errors (useful for diagnostics); treat an object as valid only when ``errors`` is empty. None means the input
is not usable at all (not an object, wrong apiVersion or kind, no spec).
"""

from __future__ import annotations

from .claims import (
    ALLOCATION_MODES,
    AllocatedDevice,
    AllocationMode,
    ClaimStatus,
    ConsumerReference,
    DeviceClaim,
    DeviceConstraint,
    DeviceRequest,
    ExactRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    parse_resource_claim,
    parse_resource_claim_template,
)
from .classes import DeviceClass, parse_device_class
from .documents import KINDS, Located, Model, flatten_documents, iter_objects, parse_object
from .meta import API_VERSION, ObjectMeta, OwnerReference
from .names import qualify, split_qualified
from .nodeselector import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, node_selector_matches
from .selectors import DeviceConfiguration, Selector
from .slices import (
    AttributeValue,
    CapacityPolicy,
    Device,
    DeviceCapacity,
    DeviceID,
    Pool,
    ResourceSlice,
    device_available_on,
    parse_resource_slice,
)

__all__ = [
    "ALLOCATION_MODES",
    "API_VERSION",
    "KINDS",
    "AllocatedDevice",
    "AllocationMode",
    "AttributeValue",
    "CapacityPolicy",
    "ClaimStatus",
    "ConsumerReference",
    "Device",
    "DeviceCapacity",
    "DeviceClaim",
    "DeviceClass",
    "DeviceConfiguration",
    "DeviceConstraint",
    "DeviceID",
    "DeviceRequest",
    "ExactRequest",
    "Located",
    "Model",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "OwnerReference",
    "Pool",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "Selector",
    "device_available_on",
    "flatten_documents",
    "iter_objects",
    "node_selector_matches",
    "parse_device_class",
    "parse_object",
    "parse_resource_claim",
    "parse_resource_claim_template",
    "parse_resource_slice",
    "qualify",
    "split_qualified",
]
