"""The CEL environment of each Kubernetes version: what kube-apiserver 1.34-1.37 accepts in a new selector and
what the scheduler compiles, as ``gpuclaim.dra.versions`` describes them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import cel, versions

MINORS = (34, 35, 36, 37)

# ext.Lists v3 (cel-go ext/lists.go): in k8s.io/apiserver's base environment from 1.34, so in the apiserver's
# new-expression environment (compatibility n-1) from 1.35
EXT_LISTS = [
    "[3, 1, 2].sort() == [1, 2, 3]",
    "[1, 2].sortBy(x, -x) == [2, 1]",
    "lists.range(3) == [0, 1, 2]",
    "[1, 2, 3].slice(1, 3) == [2, 3]",
    "[1, 1, 2].distinct() == [1, 2]",
    "[1, 2].reverse() == [2, 1]",
    "[[1], [2, 3]].flatten() == [1, 2, 3]",
]


def compiles(expression: str, env: cel.Environment) -> bool:
    try:
        cel.compile_selector(expression, mode=env)
    except cel.CelCompileError:
        return False
    return True


@pytest.mark.parametrize("expression", EXT_LISTS, ids=[e.split("(")[0].split(".")[-1] for e in EXT_LISTS])
def test_ext_lists_reach_new_selectors_from_1_35(expression: str) -> None:
    accepted = [compiles(expression, versions.model_for(m).cel_new) for m in MINORS]
    assert accepted == [False, True, True, True]
    assert all(compiles(expression, versions.model_for(m).cel_stored) for m in MINORS)
    assert cel.compile_selector(expression, mode=versions.model_for(35).cel_new).value(None) is True


def test_allow_multiple_allocations_is_declared_where_consumable_capacity_is_on() -> None:
    expression = "device.allowMultipleAllocations == true"
    assert [compiles(expression, versions.model_for(m).cel_new) for m in MINORS] == [False, False, True, True]
    assert not compiles(expression, versions.model_for(37, feature_gates={"DRAConsumableCapacity": False}).cel_new)
    assert compiles(expression, versions.model_for(35, feature_gates={"DRAConsumableCapacity": True}).cel_new)
    assert all(compiles(expression, versions.model_for(m).cel_stored) for m in MINORS)


def test_the_string_modes_keep_naming_1_34s_environments() -> None:
    assert cel.environment("new") == versions.model_for(34).cel_new
    assert cel.environment("stored").ext_lists == 3 and cel.environment("stored").allow_multiple_allocations


def test_the_cache_keeps_one_entry_per_environment() -> None:
    cache = cel.SelectorCache()
    with pytest.raises(cel.CelCompileError):
        cache.compile("[1].sort() == [1]", mode=versions.model_for(34).cel_new)
    assert cache.compile("[1].sort() == [1]", mode=versions.model_for(35).cel_new).env.compatibility == 34
    assert len(cache) == 2


_PIECES = st.sampled_from([
    "device.driver == 'gpu.nvidia.com'", "device.allowMultipleAllocations", "[1, 2].sort()[0] == 1",
    "lists.range(2).size() == 2", "[1].first().hasValue()", "'a'.upperAscii() == 'A'", "sets.contains([1], [1])",
    "[2, 1].sortBy(x, x)[0] == 1", "['a'].distinct().size() == 1", "device.capacity.size() >= 0",
    "cel.bind(x, 1, x == 1)", "[1, 2].reverse()[0] == 2", "isSemver('1.0.0')", "[0].slice(0, 1) == [0]",
])


@settings(deadline=None)  # compiles in 8 environments: 300 ms on the shared 2-core machine at load 5, 1 ms quiet
@given(st.lists(_PIECES, min_size=1, max_size=4), st.sampled_from([" && ", " || "]))
def test_environments_only_grow_with_the_version_and_the_scheduler_takes_what_the_apiserver_takes(
        pieces: list[str], joiner: str) -> None:
    expression = joiner.join(f"({p})" for p in pieces)
    new = [compiles(expression, versions.model_for(m).cel_new) for m in MINORS]
    stored = [compiles(expression, versions.model_for(m).cel_stored) for m in MINORS]
    assert new == sorted(new)  # once accepted, accepted by every later version at default gates
    assert all(s or not n for n, s in zip(new, stored, strict=True))


def test_includes_is_in_the_1_37_scheduler_and_in_new_selectors_only_with_list_type_attributes() -> None:
    expression = "device.driver.includes('gpu.nvidia.com') && [1, 2].includes(2)"
    assert not any(compiles(expression, versions.model_for(m).cel_new) for m in MINORS)
    assert [compiles(expression, versions.model_for(m).cel_stored) for m in MINORS] == [False, False, True, True]
    gated = versions.model_for(37, feature_gates={"DRAListTypeAttributes": True}).cel_new
    assert cel.compile_selector(expression, mode=gated).value(cel.PlainDevice(driver="gpu.nvidia.com")) is True


@pytest.mark.parametrize(("expression", "value"), [
    ("[1, 2, 3].includes(2)", True), ("[1, 2, 3].includes(4)", False), ("'model-a'.includes('model-a')", True),
    ("'model-a'.includes('model-b')", False), ("[1, 2].includes(2.0)", True), ("[quantity('1')].includes(1)", False),
    ("[[1], [2]].includes([2])", True), ("(1).includes('1')", False),
])  # the first four are library/lists.go's documented examples
def test_includes_compares_as_cel_go_equal(expression: str, value: bool) -> None:
    assert cel.compile_selector(expression, mode=versions.model_for(37).cel_stored).value(None) is value
