"""DeviceClass parsing, the kind dispatcher and List flattening."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import load_yaml, paths

from gpuclaim.dra import api


def device_class(spec: Any = None, name: str = "gpu.example.com") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}}
    if spec is not None:
        obj["spec"] = spec
    return obj


def test_a_device_class_without_spec_admits_everything() -> None:
    model, errors = api.parse_device_class(device_class())
    assert errors == [] and model is not None and model.selectors == ()


CLASS_CASES = [
    ("bad-name", device_class({}, name="GPU"), [("metadata.name", "FieldValueInvalid")]),
    (
        "namespaced",
        {**device_class({}), "metadata": {"name": "x", "namespace": "ns"}},
        [("metadata.namespace", "FieldValueForbidden")],
    ),
    (
        "too-many-selectors",
        device_class({"selectors": [{"cel": {"expression": "true"}}] * 33}),
        [("spec.selectors", "FieldValueTooMany")],
    ),
    (
        "bad-extended-resource",
        device_class({"extendedResourceName": "gpu"}),
        [("spec.extendedResourceName", "FieldValueInvalid")],
    ),
    (
        "kubernetes-io-extended-resource",
        device_class({"extendedResourceName": "kubernetes.io/gpu"}),
        [("spec.extendedResourceName", "FieldValueInvalid")],
    ),
    (
        "class-config-requests-unknown",
        device_class({"config": [{"requests": ["a"]}]}),
        [
            ("spec.config[0].requests", "FieldValueForbidden"),
            ("spec.config[0].opaque", "FieldValueRequired"),
        ],
    ),
    (
        "config-bad-driver",
        device_class({"config": [{"opaque": {"driver": "", "parameters": {}}}]}),
        [
            ("spec.config[0].opaque.driver", "FieldValueRequired"),
        ],
    ),
    ("no-metadata", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"}, [("metadata", "FieldValueRequired")]),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CLASS_CASES], ids=[c[0] for c in CLASS_CASES])
def test_invalid_device_classes(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert paths(api.parse_object(obj)[1]) == expected


def test_parse_object_refuses_other_kinds_and_non_objects() -> None:
    assert paths(api.parse_object({"apiVersion": "v1", "kind": "Pod"})[1]) == [("kind", "FieldValueNotSupported")]
    assert paths(api.parse_object({"apiVersion": "v1"})[1]) == [("kind", "FieldValueRequired")]
    assert paths(api.parse_object([1, 2])[1]) == [("kind", "FieldValueInvalid")]
    assert api.parse_object("text")[0] is None


def test_kubectl_list_output_and_documents_are_flattened_with_their_origin() -> None:
    docs = [
        load_yaml("kind: List\napiVersion: v1\nitems:\n- {kind: DeviceClass}\n- {kind: ResourceSlice}\n"),
        None,
        load_yaml("kind: ResourceClaim"),
        load_yaml("kind: ResourceSliceList\nitems: [{kind: ResourceSlice}]"),
    ]
    located = list(api.iter_objects(docs))
    assert [(x.doc, x.item) for x in located] == [(0, 0), (0, 1), (2, None), (3, 0)]
    assert [x.obj["kind"] for x in located] == ["DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceSlice"]  # type: ignore[index]
    assert api.flatten_documents(docs) == [x.obj for x in located]
