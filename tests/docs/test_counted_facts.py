"""Figures in the docs that are facts about the code, read back from the code so they cannot go stale:

- docs/dev/real-control-plane.md: how many tests `tests/realkube` runs per Kubernetes minor (pytest's collection
  with one minor under test);
- docs/install.md: how many value sets besides the defaults the chart tests render (`VALUE_SETS`);
- docs/benchmarks.md: the reliability short run's load, admissions and rate (`e2e.reliability.runner.SHORT`).

Measured figures are not checked here: they carry their date and the command that made them.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e.kube import build
from e2e.reliability import runner

ROOT = Path(__file__).resolve().parents[2]
WORDS = {w: n for n, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                     "ten", "eleven", "twelve"))}


def _page(name: str) -> str:
    return " ".join((ROOT / "docs" / name).read_text(encoding="utf-8").split())


def _number(text: str) -> int:
    return WORDS[text] if text in WORDS else int(text.replace(",", ""))


def test_the_realkube_test_count_per_minor_is_what_pytest_collects() -> None:
    env = {**os.environ, "GPUCLAIM_KUBE_VERSIONS": build.DEFAULT_MINOR}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "tests/realkube"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
    m = re.search(r"^(\d+) tests? collected", done.stdout, re.MULTILINE)
    assert m is not None, done.stdout[-2000:] + done.stderr[-2000:]
    said = re.search(r"(\d+) tests per Kubernetes minor", _page("dev/real-control-plane.md"))
    assert said is not None and int(said.group(1)) == int(m.group(1)), f"pytest collects {m.group(1)} per minor"


def _value_sets() -> list[str]:
    """The keys of `VALUE_SETS` in tests/charts/chart_helpers.py (read, not imported: it renders with Helm)."""
    tree = ast.parse((ROOT / "tests" / "charts" / "chart_helpers.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "VALUE_SETS":
            assert isinstance(node.value, ast.Dict)
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    raise AssertionError("tests/charts/chart_helpers.py has no VALUE_SETS")


def test_the_chart_value_set_count_is_the_chart_tests_one() -> None:
    sets = _value_sets()
    said = re.search(r"for the defaults and (\w+) value sets", _page("install.md"))
    assert "default" in sets and said is not None
    assert _number(said.group(1)) == len(sets) - 1, f"the chart tests render the defaults and {len(sets) - 1} sets"


def test_the_reliability_short_runs_load_is_the_codes() -> None:
    said = re.search(r"\| load: admissions, rate, errors \| ([\d,]+), (\d+)/s, 0 \|", _page("benchmarks.md"))
    assert said is not None
    assert (_number(said.group(1)), float(said.group(2))) == (runner.SHORT.load_count, runner.SHORT.load_rate)
    intro = re.search(r"The short run's load is ([\d,]+) admissions at (\d+)/s", _page("benchmarks.md"))
    assert intro is not None
    assert (_number(intro.group(1)), float(intro.group(2))) == (runner.SHORT.load_count, runner.SHORT.load_rate)


def test_a_stale_count_is_caught() -> None:
    assert _number("seven") != len(_value_sets()) - 1
    assert _number("400") != runner.SHORT.load_count
