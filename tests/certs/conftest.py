"""Fixtures for the certs tests: one CA and serving pair issued per session (key generation is the slow part)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from certs_helpers import NAMES

from gpuclaim.certs import material, selfsigned


@pytest.fixture(scope="session")
def ca() -> material.KeyPair:
    return selfsigned.issue_ca(now=datetime.now(UTC))


@pytest.fixture(scope="session")
def serving(ca: material.KeyPair) -> material.KeyPair:
    return selfsigned.issue_serving(ca=ca, names=NAMES, now=datetime.now(UTC))
