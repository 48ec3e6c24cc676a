"""Parsing cost: the extender parses every slice of the fleet (5,000 nodes x 8 GPUs = 40,000 devices)."""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import pytest
from api_helpers import FIXTURES, load_objects

from gpuclaim.dra import api


def fleet(nodes: int) -> list[dict[str, Any]]:
    """H100 slices shaped like the real p5 capture, one per node, with unique UUIDs and bus IDs."""
    objects = load_objects(FIXTURES / "resourceslices" / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")
    base = next(o for o in objects if o["spec"]["driver"] == "gpu.nvidia.com")
    out = []
    for n in range(nodes):
        obj = copy.deepcopy(base)
        obj["metadata"]["name"] = f"node-{n}-gpu.nvidia.com"
        obj["spec"]["nodeName"] = obj["spec"]["pool"]["name"] = f"node-{n}"
        for i, device in enumerate(obj["spec"]["devices"]):
            device["attributes"]["uuid"]["string"] = f"GPU-{n:08x}-{i:04x}-4000-8000-000000000000"
            device["attributes"]["resource.kubernetes.io/pciBusID"]["string"] = f"0000:{i:02x}:00.0"
        out.append(obj)
    return out


def _parse_all(objs: list[dict[str, Any]]) -> tuple[float, int]:
    start = time.perf_counter()
    devices = 0
    for obj in objs:
        model, errors = api.parse_resource_slice(obj)
        assert not errors and model is not None
        devices += len(model.devices)
    return time.perf_counter() - start, devices


def test_parsing_4000_devices_is_fast() -> None:
    seconds, devices = _parse_all(fleet(500))
    assert devices == 4000
    assert seconds < 2.0  # ~0.15 s on one core; generous for a shared CI machine


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GPUCLAIM_LONG") != "1", reason="long run: GPUCLAIM_LONG=1")
def test_parsing_40000_devices_takes_well_under_a_few_seconds() -> None:
    seconds, devices = _parse_all(fleet(5000))
    assert devices == 40000
    assert seconds < 4.0
