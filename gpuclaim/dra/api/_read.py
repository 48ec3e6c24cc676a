"""Typed reads from untrusted dicts that collect FieldErrors instead of raising.

Field paths are built only when something is wrong: the cluster cache parses tens of thousands of devices,
and most of them are fine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from gpuclaim.dra.fieldpath import FieldError, Path

from . import names

EMPTY_MAP: Mapping[str, Any] = MappingProxyType({})


def typename(value: object) -> str:
    """The JSON-ish type name used in messages (``bool`` before ``int``: bool is an int in Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


class Reader:
    """Collects FieldErrors while reading one object."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, error: FieldError) -> None:
        self.errors.append(error)

    def wrong_type(self, path: Path, value: object, expected: str) -> None:
        self.errors.append(FieldError.invalid(path, value, f"must be {expected}, got {typename(value)}"))

    # --- containers ---

    def top(self, obj: Mapping[str, Any], key: str, *, required: bool = False) -> Mapping[str, Any] | None:
        """A top-level object field (``metadata``, ``spec``, ``status``)."""
        value = obj.get(key)
        if value is None:
            if required:
                self.errors.append(FieldError.required(Path.root(key), ""))
            return None
        if not isinstance(value, Mapping):
            self.wrong_type(Path.root(key), value, "an object")
            return None
        return value

    def obj(
        self, parent: Mapping[str, Any], key: str, path: Path, *, required: bool = False
    ) -> Mapping[str, Any] | None:
        value = parent.get(key)
        if value is None:
            if required:
                self.errors.append(FieldError.required(path.child(key), ""))
            return None
        if not isinstance(value, Mapping):
            self.wrong_type(path.child(key), value, "an object")
            return None
        return value

    def seq(self, parent: Mapping[str, Any], key: str, path: Path, *, limit: int | None = None) -> list[Any]:
        """A list field; over ``limit`` gives TooMany and no items (the apiserver stops there, for DoS reasons)."""
        value = parent.get(key)
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            self.wrong_type(path.child(key), value, "a list")
            return []
        if limit is not None and len(value) > limit:
            self.errors.append(FieldError.too_many(path.child(key), len(value), limit))
            return []
        return list(value)

    def objects(
        self, parent: Mapping[str, Any], key: str, path: Path, *, limit: int | None = None
    ) -> tuple[Mapping[str, Any], ...]:
        """A list of objects kept raw (alpha fields); items that are not objects are reported and dropped."""
        out = []
        for i, item in enumerate(self.seq(parent, key, path, limit=limit)):
            if isinstance(item, Mapping):
                out.append(item)
            else:
                self.wrong_type(path.child(key).index(i), item, "an object")
        return tuple(out)

    def each_object(
        self, parent: Mapping[str, Any], key: str, path: Path, *, limit: int | None = None
    ) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """A list of objects to parse one by one: each with its path; items that are not objects are reported and
        skipped."""
        for i, item in enumerate(self.seq(parent, key, path, limit=limit)):
            ipath = path.child(key).index(i)
            if isinstance(item, Mapping):
                yield ipath, item
            else:
                self.wrong_type(ipath, item, "an object")

    def strings(self, parent: Mapping[str, Any], key: str, path: Path, *, limit: int | None = None) -> tuple[str, ...]:
        out = []
        for i, item in enumerate(self.seq(parent, key, path, limit=limit)):
            if isinstance(item, str):
                out.append(item)
            else:
                self.wrong_type(path.child(key).index(i), item, "a string")
        return tuple(out)

    def str_map(self, parent: Mapping[str, Any], key: str, path: Path) -> Mapping[str, str]:
        """A map of strings to strings (labels, annotations); bad entries are reported and dropped."""
        value = parent.get(key)
        if value is None:
            return EMPTY_MAP
        if not isinstance(value, Mapping):
            self.wrong_type(path.child(key), value, "an object")
            return EMPTY_MAP
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                self.wrong_type(path.child(key), k, "a map with string keys")
            elif not isinstance(v, str):
                self.wrong_type(path.child(key).key(k), v, "a string")
            else:
                out[k] = v
        return MappingProxyType(out)

    # --- scalars ---

    def string(self, parent: Mapping[str, Any], key: str, path: Path, *, required: bool = False) -> str | None:
        value = parent.get(key)
        if value is None or (required and value == ""):
            if required:
                self.errors.append(FieldError.required(path.child(key), ""))
            return None
        if not isinstance(value, str):
            self.wrong_type(path.child(key), value, "a string")
            return None
        return value

    def boolean(self, parent: Mapping[str, Any], key: str, path: Path) -> bool | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.wrong_type(path.child(key), value, "a boolean")
            return None
        return value

    def integer(self, parent: Mapping[str, Any], key: str, path: Path) -> int | None:
        value = parent.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.wrong_type(path.child(key), value, "an integer")
            return None
        if not -(2**63) <= value < 2**63:
            self.errors.append(FieldError.invalid(path.child(key), value, "must fit in a 64-bit signed integer"))
            return None
        return value

    # --- structure ---

    def unknown_fields(self, obj: Mapping[str, Any], allowed: frozenset[str], path: Path) -> None:
        """Strict field validation (kubectl's default) rejects fields the v1 schema does not have."""
        if obj.keys() <= allowed:
            return
        for key in obj:
            if key not in allowed:
                if isinstance(key, str):
                    self.errors.append(FieldError.forbidden(path.child(key), "unknown field"))
                else:
                    self.wrong_type(path, key, "an object with string keys")

    def check(self, path: Path, value: str, checker: Callable[[str], list[str]]) -> bool:
        msgs = checker(value)
        for msg in msgs:
            self.errors.append(FieldError.invalid(path, value, msg))
        return not msgs

    def name(self, parent: Mapping[str, Any], key: str, path: Path, checker: Callable[[str], list[str]]) -> str:
        """A required name field checked by one of the ``names.check_*`` rules; ``""`` when missing or bad type."""
        value = self.string(parent, key, path, required=True)
        if value is None:
            return ""
        self.check(path.child(key), value, checker)
        return value

    def request_ref(self, value: object, path: Path, known: Mapping[str, frozenset[str] | None]) -> str | None:
        """A ``<request>`` or ``<request>/<subrequest>`` reference (constraints, config, allocation results)."""
        if not isinstance(value, str):
            self.wrong_type(path, value, "a string")
            return None
        msg = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
        segments = value.split("/")
        if len(segments) > 2:
            self.errors.append(FieldError.invalid(path, value, msg))
            return value
        for segment in segments:
            self.check(path, segment, names.check_dns1123_label)
        subs = known.get(segments[0], frozenset())
        found = segments[0] in known and (len(segments) == 1 or (subs is not None and segments[1] in subs))
        if not found:
            self.errors.append(FieldError.invalid(path, value, msg))
        return value
