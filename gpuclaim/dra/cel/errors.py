"""Errors of the DRA CEL environment, worded as kube-apiserver / kube-scheduler word them."""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal["invalid", "too_long", "too_complex"]


class CelCompileError(Exception):
    """An expression the apiserver would refuse.

    ``message`` is the detail the apiserver prints (``compilation failed: ERROR: <input>:1:42: ...``
    with its source and caret lines, ``must evaluate to bool ...``, ``too complex, exceeds cost limit``,
    ``Too long: ...``); ``kind`` says which field error it becomes (Invalid, TooLong, Forbidden);
    ``hint`` is gpuclaim's advice (e.g. the ``compareTo(...) >= 0`` form), not part of upstream's text.
    """

    def __init__(
        self, message: str, *, line: int | None = None, column: int | None = None, hint: str | None = None,
        kind: ErrorKind = "invalid", cost: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint
        self.kind = kind
        self.cost = cost

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\nhint: {self.hint}"


class CelRuntimeError(Exception):
    """An evaluation error; the scheduler aborts the pod's scheduling attempt on it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def location(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column (in characters) of offset ``pos``, as cel-go counts them."""
    before = text[:pos]
    line = before.count("\n") + 1
    column = pos - (before.rfind("\n") + 1) + 1
    return line, column


def format_issue(text: str, pos: int, message: str) -> str:
    line, column = location(text, pos)
    source = text.split("\n")[line - 1] if text else ""
    return f"ERROR: <input>:{line}:{column}: {message}\n | {source}\n | {'.' * (column - 1)}^"


def error_at(text: str, pos: int, message: str, *, hint: str | None = None) -> CelCompileError:
    line, column = location(text, pos)
    return CelCompileError(
        "compilation failed: " + format_issue(text, pos, message), line=line, column=column, hint=hint
    )


class CelCostLimitError(CelRuntimeError):
    """The runtime cost limit was hit: aborts the whole evaluation, never absorbed by ``||``/``&&``."""
