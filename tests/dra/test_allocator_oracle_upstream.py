"""Differential: every in-scope case of upstream's TestAllocator table (tests/fixtures/allocator, v0.34.4's table) run
through gpuclaim's simulation AND the upstream allocator of each supported version (k8s.io/dynamic-resource-allocation
v0.34-v0.37, e2e/oracle/allocator) with the case's features named as that version names them: gpuclaim's outcome must
be one upstream produces (see tests/dra/allocator_oracle.py).

Out of scope, skipped with the reason: the two objects the apiserver refuses
(allocator_cases.NOT_REPRESENTABLE), and from 0.36 on the cases without a node (the 0.36+ allocators read the node's
name; the scheduler always has a node, the old table did not always give one).
"""

from __future__ import annotations

from typing import Any

import allocator_cases as ac
import allocator_oracle as ao
import pytest

from e2e.oracle.versions import VERSIONS
from gpuclaim.dra import versions
from gpuclaim.dra.allocator import features_for

CASES = ac.load_cases()


def _skip_reason(case: dict[str, Any], version: str) -> str | None:
    reason = ac.skip_reason(case)
    if reason is None and not case.get("node") and ao.minor(version) >= 36:
        reason = "no node: the 0.36+ allocators need one (Allocate reads node.Name)"
    return reason


@pytest.fixture(scope="module")
def differences(allocator_oracles: Any) -> dict[tuple[str, str], str | None]:
    out: dict[tuple[str, str], str | None] = {}
    for version in VERSIONS:
        in_scope = [c for c in CASES if _skip_reason(c, version) is None]
        scenarios = [ao.scenario_from_case(c, version) for c in in_scope]
        found = ao.compare_batch(allocator_oracles(version), scenarios)
        out.update({(version, c["name"]): d for c, d in zip(in_scope, found, strict=True)})
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_simulation_agrees_with_the_upstream_allocator(case: dict[str, Any], version: str,
                                                      differences: dict[tuple[str, str], str | None]) -> None:
    reason = _skip_reason(case, version)
    if reason is not None:
        pytest.skip(reason)
    assert differences[version, case["name"]] is None, differences[version, case["name"]]


def test_binding_condition_cases_without_the_gate_are_in_scope() -> None:
    names = {c["name"] for c in CASES if ac.skip_reason(c) is None}
    assert {"binding-conditions-without-feature-gate",
            "device-binding-conditions-without-binding-conditions-feature-gate"} <= names  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_each_oracle_runs_its_versions_scheduler_defaults(allocator_oracles: Any, version: str) -> None:
    """The features and implementation the oracle runs without ``features`` are the version model's: what that
    version's kube-scheduler passes at default gates (1.34: experimental; 1.35-1.37: incubating)."""
    oracle = allocator_oracles(version)
    model = versions.model_for(version)
    ours = features_for(model)
    reply = oracle.run({"node": {"name": "n"}, "slices": [], "classes": [], "claims": []})
    assert reply["implementation"] == model.allocator.implementation == ours.implementation
    assert ao.features({"features": oracle.scheduler_features()}, version) == ours
    assert oracle.version().startswith(f"k8s.io/dynamic-resource-allocation@v0.{ao.minor(version)}.")


def test_without_device_status_1_34_runs_the_incubating_allocator(allocator_oracles: Any) -> None:
    reply = allocator_oracles("1.34").run({"features": {"adminAccess": True, "prioritizedList": True}, "node": None,
                                           "slices": [], "classes": [], "claims": []})  # fmt: skip
    assert reply["implementation"] == "incubating"
    assert ao.features({"features": {"adminAccess": True, "prioritizedList": True}}).implementation == "incubating"
