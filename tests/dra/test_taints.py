"""Effective device taints (gpuclaim.dra.taints): the slice's own plus matching DeviceTaintRules, per version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import taints, versions
from gpuclaim.dra.api import parse_device_class, parse_resource_slice
from gpuclaim.dra.api.slices import ResourceSlice

V34 = versions.model_for(34)
V35 = versions.model_for(35)
V36 = versions.model_for(36)
V37 = versions.model_for(37)
NO_SCHEDULE = {"key": "example.com/broken", "value": "fan", "effect": "NoSchedule"}


def slice_obj(driver: str = "gpu.nvidia.com", pool: str = "node-a", devices: int = 4,
              own: dict[str, Any] | None = None) -> dict[str, Any]:
    devs: list[dict[str, Any]] = []
    for i in range(devices):
        dev: dict[str, Any] = {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}}
        if own is not None and i == 0:
            dev["taints"] = [own]
        devs.append(dev)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{pool}-{driver}"},
            "spec": {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": pool, "devices": devs}}


def parsed(obj: dict[str, Any]) -> ResourceSlice:
    result, errors = parse_resource_slice(obj)
    assert result is not None and not errors, errors
    return result


def rule(name: str, selector: dict[str, Any] | None, taint: dict[str, Any] = NO_SCHEDULE) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": taint}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def tainted(s: ResourceSlice, objs: list[dict[str, Any]], model: versions.KubernetesModel) -> list[str]:
    rules, problems = taints.parse_rules(objs)
    assert not problems
    out = taints.apply_rules(s, rules, model)
    return [d.name for d in out.devices if d.taints]


def test_a_rule_by_driver_pool_and_device_taints_that_device_only() -> None:
    s = parsed(slice_obj())
    sel = {"driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-2"}
    assert tainted(s, [rule("r", sel)], V37) == ["gpu-2"]
    out = taints.apply_rules(s, taints.parse_rules([rule("r", sel)])[0], V37)
    assert out.devices[2].taints == (NO_SCHEDULE,)


@pytest.mark.parametrize("selector", [{"driver": "other.example.com"}, {"pool": "node-b"}, {"device": "gpu-9"},
                                      {"driver": "gpu.nvidia.com", "pool": "node-b"}])
def test_any_mismatched_field_means_no_device(selector: dict[str, Any]) -> None:
    s = parsed(slice_obj())
    assert tainted(s, [rule("r", selector)], V37) == []


def test_an_empty_selector_matches_every_device() -> None:
    assert tainted(parsed(slice_obj()), [rule("r", {})], V37) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_no_selector_matches_nothing_from_1_37_and_everything_before() -> None:
    # D37 tracker.go applyPatches: "No selector matches no devices"; D35/D36: a nil selector skipped every check
    s = parsed(slice_obj())
    assert tainted(s, [rule("r", None)], V37) == []
    on36 = V36.with_gates({"DRADeviceTaintRules": True})
    assert tainted(s, [rule("r", None)], on36) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_rules_apply_only_where_the_scheduler_gate_is_on() -> None:
    assert taints.rules_apply(V37)
    assert not taints.rules_apply(V36)  # beta, off by default: "Depends on an off-by-default beta API"
    assert not taints.rules_apply(V35)
    assert not taints.rules_apply(V34)  # DRADeviceTaints alpha, off
    assert taints.rules_apply(V36.with_gates({"DRADeviceTaintRules": True}))
    assert taints.rules_apply(V35.with_gates({"DRADeviceTaintRules": True, "DRADeviceTaints": True}))
    s = parsed(slice_obj())
    assert tainted(s, [rule("r", {"device": "gpu-1"})], V36) == []
    assert not taints.rules_apply(V37.with_gates({"DRADeviceTaintRules": False}))


def test_own_taints_come_first_and_the_object_is_kept_when_nothing_matches() -> None:
    own = {"key": "driver.example.com/ecc", "effect": "NoExecute"}
    s = parsed(slice_obj(own=own))
    rules, _ = taints.parse_rules([rule("b", {"device": "gpu-0"}), rule("a", {"device": "gpu-0"},
                                                                            {"key": "k", "effect": "None"})])
    out = taints.apply_rules(s, rules, V37)
    assert out.devices[0].taints == (own, {"key": "k", "effect": "None"}, NO_SCHEDULE)  # rules by name
    assert out.devices[1] is s.devices[1]
    assert taints.apply_rules(s, taints.parse_rules([rule("r", {"pool": "x"})])[0], V37) is s
    assert taints.apply_rules(s, [], V37) is s


def test_1_34_rules_select_by_class_and_cel() -> None:
    on34 = V34.with_gates({"DRADeviceTaints": True})
    cls, errors = parse_device_class({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                      "metadata": {"name": "odd"}, "spec": {"selectors": [
                                          {"cel": {"expression": "device.attributes['gpu.nvidia.com'].index % 2 == 1"}}
                                      ]}})
    assert cls is not None and not errors
    s = parsed(slice_obj())
    by_class = rule("c", {"deviceClassName": "odd"})
    by_cel = rule("e", {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].index >= 2"}}]})
    rules, _ = taints.parse_rules([by_class])
    assert [d.name for d in taints.apply_rules(s, rules, on34, {"odd": cls}).devices if d.taints] == ["gpu-1",
                                                                                                    "gpu-3"]
    assert [d.name for d in taints.apply_rules(s, rules, on34, {}).devices if d.taints] == []  # class missing
    rules, _ = taints.parse_rules([by_cel])
    assert [d.name for d in taints.apply_rules(s, rules, on34).devices if d.taints] == ["gpu-2", "gpu-3"]
    # a runtime error (no such attribute) is no match, not a failure
    broken = rule("x", {"selectors": [{"cel": {"expression": "device.attributes['x.example.com'].nope"}}]})
    assert [d.name for d in taints.apply_rules(s, taints.parse_rules([broken])[0], on34).devices if d.taints] == []
    # the fields were tombstoned in 1.35: the tracker ignores them
    on35 = V35.with_gates({"DRADeviceTaints": True, "DRADeviceTaintRules": True})
    assert tainted(s, [by_cel], on35) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


@pytest.mark.parametrize(("obj", "field"), [
    ("x", ""), ({"metadata": {}}, "metadata.name"), ({"metadata": {"name": "r"}}, "spec"),
    ({"metadata": {"name": "r"}, "spec": {}}, "spec.taint"),
    ({"metadata": {"name": "r"}, "spec": {"taint": {"key": "k"}}}, "spec.taint.effect"),
    ({"metadata": {"name": "r"}, "spec": {"taint": NO_SCHEDULE, "deviceSelector": []}}, "spec.deviceSelector"),
    ({"metadata": {"name": "r"}, "spec": {"taint": NO_SCHEDULE, "deviceSelector": {"pool": 3}}},
     "spec.deviceSelector.pool"),
    ({"metadata": {"name": "r"}, "spec": {"taint": NO_SCHEDULE, "deviceSelector": {"selectors": [{}]}}},
     "spec.deviceSelector.selectors[0].cel.expression"),
])
def test_a_malformed_rule_is_reported_by_field_and_taints_nothing(obj: Any, field: str) -> None:
    rules, problems = taints.parse_rules([obj, rule("ok", {"device": "gpu-0"})])
    assert [r.name for r in rules] == ["ok"]
    assert len(problems) == 1 and problems[0].field == field
    assert field in str(problems[0])


_names = st.sampled_from(["gpu-0", "gpu-1", "gpu-3", "gpu-7"])
_selectors = st.fixed_dictionaries({}, optional={"driver": st.sampled_from(["gpu.nvidia.com", "x.example.com"]),
                                                 "pool": st.sampled_from(["node-a", "node-b"]), "device": _names})


@settings(max_examples=200, deadline=None)
@given(selectors=st.lists(st.one_of(st.none(), _selectors), max_size=5),
       minor=st.sampled_from([35, 36, 37]))
def test_effective_taints_equal_upstream_apply_patches(selectors: list[dict[str, str] | None], minor: int) -> None:
    """An independent restatement of applyPatches (D35-D37 resourceslice/tracker): a device gets a rule's taint iff
    every set selector field equals the slice's driver, pool name, device name; a nil selector per version."""
    model = versions.model_for(minor).with_gates({"DRADeviceTaintRules": True, "DRADeviceTaints": True})
    s = parsed(slice_obj(devices=8))
    objs = [rule(f"r{i}", sel, {"key": f"k{i}", "effect": "NoSchedule"}) for i, sel in enumerate(selectors)]
    rules, problems = taints.parse_rules(objs)
    assert not problems
    out = taints.apply_rules(s, rules, model)
    for device in out.devices:
        expected = []
        for i, sel in sorted(enumerate(selectors), key=lambda p: f"r{p[0]}"):
            if sel is None:
                hit = minor <= 36
            else:
                hit = all(sel.get(k) in (None, v) for k, v in
                          (("driver", s.driver), ("pool", s.pool.name), ("device", device.name)))
            if hit:
                expected.append({"key": f"k{i}", "effect": "NoSchedule"})
        assert list(device.taints) == expected


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                    max_leaves=12))
def test_any_input_gives_a_rule_or_a_named_error(obj: Any) -> None:
    rules, problems = taints.parse_rules([obj])
    assert len(rules) + len(problems) == 1
    for p in problems:
        assert str(p).startswith("DeviceTaintRule ")
