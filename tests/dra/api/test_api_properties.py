"""Property tests: any mutation of a valid object never raises, and every error names a field path.

A mutation under ``spec`` that changes a value's JSON type must be reported: the model never silently reads a
wrong-typed field.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any

from api_helpers import FIXTURES, load_objects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.dra import api
from gpuclaim.dra.fieldpath import FieldError

EXAMPLES = 300 if os.environ.get("GPUCLAIM_LONG") != "1" else 5000

CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b"}},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                        "allocationMode": "ExactCount",
                        "count": 2,
                        "adminAccess": False,
                    },
                },
                {
                    "name": "flex",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 1},
                        {"name": "small", "deviceClassName": "mig.nvidia.com", "allocationMode": "All"},
                    ],
                },
            ],
            "constraints": [{"requests": ["gpu", "flex/big"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}],
        }
    },
}
TEMPLATE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "ns"},
    "spec": {"metadata": {"labels": {"x": "y"}}, "spec": CLAIM["spec"]},
}
SLICE = load_objects(FIXTURES / "resourceslices" / "aws-p4d-8xA100-SXM4-40GB-nvidia.yaml")[0]
CLASS = load_objects(FIXTURES / "deviceclasses" / "ALL-rendered-resource.k8s.io-v1.yaml")[0]
BASES = [CLAIM, TEMPLATE, SLICE, CLASS]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


def _nodes(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _nodes(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield (*prefix, i)
            yield from _nodes(v, (*prefix, i))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


def _check(errors: list[FieldError]) -> None:
    for error in errors:
        assert isinstance(error, FieldError)
        assert str(error)  # renders


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(BASES), data=st.data(), value=json_values)
def test_replacing_any_value_never_raises_and_wrong_types_in_spec_are_reported(
    base: Any, data: Any, value: Any
) -> None:
    obj = copy.deepcopy(base)
    path = data.draw(st.sampled_from(list(_nodes(obj))))
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    old = parent[path[-1]]
    parent[path[-1]] = value
    model, errors = api.parse_object(obj)
    _check(errors)
    opaque = "parameters" in path  # driver parameters are free-form JSON
    quantity_as_number = path[-1] == "value" and _kind(value) == "number"  # Quantity accepts JSON numbers
    opaque = opaque or quantity_as_number
    if path[0] == "spec" and not opaque and value is not None and _kind(value) != _kind(old):
        assert errors, f"{path} {old!r} -> {value!r} went unnoticed"
    if model is None:
        assert errors


@settings(max_examples=EXAMPLES, deadline=None)
@given(base=st.sampled_from(BASES), data=st.data(), key=st.text(min_size=1, max_size=10) | st.integers())
def test_adding_or_deleting_fields_never_raises(base: Any, data: Any, key: Any) -> None:
    obj = copy.deepcopy(base)
    containers = [p for p in _nodes(obj) if isinstance(_get(obj, p), dict)]
    path = data.draw(st.sampled_from(containers))
    target = _get(obj, path)
    if data.draw(st.booleans()) and target:
        del target[data.draw(st.sampled_from(list(target)))]
    else:
        target[key] = data.draw(json_values)
    _, errors = api.parse_object(obj)
    _check(errors)


@settings(max_examples=EXAMPLES, deadline=None)
@given(obj=json_values, kind=st.sampled_from([*api.KINDS, "Pod"]))
def test_arbitrary_json_never_raises(obj: Any, kind: str) -> None:
    if isinstance(obj, dict):
        obj = {**obj, "apiVersion": "resource.k8s.io/v1", "kind": kind}
    model, errors = api.parse_object(obj)
    _check(errors)
    assert model is not None or errors


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj
