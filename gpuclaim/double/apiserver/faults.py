"""Fault injection: answer chosen requests with an error, slowly, or cut watch streams short.

Rules are matched in the order added, by verb (list, watch, get, create, update, patch, delete) and
resource plural (empty = any); each rule fires `times` times (None = until cleared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

FaultKind = Literal["status", "delay", "drop_watch"]
VERBS = frozenset({"list", "watch", "get", "create", "update", "patch", "delete"})


@dataclass(slots=True)
class Fault:
    kind: FaultKind
    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    code: int = 500  # kind=status: 410 on a watch is sent as an ERROR event, as the apiserver does
    retry_after: int | None = None  # kind=status, code 429: the Retry-After header in seconds
    delay_seconds: float = 0.0  # kind=delay
    every: int = 1  # kind=drop_watch: close the stream after this many events
    times: int | None = 1

    def applies(self, verb: str, resource: str) -> bool:
        return (not self.verbs or verb in self.verbs) and (not self.resources or resource in self.resources)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        kind = data.get("kind")
        if kind not in ("status", "delay", "drop_watch"):
            raise ValueError("kind: must be one of status, delay, drop_watch")
        verbs = frozenset(data.get("verbs") or ())
        if not verbs <= VERBS:
            raise ValueError(f"verbs: unknown verb(s) {sorted(verbs - VERBS)}")
        times = data.get("times", 1)
        return cls(kind=kind, verbs=verbs, resources=frozenset(data.get("resources") or ()),
                   code=int(data.get("code", 500)),
                   retry_after=None if data.get("retryAfter") is None else int(data["retryAfter"]),
                   delay_seconds=float(data.get("delaySeconds", 0.0)), every=max(1, int(data.get("every", 1))),
                   times=None if times is None else int(times))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "verbs": sorted(self.verbs), "resources": sorted(self.resources),
                "code": self.code, "retryAfter": self.retry_after, "delaySeconds": self.delay_seconds,
                "every": self.every, "times": self.times}


@dataclass
class Faults:
    rules: list[Fault] = field(default_factory=list)
    fired: dict[str, int] = field(default_factory=dict)  # by kind, for tests to see a storm really happened

    def add(self, fault: Fault) -> None:
        self.rules.append(fault)

    def clear(self) -> None:
        self.rules.clear()

    def take(self, verb: str, resource: str) -> list[Fault]:
        """The rules that fire for this request (at most one of each kind), consuming their counts."""
        chosen: dict[str, Fault] = {}
        for rule in list(self.rules):
            if rule.kind in chosen or not rule.applies(verb, resource):
                continue
            if rule.kind == "drop_watch" and verb != "watch":
                continue
            chosen[rule.kind] = rule
            if rule.times is not None:
                rule.times -= 1
                if rule.times <= 0:
                    self.rules.remove(rule)
            self.fired[rule.kind] = self.fired.get(rule.kind, 0) + 1
        return list(chosen.values())
