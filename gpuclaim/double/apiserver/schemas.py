"""Validation of written objects against the official Kubernetes OpenAPI schemas of the minor the double plays.

The schemas are the ones shipped by `kubernetes-validate` (one directory per minor, 1.34-1.37: a
DeviceTaintRule or a 1.37 field is unknown to 1.34's); `kubernetes_validate.validate` re-reads
and re-resolves them on every call (~13 ms), far too slow for a store that loads tens of thousands
of objects, so the same Draft 2020-12 validator is built once per (apiVersion, kind) and reused.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from functools import cache
from typing import Any

import jsonschema
import referencing
from referencing import Registry, Resource

NEWEST_MINOR = "1.37"  # the double plays 1.37 unless its Settings.git_version names another minor


class SchemaError(ValueError):
    """The object does not match its schema; `field` is the Kubernetes field path of the problem."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def _load(minor: str, name: str) -> Any:
    ref = importlib.resources.files("kubernetes_validate").joinpath(
        f"kubernetes-json-schema/v{minor}.0-local-strict/{name}")
    return json.loads(ref.read_text())


@cache
def _raw_definitions(minor: str) -> Any:
    return _load(minor, "_definitions.json")


@cache
def _definitions(minor: str) -> Resource[Any]:
    return Resource.from_contents(_raw_definitions(minor))


@cache
def _kind_schema(api_version: str, kind: str, minor: str) -> Any:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        return _load(minor, f"{kind.lower()}-{group}.json")
    except FileNotFoundError:
        return None


@cache
def _validator(api_version: str, kind: str, minor: str) -> jsonschema.protocols.Validator | None:
    schema = _kind_schema(api_version, kind, minor)
    if schema is None:
        return None
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = _definitions(minor) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def _render_path(path: Any) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def validate(obj: dict[str, Any], minor: str = NEWEST_MINOR) -> None:
    """Raise SchemaError when `obj` does not validate against `minor`'s schemas (strict: unknown fields are errors)."""
    validator = _validator(str(obj.get("apiVersion", "")), str(obj.get("kind", "")), minor)
    if validator is None:
        raise SchemaError("kind", f"no {minor} schema for {obj.get('apiVersion')}/{obj.get('kind')}")
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    except referencing.exceptions.Unresolvable as exc:  # a broken schema file, not the user's fault
        raise SchemaError("", f"schema could not be resolved: {exc}") from exc
    if error is not None:
        raise SchemaError(_render_path(error.absolute_path), error.message)


# ---- walking a schema (the strategic merge patch reads its list metadata here) -----------------------------------
Node = dict[str, Any]


def schema_of(api_version: str, kind: str) -> Node:
    """The top-level schema of a kind; {} (no metadata: plain merge semantics) for a kind without one."""
    return _kind_schema(api_version, kind, NEWEST_MINOR) or {}


def _resolve(node: Node) -> Node:
    name = ref_name(node)
    if name is None:
        return node
    resolved = definitions().get(name)
    return resolved if isinstance(resolved, dict) else {}


def child(node: Node, key: str) -> Node:
    """The (unresolved) schema of field `key`: the patch metadata sits on the field, beside its $ref."""
    found = (_resolve(node).get("properties") or {}).get(key)
    if found is None:
        found = _resolve(node).get("additionalProperties")
    return found if isinstance(found, dict) else {}


def items(node: Node) -> Node:
    found = _resolve(node).get("items")
    return found if isinstance(found, dict) else {}


def patch_meta(node: Node) -> tuple[str, str | None]:
    """(x-kubernetes-patch-strategy, x-kubernetes-patch-merge-key) of a field; ("", None) when it has none."""
    return str(node.get("x-kubernetes-patch-strategy", "")), node.get("x-kubernetes-patch-merge-key")


def definitions() -> dict[str, Node]:
    """Every definition of the schemas the double validates with, by name (`io.k8s.api.core.v1.Pod`)."""
    defs = _raw_definitions(NEWEST_MINOR)["$defs"]
    assert isinstance(defs, dict)
    return defs


def ref_name(node: Node) -> str | None:
    """The definition a `$ref` names, or None."""
    ref = node.get("$ref")
    return ref.partition("#/$defs/")[2] if isinstance(ref, str) and "#/$defs/" in ref else None
