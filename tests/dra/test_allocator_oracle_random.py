"""Differential: random fleets, pools and claims (allocator_scenarios) through gpuclaim's simulation and the upstream
allocator of each supported Kubernetes version, every scenario through that version's one oracle process of the
session. The default run covers EXAMPLES scenarios per version; GPUCLAIM_LONG=1 (marker ``slow``) runs
LONG_EXAMPLES more against the newest version (GPUCLAIM_LONG_VERSIONS=1.34,1.37 to choose).

A disagreement fails with the (shrunk) scenario as JSON; add it to tests/fixtures/allocator-oracle/ (the regression
corpus, replayed by test_allocator_oracle_corpus.py) with the fix. GPUCLAIM_ORACLE_FINDINGS=DIR also writes every
disagreement met while searching there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import allocator_oracle as ao
import pytest
from allocator_scenarios import scenarios
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2e.oracle.versions import NEWEST, VERSIONS

EXAMPLES = 1_050
LONG_EXAMPLES = 11_000
LONG_VERSIONS = os.environ.get("GPUCLAIM_LONG_VERSIONS", NEWEST).split(",")
OUTCOMES: dict[str, Counter[str]] = {v: Counter() for v in VERSIONS}


def _check(oracle: Any, scenario: dict[str, Any]) -> None:
    diff, status = ao.compare_all(oracle, [scenario])[0]
    OUTCOMES[oracle.version_name][status if diff is None else "disagree"] += 1
    if diff is not None and os.environ.get("GPUCLAIM_ORACLE_FINDINGS"):
        out = Path(os.environ["GPUCLAIM_ORACLE_FINDINGS"])
        out.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"version": oracle.version_name, "difference": diff, "scenario": scenario}, indent=1,
                          sort_keys=True)  # fmt: skip
        (out / f"finding-{hashlib.sha256(body.encode()).hexdigest()[:12]}.json").write_text(body)
    assert diff is None, f"{diff}\n{json.dumps(scenario)}"


_SETTINGS: dict[str, Any] = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.timeout(900)  # ~40 s alone per version; the 120 s default is for hangs, and the machines are shared
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=EXAMPLES, **_SETTINGS)
@given(data=st.data())
def test_random_scenarios_agree_with_the_upstream_allocator(allocator_oracles: Any, version: str,
                                                            data: st.DataObject) -> None:
    _check(allocator_oracles(version), data.draw(scenarios(version), label="scenario"))


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GPUCLAIM_LONG") != "1", reason="long differential run (GPUCLAIM_LONG=1)")
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("version", LONG_VERSIONS)
@settings(max_examples=LONG_EXAMPLES, **_SETTINGS)
@given(data=st.data())
def test_many_random_scenarios_agree_with_the_upstream_allocator(allocator_oracles: Any, version: str,
                                                                 data: st.DataObject) -> None:
    _check(allocator_oracles(version), data.draw(scenarios(version), label="scenario"))


@pytest.mark.parametrize("version", VERSIONS)
def test_the_random_scenarios_reach_every_outcome(version: str) -> None:
    """Runs after the differential (file order): the scenarios allocate, fail to fit and fail, all three often
    enough to mean something (figures from 1,000 scenarios: ~19% allocated, ~53% unsatisfiable, ~28% error)."""
    outcomes = OUTCOMES[version]
    if sum(outcomes.values()) < 500:
        pytest.skip("the differential test did not run in this session")
    total = sum(outcomes.values())
    for status in ("allocated", "unsatisfiable", "error"):
        assert outcomes[status] >= total * 0.08, outcomes
