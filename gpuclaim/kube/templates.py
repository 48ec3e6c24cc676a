"""Create a ResourceClaimTemplate at admission time: idempotent, quick to fail, clear when it cannot.

Templates are named after a hash of their spec, so an existing template of the same name should
carry the same spec; 409 AlreadyExists is then success. If it differs (someone edited it, or a
hash collision) the caller gets an error that says which fields differ, never a silent mismatch.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path

Obj = dict[str, Any]
API_VERSION = "resource.k8s.io/v1"


class TemplateError(Exception):
    """`reference` is one of: template-differs, api-refused (the API server answered 4xx other than 409: the
    object or its namespace is refused, e.g. invalid, namespace missing, quota full), api-unavailable,
    api-rejected (any other error status: 5xx, a 409 conflict). `status` is the API server's (code, reason)
    for api-refused."""

    def __init__(self, reference: str, message: str, *, status: tuple[int, str] | None = None) -> None:
        super().__init__(message)
        self.reference = reference
        self.status = status


def refused(exc: ApiError) -> bool:
    """The API server refused the request itself (4xx other than 409): asking again gets the same answer, so it is
    the object's refusal, never "unavailable" (issue 22, item 2: a 422 on a too-long selector or a 403 of a full
    quota was answered per internalErrorPolicy, which admitted the pod unconverted). A 409 is a race with another
    writer, not an answer about the object. A 429 is a refusal too: passed on as 429, the pod's client retries
    as it would after the API server's own 429."""
    return 400 <= exc.code < 500 and exc.code != 409


def _default_exact(request: Any) -> None:
    if isinstance(request, dict):
        request.setdefault("allocationMode", "ExactCount")
        if request["allocationMode"] == "ExactCount":
            request.setdefault("count", 1)


def _prune(value: Any) -> Any:
    """Drop what JSON omitempty drops (None, {}, []) so that absent and empty compare equal."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def normalized_spec(template: Obj) -> Any:
    """The template's spec as the apiserver stores it: v1 defaults applied, empty fields dropped."""
    spec = copy.deepcopy(template.get("spec") or {})
    for request in ((spec.get("spec") or {}).get("devices") or {}).get("requests") or ():
        if isinstance(request, dict):
            _default_exact(request.get("exactly"))
            for sub in request.get("firstAvailable") or ():
                _default_exact(sub)
    return _prune(spec)


def differences(existing: Any, wanted: Any, path: str = "spec") -> list[str]:
    """Field paths where two normalised specs differ, with both values."""
    if isinstance(existing, dict) and isinstance(wanted, dict):
        out: list[str] = []
        for key in sorted(existing.keys() | wanted.keys()):
            out += differences(existing.get(key), wanted.get(key), f"{path}.{key}")
        return out
    if isinstance(existing, list) and isinstance(wanted, list) and len(existing) == len(wanted):
        return [d for i, (a, b) in enumerate(zip(existing, wanted, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    if existing != wanted:
        return [f"{path}: existing {_short(existing)}, wanted {_short(wanted)}"]
    return []


def _short(value: Any) -> str:
    text = "<unset>" if value is None else repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


async def ensure_template(client: KubeClient, namespace: str, template: Obj, *, time_limit: float = 2.0,
                          dry_run: bool = False) -> Obj:
    """Create `template` in `namespace`, or accept an identical existing one; return the stored object.

    Raises TemplateError within about `time_limit` seconds when the API does not answer.
    """
    name = str((template.get("metadata") or {}).get("name", ""))
    where = f"ResourceClaimTemplate {namespace}/{name}"
    collection = resource_path(API_VERSION, "resourceclaimtemplates", namespace=namespace)
    body = {**template, "apiVersion": API_VERSION, "kind": "ResourceClaimTemplate"}
    try:
        async with asyncio.timeout(time_limit):
            try:
                return await client.create(collection, body, dry_run=dry_run, time_limit=time_limit)
            except ApiError as exc:
                if exc.code != 409 or exc.reason != "AlreadyExists":
                    raise
            existing = await client.get(f"{collection}/{name}", time_limit=time_limit)
    except TimeoutError:
        message = f"{where}: the API server did not answer within {time_limit:g}s"
        raise TemplateError("api-unavailable", message) from None
    except ApiUnavailable as exc:
        raise TemplateError("api-unavailable", f"{where}: {exc}") from None
    except ApiError as exc:
        if refused(exc):
            raise TemplateError("api-refused", f"{where}: the API server refused it: {exc}",
                                status=(exc.code, exc.reason)) from None
        raise TemplateError("api-rejected", f"{where}: the API server refused it: {exc}") from None
    diffs = differences(normalized_spec(existing), normalized_spec(body))
    if diffs:
        raise TemplateError("template-differs", f"{where} already exists with a different spec: " + "; ".join(diffs))
    return existing
