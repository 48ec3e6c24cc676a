"""Differential: every in-scope case of upstream's TestAllocator table (tests/fixtures/allocator) run through
gpuclaim's simulation AND the upstream allocator (k8s.io/dynamic-resource-allocation v0.34.4, e2e/oracle/allocator)
with the case's features: gpuclaim's outcome must be one upstream produces (see tests/dra/allocator_oracle.py).

Out of scope, skipped with the reason: cases needing alpha DRAConsumableCapacity or DRADeviceBindingConditions
(gpuclaim does not simulate them) and the two objects the apiserver refuses (allocator_cases.NOT_REPRESENTABLE).
"""

from __future__ import annotations

from typing import Any

import allocator_cases as ac
import allocator_oracle as ao
import pytest

from e2e.oracle.allocator import SCHEDULER_FEATURES

CASES = ac.load_cases()
IN_SCOPE = [c for c in CASES if ac.skip_reason(c) is None]


@pytest.fixture(scope="module")
def differences(allocator_oracle: Any) -> dict[str, str | None]:
    scenarios = [ao.scenario_from_case(c) for c in IN_SCOPE]
    return dict(zip([c["name"] for c in IN_SCOPE], ao.compare_batch(allocator_oracle, scenarios), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_simulation_agrees_with_the_upstream_allocator(case: dict[str, Any],
                                                      differences: dict[str, str | None]) -> None:
    reason = ac.skip_reason(case)
    if reason is not None:
        pytest.skip(reason)
    assert differences[case["name"]] is None, differences[case["name"]]


def test_binding_condition_cases_without_the_gate_are_in_scope() -> None:
    names = {c["name"] for c in IN_SCOPE}
    assert {"binding-conditions-without-feature-gate",
            "device-binding-conditions-without-binding-conditions-feature-gate"} <= names  # fmt: skip


def test_the_scheduler_feature_set_selects_the_experimental_allocator(allocator_oracle: Any) -> None:
    reply = allocator_oracle.run({"features": dict(SCHEDULER_FEATURES), "node": {"name": "n"}, "slices": [],
                                  "classes": [], "claims": []})  # fmt: skip
    assert reply["implementation"] == "experimental"
    no_status = allocator_oracle.run({"features": {"adminAccess": True, "prioritizedList": True}, "node": None,
                                      "slices": [], "classes": [], "claims": []})  # fmt: skip
    assert no_status["implementation"] == "incubating"
    assert allocator_oracle.version() == "k8s.io/dynamic-resource-allocation@v0.34.4"
