"""Fixtures for the certs tests: one CA and serving pair issued per session (key generation is the slow part); no
ambient cluster for the tests of the command."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from certs_helpers import NAMES

from gpuclaim.certs import material, selfsigned


@pytest.fixture(scope="session")
def ca() -> material.KeyPair:
    return selfsigned.issue_ca(now=datetime.now(UTC))


@pytest.fixture(scope="session")
def serving(ca: material.KeyPair) -> material.KeyPair:
    return selfsigned.issue_serving(ca=ca, names=NAMES, now=datetime.now(UTC))


@pytest.fixture
def no_ambient_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither an in-cluster service account nor the user's kubeconfig: `gpuclaim certs` without `--kubeconfig`
    works on local files only, whatever machine the tests run on."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
