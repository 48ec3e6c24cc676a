"""A random workload mix on 20 fake nodes with partly used GPUs: every device the real kube-scheduler allocates is
the device the extender's prediction code picks on the node it chose.

Its own cluster (`up --nodes 20`: 20 nodes cloned from the demo fleet's real slices: 9 H100, 8 A100 of which 2
with MIG, 3 T4). Per example: some GPUs taken first by bound pods holding allocated claims (drawn), then at
least 50 pods (CPU, 1, 2 or 4 GPUs, MIG 1g.5gb) submitted one at a time, each after the previous one is bound,
so the state each prediction is computed on is the one the scheduler allocated from. The shapes are bounded by
construction so that everything fits (at most 4x4 + 8 MIG + 48x2 GPUs against 134 whole GPUs and 16 MIG 1g);
a pod that is not bound anyway must be one the prediction also finds no node for.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realkube_cluster import Kube, cpu_pod, down, gpu_pod, up

from e2e.kube import demo
from e2e.kube.api import collection
from gpuclaim.commands._config import load_config_file

NODES = 20


@pytest.fixture(scope="module")
def mix(tmp_path_factory: pytest.TempPathFactory, kube: Kube) -> Iterator[Kube]:
    # `kube` first: the session cluster keeps its place in the order (binaries checked once)
    run = tmp_path_factory.mktemp("realkube-mix") / "run"
    first_line, state = up(run, kube.minor, "--nodes", str(NODES))
    cluster = Kube(run, first_line, state, kube.minor)
    try:
        yield cluster
    finally:
        cluster.close()
        down(run)


SHAPES = {"cpu": None, "gpu1": ("nvidia.com/gpu", 1), "gpu2": ("nvidia.com/gpu", 2),
          "gpu4": ("nvidia.com/gpu", 4), "mig": ("nvidia.com/mig-1g.5gb", 1)}

workload_mix = st.tuples(
    st.lists(st.just("gpu4"), max_size=4),
    st.lists(st.just("mig"), max_size=8),
    st.lists(st.sampled_from(["cpu", "gpu1", "gpu1", "gpu2"]), min_size=46, max_size=48),
).flatmap(lambda parts: st.permutations([*parts[0], *parts[1], *parts[2]]))

#: (node index, how many of its whole GPUs are already taken)
busy_gpus = st.lists(st.tuples(st.integers(0, NODES - 1), st.integers(1, 3)), min_size=3, max_size=6,
                     unique_by=lambda t: t[0])


def occupy(kube: Kube, ns: str, node: str, count: int) -> None:
    """A bound pod holding a claim allocated to the node's first `count` whole GPUs (as a running job would)."""
    slices = [s for s in kube.api.list("ResourceSlice") if s["spec"].get("nodeName") == node
              and s["spec"]["driver"] == "gpu.nvidia.com"]
    devices = [d["name"] for s in slices for d in s["spec"]["devices"]
               if d["attributes"]["type"]["string"] == "gpu"][:count]
    name = f"busy-{node}"
    pod = kube.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                           "spec": {"nodeName": node, "containers": [{
                               "name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                               "resources": {"claims": [{"name": "gpus"}]}}],
                               "resourceClaims": [{"name": "gpus", "resourceClaimName": name}]}})
    claim = kube.api.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"name": name, "namespace": ns},
                             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                                 "deviceClassName": "gpu.nvidia.com", "count": len(devices)}}]}}})
    kube.api.patch_status(claim, {
        "allocation": {"devices": {"results": [{"request": "gpus", "driver": "gpu.nvidia.com", "pool": node,
                                                "device": d} for d in devices]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]})


def clean(kube: Kube, ns: str) -> None:
    kube.delete_namespace_pods(ns)
    for claim in kube.api.list("ResourceClaim", ns):
        kube.api.delete(f"{collection('ResourceClaim', ns)}/{claim['metadata']['name']}")
    deadline = time.monotonic() + 60
    while kube.api.list("ResourceClaim", ns) and time.monotonic() < deadline:
        time.sleep(0.2)
    kube.api.delete(f"/api/v1/namespaces/{ns}", grace=None)


@pytest.mark.timeout(900)
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(shapes=workload_mix, busy=busy_gpus)
def test_every_real_allocation_is_the_extenders_prediction(mix: Kube, shapes: list[str],
                                                           busy: list[tuple[int, int]]) -> None:
    config = load_config_file(Path(mix.config_path)).extender
    nodes = mix.state["nodes"]
    ns = mix.namespace("mix")
    try:
        for index, count in busy:
            occupy(mix, ns, nodes[index], count)
        checked = 0
        for i, shape in enumerate(shapes):
            name = f"p{i:02d}-{shape}-{uuid.uuid4().hex[:4]}"
            spec = SHAPES[shape]
            obj = cpu_pod(name, ns) if spec is None else gpu_pod(name, ns, spec[1], spec[0])
            status, body = mix.api.request("POST", collection("Pod", ns), obj)
            assert status == 201, body
            assert (spec is None) == (not body["spec"].get("resourceClaims")), f"{name}: conversion"
            pod = mix.wait_bound(ns, name, timeout=15)
            snapshot = demo.snapshot(mix.api)
            if not pod["spec"].get("nodeName"):
                from gpuclaim.demo.scenario import predictions

                rows = predictions(pod, snapshot, config)
                fits = [r["node"] for r in rows if r["score"] is not None]
                assert not fits, f"{name} not bound ({demo._unschedulable(pod)}) but predicted to fit on {fits}"
                continue
            allocated, predicted, reason = demo.allocated_and_predicted(pod, snapshot, config)
            assert allocated == predicted, f"{name} on {pod['spec']['nodeName']}: {reason}"
            assert bool(allocated) == (spec is not None)
            checked += 1
        assert checked >= 45, f"only {checked} of {len(shapes)} pods scheduled"
    finally:
        clean(mix, ns)
