"""Kubernetes `Status` errors as the apiserver returns them (code, reason, message, details)."""

from __future__ import annotations

from typing import Any

_REASONS = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict",
            410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}


class ApiError(Exception):
    def __init__(self, code: int, message: str, *, reason: str | None = None,
                 details: dict[str, Any] | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            out["details"] = self.details
        return out


def _details(kind_plural: str, name: str, group: str) -> dict[str, Any]:
    return {"name": name, "group": group, "kind": kind_plural}


def not_found(plural: str, name: str, group: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(404, f'{resource} "{name}" not found', details=_details(plural, name, group))


def already_exists(plural: str, name: str, group: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(409, f'{resource} "{name}" already exists', reason="AlreadyExists",
                    details=_details(plural, name, group))


def precondition_failed(kind: str, plural: str, name: str, group: str, cause: str) -> ApiError:
    """409 Conflict for a failed DeleteOptions precondition, worded as kube-apiserver 1.34 words it (the resource
    is named by its Kind there, e.g. `ResourceClaimTemplate.resource.k8s.io`; checked in tests/realkube)."""
    resource = f"{kind}.{group}" if group else kind
    return ApiError(409, f'Operation cannot be fulfilled on {resource} "{name}": {cause}',
                    details=_details(plural, name, group))


def conflict(plural: str, name: str, group: str, cause: str | None = None) -> ApiError:
    """409 Conflict; `cause` replaces the stale-update text."""
    resource = f"{plural}.{group}" if group else plural
    cause = cause or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, f'Operation cannot be fulfilled on {resource} "{name}": {cause}',
                    details=_details(plural, name, group))


def invalid(kind: str, name: str, group: str, field: str, message: str) -> ApiError:
    causes = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
    return ApiError(422, f'{kind}.{group or "core"} "{name}" is invalid: {field}: {message}' if field
                    else f'{kind}.{group or "core"} "{name}" is invalid: {message}',
                    details={"name": name, "group": group, "kind": kind, "causes": causes})


def expired(message: str = "too old resource version") -> ApiError:
    return ApiError(410, message)
