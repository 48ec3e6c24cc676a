"""Dispatch by kind, and flatten multi-document YAML / ``kubectl get -o yaml`` List output into objects."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from gpuclaim.dra.fieldpath import FieldError, Path

from ._read import typename
from .claims import ResourceClaim, ResourceClaimTemplate, parse_resource_claim, parse_resource_claim_template
from .classes import DeviceClass, parse_device_class
from .slices import ResourceSlice, parse_resource_slice

Model = DeviceClass | ResourceClaim | ResourceClaimTemplate | ResourceSlice

PARSERS: Mapping[str, Callable[[object], tuple[Any, list[FieldError]]]] = {
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
    "ResourceSlice": parse_resource_slice,
}
KINDS = tuple(PARSERS)


def parse_object(obj: object) -> tuple[Model | None, list[FieldError]]:
    """Parse any of the four resource.k8s.io/v1 kinds; other kinds give a NotSupported error on ``kind``."""
    if not isinstance(obj, Mapping):
        return None, [FieldError.invalid(Path.root("kind"), typename(obj), "expected a Kubernetes object")]
    kind = obj.get("kind")
    parser = PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        if kind is None or kind == "":
            return None, [FieldError.required(Path.root("kind"), "")]
        return None, [FieldError.not_supported(Path.root("kind"), kind, KINDS)]
    return parser(obj)


class Located(NamedTuple):
    """An object and where it came from: the YAML document (0-based) and, for a List, the item index."""

    doc: int
    item: int | None
    obj: object


def iter_objects(documents: Iterable[object]) -> Iterator[Located]:
    """Yield the objects of a document stream; ``kind: List`` (or any ``*List`` with ``items``) is expanded.

    Empty documents (``None``) are skipped; anything else is yielded as it is, so a caller can report it.
    """
    for doc_index, doc in enumerate(documents):
        if doc is None:
            continue
        if _is_list(doc):
            assert isinstance(doc, Mapping)
            for item_index, item in enumerate(doc.get("items") or ()):
                yield Located(doc_index, item_index, item)
        else:
            yield Located(doc_index, None, doc)


def flatten_documents(documents: Iterable[object]) -> list[object]:
    """The objects of a document stream, Lists expanded (see :func:`iter_objects`)."""
    return [located.obj for located in iter_objects(documents)]


def _is_list(doc: object) -> bool:
    if not isinstance(doc, Mapping):
        return False
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items", []), list | tuple)
