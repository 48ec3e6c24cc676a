"""The CEL oracles (k8s.io/dynamic-resource-allocation v0.34-v0.37, built from Go modules) for the differential
tests.

Built once per source hash into the user cache, started once per version and test session. Without Go the oracle
tests skip with a message; with ``CI`` set a missing Go fails them (CI must run the oracles).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from e2e.oracle import gobuild


@pytest.fixture(scope="session")
def cel_oracles() -> Iterator[Callable[[str], Any]]:
    """``cel_oracles("1.37")``: that version's oracle, started on first use and kept for the session."""
    from e2e.oracle.cel.client import CelOracle, binary

    started: dict[str, Any] = {}

    def get(version: str) -> Any:
        if version not in started:
            gobuild.require_go()
            started[version] = CelOracle(binary(version), version=version)
        return started[version]

    yield get
    for oracle in started.values():
        oracle.close()
