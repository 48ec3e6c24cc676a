"""Differential: 1.34's DeviceTaintRules (v1alpha3: ``deviceClassName`` and CEL ``selectors`` beside driver, pool and
device; both dropped in 1.35) as gpuclaim applies them (``dra.taints``) and as kube-scheduler 1.34's ResourceSlice
tracker does (e2e/oracle/tracker, k8s.io/dynamic-resource-allocation v0.34.4 resourceslice/tracker, fed through a
fake clientset's informers): every device must carry the same taints.

The rules' selectors and the classes' read attributes some devices lack, so CEL runtime errors (no match upstream)
are part of the run; a class that does not exist selects nothing. 1.34 applies rules only with DRADeviceTaints on
(alpha, off by default), so gpuclaim's model here has the gate on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.dra import taints, versions
from gpuclaim.dra.api import parse_device_class, parse_resource_slice

MODEL = versions.model_for("1.34", feature_gates={"DRADeviceTaints": True})
GPU, NIC = "gpu.example.com", "nic.example.com"
CLASSES = {
    "gpu": (f'device.driver == "{GPU}"',),
    "a100": (f'device.attributes["{GPU}"].model == "a100"',),  # a runtime error on a NIC and a GPU without model
    "big": (f'device.driver == "{GPU}"', f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'),
}
SELECTORS = (
    f'device.attributes["{GPU}"].model == "h100"',
    f'"model" in device.attributes["{GPU}"]',
    'device.driver == "nic.example.com"',
    f'device.attributes["{GPU}"].numa == 1',
)


@pytest.fixture(scope="module")
def tracker() -> Iterator[Any]:
    from e2e.oracle import gobuild
    from e2e.oracle.tracker import TrackerOracle, binary

    gobuild.require_go()
    with TrackerOracle(binary()) as oracle:
        yield oracle


@st.composite
def device(draw: st.DrawFn, driver: str, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"dev-{index}"}
    attrs: dict[str, Any] = {}
    if driver == GPU and draw(st.booleans()):
        attrs["model"] = {"string": draw(st.sampled_from(["a100", "h100"]))}
    if driver == GPU and draw(st.booleans()):
        attrs["numa"] = {"int": draw(st.integers(0, 1))}
    if attrs:
        out["attributes"] = attrs
    if driver == GPU and draw(st.booleans()):
        out["capacity"] = {"memory": {"value": draw(st.sampled_from(["16Gi", "80Gi"]))}}
    return out


@st.composite
def resource_slice(draw: st.DrawFn, index: int) -> dict[str, Any]:
    driver = draw(st.sampled_from([GPU, NIC]))
    devices = [draw(device(driver, i)) for i in range(draw(st.integers(1, 4)))]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"slice-{index}"},
            "spec": {"driver": driver, "nodeName": "node-1",
                     "pool": {"name": f"pool-{index % 2}", "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


@st.composite
def rule(draw: st.DrawFn, index: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": draw(st.sampled_from(["k0", "k1"])),
                                      "effect": draw(st.sampled_from(["NoSchedule", "NoExecute"]))}}
    if draw(st.integers(0, 9)) > 0:  # rarely no selector: every device, in 1.34
        selector: dict[str, Any] = {}
        if draw(st.booleans()):
            selector["deviceClassName"] = draw(st.sampled_from([*CLASSES, "missing"]))
        if draw(st.booleans()):
            selector["selectors"] = [{"cel": {"expression": e}}
                                     for e in draw(st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=2))]
        for key, values in (("driver", [GPU, NIC]), ("pool", ["pool-0", "pool-1"]), ("device", ["dev-0", "dev-1"])):
            if draw(st.integers(0, 3)) == 0:
                selector[key] = draw(st.sampled_from(values))
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
            "metadata": {"name": f"rule-{index}"}, "spec": spec}


def class_objects() -> list[dict[str, Any]]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}} for name, exprs in CLASSES.items()]


def _ours(slices: list[dict[str, Any]], rules: list[dict[str, Any]]) -> dict[tuple[str, str], Counter[tuple[str, str]]]:
    parsed_classes = {}
    for obj in class_objects():
        klass, errors = parse_device_class(obj)
        assert klass is not None and not errors, errors
        parsed_classes[klass.name] = klass
    parsed = []
    for obj in slices:
        model, errors = parse_resource_slice(obj)
        assert model is not None and not errors, errors
        parsed.append(model)
    parsed_rules, problems = taints.parse_rules(rules)
    assert not problems, problems
    out = {}
    for s in taints.apply_to_slices(parsed, parsed_rules, MODEL, parsed_classes):
        for d in s.devices:
            out[(s.name, d.name)] = Counter((str(t["key"]), str(t["effect"])) for t in d.taints)
    return out


def _upstream(reply: dict[str, Any]) -> dict[tuple[str, str], Counter[tuple[str, str]]]:
    assert not reply.get("missing"), reply  # only a selector that does not compile drops a slice
    return {(s["metadata"]["name"], d["name"]): Counter((t["key"], t["effect"]) for t in d.get("taints") or ())
            for s in reply["slices"] for d in s["spec"]["devices"]}


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.timeout(600)
def test_1_34_rules_taint_the_devices_its_slice_tracker_taints(tracker: Any, data: st.DataObject) -> None:
    slices = [data.draw(resource_slice(i)) for i in range(data.draw(st.integers(1, 3)))]
    rules = [data.draw(rule(i)) for i in range(data.draw(st.integers(1, 4)))]
    (reply,) = tracker.patch_many([{"slices": slices, "rules": rules, "classes": class_objects()}])
    assert _ours(slices, rules) == _upstream(reply), (slices, rules)


def test_a_rule_by_class_taints_only_what_the_class_selects(tracker: Any) -> None:
    """The case by hand: the class's selectors decide, a runtime error (a NIC has no GPU attributes) is no match,
    and a class that does not exist selects nothing."""
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"s-{driver}"},
               "spec": {"driver": driver, "nodeName": "node-1",
                        "pool": {"name": driver, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "dev-0", "attributes": {"model": {"string": "a100"}}},
                                    {"name": "dev-1"}]}} for driver in (GPU, NIC)]
    rules = [{"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": name},
              "spec": {"deviceSelector": {"deviceClassName": klass},
                       "taint": {"key": name, "effect": "NoSchedule"}}}
             for name, klass in (("by-a100", "a100"), ("by-missing", "missing"))]
    (reply,) = tracker.patch_many([{"slices": slices, "rules": rules, "classes": class_objects()}])
    upstream = _upstream(reply)
    assert upstream == _ours(slices, rules)
    assert {k for k, v in upstream.items() if v} == {(f"s-{GPU}", "dev-0")}
