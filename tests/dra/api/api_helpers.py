"""Test-only file reading for the model tests (dra/ itself does no I/O)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuclaim.dra import api

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def load_documents(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as fh:
        return list(yaml.safe_load_all(fh))


def load_objects(path: Path) -> list[Any]:
    """Every object of a file, ``kind: List`` expanded."""
    return api.flatten_documents(load_documents(path))


def load_yaml(text: str) -> Any:
    return yaml.safe_load(text)


def paths(errors: list[Any]) -> list[tuple[str, str]]:
    """(path, type) pairs: what the tests assert on."""
    return [(str(e.path), str(e.type)) for e in errors]
