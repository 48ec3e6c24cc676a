"""Fixtures of the `realkube` tests: one real control plane per session (tests/realkube/realkube_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from realkube_cluster import Kube, down, require_binaries, up

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realkube)


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    require_binaries()
    run = tmp_path_factory.mktemp("realkube") / "run"
    first_line, state = up(run)
    cluster = Kube(run, first_line, state)
    try:
        yield cluster
    finally:
        cluster.close()
        down(run)
        cluster.reap()
