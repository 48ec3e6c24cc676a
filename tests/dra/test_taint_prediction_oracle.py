"""Differential: the extender's prediction on tainted devices equals the upstream allocator's pick, per version.

For random DeviceTaintRules, tolerations and claims, the extender's predicted devices (``gpuclaim score``'s offline
view, with that version's model) equal the pick of the upstream allocator of that version (e2e/oracle, one process
per version) run on the slices as kube-scheduler's slice tracker patches them (upstream applyPatches, restated
independently here, not through gpuclaim.dra.taints).
"""

from __future__ import annotations

import copy
from typing import Any

import allocator_oracle as ao
import pytest
from extender import fleet
from extender.test_taint_prediction import offline_devices, rule
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.dra import versions


def _patched(slice_obj: dict[str, Any], rules: list[dict[str, Any]], minor: int) -> dict[str, Any]:
    """Upstream's applyPatches (D35-D37 resourceslice/tracker/tracker.go), restated: rules in name order."""
    out = copy.deepcopy(slice_obj)
    on = minor >= 37  # DRADeviceTaintRules is on by default only from 1.37
    if not on:
        return out
    spec = out["spec"]
    for r in sorted(rules, key=lambda r: r["metadata"]["name"]):
        sel = r["spec"].get("deviceSelector")
        if sel is None:
            continue  # 1.37: no selector matches no devices
        if sel.get("driver") not in (None, spec["driver"]) or sel.get("pool") not in (None, spec["pool"]["name"]):
            continue
        for device in spec["devices"]:
            if sel.get("device") in (None, device["name"]):
                device.setdefault("taints", []).append(r["spec"]["taint"])
    return out


_effects = st.sampled_from(["NoSchedule", "NoExecute", "None"])
_selector = st.fixed_dictionaries({}, optional={"driver": st.sampled_from(["gpu.nvidia.com", "x.example.com"]),
                                                "pool": st.sampled_from(["n", "m"]),
                                                "device": st.sampled_from([f"gpu-{i}" for i in range(8)])})
_toleration = st.fixed_dictionaries({"operator": st.sampled_from(["Exists", "Equal"])},
                                    optional={"key": st.sampled_from(["k0", "k1"]), "effect": _effects})


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(st.tuples(st.one_of(st.none(), _selector), _effects, st.sampled_from(["k0", "k1"])),
                      max_size=6),
       tolerations=st.lists(_toleration, max_size=2), count=st.integers(1, 4),
       tight=st.booleans(), version=st.sampled_from(["1.35", "1.36", "1.37"]))
@pytest.mark.timeout(600)
def test_the_prediction_equals_the_upstream_allocator_on_tainted_slices(
        allocator_oracles: Any, rules: list[tuple[dict[str, Any] | None, str, str]],
        tolerations: list[dict[str, Any]], count: int, tight: bool, version: str) -> None:
    minor = versions.parse_version(version).minor
    rule_objs = [rule(f"r{i}", sel, effect, key) for i, (sel, effect, key) in enumerate(rules)]
    for t in tolerations:
        if t["operator"] == "Equal":
            t["value"] = ""
    node = fleet.pairs_node("n")
    devices: dict[str, Any] = fleet.tight_or_any(count) if tight else {"requests": [fleet.exact("gpu", count)]}
    if tolerations:
        for request in devices["requests"]:
            for alt in request.get("firstAvailable") or [request["exactly"]]:
                alt["tolerations"] = tolerations
    template = fleet.template("one", devices)
    pod = fleet.pod("one")
    ours = offline_devices([node, *fleet.gpu_classes(), template, *rule_objs], pod, minor)

    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "p-one", "namespace": "default", "uid": "claim-uid"},
             "spec": copy.deepcopy(template["spec"]["spec"])}
    for request in claim["spec"]["devices"]["requests"]:  # the apiserver's defaulting, which the oracle expects
        for alt in request.get("firstAvailable") or [request["exactly"]]:
            alt.setdefault("allocationMode", "ExactCount")
    scenario = {"node": {"name": "n", "labels": {}}, "slices": [_patched(node, rule_objs, minor)],
                "classes": fleet.gpu_classes(), "allocatedDevices": [], "claims": [claim]}
    (reply,) = allocator_oracles(version).run_many([scenario])
    upstream = ao.canonical_upstream(reply)
    if upstream[0] != "allocated":
        assert ours is None, (upstream, ours)
        return
    ((picked, _),) = upstream[1]
    assert ours == tuple(f"{driver}/{pool}/{dev}" for _, driver, pool, dev, *_ in picked), (upstream, ours)
