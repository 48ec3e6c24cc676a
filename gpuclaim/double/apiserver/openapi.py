"""`/openapi/v3`: one document per served group version: each kind's PATCH path and parameters, and the schemas.

kubectl reads it for one thing on create and apply: whether the PATCH of a kind takes `fieldValidation`
(k8s.io/cli-runtime `resource/query_param_verifier_v3.go`). It does, so kubectl leaves validation to the server
and sends `fieldValidation=Strict`, which the double does anyway against the official schemas (`schemas.py`).
Without this document kubectl 1.37 falls back to OpenAPI v2 for client-side validation and fails
(`failed to download openapi`). `components.schemas` holds the schemas the double validates with (`schemas.py`:
the official JSON Schemas, turned into OpenAPI 3.0 shape: `$ref` into `#/components/schemas/`, wrapped in `allOf`
where it has siblings, as kube-apiserver writes it), so `kubectl explain` works. `/openapi/v2` is not served.

The strategic merge patch is served (`patches.py`) but not listed in the PATCH request bodies: listed, kubectl
would compute the patch from the OpenAPI schema and its list metadata, unlisted from its built-in types, which is
what it does for every built-in kind anyway.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import orjson

from gpuclaim.double.apiserver import discovery, schemas
from gpuclaim.double.apiserver.resources import RESOURCE_TYPES, ResourceType

_QUERY = {"in": "query", "schema": {"type": "string", "uniqueItems": True}}
_PARAMETERS = [
    {"name": "dryRun", "description": "When present, indicates that modifications should not be persisted.", **_QUERY},
    {"name": "fieldManager", "description": "fieldManager is a name associated with the actor or entity that is "
                                            "making these changes (accepted, not recorded).", **_QUERY},
    {"name": "fieldValidation", "description": "Strict, Warn or Ignore: the double always validates strictly "
                                               "(unknown or duplicate fields are refused).", **_QUERY},
]
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")


def _path(rt: ResourceType) -> str:
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    return f"{prefix}{scope}/{rt.plural}/{{name}}"


def _key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _document(group: str, version: str) -> dict[str, Any]:
    paths = {}
    for rt in RESOURCE_TYPES:
        if (rt.group, rt.version) != (group, version):
            continue
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        body = {"content": {t: {"schema": {"type": "object"}} for t in PATCH_TYPES}, "required": True}
        paths[_path(rt)] = {"patch": {"operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch",
                                      "x-kubernetes-group-version-kind": gvk, "parameters": _PARAMETERS,
                                      "requestBody": body, "responses": {"200": {"description": "OK"}}}}
    kinds = {(rt.group, rt.version, rt.kind) for rt in RESOURCE_TYPES if (rt.group, rt.version) == (group, version)}
    return {"openapi": "3.0.0", "info": {"title": "gpuclaim API double", "version": discovery.GIT_VERSION},
            "paths": paths, "components": {"schemas": _components(kinds)}}


def _gvks(definition: schemas.Node) -> set[tuple[str, str, str]]:
    listed = definition.get("x-kubernetes-group-version-kind") or []
    return {(g.get("group", ""), g.get("version", ""), g.get("kind", "")) for g in listed if isinstance(g, dict)}


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {name} if (name := schemas.ref_name(node)) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _oas(node: Any) -> Any:
    """A JSON Schema 2020-12 node in OpenAPI 3.0 shape."""
    if isinstance(node, list):
        return [_oas(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" or (key == "additionalProperties" and value is False):
            continue  # strictness is the validator's business; OpenAPI 3.0 keeps no siblings beside a $ref
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if len(types) == 1 else types
        else:
            out[key] = _oas(value)
    name = schemas.ref_name(node)
    if name is None:
        return out
    ref = {"$ref": f"#/components/schemas/{name}"}
    return {**out, "allOf": [ref]} if out else ref


def _components(kinds: set[tuple[str, str, str]]) -> dict[str, Any]:
    """The definitions of `kinds` and every definition they reach."""
    definitions = schemas.definitions()
    todo = [name for name, d in definitions.items() if _gvks(d) & kinds]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        todo.extend(_refs(definitions[name]) - seen)
    return {name: _oas(definitions[name]) for name in sorted(seen)}


@cache
def document(key: str) -> bytes | None:
    """The document for `api/v1` or `apis/GROUP/VERSION`, or None when the double does not serve it."""
    for rt in RESOURCE_TYPES:
        if _key(rt.group, rt.version) == key:
            return orjson.dumps(_document(rt.group, rt.version))
    return None


@cache
def index() -> dict[str, Any]:
    keys = sorted({_key(rt.group, rt.version) for rt in RESOURCE_TYPES})
    paths = {}
    for key in keys:
        digest = hashlib.sha256(document(key) or b"").hexdigest()[:32].upper()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}
