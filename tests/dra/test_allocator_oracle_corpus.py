"""Regression vectors: every disagreement with the upstream allocator found so far (tests/fixtures/allocator-oracle),
each with upstream's outcome as the oracle recorded it. gpuclaim must give one of the recorded outcomes (no Go
needed); with Go, the oracle must still give them too (the vectors stay true to v0.34.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import allocator_oracle as ao
import pytest

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "allocator-oracle"
VECTORS = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CORPUS.glob("*.json"))]
IDS = [v["name"] for v in VECTORS]


def _recorded(vector: dict[str, Any]) -> list[ao.Canonical]:
    return [ao.canonical_upstream(o) for o in vector["upstream"]]


def test_the_corpus_is_not_empty() -> None:
    assert len(VECTORS) >= 11


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_gpuclaim_gives_the_recorded_upstream_outcome(vector: dict[str, Any]) -> None:
    ours = ao.canonical_gpuclaim(ao.run_gpuclaim(vector["scenario"]))
    assert ao.difference(ours, _recorded(vector)) is None, ao.difference(ours, _recorded(vector))


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_the_oracle_still_gives_the_recorded_outcome(vector: dict[str, Any], allocator_oracle: Any) -> None:
    scenario = vector["scenario"]
    reply = allocator_oracle.run(ao._wire(scenario, ao.RETRY_REPEAT if ao.multi_pool(scenario) else 0))
    assert set(ao.upstream_outcomes(reply)) == set(_recorded(vector))
