"""Chart test fixtures; the helpers live in chart_helpers (a unique module name: several test folders
have a conftest.py, so `from conftest import ...` would pick whichever was imported first)."""

from __future__ import annotations

from collections.abc import Callable

import helm_python as helm
import pytest
from chart_helpers import Rendered, _chart, _render


@pytest.fixture(scope="module")
def render() -> Callable[[str], Rendered]:
    """render(name) -> the parsed manifests of VALUE_SETS[name]; each set is rendered once per session."""
    return _render


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    return _chart()
