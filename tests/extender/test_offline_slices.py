"""The offline view (`gpuclaim score --cluster`, the extender over an inventory) gathers a node's pools from the
slices that concern it, not from every slice (5,000 nodes were quadratic: `python -m e2e.bench.extender_steps` never
finished its first call). Hypothesis makes fleets whose pools span nodes, mix node-bound and all-nodes slices, hold
several generations and miss slices; every node's pools and candidates must be what gather_pools makes from all the
slices, for the allocator of every supported Kubernetes version."""

from __future__ import annotations

import gc
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import allocator, versions
from gpuclaim.dra.api import parse_resource_slice
from gpuclaim.dra.config import load_config
from gpuclaim.extender.offline import OfflineView

from . import fleet

NODES = ("n0", "n1", "n2")


@st.composite
def slices(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 8))):
        driver = draw(st.sampled_from(["gpu.nvidia.com", "gpu.example.com"]))
        where = draw(st.sampled_from([*NODES, "all"]))
        pool = draw(st.sampled_from(["p0", "p1", "p2"]))
        devices = [fleet.gpu(f"gpu-{i}-{d}") for d in range(draw(st.integers(0, 2)))]
        spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": draw(st.integers(1, 2)),
                                                           "resourceSliceCount": draw(st.integers(1, 3))},
                                "devices": devices}
        spec.update({"allNodes": True} if where == "all" else {"nodeName": where})
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": f"s{i}-{where}"}, "spec": spec})
    return out


def _shape(pools: allocator.NodePools) -> Any:
    return ([(p.id, p.generation, p.incomplete, p.invalid, tuple(s.name for s in p.slices)) for p in pools.pools],
            [(c.id, c.on_node) for c in pools.candidates], pools.error)


@settings(max_examples=80, deadline=None)
@given(objects=slices(), model=st.sampled_from([versions.model_for(int(v.split(".")[1])) for v in versions.SUPPORTED]))
def test_a_nodes_pools_are_those_gathered_from_every_slice(objects: list[dict[str, Any]],
                                                          model: versions.KubernetesModel) -> None:
    view = OfflineView([*objects, *fleet.gpu_classes()], config=load_config({}).extender, model=model)
    parsed = sorted((parse_resource_slice(o)[0] for o in objects), key=lambda s: (s.driver, s.pool.name, s.name))
    features = allocator.features_for(model)
    for name in NODES:
        state = view.node_state(name)
        bound_here = any(o["spec"].get("nodeName") == name for o in objects)
        if state is None:
            assert not bound_here
            continue
        expected = allocator.gather_pools(allocator.NodeInfo(name, {}), parsed, features=features)
        assert _shape(state.pools) == _shape(expected)


def test_the_first_call_over_a_big_inventory_is_linear_in_its_nodes() -> None:
    """Building every node's state, and looking up as many unknown names, costs the same per node at 200 and at
    1,600 nodes (within a factor, for the machine's noise); per node it grew with the fleet before (3.5 times from
    200 to 1,600 nodes, measured)."""

    def per_node(nodes: int) -> float:
        view = OfflineView([fleet.pairs_node(f"n{i:05d}") for i in range(nodes)] + fleet.gpu_classes(),
                           config=load_config({}).extender)
        gc.disable()
        try:
            started = time.perf_counter()
            for i in range(nodes):
                assert view.node_state(f"n{i:05d}") is not None
            for i in range(nodes):
                assert view.node_state(f"unknown-{i}") is None
            return (time.perf_counter() - started) / nodes
        finally:
            gc.enable()

    small = min(per_node(200) for _ in range(3))
    big = min(per_node(1600) for _ in range(2))
    assert big < 2 * small, f"{small * 1e6:.0f} us a node at 200 nodes, {big * 1e6:.0f} us at 1,600"
