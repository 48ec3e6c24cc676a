"""Dispatch by kind, and flatten multi-document YAML / ``kubectl get -o yaml`` List output into objects, from a
stream or from a cluster dump directory."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path as FilePath
from typing import Any, NamedTuple

import yaml

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


DUMP_SUFFIXES = (".yaml", ".yml", ".json")


class DumpError(ValueError):
    """A dump directory or one of its files cannot be read; the message names which and why, on one line."""


def read_dump(directory: FilePath) -> Iterator[tuple[FilePath, Located]]:
    """The objects of a cluster dump (``--cluster DIR``, as ``kubectl get -o yaml`` writes it): every .yaml, .yml
    or .json file below `directory` in sorted order, each file's documents as :func:`iter_objects` yields them,
    with the file they came from. Raises :class:`DumpError` for a missing or empty directory or a file that is not
    YAML."""
    if not directory.is_dir():
        raise DumpError(f"--cluster {directory}: not a directory")
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in DUMP_SUFFIXES)
    if not files:
        raise DumpError(f"--cluster {directory}: no .yaml, .yml or .json files")
    for path in files:
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise DumpError(f"{path}: {' '.join(str(exc).split())}") from None
        for located in iter_objects(documents):
            yield path, located


def _is_list(doc: object) -> bool:
    if not isinstance(doc, Mapping):
        return False
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items", []), list | tuple)
