"""`/openapi/v3`: one document per served group version, with paths and parameters but no schemas.

kubectl reads it for one thing on create and apply: whether the PATCH of a kind takes `fieldValidation`
(k8s.io/cli-runtime `resource/query_param_verifier_v3.go`). It does, so kubectl leaves validation to the server
and sends `fieldValidation=Strict`, which the double does anyway against the official schemas (`schemas.py`).
Without this document kubectl 1.37 falls back to OpenAPI v2 for client-side validation and fails
(`failed to download openapi`). The documents carry no `components.schemas`, so `kubectl explain` finds nothing:
the double does not serve it, nor `/openapi/v2`.

The strategic merge patch is served (`patches.py`) but not listed in the PATCH request bodies: listed, kubectl
would compute the patch from these schemas, which are not there; unlisted, it computes it from its built-in types.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import orjson

from gpuclaim.double.apiserver import discovery
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
    return {"openapi": "3.0.0", "info": {"title": "gpuclaim API double", "version": discovery.GIT_VERSION},
            "paths": paths, "components": {}}


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
