"""gpuclaim/fleet/metrics.py registered with a real FleetIndex fed the objects of tests/fixtures/clusters/demo-fleet
(real slices of p5, p4d and T4 nodes, the demo's running pods): the values against the index's own JSON, label
values that name no device, pod, claim or namespace, a series count bounded by node x driver x model x state
whatever the claims, and updates as claims come and go (Hypothesis picks which devices are allocated)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gpuclaim.dra.config import load_config
from gpuclaim.fleet import metrics, model

DUMP = Path(__file__).resolve().parents[1] / "fixtures" / "clusters" / "demo-fleet"
Obj = dict[str, Any]
LABELS = ("node", "driver", "model", "state")


def dump_objects() -> list[Obj]:
    objects: list[Obj] = []
    for path in sorted(DUMP.glob("*.yaml")):
        objects.extend(yaml.safe_load(path.read_text())["items"])
    return objects


def fed_index(objects: list[Obj]) -> model.FleetIndex:
    index = model.FleetIndex(load_config({}))
    for kind in ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim"):
        for obj in objects:
            if obj["kind"] == kind:
                index.on_event(kind, "ADDED", obj)
    return index


def samples(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client import generate_latest

    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name.startswith("gpuclaim_fleet"):
            out[family.name] = [(s.labels, s.value) for s in family.samples]
    return out


def claim(name: str, ns: str, node: str, devices: list[str], *, pod: str | None) -> Obj:
    status: Obj = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.nvidia.com", "pool": node, "device": d} for d in devices]}}}
    if pod is not None:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          "count": len(devices)}}]}},
            "status": status}


@pytest.fixture
def index() -> model.FleetIndex:
    return fed_index(dump_objects())


def test_the_values_are_the_index_own_counts_and_summaries(index: model.FleetIndex) -> None:
    registry = CollectorRegistry()
    metrics.register(registry, index)
    fleet = index.snapshot_dict()
    by_key: Counter[tuple[str, str, str, str]] = Counter()
    for node in fleet["nodes"]:
        for group in node["groups"]:
            for d in group["devices"]:
                by_key[(node["name"], d["driver"], d["model"] or "", d["state"])] += 1
    got = samples(registry)
    devices = {(s["node"], s["driver"], s["model"], s["state"]): v for s, v in got[metrics.DEVICES]}
    assert {k: v for k, v in devices.items() if v} == dict(by_key)
    assert sum(devices.values()) == fleet["summary"]["devices"]["total"] == 40
    assert devices[("p5-h100-1", "gpu.nvidia.com", "NVIDIA H100 80GB HBM3", "allocated")] == 6
    # free and allocated exist at 0 too; the other states only while a device is in them
    assert devices[("gcp-t4-0", "gpu.nvidia.com", "Tesla T4", "free")] == 1
    assert ("p5-h100-1", "gpu.nvidia.com", "NVIDIA H100 80GB HBM3", "reserved") not in devices
    assert devices[("p5-h100-1", "compute-domain.nvidia.com", "", "allocated")] == 0
    largest = {(s["node"], s["driver"]): v for s, v in got[metrics.LARGEST_FREE_TIGHT_GROUP]}
    stranded = {(s["node"], s["driver"]): v for s, v in got[metrics.STRANDED]}
    for node in fleet["nodes"]:
        if len(node["drivers"]) == 1:
            (driver,) = node["drivers"]
            assert largest[(node["name"], driver)] == node["summary"]["largestFreeTightGroup"]
            assert stranded[(node["name"], driver)] == node["summary"]["stranded"]
    # p5-h100-1 also publishes compute-domain channels: the GPU driver's figure is its GPUs' alone (gpu-6 and
    # gpu-7 free, each under its own PCIe root: the largest tight group holds 1)
    assert set(index.nodes()[-1].drivers) == {"gpu.nvidia.com", "compute-domain.nvidia.com"}
    assert largest[("p5-h100-1", "gpu.nvidia.com")] == 1
    assert largest[("p4d-a100-0", "gpu.nvidia.com")] == 2


def test_no_label_names_a_device_pod_claim_or_namespace(index: model.FleetIndex) -> None:
    registry = CollectorRegistry()
    metrics.register(registry, index)
    fleet = index.snapshot_dict()
    private = {"research"}
    for node in fleet["nodes"]:
        for group in node["groups"]:
            for d in group["devices"]:
                private.add(d["name"])
                private |= {c["name"] for c in d["claims"]} | {p["name"] for p in d["pods"]}
    for name, series in samples(registry).items():
        for labels, _ in series:
            assert not set(labels.values()) & private, (name, labels)
            assert set(labels) <= {"node", "driver", "model", "state"}


def test_the_series_count_is_bounded_by_the_fleets_shape_not_its_claims(index: model.FleetIndex) -> None:
    registry = CollectorRegistry()
    metrics.register(registry, index)
    before = {name: len(series) for name, series in samples(registry).items()}
    shapes = {(e.name, r.id.driver, r.model) for e in index.nodes() for r in e.rows}
    assert before[metrics.DEVICES] == len(shapes) * len(metrics.ALWAYS)  # nothing reserved, tainted, unhealthy
    assert before[metrics.STRANDED] == before[metrics.LARGEST_FREE_TIGHT_GROUP] == len(
        {(n, d) for n, d, _ in shapes})
    for i, device in enumerate(("gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7")):
        index.on_event("ResourceClaim", "ADDED", claim(f"c{i}", f"team-{i}", "p4d-a100-0", [device], pod=f"p{i}"))
    after = samples(registry)
    assert {name: len(series) for name, series in after.items()} == before
    # a held claim and a tainted device add their state's series once per node x driver x model, never per device
    index.on_event("ResourceClaim", "ADDED", claim("held", "team-x", "p4d-a100-6", ["gpu-0", "gpu-1"], pod=None))
    index.on_event("ResourceClaim", "ADDED", claim("held2", "team-y", "p4d-a100-6", ["gpu-2"], pod=None))
    grown = {name: len(series) for name, series in samples(registry).items()}
    assert grown == {**before, metrics.DEVICES: before[metrics.DEVICES] + 1}
    assert grown[metrics.DEVICES] <= len(shapes) * len(model.STATES)
    devices = {(s["node"], s["driver"], s["model"], s["state"]): v for s, v in after[metrics.DEVICES]}
    assert devices[("p4d-a100-0", "gpu.nvidia.com", "NVIDIA A100-SXM4-40GB", "allocated")] == 8
    assert devices[("p4d-a100-0", "gpu.nvidia.com", "NVIDIA A100-SXM4-40GB", "free")] == 0
    assert {(s["node"], s["driver"]): v for s, v in after[metrics.LARGEST_FREE_TIGHT_GROUP]}[
        ("p4d-a100-0", "gpu.nvidia.com")] == 0


def test_a_scrape_follows_the_index_and_reuses_families_while_nothing_changed(index: model.FleetIndex) -> None:
    collector = metrics.FleetCollector(index)
    first = list(collector.collect())
    assert next(iter(collector.collect())) is first[0]  # same revision: the same families
    index.on_event("ResourceClaim", "ADDED", claim("held", "team-x", "gcp-t4-0", ["gpu-1"], pod=None))
    second = {f.name: f for f in collector.collect()}
    values = {tuple(s.labels[k] for k in LABELS): s.value for s in second[metrics.DEVICES].samples}
    assert values[("gcp-t4-0", "gpu.nvidia.com", "Tesla T4", "reserved")] == 1  # allocated, nobody running
    assert values[("gcp-t4-0", "gpu.nvidia.com", "Tesla T4", "free")] == 0
    index.on_event("ResourceClaim", "DELETED", claim("held", "team-x", "gcp-t4-0", ["gpu-1"], pod=None))
    third = {f.name: f for f in collector.collect()}
    values = {tuple(s.labels[k] for k in LABELS): s.value for s in third[metrics.DEVICES].samples}
    assert values[("gcp-t4-0", "gpu.nvidia.com", "Tesla T4", "free")] == 1


FREE_P4D = [("p4d-a100-0", f"gpu-{i}") for i in range(1, 8)] + [("p5-h100-1", "gpu-6"), ("p5-h100-1", "gpu-7")]


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.tuples(st.sampled_from(FREE_P4D), st.booleans()), unique_by=lambda p: p[0], max_size=9))
def test_allocated_and_reserved_series_add_up_to_the_claims_made(picks: list[tuple[tuple[str, str], bool]]) -> None:
    index = fed_index(dump_objects())
    registry = CollectorRegistry()
    metrics.register(registry, index)
    for i, ((node, device), running) in enumerate(picks):
        index.on_event("ResourceClaim", "ADDED", claim(f"h{i}", "team", node, [device],
                                                       pod=f"p{i}" if running else None))
    by_state: Counter[str] = Counter()
    for labels, value in samples(registry)[metrics.DEVICES]:
        by_state[labels["state"]] += int(value)
    assert by_state["allocated"] == 9 + sum(1 for _, running in picks if running)  # the demo's 9 + the new
    assert by_state["reserved"] == sum(1 for _, running in picks if not running)
    assert sum(by_state.values()) == 40
