"""Agreement with the upstream allocator: every case of upstream's TestAllocator (k8s.io/dynamic-resource-allocation
v0.34.9) that the simulation supports, run with the case's features, must give upstream's outcome: the same
devices per request (as sets: upstream's pool order is a Go map's), the same node selector, unsatisfiable, or an
error containing upstream's wording.

Run ``pytest tests/dra/test_allocator_upstream.py -s`` to print the agreement table.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import allocator_cases as ac
import pytest

from gpuclaim.dra.allocator import allocate

CASES = ac.load_cases()


def _run(case: dict[str, Any]) -> str | None:
    slices, classes, claims = ac.parsed(case)
    outcome = allocate(ac.node(case), claims, slices=slices, classes=classes, allocated=ac.allocated(case),
                       features=ac.features(case), shared=ac.shared(case))  # fmt: skip
    return ac.compare(case, outcome)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_simulation_agrees_with_upstream(case: dict[str, Any]) -> None:
    reason = ac.skip_reason(case)
    if reason is not None:
        pytest.skip(reason)
    difference = _run(case)
    assert difference is None, difference


def test_agreement_table_covers_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    """Every case is simulated, shared devices and binding conditions included; only the two objects the apiserver
    refuses are skipped."""
    tally: Counter[str] = Counter()
    skipped: list[tuple[str, str]] = []
    for case in CASES:
        reason = ac.skip_reason(case)
        if reason is not None:
            tally["skipped"] += 1
            skipped.append((case["name"], reason))
            continue
        tally["agree" if _run(case) is None else "disagree"] += 1
    with capsys.disabled():
        print(f"\nupstream allocator cases: {len(CASES)}; agree {tally['agree']}, disagree {tally['disagree']}, "
              f"skipped {tally['skipped']}")  # fmt: skip
        for name, reason in skipped:
            print(f"  skipped {name}: {reason}")
    assert tally["disagree"] == 0
    assert sorted(name for name, _ in skipped) == sorted(ac.NOT_REPRESENTABLE)
