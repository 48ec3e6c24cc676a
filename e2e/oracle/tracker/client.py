"""Client of the 1.34 slice-tracker oracle: one long-lived Go process, one JSON line per request each way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.oracle import gobuild
from e2e.oracle.jsonlines import JsonLinesProcess

FOLDER = Path(__file__).resolve().parent / "v0.34"


def binary() -> Path:
    """The oracle's binary (built on first use, cached by source hash)."""
    return gobuild.build(FOLDER, "tracker-oracle-v0.34")


class TrackerOracle(JsonLinesProcess):
    """``patch(slices, rules, classes)``: ``{"slices": [...patched...], "missing": [names]}``."""

    name = "tracker oracle"

    def _failure(self, reply: Mapping[str, Any]) -> str | None:
        if reply.get("status") != "ok":
            return f"{reply.get('status')}: {reply.get('error')}"
        return None

    def patch_many(self, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self.exchange(requests)
