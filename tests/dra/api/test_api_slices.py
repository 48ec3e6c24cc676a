"""ResourceSlice: node association, pools, device attributes and capacities, with apiserver paths."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import paths

from gpuclaim.dra import api
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.semver import parse_semver


def device(name: str = "gpu-0", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"productName": {"string": "X"}},
        "capacity": {"memory": {"value": "40Gi"}},
        **fields,
    }


def slice_(devices: list[Any] | None = None, **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [device()] if devices is None else devices,
    }
    if not {"nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"} & spec.keys():
        base["nodeName"] = "node-a"
    base.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": base}


def test_unqualified_names_join_the_driver_domain_and_values_are_typed() -> None:
    attrs = {
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1+build"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    }
    model, errors = api.parse_resource_slice(slice_([device(attributes=attrs, capacity={"memory": {"value": "80Gi"}})]))
    assert errors == [] and model is not None
    (dev,) = model.devices
    assert dict(dev.attributes) == {
        "gpu.example.com/index": 3,
        "gpu.example.com/healthy": True,
        "gpu.example.com/driverVersion": parse_semver("1.2.3-rc.1+build"),
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
    }
    assert dev.capacity == {"gpu.example.com/memory": parse_quantity("80Gi")}
    assert (dev.driver, dev.pool) == ("gpu.example.com", "node-a")
    assert str(dev.id) == "gpu.example.com/node-a/gpu-0"


def test_numeric_capacity_values_are_accepted_as_quantities() -> None:
    model, errors = api.parse_resource_slice(slice_([device(capacity={"cores": {"value": 304}})]))
    assert errors == [] and model is not None
    assert model.devices[0].capacity["gpu.example.com/cores"] == parse_quantity("304")


CASES = [
    ("no-node-association", slice_(allNodes=None, nodeName=None), [("spec", "FieldValueRequired")]),
    ("two-node-associations", slice_(nodeName="n", allNodes=True), [("spec", "FieldValueInvalid")]),
    (
        "all-nodes-false",
        slice_(allNodes=False),
        [("spec.allNodes", "FieldValueInvalid"), ("spec", "FieldValueRequired")],
    ),
    (
        "selector-two-terms",
        slice_(
            nodeSelector={
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]
                * 2
            }
        ),
        [("spec.nodeSelector.nodeSelectorTerms", "FieldValueInvalid")],
    ),
    ("bad-driver", slice_(driver="Not A Driver"), [("spec.driver", "FieldValueInvalid")]),
    ("long-driver", slice_(driver="a" * 64), [("spec.driver", "FieldValueInvalid")]),
    (
        "bad-pool",
        slice_(pool={"name": "a//b", "generation": -1, "resourceSliceCount": 0}),
        [
            ("spec.pool.name", "FieldValueInvalid"),
            ("spec.pool.generation", "FieldValueInvalid"),
            ("spec.pool.resourceSliceCount", "FieldValueInvalid"),
        ],
    ),
    ("too-many-devices", slice_([device(f"d{i}") for i in range(129)]), [("spec.devices", "FieldValueTooMany")]),
    ("dup-device", slice_([device(), device()]), [("spec.devices[1]", "FieldValueDuplicate")]),
    ("bad-device-name", slice_([device("gpu.0")]), [("spec.devices[0].name", "FieldValueInvalid")]),
    (
        "string-too-long",
        slice_([device(attributes={"a": {"string": "x" * 65}})]),
        [("spec.devices[0].attributes[a].string", "FieldValueTooLong")],
    ),
    (
        "bad-version",
        slice_([device(attributes={"v": {"version": "v1.2.3"}})]),
        [("spec.devices[0].attributes[v].version", "FieldValueInvalid")],
    ),
    (
        "two-values",
        slice_([device(attributes={"a": {"int": 1, "string": "x"}})]),
        [("spec.devices[0].attributes[a]", "FieldValueInvalid")],
    ),
    ("no-value", slice_([device(attributes={"a": {}})]), [("spec.devices[0].attributes[a]", "FieldValueInvalid")]),
    (
        "bad-attribute-name",
        slice_([device(attributes={"bad-name": {"int": 1}})]),
        [("spec.devices[0].attributes", "FieldValueInvalid")],
    ),
    (
        "name-too-long",
        slice_([device(attributes={"a" * 33: {"int": 1}})]),
        [("spec.devices[0].attributes", "FieldValueInvalid")],
    ),
    (
        "int-as-string",
        slice_([device(attributes={"a": {"int": "1"}})]),
        [("spec.devices[0].attributes[a].int", "FieldValueInvalid")],
    ),
    (
        "too-many-attributes",
        slice_([device(attributes={f"a{i}": {"int": i} for i in range(32)})]),
        [("spec.devices[0]", "FieldValueInvalid")],
    ),
    (
        "bad-quantity",
        slice_([device(capacity={"memory": {"value": "80 GB"}})]),
        [("spec.devices[0].capacity[memory].value", "FieldValueInvalid")],
    ),
    (
        "capacity-no-value",
        slice_([device(capacity={"memory": {}})]),
        [("spec.devices[0].capacity[memory].value", "FieldValueRequired")],
    ),
    (
        "basic-wrapper",
        slice_([{"name": "d", "basic": {"attributes": {}}}]),
        [("spec.devices[0].basic", "FieldValueForbidden")],
    ),
    (
        "device-node-without-per-device",
        slice_([device(nodeName="n")]),
        [("spec.devices[0]", "FieldValueInvalid")],
    ),
    (
        "per-device-missing",
        slice_([device()], perDeviceNodeSelection=True),
        [("spec.devices[0]", "FieldValueRequired")],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_slices_are_reported_at_the_apiserver_path(
    obj: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert paths(api.parse_object(obj)[1]) == expected


def test_semver_and_too_long_messages_match_the_apiserver() -> None:
    _, errors = api.parse_resource_slice(
        slice_([device(attributes={"v": {"version": "v1"}, "s": {"string": "x" * 65}})])
    )
    assert [str(e) for e in errors] == [
        'spec.devices[0].attributes[v].version: Invalid value: "v1": '
        "must be a string compatible with semver.org spec 2.0.0",
        "spec.devices[0].attributes[s].string: Too long: may not be more than 64 bytes",
    ]


def test_node_association_helpers() -> None:
    by_name, _ = api.parse_resource_slice(slice_(nodeName="node-a"))
    everywhere, _ = api.parse_resource_slice(slice_(allNodes=True))
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    by_label, _ = api.parse_resource_slice(slice_(nodeSelector={"nodeSelectorTerms": [term]}))
    assert by_name and everywhere and by_label
    assert by_name.available_on(node_name="node-a", node_labels={})
    assert not by_name.available_on(node_name="node-b", node_labels={})
    assert everywhere.available_on(node_name="x", node_labels={})
    assert by_label.available_on(node_name="x", node_labels={"zone": "z1"})
    assert not by_label.available_on(node_name="x", node_labels={"zone": "z2"})


def test_per_device_node_selection() -> None:
    devices = [device("a", nodeName="n1"), device("b", allNodes=True)]
    model, errors = api.parse_resource_slice(slice_(devices, perDeviceNodeSelection=True))
    assert errors == [] and model is not None
    assert model.per_device_node_selection
    assert api.device_available_on(model.devices[0], node_name="n1", node_labels={})
    assert not api.device_available_on(model.devices[0], node_name="n2", node_labels={})
    assert model.available_on(node_name="n2", node_labels={})  # device b is everywhere


def test_identical_strings_and_names_are_shared_between_devices() -> None:
    model, _ = api.parse_resource_slice(slice_([device("a"), device("b")]))
    assert model is not None
    a, b = model.devices
    ((ka, va),) = a.attributes.items()
    ((kb, vb),) = b.attributes.items()
    assert ka is kb and va is vb


@pytest.mark.parametrize(
    "raw",
    [
        {"name": "gpu-0", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
        {"name": "gpu-0", "capacity": {"memory": {"value": "4Gi"}},
         "consumesCounters": [{"counterSet": "cs", "counters": {"memory": {"value": "4Gi"}}}]},
    ],
    ids=["taints-only", "capacity-and-counters"],
)
def test_alpha_device_fields_are_kept_however_few_other_fields_a_device_has(raw: dict[str, Any]) -> None:
    # a device with only a name and one alpha field must not lose that field (the allocator reads it)
    model, _errors = api.parse_resource_slice(slice_([raw]))
    assert model is not None
    (dev,) = model.devices
    assert dev.taints or dev.consumes_counters
