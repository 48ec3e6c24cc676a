"""Agreement with the official schemas of every supported Kubernetes minor on what is well-formed.

The model accepts what the schema accepts, and an unknown field anywhere under ``spec`` is refused by both
(kubectl's strict field validation).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from api_helpers import FIXTURES, load_objects
from hypothesis import given, settings
from hypothesis import strategies as st
from official_schemas import assert_valid
from test_api_properties import CLAIM, TEMPLATE

from gpuclaim.double.apiserver.schemas import SchemaError
from gpuclaim.dra import api


def _schema_errors(obj: dict[str, Any]) -> str | None:
    try:
        assert_valid(obj)
    except SchemaError as exc:
        return str(exc).splitlines()[0]
    return None


VALID = [
    CLAIM,
    TEMPLATE,
    *load_objects(FIXTURES / "deviceclasses" / "ALL-rendered-resource.k8s.io-v1.yaml"),
    *[o for o in load_objects(FIXTURES / "resourceslices" / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")],
    *load_objects(FIXTURES / "resourceslices" / "oci-gb200-4gpu-nvidia-v25.12.yaml"),
]


@pytest.mark.parametrize("obj", VALID, ids=lambda o: f"{o['kind']}-{o['metadata'].get('name', '')}"[:60])
def test_valid_objects_are_valid_for_both(obj: dict[str, Any]) -> None:
    assert _schema_errors(obj) is None
    assert api.parse_object(obj)[1] == []


def _containers(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    if isinstance(obj, dict):
        if prefix and prefix[-1] not in ("parameters", "attributes", "capacity", "labels", "annotations"):
            out.append(prefix)
        for k, v in obj.items():
            out += _containers(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _containers(v, (*prefix, i))
    return out


@settings(max_examples=60, deadline=None)
@given(base=st.sampled_from(VALID), data=st.data())
def test_an_unknown_field_under_spec_is_refused_by_both(base: dict[str, Any], data: Any) -> None:
    obj = copy.deepcopy(base)
    candidates = [p for p in _containers(obj) if p[0] == "spec"]
    path = data.draw(st.sampled_from(candidates))
    target = obj
    for step in path:
        target = target[step]
    target["zzUnknown"] = 1
    assert _schema_errors(obj) is not None
    errors = api.parse_object(obj)[1]
    assert any(str(e.path).endswith("zzUnknown") for e in errors), [str(e) for e in errors]
