"""What /readyz reports: every check must pass (cluster view synced and fresh, serving certificate loaded)."""

from __future__ import annotations

from collections.abc import Callable

Check = Callable[[], tuple[bool, str]]


class Readiness:
    def __init__(self, checks: list[tuple[str, Check]] | None = None) -> None:
        self.checks: list[tuple[str, Check]] = list(checks or [])

    def add(self, name: str, check: Check) -> None:
        self.checks.append((name, check))

    def status(self) -> tuple[bool, list[str]]:
        ok, lines = True, []
        for name, check in self.checks:
            try:
                passed, detail = check()
            except Exception as exc:  # a broken check is a failed check, not a 500
                passed, detail = False, f"check failed: {exc}"
            ok = ok and passed
            lines.append(f"[{'+' if passed else '-'}]{name} {detail}")
        return ok, lines
