"""The upstream allocator oracles, one process per Kubernetes version and test session (built from
e2e/oracle/allocator/v0.3x on first use; skipped without Go, a failure without Go when CI is set)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def allocator_oracles() -> Iterator[Callable[[str], Any]]:
    """``allocator_oracles("1.37")``: that version's oracle, started on first use and kept for the session."""
    from e2e.oracle import gobuild
    from e2e.oracle.allocator import AllocatorOracle, binary

    started: dict[str, Any] = {}

    def get(version: str) -> Any:
        if version not in started:
            gobuild.require_go()
            started[version] = AllocatorOracle(binary(version), version=version)
        return started[version]

    yield get
    for oracle in started.values():
        oracle.close()
