"""Hypothesis: arbitrary mutations of valid claims, templates, classes and pods never crash the validator,
and every finding names a field. Bounded in CI; GPUCLAIM_LONG=1 runs many more examples."""

from __future__ import annotations

import copy
import os
from typing import Any

import validate_objects as o
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.webhook.validate import validate_manifest, validate_object

SEEDS: list[dict[str, Any]] = [
    o.claim(o.request("gpu", "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", count=2),
            constraints=[{"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
    o.template({"name": "flex", "firstAvailable": [
        {"name": "big", **o.exact("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')")},
        {"name": "small", **o.exact(cls="mig.nvidia.com", count=2)}]}),
    o.template(o.request("gpu", allocationMode="All", adminAccess=True)),
    o.device_class("h100", "device.driver == 'gpu.nvidia.com'"),
    o.pod({"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
           "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "g", "request": "gpu"}],
                                                                     "limits": {"nvidia.com/gpu": 1}}}]}),
]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.text(max_size=12),
                    st.sampled_from(["", "gpu", "All", "a/b", "device.driver ==", "device.attributes['x'].y == 1",
                                     "1 +", "gpu.nvidia.com", "ExactCount", "true"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)


def _containers(node: Any, trail: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [trail]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _containers(value, (*trail, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _containers(value, (*trail, i))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    obj = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        trail = draw(st.sampled_from(_containers(obj)))
        if not trail:
            continue
        parent = obj
        for step in trail[:-1]:
            parent = parent[step]
        op = draw(st.sampled_from(["set", "delete", "duplicate"]))
        if op == "delete" and isinstance(parent, dict):
            del parent[trail[-1]]
        elif op == "duplicate" and isinstance(parent, list):
            parent.extend([copy.deepcopy(parent[trail[-1]])] * draw(st.integers(1, 40)))
        else:
            parent[trail[-1]] = draw(VALUES)
    return obj


EXAMPLES = 3000 if os.environ.get("GPUCLAIM_LONG") == "1" else 150


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=mutated(), operation=st.sampled_from(["CREATE", "UPDATE"]))
def test_mutated_objects_never_crash_and_every_finding_names_a_field(obj: dict[str, Any], operation: str) -> None:
    inventory = o.inventory(namespaces={"default": {}})
    old = SEEDS[0] if operation == "UPDATE" else None
    for verdict in (validate_object(obj, operation=operation, old_object=old, inventory=inventory, config=o.config()),
                    validate_manifest(obj, inventory=inventory, config=o.config(podPolicy="warn"))):
        for error in verdict.denials:
            assert error.path.steps, error
            assert str(error).startswith(str(error.path))
        for notice in verdict.notices:
            assert notice.path.steps, notice
        assert isinstance(verdict.message, str) and all(isinstance(w, str) for w in verdict.warnings)
