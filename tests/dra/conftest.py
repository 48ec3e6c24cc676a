"""The upstream allocator oracle, one process per test session (built from e2e/oracle/allocator on first use;
skipped without Go, a failure without Go when CI is set)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def allocator_oracle() -> Iterator[Any]:
    from e2e.oracle import gobuild
    from e2e.oracle.allocator import AllocatorOracle, binary

    gobuild.require_go()
    with AllocatorOracle(binary()) as oracle:
        yield oracle
