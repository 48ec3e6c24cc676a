"""The dry-run is incremental per ResourceSlice: a slice change is reflected in the next verdict, and only the
changed slice is evaluated again (counted through ``DeviceIndex.summaries.stats``). A patched index gives
exactly what an index built from scratch gives (hypothesis, over sequences of in-place updates)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import validate_objects as o
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import api, cel
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.webhook.validate import UNKNOWN, DeviceIndex, OfflineInventory, Unknown, validate_object
from gpuclaim.webhook.validate.dryrun import Result, match_alternative

UNGUARDED = "device.attributes['gpu.nvidia.com'].index == 0"


class _Inventory:
    """The real classes and namespaces, with a device index the test replaces as slices change."""

    def __init__(self, index: DeviceIndex) -> None:
        self.index = index
        self._rest = OfflineInventory(classes=list(o.classes()), namespaces={"default": {}})

    def devices(self) -> DeviceIndex:
        return self.index

    def device_class(self, name: str) -> api.DeviceClass | Unknown | None:
        return self._rest.device_class(name)

    def namespace_labels(self, name: str) -> Mapping[str, str] | Unknown | None:
        return self._rest.namespace_labels(name)

    def template(self, namespace: str, name: str) -> api.ResourceClaimTemplate | Unknown | None:
        return UNKNOWN


def _with_index(source: api.ResourceSlice, version: str, device: int = 0) -> api.ResourceSlice:
    """``source`` as after a driver update: a new resourceVersion, and device ``device`` gained ``index``."""
    devices = list(source.devices)
    devices[device] = dataclasses.replace(devices[device],
                                          attributes={**devices[device].attributes, "gpu.nvidia.com/index": 0})
    return dataclasses.replace(source, meta=dataclasses.replace(source.meta, resource_version=version),
                               devices=tuple(devices))


def _validate(inventory: _Inventory) -> str:
    verdict = validate_object(o.claim(o.request("gpu", UNGUARDED)), operation="CREATE", inventory=inventory,
                              config=o.config(runtimeError="warn"))
    return " ".join(verdict.warnings)


def test_a_slice_update_is_reflected_and_only_that_slice_is_evaluated_again() -> None:
    slices = list(o.slices(o.H100_SLICES))
    gpu = [n for n, s in enumerate(slices) if s.driver == "gpu.nvidia.com"]
    inventory = _Inventory(DeviceIndex.build(slices))
    stats = inventory.index.summaries.stats
    assert "CEL runtime error on 16 devices" in _validate(inventory)
    evaluated = stats.segments_evaluated
    assert evaluated == len(slices)  # one chain, every slice once

    assert "CEL runtime error on 16 devices" in _validate(inventory)
    assert stats.segments_evaluated == evaluated  # the same index: the remembered result

    slices[gpu[1]] = _with_index(slices[gpu[1]], "v2")
    patched = inventory.index.replaced({slices[gpu[1]].name: slices[gpu[1]]})
    assert patched is not None and patched.parent is inventory.index and patched.patched == (gpu[1],)
    inventory.index = patched
    warnings = _validate(inventory)
    assert "CEL runtime error on 15 devices" in warnings
    assert stats.segments_evaluated == evaluated + 1
    assert stats.devices_projected == sum(map(len, patched.segments)) + len(patched.segments[gpu[1]])

    # the same slice again (a relist re-parses it): nothing changes, nothing is evaluated
    again = dataclasses.replace(slices[gpu[1]])
    assert patched.replaced({again.name: again}) is patched
    # a full rebuild (after a slice was added or deleted) keeps every unchanged slice's summary too
    slices[gpu[0]] = _with_index(slices[gpu[0]], "v3", device=3)
    inventory.index = DeviceIndex.build(slices, previous=patched)
    assert "CEL runtime error on 14 devices" in _validate(inventory)
    assert stats.segments_evaluated == evaluated + 2
    del slices[gpu[0]]
    inventory.index = DeviceIndex.build(slices, previous=inventory.index)
    assert "CEL runtime error on 7 devices" in _validate(inventory)
    assert stats.segments_evaluated == evaluated + 2


def test_identical_slices_share_one_evaluation_and_changes_outside_the_selectors_cost_no_cel() -> None:
    [template] = [s for s in o.slices(o.H100_SLICES) if s.driver == "gpu.nvidia.com"][:1]
    fleet = [dataclasses.replace(template, meta=dataclasses.replace(template.meta, name=f"node-{n}"),
                                 pool=api.Pool(f"pool-{n}", 1, 1), node_name=f"node-{n}") for n in range(50)]
    inventory = _Inventory(DeviceIndex.build(fleet))
    stats = inventory.index.summaries.stats
    assert "CEL runtime error on 400 devices" in _validate(inventory)
    assert (stats.segments_evaluated, stats.signatures_evaluated) == (50, 1)
    # a health attribute no selector reads: the slice is projected again, but its summary is the shared one
    changed = dataclasses.replace(fleet[7], meta=dataclasses.replace(fleet[7].meta, resource_version="9"),
                                  devices=tuple(dataclasses.replace(d, attributes={**d.attributes, "x.io/ok": True})
                                                for d in fleet[7].devices))
    patched = inventory.index.replaced({changed.name: changed})
    assert patched is not None
    inventory.index = patched
    assert "CEL runtime error on 400 devices" in _validate(inventory)
    assert (stats.segments_evaluated, stats.signatures_evaluated) == (51, 1)


def test_changes_an_update_cannot_patch_ask_for_a_rebuild() -> None:
    slices = list(o.slices(o.H100_SLICES))
    index = DeviceIndex.build(slices)
    first = slices[0]
    newer = dataclasses.replace(first, pool=dataclasses.replace(first.pool, generation=first.pool.generation + 1))
    assert index.replaced({first.name: newer}) is None  # a new generation can retire other slices
    assert index.replaced({"not-there": first}) is None
    assert index.replaced({first.name: None}) is None


# ---- a patched index is indistinguishable from a fresh one -------------------------------------------------
DRIVER = "gpu.example.com"
CLASS = [cel.compile_selector(f"device.driver == '{DRIVER}'", mode="stored")]
REQUEST = [cel.compile_selector(f"device.attributes['{DRIVER}'].index >= 1", mode="new"),
           cel.compile_selector(f"device.attributes['{DRIVER}'].model == 'a'", mode="new")]

_device = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([None, 0, 1, 2]), st.sampled_from([DRIVER, "x.io"]))
_slice = st.tuples(st.sampled_from([None, "node-0", "node-1", "node-2"]), st.lists(_device, max_size=4))


def _make(n: int, version: int, spec: tuple[str | None, list[tuple[str, int | None, str]]]) -> api.ResourceSlice:
    node, devices = spec
    models = []
    for k, (model, index, driver) in enumerate(devices):
        attributes: dict[str, api.AttributeValue] = {f"{DRIVER}/model": model}
        if index is not None:
            attributes[f"{DRIVER}/index"] = index
        models.append(api.Device(name=f"d{k}", driver=driver, pool=f"pool-{n}", attributes=attributes,
                                 capacity={f"{DRIVER}/memory": parse_quantity("80Gi")}))
    return api.ResourceSlice(meta=api.ObjectMeta(name=f"slice-{n}", resource_version=str(version)), driver=DRIVER,
                             pool=api.Pool(f"pool-{n}", 1, 1), devices=tuple(models), node_name=node,
                             all_nodes=node is None)


def _view(result: Result) -> tuple[object, ...]:
    return (result.matched, dict(result.rejected),
            {k: (g.count, g.example.id, g.message) for k, g in result.errors.items()}, result.best_node(),
            [d.id for d in result.matching_devices()], [d.id for d in result.admitted_by_class()])


@settings(max_examples=60, deadline=None)
@given(st.lists(_slice, min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), _slice, st.booleans()), max_size=8))
def test_patched_results_equal_results_from_scratch(
    initial: list[tuple[str | None, list[tuple[str, int | None, str]]]],
    updates: list[tuple[int, tuple[str | None, list[tuple[str, int | None, str]]], bool]],
) -> None:
    slices = [_make(n, 1, spec) for n, spec in enumerate(initial)]
    index = DeviceIndex.build(slices)
    match_alternative(index, CLASS, REQUEST).best_node()  # per-node counts patched (this chain) or redone
    match_alternative(index, CLASS[:0], CLASS)
    for version, (n, spec, rebuild) in enumerate(updates, start=2):
        n %= len(slices)
        slices[n] = _make(n, version, spec)
        patched = None if rebuild else index.replaced({slices[n].name: slices[n]})
        index = DeviceIndex.build(slices, previous=index) if patched is None else patched
        fresh = DeviceIndex.build(slices)
        assert [s.name for s in index.segments] == [s.name for s in fresh.segments]
        assert _view(match_alternative(index, CLASS, REQUEST)) == _view(match_alternative(fresh, CLASS, REQUEST))
        assert _view(match_alternative(index, CLASS[:0], CLASS)) == _view(match_alternative(fresh, CLASS[:0], CLASS))
