"""Object metadata and the apiVersion/kind check shared by every resource.k8s.io/v1 kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuclaim.dra.fieldpath import FieldError, Path

from . import names
from ._read import EMPTY_MAP, Reader

API_VERSION = "resource.k8s.io/v1"
OLD_API_VERSIONS = frozenset({"resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"})
ANNOTATIONS_MAX_TOTAL_BYTES = 256 * 1024

_V1_HINTS = {
    "ResourceClaim": "in v1 a request's deviceClassName, selectors, allocationMode, count and adminAccess go under "
    "`exactly` (spec.devices.requests[0].exactly.deviceClassName)",
    "ResourceClaimTemplate": "in v1 a request's deviceClassName, selectors, allocationMode, count and adminAccess go "
    "under `exactly` (spec.spec.devices.requests[0].exactly.deviceClassName)",
    "ResourceSlice": "in v1 a device's attributes and capacity sit directly on the device "
    "(spec.devices[0].attributes), "
    "without the v1beta1 `basic` wrapper",
    "DeviceClass": "the DeviceClass spec is the same in v1: change apiVersion to resource.k8s.io/v1",
}

_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "uid", "resourceVersion", "generation", "labels", "annotations",
        "ownerReferences", "finalizers", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
        "managedFields", "selfLink",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    block_owner_deletion: bool = False


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str = ""
    namespace: str = ""
    uid: str = ""
    generate_name: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()
    deleting: bool = False  # deletionTimestamp is set


def check_type_meta(obj: Mapping[str, Any], kind: str, r: Reader) -> bool:
    """apiVersion must be resource.k8s.io/v1 and kind must match; older DRA versions get a pointer to v1."""
    ok = True
    root = Path.root("apiVersion")
    api_version = obj.get("apiVersion")
    if isinstance(api_version, str) and api_version in OLD_API_VERSIONS:
        r.add(
            FieldError.invalid(root, api_version, f"gpuclaim reads {API_VERSION} (Kubernetes 1.34); " + _V1_HINTS[kind])
        )
        ok = False
    elif api_version != API_VERSION:
        if api_version is None or api_version == "":
            r.add(FieldError.required(root, f"must be {API_VERSION}"))
        else:
            r.add(FieldError.not_supported(root, api_version, [API_VERSION]))
        ok = False
    got_kind = obj.get("kind")
    if got_kind != kind:
        if got_kind is None or got_kind == "":
            r.add(FieldError.required(Path.root("kind"), f"must be {kind}"))
        else:
            r.add(FieldError.not_supported(Path.root("kind"), got_kind, [kind]))
        ok = False
    return ok


def parse_object_meta(
    obj: Mapping[str, Any],
    r: Reader,
    *,
    namespaced: bool,
    name_rule: Callable[[str], list[str]] = names.check_dns1123_subdomain,
) -> ObjectMeta:
    meta = r.top(obj, "metadata", required=True)
    if meta is None:
        return ObjectMeta()
    return _parse_meta_body(meta, Path.root("metadata"), r, namespaced=namespaced, name_rule=name_rule)


def _parse_meta_body(
    meta: Mapping[str, Any],
    path: Path,
    r: Reader,
    *,
    namespaced: bool,
    name_rule: Callable[[str], list[str]],
) -> ObjectMeta:
    r.unknown_fields(meta, _META_FIELDS, path)
    name = r.string(meta, "name", path) or ""
    generate_name = r.string(meta, "generateName", path) or ""
    if name:
        r.check(path.child("name"), name, name_rule)
    elif not generate_name and meta.get("name") in (None, "") and meta.get("generateName") in (None, ""):
        r.add(FieldError.required(path.child("name"), "name or generateName is required"))
    namespace = r.string(meta, "namespace", path) or ""
    if namespace:
        if not namespaced:
            r.add(FieldError.forbidden(path.child("namespace"), "not allowed on this type"))
        else:
            r.check(path.child("namespace"), namespace, names.check_dns1123_label)
    labels = r.str_map(meta, "labels", path)
    annotations = r.str_map(meta, "annotations", path)
    check_labels_annotations(labels, annotations, path, r)
    owners = []
    for ipath, item in r.each_object(meta, "ownerReferences", path):
        owners.append(
            OwnerReference(
                api_version=r.string(item, "apiVersion", ipath, required=True) or "",
                kind=r.string(item, "kind", ipath, required=True) or "",
                name=r.string(item, "name", ipath, required=True) or "",
                uid=r.string(item, "uid", ipath) or "",
                controller=bool(r.boolean(item, "controller", ipath)),
                block_owner_deletion=bool(r.boolean(item, "blockOwnerDeletion", ipath)),
            )
        )
    finalizers = r.strings(meta, "finalizers", path)
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=r.string(meta, "uid", path) or "",
        generate_name=generate_name,
        resource_version=_stringish(meta.get("resourceVersion")),
        labels=labels,
        annotations=annotations,
        owner_references=tuple(owners),
        finalizers=finalizers,
        deleting=meta.get("deletionTimestamp") is not None,
    )


def check_labels_annotations(labels: Mapping[str, str], annotations: Mapping[str, str], path: Path, r: Reader) -> None:
    for key, value in labels.items():
        r.check(path.child("labels"), key, names.check_label_key)
        r.check(path.child("labels").key(key), value, names.check_label_value)
    total = 0
    for key, value in annotations.items():
        r.check(path.child("annotations"), key.lower(), names.check_label_key)
        total += len(key) + len(value)
    if total > ANNOTATIONS_MAX_TOTAL_BYTES:
        r.add(FieldError.too_long(path.child("annotations"), "", ANNOTATIONS_MAX_TOTAL_BYTES))


def _stringish(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)
