"""Regression vectors: every disagreement with the upstream allocator found so far (tests/fixtures/allocator-oracle),
each with the Kubernetes version whose oracle recorded it (``version``, 1.34 when absent) and upstream's outcomes.
gpuclaim's model of that version must give one of the recorded outcomes (no Go needed); with Go, that version's
oracle must still give them too. A vector marked ``open`` is a known disagreement not fixed yet: expected to fail,
strictly, so fixing it fails until the mark is removed (docs/dev/allocator-oracle.md counts them per version)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import allocator_oracle as ao
import pytest

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "allocator-oracle"
VECTORS = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CORPUS.glob("*.json"))]


def _recorded(vector: dict[str, Any]) -> list[ao.Canonical]:
    return [ao.canonical_upstream(o) for o in vector["upstream"]]


def _version(vector: dict[str, Any]) -> str:
    return str(vector.get("version", "1.34"))


def _params() -> list[Any]:
    return [pytest.param(v, id=f"{_version(v)}-{v['name']}",
                         marks=[pytest.mark.xfail(strict=True, reason="open disagreement")] if v.get("open") else [])
            for v in VECTORS]  # fmt: skip


def test_the_corpus_is_not_empty() -> None:
    assert len(VECTORS) >= 11


@pytest.mark.parametrize("vector", _params())
def test_gpuclaim_gives_the_recorded_upstream_outcome(vector: dict[str, Any]) -> None:
    ours = ao.canonical_gpuclaim(ao.run_gpuclaim(vector["scenario"], _version(vector)))
    assert ao.difference(ours, _recorded(vector)) is None, ao.difference(ours, _recorded(vector))


@pytest.mark.parametrize("vector", VECTORS, ids=[f"{_version(v)}-{v['name']}" for v in VECTORS])
def test_the_oracle_still_gives_the_recorded_outcome(vector: dict[str, Any], allocator_oracles: Any) -> None:
    scenario = vector["scenario"]
    reply = allocator_oracles(_version(vector)).run(ao._wire(scenario, ao.RETRY_REPEAT if ao.multi_pool(scenario)
                                                             else 0))  # fmt: skip
    assert set(ao.upstream_outcomes(reply)) == set(_recorded(vector))
