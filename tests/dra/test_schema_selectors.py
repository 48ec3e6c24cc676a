"""``dra.schemas.selectors.facts``: which attribute reads are guarded, i.e. cannot fail at run time on a device
that lacks the attribute. The analysis is checked against the CEL evaluator itself: whatever it calls guarded
evaluates without an error on a device without the attribute."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuclaim.dra import cel
from gpuclaim.dra.schemas import selectors

NV = 'device.attributes["gpu.nvidia.com"]'
X = f"{NV}.pcieBusID"  # published only by some releases of the NVIDIA driver


def guarded(expression: str) -> list[bool]:
    found = selectors.facts(expression)
    assert found is not None
    return [r.guarded for r in found.reads if r.name == "pcieBusID"]


@pytest.mark.parametrize(("expression", "expected"), [
    (f'{X} == "a"', [False]),
    (f'has({X}) && {X} == "a"', [True, True]),
    (f'{X} == "a" && has({X})', [True, True]),  # && is commutative for errors in CEL
    (f'!has({X}) || {X} == "a"', [True, True]),
    (f'has({X}) ? {X} == "a" : false', [True, True]),
    (f'has({X}) ? false : {X} == "a"', [True, False]),
    (f'{NV}.?pcieBusID.orValue("") == "a"', [True]),
    (f'{NV}[?"pcieBusID"].orValue("") == "a"', [True]),
    (f'"pcieBusID" in {NV} && {X} == "a"', [True, True]),
    (f'{NV}.?pcieBusID.hasValue() && {X} == "a"', [True, True]),
    (f'has({X}) || {X} == "a"', [True, False]),  # the read runs exactly when the attribute is missing
    (f'cel.bind(nv, {NV}, has(nv.pcieBusID) && nv.pcieBusID == "a")', [True, True]),
    (f'has({NV}.other) && {X} == "a"', [False]),
], ids=["bare", "has-and", "and-has", "not-has-or", "ternary-then", "ternary-else", "optional-field",
        "optional-index", "in-and", "hasValue-and", "has-or", "bind", "other-name"])
def test_reads_behind_a_presence_test_are_guarded(expression: str, expected: list[bool]) -> None:
    assert guarded(expression) == expected


_GUARDS = [f"has({X})", f'"pcieBusID" in {NV}', f"{NV}.?pcieBusID.hasValue()"]
_USES = [f'{X} == "a"', f'{X}.startsWith("0000")', f'{NV}.?pcieBusID.orValue("") == "a"', "true",
         'device.driver == "gpu.nvidia.com"']


@st.composite
def _expressions(draw: st.DrawFn, depth: int = 0) -> str:
    choice = draw(st.integers(0, 5 if depth < 3 else 1))
    if choice == 0:
        return draw(st.sampled_from(_USES))
    if choice == 1:
        return draw(st.sampled_from(_GUARDS))
    left, right = draw(_expressions(depth + 1)), draw(_expressions(depth + 1))
    if choice == 2:
        return f"({left}) && ({right})"
    if choice == 3:
        return f"({left}) || ({right})"
    if choice == 4:
        return f"!({left})"
    cond = draw(_expressions(depth + 1))
    return f"({cond}) ? ({left}) : ({right})"


@given(_expressions())
def test_a_selector_whose_reads_are_all_guarded_never_fails_on_a_device_without_the_attribute(
        expression: str) -> None:
    reads = guarded(expression)
    device = cel.PlainDevice(driver="gpu.nvidia.com", attributes={"gpu.nvidia.com/productName": "H100"})
    try:
        compiled = cel.compile_selector(expression, mode="stored")
    except cel.CelCompileError:
        return
    outcome = compiled.outcome(device)
    if all(reads):
        assert not isinstance(outcome, cel.CelRuntimeError), (expression, outcome)
    else:
        # the analysis is allowed to be cautious, never wrong the other way; a bare read alone does fail
        if expression == f'{X} == "a"':
            assert isinstance(outcome, cel.CelRuntimeError)
