"""Suite-wide hygiene: fixtures live under tests/fixtures, tests only talk to loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
