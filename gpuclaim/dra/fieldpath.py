"""Kubernetes field paths and field errors, shaped like k8s.io/apimachinery's `field` package.

Every rejection gpuclaim makes names the field the way kube-apiserver would
(`spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero`), so a
user can match our message with the apiserver's. Validators collect errors, never raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ErrorType", "FieldError", "Path", "join_errors"]


@dataclass(frozen=True, slots=True)
class Path:
    """An immutable path; steps are field names (str), list indexes (int) or map keys (`_Key`)."""

    steps: tuple[str | int | _Key, ...] = ()

    @classmethod
    def root(cls, *names: str) -> Path:
        return cls(tuple(names))

    def child(self, *names: str) -> Path:
        return Path(self.steps + names)

    def index(self, i: int) -> Path:
        return Path((*self.steps, i))

    def key(self, k: str) -> Path:
        return Path((*self.steps, _Key(k)))

    def __str__(self) -> str:
        out: list[str] = []
        for step in self.steps:
            if isinstance(step, int):
                out.append(f"[{step}]")
            elif isinstance(step, _Key):
                out.append(f"[{step.name}]")
            else:
                out.append(f".{step}" if out else step)
        return "".join(out)


@dataclass(frozen=True, slots=True)
class _Key:
    name: str


class ErrorType(StrEnum):
    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_MANY = "FieldValueTooMany"
    TOO_LONG = "FieldValueTooLong"
    DUPLICATE = "FieldValueDuplicate"
    NOT_FOUND = "FieldValueNotFound"
    INTERNAL = "InternalError"


# apimachinery's ErrorType.String()
_TYPE_TEXT = {
    ErrorType.REQUIRED: "Required value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.INTERNAL: "Internal error",
}
# types whose message omits the value, as apimachinery's ErrorBody does
_NO_VALUE = {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL, ErrorType.TOO_MANY}
_OMIT = object()


def _render_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


@dataclass(frozen=True, slots=True)
class FieldError:
    path: Path
    type: ErrorType
    value: object
    detail: str

    def __str__(self) -> str:
        body = _TYPE_TEXT[self.type]
        if self.type not in _NO_VALUE and self.value is not _OMIT:
            body += f": {_render_value(self.value)}"
        if self.detail:
            body += f": {self.detail}"
        return f"{self.path}: {body}" if self.path.steps else body

    @classmethod
    def required(cls, path: Path, detail: str = "") -> FieldError:
        return cls(path, ErrorType.REQUIRED, _OMIT, detail)

    @classmethod
    def invalid(cls, path: Path, value: object, detail: str) -> FieldError:
        return cls(path, ErrorType.INVALID, value, detail)

    @classmethod
    def not_supported(cls, path: Path, value: object, valid: Sequence[str]) -> FieldError:
        detail = "supported values: " + ", ".join(f'"{v}"' for v in valid) if valid else ""
        return cls(path, ErrorType.NOT_SUPPORTED, value, detail)

    @classmethod
    def forbidden(cls, path: Path, detail: str) -> FieldError:
        return cls(path, ErrorType.FORBIDDEN, _OMIT, detail)

    @classmethod
    def too_many(cls, path: Path, actual: int, limit: int) -> FieldError:
        detail = f"must have at most {limit} items" if actual < 0 else f"has {actual}, must have at most {limit} items"
        return cls(path, ErrorType.TOO_MANY, actual, detail)

    @classmethod
    def too_long(cls, path: Path, value: object, limit: int) -> FieldError:
        return cls(path, ErrorType.TOO_LONG, value, f"may not be more than {limit} bytes")

    @classmethod
    def duplicate(cls, path: Path, value: object) -> FieldError:
        return cls(path, ErrorType.DUPLICATE, value, "")

    @classmethod
    def not_found(cls, path: Path, value: object, detail: str = "") -> FieldError:
        return cls(path, ErrorType.NOT_FOUND, value, detail)



#: a denial message stays readable and small whatever the object (issue 14, finding 8: 5,000 bad containers
#: made an 848 KB Status message): each error at most MAX_ERROR_CHARS, the whole at most MAX_MESSAGE_CHARS,
#: then how many errors were left out
MAX_ERROR_CHARS = 1024
MAX_MESSAGE_CHARS = 8192


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[: limit - 40]}... ({len(text) - limit + 40} more characters)"


def join_errors(errors: Sequence[FieldError], *, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    """One message that begins with the count, as the example driver's webhook answers; bounded in size, with the
    number of errors left out at the end."""
    if not errors:
        return ""
    if len(errors) == 1:
        return _bounded(str(errors[0]), max(MAX_ERROR_CHARS, max_chars))
    head = f"{len(errors)} errors: "
    parts: list[str] = []
    used = len(head)
    for error in errors:
        text = _bounded(str(error), MAX_ERROR_CHARS)
        if parts and used + len(text) + 2 > max_chars:
            break
        parts.append(text)
        used += len(text) + 2
    left = len(errors) - len(parts)
    tail = f"; ... and {left} more error{'s' if left > 1 else ''} not shown" if left else ""
    return head + "; ".join(parts) + tail
