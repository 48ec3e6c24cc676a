"""AdmissionReview admission.k8s.io/v1 on the wire: decode a request, encode a response (orjson both ways).

Two error channels (STYLE 6). A body we cannot answer as a review at all (not JSON, not an AdmissionReview,
another apiVersion, no request or no uid) raises `BadReview`: the handler answers HTTP 400 and kube-apiserver
applies the webhook's failurePolicy. A review we can answer but whose request fields are malformed (an
operation we do not know, an `object` that is not a JSON object, ...) decodes with `FieldError`s under
`request.*`; the handler denies it with those paths, so the user sees what was wrong.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import orjson

from gpuclaim.dra.api import names
from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.serving import chunked_json

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
Obj = dict[str, Any]

# kube-apiserver: warnings longer than this may be truncated, and a response with very many is pointless
MAX_WARNING_CHARS = 512
MAX_WARNINGS = 32


class BadReview(Exception):
    """The body is not an AdmissionReview v1 we can answer; the message says why (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    group: str
    version: str
    resource: str


@dataclass(frozen=True, slots=True)
class Request:
    """`request` of an AdmissionReview, snake_case. `object`/`old_object` are the raw JSON (or None)."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    operation: str  # one of OPERATIONS once `errors` is empty
    namespace: str = ""
    name: str = ""
    sub_resource: str = ""
    object: Obj | None = None
    old_object: Obj | None = None
    dry_run: bool = False
    user_info: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] | None = None
    #: the size of the body it came in, in bytes (big objects are worked on off the event loop)
    size: int = 0


@dataclass(frozen=True, slots=True)
class Status:
    code: int
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Response:
    uid: str
    allowed: bool
    status: Status | None = None
    patch: Sequence[Mapping[str, Any]] | None = None  # RFC 6902 operations; only from the mutating endpoint
    warnings: Sequence[str] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    #: `encode_patch(patch)`, when the caller has it already (a cached conversion's patch is encoded once)
    encoded_patch: str | None = None


def _str(request: Mapping[str, Any], key: str, errors: list[FieldError], *, required: bool = False) -> str:
    value = request.get(key)
    if isinstance(value, str):  # the well-formed case first: no field path is built unless something is wrong
        return value
    if value is None:
        if required:
            errors.append(FieldError.required(Path.root("request", key)))
        return ""
    errors.append(FieldError.invalid(Path.root("request", key), _brief(value), "must be a string"))
    return ""


def _gv(request: Mapping[str, Any], key: str, last: str, errors: list[FieldError]) -> tuple[str, str, str]:
    value = request.get(key)
    if not isinstance(value, dict):
        path = Path.root("request", key)
        errors.append(FieldError.required(path) if value is None else
                      FieldError.invalid(path, _brief(value), f"must be an object with group, version, {last}"))
        return "", "", ""
    group, version, name = value.get("group", ""), value.get("version", ""), value.get(last, "")
    if type(group) is str and type(version) is str and type(name) is str:
        return group, version, name
    out: list[str] = []
    for part, item in (("group", group), ("version", version), (last, name)):
        if not isinstance(item, str):
            errors.append(FieldError.invalid(Path.root("request", key).child(part), _brief(item),
                                             "must be a string"))
            item = ""
        out.append(item)
    return out[0], out[1], out[2]


def _object(request: Mapping[str, Any], key: str, errors: list[FieldError]) -> Obj | None:
    value = request.get(key)
    if value is None or isinstance(value, dict):
        return value
    errors.append(FieldError.invalid(Path.root("request", key), _brief(value), "must be a JSON object or null"))
    return None


def _brief(value: object) -> object:
    """A value for an error message: scalars as they are, containers by type only (they may hold secrets)."""
    if isinstance(value, dict):
        return "<object>"
    if isinstance(value, list):
        return "<array>"
    if isinstance(value, str) and len(value) > 64:
        return value[:61] + "..."
    return value


_KINDS: dict[tuple[str, str, str], GroupVersionKind] = {}
_RESOURCES: dict[tuple[str, str, str], GroupVersionResource] = {}
_T = TypeVar("_T")
_MAX_INTERNED = 256  # a webhook sees a handful of kinds; the bound only stops a stream of made-up ones


def _interned(table: dict[tuple[str, str, str], _T], make: Callable[[str, str, str], _T],
              parts: tuple[str, str, str]) -> _T:
    """One immutable GroupVersionKind/Resource per distinct value: building a frozen dataclass costs ~2 us."""
    found = table.get(parts)
    if found is None:
        found = make(*parts)
        if len(table) < _MAX_INTERNED:
            table[parts] = found
    return found


def decode(body: bytes, *, stepwise: bool = False) -> tuple[Request, list[FieldError]]:
    """Parse a request body. Raises BadReview when it cannot be answered; else the request and the
    problems of its fields (an empty list means the request is well-formed). `stepwise`: for a big body decoded
    in a worker thread, in steps that let the event loop have the GIL between them (`serving.chunked_json`)."""
    try:
        doc = chunked_json.loads(body) if stepwise else orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(f"body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadReview(f"body is a JSON {type(doc).__name__}, not an AdmissionReview object")
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if kind != KIND:
        raise BadReview(f"kind is {kind!r}, expected {KIND!r}")
    if api_version != API_VERSION:
        raise BadReview(f"apiVersion {api_version!r} is not supported: this webhook speaks {API_VERSION} only "
                        "(set admissionReviewVersions: [v1] in the webhook configuration)")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise BadReview("request: an AdmissionReview sent to a webhook must carry a request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid: must be a non-empty string (the response has to echo it)")
    errors: list[FieldError] = []
    operation = _str(request, "operation", errors, required=True)
    if operation and operation not in OPERATIONS:
        errors.append(FieldError.not_supported(Path.root("request", "operation"), _brief(operation), OPERATIONS))
    dry_run = request.get("dryRun", False)
    if dry_run is None:
        dry_run = False
    if not isinstance(dry_run, bool):
        errors.append(FieldError.invalid(Path.root("request", "dryRun"), _brief(dry_run), "must be a boolean"))
        dry_run = True  # the safe reading: never cause side effects for a request we do not understand
    user_info = request.get("userInfo") or {}
    if not isinstance(user_info, dict):
        errors.append(FieldError.invalid(Path.root("request", "userInfo"), _brief(user_info), "must be an object"))
        user_info = {}
    options = request.get("options")
    namespace = _str(request, "namespace", errors)
    if namespace and names.check_dns1123_label(namespace):
        # it becomes a path segment of API calls made with the webhook's service account (issue 14, finding 7)
        errors.append(FieldError.invalid(Path.root("request", "namespace"), _brief(namespace),
                                         "must be a namespace name (a DNS-1123 label)"))
        namespace = ""
    parsed = Request(
        uid=uid,
        kind=_interned(_KINDS, GroupVersionKind, _gv(request, "kind", "kind", errors)),
        resource=_interned(_RESOURCES, GroupVersionResource, _gv(request, "resource", "resource", errors)),
        operation=operation,
        namespace=namespace,
        name=_str(request, "name", errors),
        sub_resource=_str(request, "subResource", errors),
        object=_object(request, "object", errors),
        old_object=_object(request, "oldObject", errors),
        dry_run=dry_run,
        user_info=user_info,
        options=options if isinstance(options, dict) else None,
        size=len(body),
    )
    return parsed, errors


def _clean_warning(text: str) -> str:
    # warnings travel as HTTP Warning headers to kubectl: no control characters, bounded length
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= MAX_WARNING_CHARS else text[: MAX_WARNING_CHARS - 3] + "..."


def encode_patch(patch: Sequence[Mapping[str, Any]]) -> str:
    """RFC 6902 operations as the `patch` field carries them: base64 of the JSON array."""
    return base64.b64encode(orjson.dumps(list(patch))).decode("ascii")


def to_wire(response: Response) -> Obj:
    body: Obj = {"uid": response.uid, "allowed": response.allowed}
    if response.status is not None:
        body["status"] = {"metadata": {}, "message": response.status.message, "reason": response.status.reason,
                          "code": response.status.code}
    if response.patch:
        # a patch without patchType is rejected by the apiserver; an empty one is left out altogether
        body["patch"] = response.encoded_patch or encode_patch(response.patch)
        body["patchType"] = "JSONPatch"
    if response.warnings:
        warnings = [_clean_warning(w) for w in response.warnings[:MAX_WARNINGS]]
        if len(response.warnings) > MAX_WARNINGS:
            warnings[-1] = f"... and {len(response.warnings) - MAX_WARNINGS + 1} more warnings"
        body["warnings"] = warnings
    if response.audit_annotations:
        body["auditAnnotations"] = dict(response.audit_annotations)
    return {"kind": KIND, "apiVersion": API_VERSION, "response": body}


def encode(response: Response) -> bytes:
    return orjson.dumps(to_wire(response))


def bad_request_body(code: int, message: str) -> bytes:
    """A `meta.k8s.io/v1` Status for the HTTP error channel, so the apiserver logs a readable reason."""
    reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 413: "RequestEntityTooLarge",
               415: "UnsupportedMediaType", 500: "InternalError"}
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reasons.get(code, "BadRequest"), "code": code})
