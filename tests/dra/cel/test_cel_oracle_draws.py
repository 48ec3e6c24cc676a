"""The differential tests' draws are a function of the code alone: CI must meet the same 5,000 selectors on every
run of the same tree (and Hypothesis version), whatever the string hash seed of the process.

Hypothesis with ``derandomize=True`` seeds its generator from the test function; the grammar must then not
depend on anything else that varies between processes (set or dict order over strings under
``PYTHONHASHSEED``, ids, time). Each draw is run in a fresh interpreter with a different hash seed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_DRAW = """
import sys
sys.path.insert(0, {here!r})
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle_grammar import devices, expressions, free_type_selectors, optional_selectors, selectors

out = []

@settings(max_examples=300, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(case=st.tuples(st.one_of(selectors(), expressions(), free_type_selectors(), optional_selectors()),
                      devices()))
def draw(case):
    expr, d = case
    out.append(repr((expr, d.driver, sorted(d.attributes.items(), key=str), sorted(map(str, d.capacity.items())))))

draw()
print("\\n".join(out))
"""


@pytest.mark.timeout(120)
def test_random_cel_draws_do_not_depend_on_the_hash_seed() -> None:
    here = str(Path(__file__).parent)
    code = _DRAW.format(here=here)
    draws = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        draws.append(done.stdout.splitlines())
    assert len(draws[0]) == 300
    assert draws[0] == draws[1]
