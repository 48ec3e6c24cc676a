"""Nodes sharing a signature share one simulation: the shared verdicts equal the ones simulated node by node."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra.config import load_config
from gpuclaim.extender import predict
from gpuclaim.extender.groups import GroupCache
from gpuclaim.extender.offline import OfflineView

from . import fleet

CONFIG = load_config({}).extender
SHAPES: dict[str, dict[str, Any]] = {
    "one": {"requests": [fleet.exact("gpu")]},
    "two": fleet.tight_or_any(2),
    "four": fleet.tight_or_any(4, "resource.kubernetes.io/numaNode"),
    "pair": {"requests": [fleet.exact("a"), fleet.exact("b")],
             "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]},
    "big": {"requests": [fleet.exact("gpu", 2, selectors=[
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')"}}])]},
}
nodes = st.lists(st.tuples(st.sampled_from(["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "Other"]),
                           st.sets(st.integers(0, 7), max_size=7), st.booleans()), min_size=2, max_size=8)


def _objects(spec: list[tuple[str, set[int], bool]]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [*fleet.gpu_classes(), *(fleet.template(n, d) for n, d in SHAPES.items())]
    for i, (product, held, numa_split) in enumerate(spec):
        name = f"n{i}"
        devices = [fleet.gpu(f"gpu-{d}", root=f"pci{i}-{d // 2}", numa=(d // 4 if numa_split else 0), product=product,
                             uuid=f"GPU-{i}-{d}") for d in range(8)]  # fmt: skip
        objects.append(fleet.node_slice(name, devices))
        if held:
            objects.append(fleet.allocated_claim(f"held-{i}", [(name, f"gpu-{d}") for d in sorted(held)]))
    return objects


@settings(max_examples=25, deadline=None)
@given(nodes, st.sampled_from(sorted(SHAPES)), st.sampled_from(["binpack", "spread"]))
def test_grouped_verdicts_equal_simulating_every_node(spec: list[tuple[str, set[int], bool]], shape: str,
                                                      policy: str) -> None:
    objects = _objects(spec)
    pod = fleet.pod(shape, annotations={CONFIG.policy_annotation: policy})
    grouped = OfflineView(objects, config=CONFIG)
    alone = OfflineView(objects, config=CONFIG)
    alone.verdict_groups = GroupCache(max_entries=0)
    names = grouped.candidates()
    shared = predict.predict(predict.resolve(pod, grouped, CONFIG), names, grouped, CONFIG)
    single = predict.predict(predict.resolve(pod, alone, CONFIG), names, alone, CONFIG)
    assert shared == single


def test_identical_nodes_are_simulated_once() -> None:
    objects = _objects([("NVIDIA A100-SXM4-40GB", {0, 1}, True)] * 6)
    view = OfflineView(objects, config=CONFIG)
    verdicts = predict.predict(predict.resolve(fleet.pod("two"), view, CONFIG), view.candidates(), view, CONFIG)
    assert view.verdict_groups.misses == 1 and view.verdict_groups.hits == 5
    assert [v.devices for v in verdicts] == [(f"gpu.nvidia.com/n{i}/gpu-2", f"gpu.nvidia.com/n{i}/gpu-3")
                                             for i in range(6)]
    assert len({v.score for v in verdicts}) == 1


@settings(max_examples=15, deadline=None)
@given(nodes, st.permutations(sorted(SHAPES)))
def test_grouped_verdicts_equal_simulating_every_node_for_shapes_asked_in_turn(
        spec: list[tuple[str, set[int], bool]], order: list[str]) -> None:
    # the pod-independent part of a signature is kept on the node state between shapes (groups.base): what a
    # shape reads (its selectors' outcomes, its constraint attributes) must still tell the shapes apart
    objects = _objects(spec)
    grouped = OfflineView(objects, config=CONFIG)
    alone = OfflineView(objects, config=CONFIG)
    alone.verdict_groups = GroupCache(max_entries=0)
    names = grouped.candidates()
    for shape in order:
        pod = fleet.pod(shape)
        shared = predict.predict(predict.resolve(pod, grouped, CONFIG), names, grouped, CONFIG)
        assert shared == predict.predict(predict.resolve(pod, alone, CONFIG), names, alone, CONFIG)
