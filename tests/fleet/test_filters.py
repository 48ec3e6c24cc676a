"""The fleet API's filters, as the API applies them (a query string through ``api.parse_query``, then the index's
answer): for any combination of driver, model, namespace and node labels, the filtered answer shows exactly the
devices of the unfiltered answer that docs/fleet.md says it should, with summaries that count what is shown.

The fleet: the demo's real p5, p4d and T4 slices with its running pods, plus a second driver's node (the real
Intel Gaudi2 slice of tests/fixtures/resourceslices/intel-gaudi2-2dev.yaml), so a driver filter has something to
leave out."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.demo import inventory
from gpuclaim.dra.config import load_config
from gpuclaim.fleet import api, model

CONFIG = load_config({})
GAUDI = Path(__file__).resolve().parents[1] / "fixtures" / "resourceslices" / "intel-gaudi2-2dev.yaml"
GAUDI_NODE = {"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": "rpl-s", "labels": {"kubernetes.io/hostname": "rpl-s", "accelerator": "gaudi2"}}}
Obj = dict[str, Any]
DeviceKey = tuple[str, str, str, str]  # node, driver, pool, device


def fleet_objects() -> list[Obj]:
    objects = copy.deepcopy(inventory.build().objects)
    return [*objects, GAUDI_NODE, yaml.safe_load(GAUDI.read_text())]


@pytest.fixture(scope="module")
def fed() -> tuple[model.FleetIndex, dict[str, dict[str, str]]]:
    index = model.FleetIndex(CONFIG)
    objects = fleet_objects()
    for kind in ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim"):
        for obj in objects:
            if obj["kind"] == kind:
                index.on_event(kind, "ADDED", obj)
    labels = {o["metadata"]["name"]: dict(o["metadata"].get("labels") or {}) for o in objects if o["kind"] == "Node"}
    return index, labels


def shown(fleet: Obj) -> dict[DeviceKey, Obj]:
    return {(n["name"], d["driver"], d["pool"], d["name"]): d for n in fleet["nodes"] for g in n["groups"]
            for d in g["devices"]}


def answer(index: model.FleetIndex, query: dict[str, str], scope: model.Scope = model.CLUSTER) -> Obj:
    filters, _ = api.parse_query(urlencode(query))
    return dict(orjson.loads(index.snapshot(scope, filters)))


def expected(everything: dict[DeviceKey, Obj], labels: dict[str, dict[str, str]], query: dict[str, str]
             ) -> set[DeviceKey]:
    """docs/fleet.md's table of parameters, read literally."""
    keep = set()
    for key, d in everything.items():
        node = key[0]
        if "driver" in query and d["driver"] != query["driver"]:
            continue
        if "model" in query and query["model"].lower() not in (d["model"] or "").lower():
            continue
        if "namespace" in query and query["namespace"] not in {c["namespace"] for c in d["claims"]}:
            continue
        if "nodeSelector" in query:
            key_, _, value = query["nodeSelector"].partition("=")
            if labels.get(node, {}).get(key_) != value:
                continue
        keep.add(key)
    return keep


QUERIES = st.fixed_dictionaries({}, optional={
    "driver": st.sampled_from(["gpu.nvidia.com", "compute-domain.nvidia.com", "gaudi.intel.com", "gpu.example.com"]),
    "model": st.sampled_from(["H100", "a100-sxm4", "t4", "NVIDIA", "gaudi", "Z9"]),
    "namespace": st.sampled_from(["research", "ml-team", "team-z"]),
    "nodeSelector": st.sampled_from(["nvidia.com/gpu.product=Tesla-T4", "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                                     "accelerator=gaudi2", "nvidia.com/gpu.product=none"]),
})


@settings(max_examples=120, deadline=None)
@given(QUERIES)
def test_every_filter_shows_exactly_the_devices_it_names(fed: Any, query: dict[str, str]) -> None:
    index, labels = fed
    everything = shown(answer(index, {}))
    fleet = answer(index, query)
    got = shown(fleet)
    assert set(got) == expected(everything, labels, query)
    for key, d in got.items():  # a filter narrows what is shown, never what a device is
        assert d == everything[key]
    assert {n["name"] for n in fleet["nodes"]} == {k[0] for k in got}  # nodes with nothing shown are left out
    states = Counter(d["state"] for d in got.values())
    assert fleet["summary"]["devices"] == {"total": len(got), **{s: states[s] for s in model.STATES}}
    assert fleet["filters"] == {k: query.get(k) for k in ("driver", "model", "namespace", "nodeSelector")}


def test_the_driver_filter_separates_the_two_drivers(fed: Any) -> None:
    index, _ = fed
    gaudi = answer(index, {"driver": "gaudi.intel.com"})
    assert [n["name"] for n in gaudi["nodes"]] == ["rpl-s"]
    assert sorted(shown(gaudi)) == [("rpl-s", "gaudi.intel.com", "rpl-s", "0000-a0-00-0-0x1020"),
                                    ("rpl-s", "gaudi.intel.com", "rpl-s", "0000-b0-00-0-0x1020")]
    # the p5 nodes publish a second NVIDIA driver's devices too (compute-domain.nvidia.com's channels)
    totals = {d: answer(index, {"driver": d})["summary"]["devices"]["total"]
              for d in ("gpu.nvidia.com", "compute-domain.nvidia.com", "gaudi.intel.com")}
    assert totals["gaudi.intel.com"] == 2 and totals["compute-domain.nvidia.com"] > 0
    assert sum(totals.values()) == answer(index, {})["summary"]["devices"]["total"]
    assert "rpl-s" not in {n["name"] for n in answer(index, {"driver": "gpu.nvidia.com"})["nodes"]}


def test_a_namespace_viewer_filtering_by_its_namespace_sees_what_a_cluster_viewer_sees(fed: Any) -> None:
    index, _ = fed
    scope = model.Scope(cluster_wide=False, namespaces=frozenset({"research"}))
    mine = answer(index, {"namespace": "research"}, scope)
    assert mine["nodes"] and shown(mine) == shown(answer(index, {"namespace": "research"}))
