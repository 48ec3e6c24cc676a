"""ResourceClaim / ResourceClaimTemplate: the v1 request shape, limits and references, with apiserver paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from api_helpers import paths

from gpuclaim.dra import api


def claim(devices: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", **meta},
        "spec": {"devices": devices},
    }


def exact(name: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", **fields}}


def errors_of(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return paths(api.parse_object(obj)[1])


def test_a_typical_claim_parses_into_requests_constraints_and_config() -> None:
    obj = claim(
        {
            "requests": [
                exact(
                    selectors=[{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}], count=2
                ),
                {
                    "name": "flex",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                        {"name": "small", "deviceClassName": "mig.nvidia.com", "count": 2},
                    ],
                },
            ],
            "constraints": [{"requests": ["gpu", "flex/big"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
            "config": [
                {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig"}}}
            ],
        }
    )
    model, errors = api.parse_resource_claim(obj)
    assert errors == []
    assert model is not None
    gpu, flex = model.spec.requests
    assert gpu.exactly is not None and gpu.exactly.count == 2 and gpu.exactly.allocation_mode == "ExactCount"
    assert str(gpu.exactly.selectors[0].path) == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert [a.ref for a in flex.alternatives] == ["flex/big", "flex/small"]
    assert [a.count for a in flex.alternatives] == [1, 2]
    assert str(flex.alternatives[1].path) == "spec.devices.requests[1].firstAvailable[1]"
    assert model.spec.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"
    assert model.spec.config[0].parameters["kind"] == "GpuConfig"
    assert model.meta.namespace == "ns"
    assert model.status.allocated is False


def test_count_defaults_to_one_and_all_mode_has_count_zero() -> None:
    model, errors = api.parse_resource_claim(claim({"requests": [exact(), exact("all", allocationMode="All")]}))
    assert errors == [] and model is not None
    assert [r.exactly.count for r in model.spec.requests if r.exactly] == [1, 0]


def test_count_zero_is_unset_and_defaults_to_one_as_the_apiserver_does() -> None:
    # the real 1.34 apiserver stores `count: 0` as `count: 1` (int64 omitempty, then defaulting)
    model, errors = api.parse_resource_claim(claim({"requests": [exact(count=0)]}))
    assert errors == [] and model is not None
    assert model.spec.requests[0].exactly is not None and model.spec.requests[0].exactly.count == 1


CASES = [
    ("count-negative", {"requests": [exact(count=-1)]},
     [("spec.devices.requests[0].exactly.count", "FieldValueInvalid")]),
    (
        "count-with-all",
        {"requests": [exact(allocationMode="All", count=2)]},
        [("spec.devices.requests[0].exactly.count", "FieldValueInvalid")],
    ),
    (
        "unknown-mode",
        {"requests": [exact(allocationMode="Some")]},
        [("spec.devices.requests[0].exactly.allocationMode", "FieldValueNotSupported")],
    ),
    ("no-shape", {"requests": [{"name": "gpu"}]}, [("spec.devices.requests[0]", "FieldValueRequired")]),
    (
        "both-shapes",
        {"requests": [{**exact(), "firstAvailable": [{"name": "a", "deviceClassName": "x"}]}]},
        [("spec.devices.requests[0]", "FieldValueInvalid")],
    ),
    ("bad-request-name", {"requests": [exact("GPU_0")]}, [("spec.devices.requests[0].name", "FieldValueInvalid")]),
    ("dup-request", {"requests": [exact(), exact()]}, [("spec.devices.requests[1]", "FieldValueDuplicate")]),
    (
        "missing-class",
        {"requests": [{"name": "gpu", "exactly": {}}]},
        [("spec.devices.requests[0].exactly.deviceClassName", "FieldValueRequired")],
    ),
    (
        "too-many-requests",
        {"requests": [exact(f"r{i}") for i in range(33)]},
        [("spec.devices.requests", "FieldValueTooMany")],
    ),
    (
        "too-many-selectors",
        {"requests": [exact(selectors=[{"cel": {"expression": "true"}}] * 33)]},
        [("spec.devices.requests[0].exactly.selectors", "FieldValueTooMany")],
    ),
    (
        "selector-without-cel",
        {"requests": [exact(selectors=[{}])]},
        [("spec.devices.requests[0].exactly.selectors[0].cel", "FieldValueRequired")],
    ),
    (
        "mis-indented-selector",
        {"requests": [exact(selectors=[{"cel": None, "expression": "true"}])]},
        [
            ("spec.devices.requests[0].exactly.selectors[0].expression", "FieldValueForbidden"),
            ("spec.devices.requests[0].exactly.selectors[0].cel", "FieldValueRequired"),
        ],
    ),
    (
        "expression-too-long",
        {"requests": [exact(selectors=[{"cel": {"expression": "true" + " " * 10240}}])]},
        [("spec.devices.requests[0].exactly.selectors[0].cel.expression", "FieldValueTooLong")],
    ),
    (
        "too-many-subrequests",
        {"requests": [{"name": "f", "firstAvailable": [{"name": f"s{i}", "deviceClassName": "x"} for i in range(9)]}]},
        [("spec.devices.requests[0].firstAvailable", "FieldValueTooMany")],
    ),
    (
        "dup-subrequest",
        {"requests": [{"name": "f", "firstAvailable": [{"name": "s", "deviceClassName": "x"}] * 2}]},
        [("spec.devices.requests[0].firstAvailable[1]", "FieldValueDuplicate")],
    ),
    (
        "admin-access-on-subrequest",
        {"requests": [{"name": "f", "firstAvailable": [{"name": "s", "deviceClassName": "x", "adminAccess": True}]}]},
        [("spec.devices.requests[0].firstAvailable[0].adminAccess", "FieldValueForbidden")],
    ),
    (
        "constraint-unknown-request",
        {"requests": [exact()], "constraints": [{"requests": ["nope"], "matchAttribute": "a.b/c"}]},
        [("spec.devices.constraints[0].requests[0]", "FieldValueInvalid")],
    ),
    (
        "constraint-unknown-subrequest",
        {"requests": [exact()], "constraints": [{"requests": ["gpu/x"], "matchAttribute": "a.b/c"}]},
        [("spec.devices.constraints[0].requests[0]", "FieldValueInvalid")],
    ),
    (
        "constraint-not-fully-qualified",
        {"requests": [exact()], "constraints": [{"matchAttribute": "pcieRoot"}]},
        [("spec.devices.constraints[0].matchAttribute", "FieldValueInvalid")],
    ),
    (
        "constraint-without-attribute",
        {"requests": [exact()], "constraints": [{"requests": ["gpu"]}]},
        [("spec.devices.constraints[0].matchAttribute", "FieldValueRequired")],
    ),
    (
        "config-unknown-request",
        {"requests": [exact()], "config": [{"requests": ["x"], "opaque": {"driver": "d.io", "parameters": {}}}]},
        [("spec.devices.config[0].requests[0]", "FieldValueInvalid")],
    ),
    (
        "config-without-opaque",
        {"requests": [exact()], "config": [{}]},
        [("spec.devices.config[0].opaque", "FieldValueRequired")],
    ),
    (
        "config-parameters-not-object",
        {"requests": [exact()], "config": [{"opaque": {"driver": "d.io", "parameters": [1]}}]},
        [("spec.devices.config[0].opaque.parameters", "FieldValueInvalid")],
    ),
    (
        "count-wrong-type",
        {"requests": [exact(count="2")]},
        [("spec.devices.requests[0].exactly.count", "FieldValueInvalid")],
    ),
    (
        "unknown-field",
        {"requests": [exact(colour="red")]},
        [("spec.devices.requests[0].exactly.colour", "FieldValueForbidden")],
    ),
]


@pytest.mark.parametrize(("devices", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_claims_are_reported_at_the_apiserver_path(
    devices: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert errors_of(claim(devices)) == expected


def test_apiserver_wording_for_count_and_mode() -> None:
    _, errors = api.parse_object(claim({"requests": [exact(count=-1), exact("b", allocationMode="Some")]}))
    assert [str(e) for e in errors] == [
        "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
        'spec.devices.requests[1].exactly.allocationMode: Unsupported value: "Some": '
        'supported values: "All", "ExactCount"',
    ]


def test_the_v1beta1_flat_request_shape_is_rejected_with_the_v1_path() -> None:
    obj = claim({"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}]})
    _, errors = api.parse_object(obj)
    assert paths(errors) == [
        ("spec.devices.requests[0].deviceClassName", "FieldValueForbidden"),
        ("spec.devices.requests[0].count", "FieldValueForbidden"),
    ]
    assert "spec.devices.requests[0].exactly.deviceClassName" in errors[0].detail


def test_v1beta1_api_version_is_rejected_with_the_v1_shape() -> None:
    obj = claim({"requests": [exact()]})
    obj["apiVersion"] = "resource.k8s.io/v1beta1"
    model, errors = api.parse_object(obj)
    assert model is None
    assert paths(errors) == [("apiVersion", "FieldValueInvalid")]
    assert "requests[0].exactly.deviceClassName" in errors[0].detail


def test_wrong_kind_and_api_version_are_errors() -> None:
    obj = claim({"requests": [exact()]})
    obj["apiVersion"] = "v1"
    obj["kind"] = "ResourceClaimTemplate"
    model, errors = api.parse_resource_claim(obj)
    assert model is None
    assert paths(errors) == [("apiVersion", "FieldValueNotSupported"), ("kind", "FieldValueNotSupported")]


def test_template_paths_start_with_spec_spec_and_metadata_is_limited() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "metadata": {"labels": {"app": "x"}, "name": "nope"},
            "spec": {"devices": {"requests": [exact(count=-1)]}},
        },
    }
    model, errors = api.parse_object(obj)
    assert paths(errors) == [
        ("spec.metadata.name", "FieldValueForbidden"),
        ("spec.spec.devices.requests[0].exactly.count", "FieldValueInvalid"),
    ]
    assert isinstance(model, api.ResourceClaimTemplate)
    assert model.claim_labels == {"app": "x"}
    assert str(model.spec.requests[0].path) == "spec.spec.devices.requests[0]"


def test_allocation_results_and_reserved_for_are_read() -> None:
    obj = claim({"requests": [exact(adminAccess=True)]})
    obj["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.nvidia.com",
                        "pool": "node-a",
                        "device": "gpu-0",
                        "adminAccess": True,
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
    }
    model, errors = api.parse_resource_claim(obj)
    assert errors == [] and model is not None
    (result,) = model.status.results
    assert result.admin_access and result.id == api.DeviceID("gpu.nvidia.com", "node-a", "gpu-0")
    assert model.spec.requests[0].exactly is not None and model.spec.requests[0].exactly.admin_access


def test_allocation_result_naming_an_unknown_request_is_reported() -> None:
    obj = claim({"requests": [exact()]})
    obj["status"] = {
        "allocation": {"devices": {"results": [{"request": "x", "driver": "d.io", "pool": "p", "device": "d"}]}}
    }
    assert errors_of(obj) == [("status.allocation.devices.results[0].request", "FieldValueInvalid")]


def test_metadata_names_follow_the_apiserver_rules() -> None:
    obj = claim({"requests": [exact()]})
    obj["metadata"] = {"name": "Bad_Name", "namespace": "ns.with.dots", "labels": {"ok": "bad value"}}
    assert errors_of(obj) == [
        ("metadata.name", "FieldValueInvalid"),
        ("metadata.namespace", "FieldValueInvalid"),
        ("metadata.labels[ok]", "FieldValueInvalid"),
    ]


def test_parsed_models_are_immutable() -> None:
    model, _ = api.parse_resource_claim(claim({"requests": [exact()]}))
    assert model is not None
    with pytest.raises(AttributeError):
        model.spec.requests[0].name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        model.meta.labels["a"] = "b"  # type: ignore[index]


def test_the_input_dict_is_not_modified() -> None:
    obj = claim({"requests": [exact(selectors=[{"cel": {"expression": "true"}}])]})
    before = copy.deepcopy(obj)
    api.parse_object(obj)
    assert obj == before
