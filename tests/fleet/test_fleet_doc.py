"""docs/fleet.md's JSON example is what the model computes for the fleet it describes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fleet_example import example

PAGE = Path(__file__).resolve().parents[2] / "docs" / "fleet.md"


def test_the_json_example_is_the_models_answer() -> None:
    text = PAGE.read_text()
    blocks = [b for b in re.findall(r"```json\n(.*?)\n```", text, flags=re.S) if '"kind": "Fleet"' in b]
    assert len(blocks) == 1  # the CLI's FleetPods example is checked by tests/fleet/test_fleet_command.py
    assert json.loads(blocks[0]) == example()
    for field in ("revision", "generatedAt", "kubernetesVersion", "scope", "filters", "summary", "nodes"):
        assert f"`{field}`" in text or field in blocks[0]
