"""Client of the allocator oracle: one long-lived Go process, one JSON line per scenario each way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.oracle import versions
from e2e.oracle.jsonlines import JsonLinesProcess

FOLDER = Path(__file__).resolve().parent


def binary(version: str = versions.NEWEST) -> Path:
    """The oracle's binary for Kubernetes ``version`` ("1.37"; built on first use, cached by source hash)."""
    return versions.build(FOLDER, "allocator-oracle", version)


class AllocatorOracle(JsonLinesProcess):
    """``run(scenario)`` for one, ``run_many(scenarios)`` to stream a batch through the same process."""

    name = "allocator oracle"

    def __init__(self, path: Path | None = None, *, version: str = versions.NEWEST) -> None:
        super().__init__(path or binary(version))
        self.version_name = version

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
        """The DRA library module the binary was built with: "k8s.io/dynamic-resource-allocation@v0.37.2"."""
        return str(self.run({"op": "version"})["version"])

    def scheduler_features(self) -> dict[str, bool]:
        """What this version's kube-scheduler passes to the allocator at default gates, in the protocol's names
        (the features a scenario without ``features`` runs with)."""
        return {k: bool(v) for k, v in self.run({"op": "version"})["scheduler"].items()}
