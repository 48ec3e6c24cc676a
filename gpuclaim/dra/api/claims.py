"""ResourceClaim and ResourceClaimTemplate: device requests, constraints, config and allocation status.

Every request is a one-of: ``exactly`` or ``firstAvailable``. Both shapes become :class:`ExactRequest`
(a subrequest is an exact request with a name and without adminAccess), so the allocator and the validator
iterate ``request.alternatives`` and never branch on the shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.dra.quantity import Quantity, QuantityError, parse_quantity

from . import names
from ._read import EMPTY_MAP, Reader, typename
from .meta import ObjectMeta, check_labels_annotations, check_type_meta, parse_object_meta
from .nodeselector import NodeSelector, parse_node_selector
from .selectors import DeviceConfiguration, Selector, parse_configs, parse_selectors
from .slices import DeviceID


def _consumed(raw: object, path: Path, r: Reader) -> Mapping[str, Quantity] | None:
    """``consumedCapacity``: capacity name -> quantity."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        r.wrong_type(path, raw, "an object")
        return None
    out: dict[str, Quantity] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = parse_quantity(value if isinstance(value, str) else str(value))
        except QuantityError as err:
            r.add(FieldError.invalid(path.key(str(name)), value, str(err)))
    return out

CLAIM_KIND = "ResourceClaim"
TEMPLATE_KIND = "ResourceClaimTemplate"

AllocationMode = Literal["ExactCount", "All"]
ALLOCATION_MODES: tuple[AllocationMode, ...] = ("All", "ExactCount")


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """``requests[i].exactly`` or one ``requests[i].firstAvailable[k]`` subrequest."""

    name: str  # the request's name for `exactly`, the subrequest's name for a subrequest
    ref: str  # how constraints, config and allocation results name it: "<req>" or "<req>/<sub>"
    device_class_name: str
    selectors: tuple[Selector, ...]
    allocation_mode: AllocationMode
    count: int  # 1 by default for ExactCount; 0 for All
    admin_access: bool  # always False for subrequests
    path: Path  # ...requests[i].exactly or ...requests[i].firstAvailable[k]
    tolerations: tuple[Mapping[str, Any], ...] = ()  # alpha DRADeviceTaints, kept raw
    capacity: Mapping[str, Any] | None = None  # alpha DRAConsumableCapacity, kept raw
    derived_attributes: tuple[Mapping[str, Any], ...] = ()  # 1.37 alpha DRADerivedAttributes, kept raw


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None
    first_available: tuple[ExactRequest, ...]
    path: Path

    @property
    def alternatives(self) -> tuple[ExactRequest, ...]:
        """What the allocator tries, in order: the one exact request, or the subrequests."""
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]  # empty: applies to all requests
    match_attribute: str | None  # fully qualified
    distinct_attribute: str | None  # alpha DRAConsumableCapacity
    path: Path


@dataclass(frozen=True, slots=True)
class DeviceClaim:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceConfiguration, ...] = ()

    def request(self, name: str) -> DeviceRequest | None:
        for request in self.requests:
            if request.name == name:
                return request
        return None


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One entry of ``status.allocation.devices.results``: as read from a claim, or as the allocator would write it."""

    request: str  # "<req>" or "<req>/<sub>"
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    # DRAConsumableCapacity: a share of a device that allows multiple allocations, and what it consumes (capacity
    # names as the slice writes them)
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None
    # copies the allocator makes where its version does (allocator.Features.results_carry_*): the request's
    # tolerations (kept raw, as the claim has them) and the device's binding conditions
    tolerations: tuple[Mapping[str, Any], ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}
        if self.admin_access:
            out["adminAccess"] = True
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed_capacity:
            out["consumedCapacity"] = {name: str(q) for name, q in self.consumed_capacity.items()}
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        return out


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ClaimStatus:
    allocated: bool = False
    results: tuple[AllocatedDevice, ...] = ()
    node_selector: NodeSelector | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    meta: ObjectMeta
    spec: DeviceClaim
    status: ClaimStatus

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    meta: ObjectMeta
    claim_labels: Mapping[str, str]  # spec.metadata.labels, copied to generated claims
    claim_annotations: Mapping[str, str]  # spec.metadata.annotations
    spec: DeviceClaim

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace


_DEVICES_FIELDS = frozenset({"requests", "constraints", "config"})
_REQUEST_FIELDS = frozenset({"name", "exactly", "firstAvailable"})
_V1BETA1_REQUEST_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")
_EXACT_FIELDS = frozenset(
    {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity",
     "derivedAttributes"}
)
_SUB_FIELDS = (_EXACT_FIELDS - {"adminAccess"}) | {"name"}
_CONSTRAINT_FIELDS = frozenset({"requests", "matchAttribute", "distinctAttribute"})
_TEMPLATE_SPEC_FIELDS = frozenset({"metadata", "spec"})
_TEMPLATE_META_FIELDS = frozenset({"labels", "annotations"})


def parse_resource_claim(obj: object) -> tuple[ResourceClaim | None, list[FieldError]]:
    r = Reader()
    if not isinstance(obj, Mapping):
        r.add(FieldError.invalid(Path.root("kind"), typename(obj), "expected a ResourceClaim object"))
        return None, r.errors
    if not check_type_meta(obj, CLAIM_KIND, r):
        return None, r.errors
    meta = parse_object_meta(obj, r, namespaced=True)
    spec_obj = r.top(obj, "spec", required=True)
    spec = parse_claim_spec(spec_obj, Path.root("spec"), r) if spec_obj is not None else DeviceClaim()
    status = _parse_status(obj, spec, r)
    return ResourceClaim(meta=meta, spec=spec, status=status), r.errors


def parse_resource_claim_template(obj: object) -> tuple[ResourceClaimTemplate | None, list[FieldError]]:
    r = Reader()
    if not isinstance(obj, Mapping):
        r.add(FieldError.invalid(Path.root("kind"), typename(obj), "expected a ResourceClaimTemplate object"))
        return None, r.errors
    if not check_type_meta(obj, TEMPLATE_KIND, r):
        return None, r.errors
    meta = parse_object_meta(obj, r, namespaced=True)
    outer = r.top(obj, "spec", required=True)
    labels: Mapping[str, str] = EMPTY_MAP
    annotations: Mapping[str, str] = EMPTY_MAP
    spec = DeviceClaim()
    if outer is not None:
        root = Path.root("spec")
        r.unknown_fields(outer, _TEMPLATE_SPEC_FIELDS, root)
        tmeta = r.obj(outer, "metadata", root)
        if tmeta is not None:
            mpath = root.child("metadata")
            for key in tmeta:
                if key not in _TEMPLATE_META_FIELDS:
                    r.add(FieldError.forbidden(mpath.child(str(key)), "only labels and annotations may be set"))
            labels = r.str_map(tmeta, "labels", mpath)
            annotations = r.str_map(tmeta, "annotations", mpath)
            check_labels_annotations(labels, annotations, mpath, r)
        inner = r.obj(outer, "spec", root, required=True)
        if inner is not None:
            spec = parse_claim_spec(inner, root.child("spec"), r)
    template = ResourceClaimTemplate(meta=meta, claim_labels=labels, claim_annotations=annotations, spec=spec)
    return template, r.errors


def parse_claim_spec(spec: Mapping[str, Any], path: Path, r: Reader) -> DeviceClaim:
    """A ResourceClaimSpec at ``path`` (``spec`` for a claim, ``spec.spec`` for a template)."""
    r.unknown_fields(spec, frozenset({"devices"}), path)
    devices = r.obj(spec, "devices", path)
    if devices is None:
        return DeviceClaim()
    dpath = path.child("devices")
    r.unknown_fields(devices, _DEVICES_FIELDS, dpath)
    requests = []
    seen: set[str] = set()
    for i, raw in enumerate(r.seq(devices, "requests", dpath, limit=names.DEVICE_REQUESTS_MAX_SIZE)):
        request = _parse_request(raw, dpath.child("requests").index(i), r)
        if request is None:
            continue
        if request.name in seen:
            r.add(FieldError.duplicate(dpath.child("requests").index(i), request.name))
        seen.add(request.name)
        requests.append(request)
    known = {
        req.name: (frozenset(s.name for s in req.first_available) if req.exactly is None else None) for req in requests
    }
    constraints = []
    for i, raw in enumerate(r.seq(devices, "constraints", dpath, limit=names.DEVICE_CONSTRAINTS_MAX_SIZE)):
        constraint = _parse_constraint(raw, dpath.child("constraints").index(i), known, r)
        if constraint is not None:
            constraints.append(constraint)
    config = parse_configs(devices, dpath, r, request_names=known)
    return DeviceClaim(requests=tuple(requests), constraints=tuple(constraints), config=config)


def _parse_request(raw: object, path: Path, r: Reader) -> DeviceRequest | None:
    if not isinstance(raw, Mapping):
        r.wrong_type(path, raw, "an object")
        return None
    flat = [k for k in _V1BETA1_REQUEST_FIELDS if k in raw]
    for key in flat:
        r.add(
            FieldError.forbidden(
                path.child(key),
                f"this is the v1beta1 request shape; in resource.k8s.io/v1 it is {path.child('exactly').child(key)}",
            )
        )
    r.unknown_fields({k: v for k, v in raw.items() if k not in flat}, _REQUEST_FIELDS, path)
    name = r.name(raw, "name", path, names.check_dns1123_label)
    exactly_raw = raw.get("exactly")
    first_raw = raw.get("firstAvailable")
    has_first = isinstance(first_raw, list | tuple) and len(first_raw) > 0
    exactly = None
    first: list[ExactRequest] = []
    if exactly_raw is not None and has_first:
        r.add(
            FieldError.invalid(
                path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            )
        )
    elif exactly_raw is None and not has_first:
        if first_raw is not None and not isinstance(first_raw, list | tuple):
            r.wrong_type(path.child("firstAvailable"), first_raw, "a list")
        elif not flat:
            r.add(FieldError.required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly_raw is not None:
        epath = path.child("exactly")
        if isinstance(exactly_raw, Mapping):
            exactly = _parse_exact(exactly_raw, epath, r, name=name, ref=name, sub=False)
        else:
            r.wrong_type(epath, exactly_raw, "an object")
    else:
        fpath = path.child("firstAvailable")
        assert isinstance(first_raw, list | tuple)
        if len(first_raw) > names.FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE:
            r.add(FieldError.too_many(fpath, len(first_raw), names.FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE))
        else:
            seen: set[str] = set()
            for k, sub_raw in enumerate(first_raw):
                spath = fpath.index(k)
                if not isinstance(sub_raw, Mapping):
                    r.wrong_type(spath, sub_raw, "an object")
                    continue
                sub_name = r.name(sub_raw, "name", spath, names.check_dns1123_label)
                if sub_name in seen:
                    r.add(FieldError.duplicate(spath, sub_name))
                seen.add(sub_name)
                first.append(_parse_exact(sub_raw, spath, r, name=sub_name, ref=f"{name}/{sub_name}", sub=True))
    return DeviceRequest(name=name, exactly=exactly, first_available=tuple(first), path=path)


def _parse_exact(raw: Mapping[str, Any], path: Path, r: Reader, *, name: str, ref: str, sub: bool) -> ExactRequest:
    if sub and "adminAccess" in raw:
        r.add(
            FieldError.forbidden(
                path.child("adminAccess"), "adminAccess is only allowed in `exactly`, not in a subrequest"
            )
        )
    r.unknown_fields({k: v for k, v in raw.items() if k != "adminAccess"} if sub else raw,
                     _SUB_FIELDS if sub else _EXACT_FIELDS, path)  # fmt: skip
    class_name = r.name(raw, "deviceClassName", path, names.check_dns1123_subdomain)
    selectors = parse_selectors(raw, path, r)
    mode_raw = r.string(raw, "allocationMode", path)
    count = r.integer(raw, "count", path)
    mode: AllocationMode = "ExactCount"
    if mode_raw in (None, "", "ExactCount"):
        # `count` is a plain int64 with omitempty: 0 is "not set", and kube-apiserver defaults it to 1 (checked
        # against the real 1.34 apiserver: tests/realkube/test_realkube_lint.py)
        if count is None or count == 0:
            count = 1
        elif count < 0:
            r.add(FieldError.invalid(path.child("count"), count, "must be greater than zero"))
    elif mode_raw == "All":
        mode = "All"
        if count not in (None, 0):
            r.add(FieldError.invalid(path.child("count"), count, "must not be specified when allocationMode is 'All'"))
        count = 0
    else:
        r.add(FieldError.not_supported(path.child("allocationMode"), mode_raw, ALLOCATION_MODES))
        count = count if count is not None else 1
    admin = False if sub else bool(r.boolean(raw, "adminAccess", path))
    tolerations = r.objects(raw, "tolerations", path, limit=names.DEVICE_TOLERATIONS_MAX_LENGTH)
    capacity = r.obj(raw, "capacity", path)
    # whether this version has the field at all is the version model's business (validate/structure.py)
    derived = r.objects(raw, "derivedAttributes", path, limit=names.DEVICE_DERIVED_ATTRIBUTES_MAX_SIZE)
    return ExactRequest(
        name=name,
        ref=ref,
        device_class_name=class_name,
        selectors=selectors,
        allocation_mode=mode,
        count=count,
        admin_access=admin,
        path=path,
        tolerations=tolerations,
        capacity=capacity,
        derived_attributes=derived,
    )


def _parse_constraint(
    raw: object, path: Path, known: Mapping[str, frozenset[str] | None], r: Reader
) -> DeviceConstraint | None:
    if not isinstance(raw, Mapping):
        r.wrong_type(path, raw, "an object")
        return None
    r.unknown_fields(raw, _CONSTRAINT_FIELDS, path)
    refs = _request_refs(raw, path, known, r)
    match = r.string(raw, "matchAttribute", path)
    distinct = r.string(raw, "distinctAttribute", path)
    if match is not None and distinct is not None:
        r.add(
            FieldError.invalid(
                path,
                None,
                'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set',
            )
        )
    if match is not None:
        r.check(path.child("matchAttribute"), match, names.check_fully_qualified_name)
    elif distinct is not None:
        r.check(path.child("distinctAttribute"), distinct, names.check_fully_qualified_name)
    else:
        r.add(FieldError.required(path.child("matchAttribute"), ""))
    return DeviceConstraint(requests=refs, match_attribute=match, distinct_attribute=distinct, path=path)


def _request_refs(
    raw: Mapping[str, Any], path: Path, known: Mapping[str, frozenset[str] | None], r: Reader
) -> tuple[str, ...]:
    refs: list[str] = []
    for j, ref in enumerate(r.seq(raw, "requests", path, limit=names.DEVICE_REQUESTS_MAX_SIZE)):
        rpath = path.child("requests").index(j)
        checked = r.request_ref(ref, rpath, known)
        if checked is None:
            continue
        if checked in refs:
            r.add(FieldError.duplicate(rpath, checked))
        refs.append(checked)
    return tuple(refs)


def _parse_status(obj: Mapping[str, Any], spec: DeviceClaim, r: Reader) -> ClaimStatus:
    status = r.top(obj, "status")
    if status is None:
        return ClaimStatus()
    path = Path.root("status")
    reserved = []
    for ipath, raw in r.each_object(status, "reservedFor", path, limit=names.RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE):
        reserved.append(
            ConsumerReference(
                resource=r.string(raw, "resource", ipath, required=True) or "",
                name=r.string(raw, "name", ipath, required=True) or "",
                uid=r.string(raw, "uid", ipath, required=True) or "",
                api_group=r.string(raw, "apiGroup", ipath) or "",
            )
        )
    allocation = r.obj(status, "allocation", path)
    if allocation is None:
        if reserved:
            r.add(FieldError.forbidden(path.child("reservedFor"), "may not be specified when `allocated` is not set"))
        return ClaimStatus(reserved_for=tuple(reserved))
    apath = path.child("allocation")
    devices = r.obj(allocation, "devices", apath)
    results = []
    if devices is not None:
        known = {
            req.name: (frozenset(s.name for s in req.first_available) if req.exactly is None else None)
            for req in spec.requests
        }
        respath = apath.child("devices").child("results")
        for i, raw in enumerate(
            r.seq(devices, "results", apath.child("devices"), limit=names.ALLOCATION_RESULTS_MAX_SIZE)
        ):
            ipath = respath.index(i)
            if not isinstance(raw, Mapping):
                r.wrong_type(ipath, raw, "an object")
                continue
            request = r.request_ref(raw.get("request", ""), ipath.child("request"), known) or ""
            results.append(
                AllocatedDevice(
                    request=request,
                    driver=r.name(raw, "driver", ipath, names.check_driver_name),
                    pool=r.name(raw, "pool", ipath, names.check_pool_name),
                    device=r.name(raw, "device", ipath, names.check_dns1123_label),
                    admin_access=bool(r.boolean(raw, "adminAccess", ipath)),
                    share_id=r.string(raw, "shareID", ipath),
                    consumed_capacity=_consumed(raw.get("consumedCapacity"), ipath.child("consumedCapacity"), r),
                    tolerations=r.objects(raw, "tolerations", ipath, limit=names.DEVICE_TOLERATIONS_MAX_LENGTH),
                    binding_conditions=r.strings(raw, "bindingConditions", ipath,
                                                 limit=names.BINDING_CONDITIONS_MAX_SIZE),
                    binding_failure_conditions=r.strings(raw, "bindingFailureConditions", ipath,
                                                         limit=names.BINDING_CONDITIONS_MAX_SIZE),
                )
            )
    node_selector = None
    if allocation.get("nodeSelector") is not None:
        node_selector = parse_node_selector(allocation["nodeSelector"], apath.child("nodeSelector"), r)
    return ClaimStatus(
        allocated=True, results=tuple(results), node_selector=node_selector, reserved_for=tuple(reserved)
    )
