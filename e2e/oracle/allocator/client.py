"""Client of the allocator oracle: one long-lived Go process, one JSON line per scenario each way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.oracle import gobuild
from e2e.oracle.jsonlines import JsonLinesProcess

FOLDER = Path(__file__).resolve().parent

# What the 1.34 kube-scheduler's DynamicResources plugin passes at default feature gates
# (dynamicresources.go:712): DRAAdminAccess, DRAPrioritizedList, DRAResourceClaimDeviceStatus.
SCHEDULER_FEATURES: Mapping[str, bool] = {"adminAccess": True, "prioritizedList": True, "deviceStatus": True}


def binary() -> Path:
    """The oracle's binary (built on first use; cached by source hash)."""
    return gobuild.build(FOLDER, "allocator-oracle")


class AllocatorOracle(JsonLinesProcess):
    """``run(scenario)`` for one, ``run_many(scenarios)`` to stream a batch through the same process."""

    name = "allocator oracle"

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path or binary())

    def __enter__(self) -> AllocatorOracle:
        return self

    def _failure(self, reply: Mapping[str, Any]) -> str | None:
        if reply.get("status") in ("bad-input", "panic"):
            return f"{reply['status']}: {reply.get('error')}"
        return None

    def run(self, scenario: Mapping[str, Any]) -> dict[str, Any]:
        return self.run_many([scenario])[0]

    def run_many(self, scenarios: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Replies in scenario order."""
        return self.exchange(scenarios)

    def version(self) -> str:
        return str(self.run({"op": "version"})["version"])
