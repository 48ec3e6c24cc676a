"""The CEL oracle (k8s.io/dynamic-resource-allocation v0.34.4, built from Go modules) for the differential tests.

Built once per source hash into the user cache, started once per test session. Without Go the oracle tests
skip with a message; with ``CI`` set a missing Go fails them (CI must run the oracles).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.oracle import gobuild


@pytest.fixture(scope="session")
def cel_oracle() -> Iterator[object]:
    gobuild.require_go()
    from e2e.oracle.cel.client import CelOracle, binary

    with CelOracle(binary()) as oracle:
        yield oracle
