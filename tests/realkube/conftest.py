"""Fixtures of the `realkube` tests: one real control plane per session (tests/realkube/realkube_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from realkube_cluster import Kube, down, minors_under_test, up

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realkube)


@pytest.fixture(scope="session", params=minors_under_test(), ids=lambda minor: f"k{minor}")
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """One control plane per minor under test; pytest runs every test of one minor before it starts the next."""
    minor = request.param
    run = tmp_path_factory.mktemp(f"realkube-{minor}") / "run"
    first_line, state = up(run, minor)
    cluster = Kube(run, first_line, state, minor)
    try:
        yield cluster
    finally:
        cluster.close()
        down(run)
        cluster.reap()
