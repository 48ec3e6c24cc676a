"""Projection reads, result caching, the compile cache and allocator-order matching."""

from __future__ import annotations

import pytest

from gpuclaim.dra import cel
from gpuclaim.dra.cel import Read
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.semver import parse_semver

NV = "gpu.nvidia.com"


def gpu(uuid: str, *, product: str = "NVIDIA H100 80GB HBM3", memory: str = "81559Mi", **extra: object) -> cel.Device:
    attrs: dict[str, object] = {
        f"{NV}/productName": product, f"{NV}/type": "gpu", f"{NV}/uuid": uuid,
        f"{NV}/driverVersion": parse_semver("580.105.8"), "resource.kubernetes.io/pcieRoot": f"pci-{uuid}",
    }
    attrs.update({f"{NV}/{k}": v for k, v in extra.items()})
    return cel.PlainDevice(NV, attrs, {f"{NV}/memory": parse_quantity(memory)})  # type: ignore[arg-type]


READS = [
    ("device.driver == 'x'", {Read("driver")}),
    (f"device.attributes['{NV}'].productName == 'x'", {Read("attribute", NV, "productName")}),
    (f"device.attributes['{NV}']['type'] == 'gpu'", {Read("attribute", NV, "type")}),
    (f"device.attributes['{NV}'].?index.orValue(0) == 0", {Read("attribute", NV, "index")}),
    (f"has(device.attributes['{NV}'].index)", {Read("attribute", NV, "index")}),
    (f"'index' in device.attributes['{NV}']", {Read("attribute", NV, "index")}),
    (f"device.capacity['{NV}'].memory.compareTo(quantity('40Gi')) >= 0", {Read("capacity", NV, "memory")}),
    (f"cel.bind(a, device.attributes['{NV}'], a.type == 'gpu' && has(a.uuid))",
     {Read("attribute", NV, "type"), Read("attribute", NV, "uuid")}),
    (f"device.attributes['{NV}'].size() > 3", {Read("attribute", NV)}),
    (f"'{NV}' in device.attributes", {Read("attribute", NV)}),
    ("device.attributes.exists(d, d == 'x')", {Read("attribute")}),
    (f"device.attributes['{NV}'][device.driver] == 1", {Read("attribute", NV), Read("driver")}),
    ("true", set()),
]


@pytest.mark.parametrize(("expr", "expected"), READS, ids=[r[0] for r in READS])
def test_reads_are_exactly_what_the_expression_looks_at(expr: str, expected: set[Read]) -> None:
    assert cel.compile_uncached(expr, mode="stored").reads == frozenset(expected)


def test_identical_gpus_cost_one_evaluation_even_with_distinct_uuids() -> None:
    sel = cel.compile_uncached(f"device.attributes['{NV}'].productName.startsWith('NVIDIA H100')")
    devices = [gpu(f"u{i}") for i in range(50)] + [gpu(f"a{i}", product="NVIDIA A100") for i in range(50)]
    outcomes = cel.match_devices([sel], devices)
    assert [o.matched for o in outcomes] == [True] * 50 + [False] * 50
    assert len(sel._results) == 2  # two distinct projections, two real evaluations


def test_absent_attribute_is_part_of_the_projection() -> None:
    sel = cel.compile_uncached(f"device.attributes['{NV}'].?index.orValue(-1) == 0", mode="stored")
    assert sel.evaluate(gpu("a", index=0)) is True
    assert sel.evaluate(gpu("b")) is False  # absent must not reuse the index=0 result
    assert sel.evaluate(gpu("c", index=0)) is True


def test_true_and_one_are_different_projections() -> None:
    sel = cel.compile_uncached(f"device.attributes['{NV}'].flag == true", mode="stored")
    assert sel.evaluate(gpu("a", flag=1)) is False
    assert sel.evaluate(gpu("b", flag=True)) is True


def test_unqualified_names_live_under_the_driver_domain() -> None:
    sel = cel.compile_uncached("device.attributes['dra.example.com'].name == 'x'")
    assert sel.evaluate(cel.PlainDevice("dra.example.com", {"name": "x"})) is True
    with pytest.raises(cel.CelRuntimeError, match="no such key: name"):
        sel.evaluate(cel.PlainDevice("other.example.com", {"name": "x"}))  # lives under other.example.com


def test_runtime_errors_are_cached_and_raised_per_device() -> None:
    sel = cel.compile_uncached(f"device.attributes['{NV}'].index == 0", mode="stored")
    for uuid in ("a", "b"):
        with pytest.raises(cel.CelRuntimeError, match="no such key: index"):
            sel.evaluate(gpu(uuid))


def test_match_devices_runs_class_selectors_first_and_stops_at_the_first_false_or_error() -> None:
    klass = cel.compile_uncached(f"device.driver == '{NV}' && device.attributes['{NV}'].type == 'gpu'")
    unguarded = cel.compile_uncached(f"device.attributes['{NV}'].index == 0", mode="stored")
    other = cel.PlainDevice("gpu.amd.com", {"gpu.amd.com/type": "amdgpu"}, {})
    devices = [other, gpu("a", index=0), gpu("b", index=1), gpu("c")]
    outcomes = cel.match_devices([klass, unguarded], devices)
    assert outcomes[0] == cel.Outcome(False, None, 0)  # the class selector shields the claim selector
    assert outcomes[1] == cel.Outcome(True)
    assert outcomes[2] == cel.Outcome(False, None, 1)
    assert outcomes[3] == cel.Outcome(False, "no such key: index", 1)
    assert cel.match_devices([klass, unguarded], devices) == outcomes  # the per-device chain cache
    assert cel.match_devices([], devices) == [cel.Outcome(True)] * 4


def test_selector_cache_is_a_bounded_lru_that_also_remembers_errors() -> None:
    cache = cel.SelectorCache(maxsize=2)
    a = cache.compile("true")
    assert cache.compile("true") is a
    with pytest.raises(cel.CelCompileError):
        cache.compile("1")
    with pytest.raises(cel.CelCompileError):
        cache.compile("1")
    cache.compile("false")
    assert len(cache) == 2
    assert cache.compile("true") is not a  # evicted, compiled again
    assert cel.compile_selector("true", cache=cache).evaluate(cel.PlainDevice()) is True


def test_new_and_stored_modes_are_cached_separately() -> None:
    cache = cel.SelectorCache()
    assert cache.compile("[1, 1].distinct().size() == 1", mode="stored").evaluate(cel.PlainDevice()) is True
    with pytest.raises(cel.CelCompileError, match="undeclared reference to 'distinct'"):
        cache.compile("[1, 1].distinct().size() == 1", mode="new")


def test_runtime_cost_limit_stops_a_stored_expression() -> None:
    expr = "[" + ", ".join(["1"] * 100) + "].all(a, [" + ", ".join(["1"] * 100) + "].all(b, [" + ", ".join(
        ["1"] * 100) + "].all(c, a + b + c == 3)))"
    sel = cel.compile_uncached(expr, mode="stored")
    assert sel.estimated_cost > cel.MAX_COST
    with pytest.raises(cel.CelRuntimeError, match="actual cost limit exceeded"):
        sel.evaluate(cel.PlainDevice())
