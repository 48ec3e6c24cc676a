"""What validation decides: denials (apiserver-style field errors) and warnings, each naming its field.

Checks append to a :class:`Findings` collector; :meth:`Findings.verdict` freezes it. A check whose severity
is configurable (``validation.runtimeError``, ``validation.noMatch``, ``validation.podPolicy``) calls
:meth:`Findings.report` with the mode and the same text lands on either side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuclaim.dra.fieldpath import FieldError, Path, join_errors

__all__ = ["Findings", "Notice", "Verdict"]


@dataclass(frozen=True, slots=True)
class Notice:
    """A warning for AdmissionResponse.warnings; kubectl prints it as ``Warning: <text>``."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path.steps else self.message


@dataclass(frozen=True, slots=True)
class Verdict:
    denials: tuple[FieldError, ...] = ()
    notices: tuple[Notice, ...] = ()
    # what each request was checked against (schemas, devices): ``gpuclaim lint --explain``
    explained: tuple[dict[str, Any], ...] = ()
    # lint only: what admission accepts but the scheduler refuses (driver schemas: an unknown attribute, a claim
    # over 32 devices); never part of ``denials``, so never of the webhook's answer
    scheduling: tuple[FieldError, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.denials

    @property
    def warnings(self) -> list[str]:
        """The strings for AdmissionResponse.warnings, each starting with the field path."""
        return [str(n) for n in self.notices]

    @property
    def message(self) -> str:
        """One message for AdmissionResponse.status.message, beginning with the count when there are several."""
        return join_errors(self.denials)


@dataclass(slots=True)
class Findings:
    denials: list[FieldError] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    explained: list[dict[str, Any]] = field(default_factory=list)
    scheduling: list[FieldError] = field(default_factory=list)

    def deny(self, error: FieldError) -> None:
        if error not in self.denials:
            self.denials.append(error)

    def deny_all(self, errors: list[FieldError]) -> None:
        for error in errors:
            self.deny(error)

    def warn(self, path: Path, message: str) -> None:
        notice = Notice(path, message)
        if notice not in self.notices:
            self.notices.append(notice)

    def report(self, mode: str, path: Path, value: object, message: str) -> None:
        """``mode`` "deny": an Invalid field error with ``value``; "warn": a warning; anything else: nothing."""
        if mode == "deny":
            self.deny(FieldError.invalid(path, value, message))
        elif mode == "warn":
            self.warn(path, message)

    def explain(self, record: dict[str, Any]) -> None:
        self.explained.append(record)

    def refused_at_scheduling(self, error: FieldError) -> None:
        if error not in self.scheduling:
            self.scheduling.append(error)

    def verdict(self) -> Verdict:
        return Verdict(tuple(self.denials), tuple(self.notices), tuple(self.explained), tuple(self.scheduling))
