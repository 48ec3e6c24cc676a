"""`python -m e2e.bench validate [--quick]`: validating a ResourceClaim against a 5,000-node x 8-GPU fleet.

The fleet is e2e.bench.cel's (copies of the real EKS p5 H100 devices with per-device uuid, bus id and PCIe
root), one node per pool; the class is NVIDIA's real `gpu.nvidia.com` DeviceClass. The claim has two
selectors (memory via compareTo, product name). Figures:

- ``first_ms``: validate_object on a claim whose selectors were never seen (compile + dry-run over every device);
- ``repeat_ms``: the median of validating the same claim again (what the webhook does for the next pod): the
  dry-run summary is remembered by the device index, so this is parse + compile-cache lookups;
- ``repeat_after_change_ms``: the same claim after the inventory changed (a new index over the same device
  objects, as after an update of one slice elsewhere): the CEL engine's per-device outcome cache answers;
- ``devices``: how many devices the dry-run covered.
"""

from __future__ import annotations

import statistics
import sys
import time
from argparse import Namespace
from typing import Any

from dra import api
from dra.config import Config
from e2e.bench.cel import build_fleet
from webhook.validate import DeviceIndex, OfflineInventory, validate_object

CLASS_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": CLASS_SELECTOR}}]},
}


def _index(fleet: list[Any], nodes: int) -> DeviceIndex:
    return DeviceIndex(fleet, [n // 8 for n in range(len(fleet))], tuple(f"node-{n}" for n in range(nodes)),
                       (True,) * nodes)


def _claim(tag: int) -> dict[str, Any]:
    selectors = [
        f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{40 + tag}Gi')) >= 0",
        f"device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100') || {tag} < 0",
    ]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"bench-{tag}", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": 8,
            "selectors": [{"cel": {"expression": s}} for s in selectors]}}]}},
    }


class _Fleet(OfflineInventory):
    def __init__(self, index: DeviceIndex, device_class: api.DeviceClass) -> None:
        super().__init__(classes=[device_class], namespaces={"default": {}})
        self._index = index


def run(args: Namespace) -> dict[str, Any]:
    nodes = 500 if args.quick else 5000
    print(f"building {nodes} nodes x 8 GPUs ...", file=sys.stderr)
    fleet = build_fleet(nodes)
    index = _index(fleet, nodes)
    device_class, errors = api.parse_device_class(CLASS)
    assert device_class is not None and not errors
    inventory = _Fleet(index, device_class)
    config = Config()
    firsts, repeats, changed = [], [], []
    for trial in range(3):
        claim = _claim(trial + 1)
        start = time.perf_counter()
        verdict = validate_object(claim, operation="CREATE", inventory=inventory, config=config)
        firsts.append((time.perf_counter() - start) * 1000)
        assert verdict.allowed and not verdict.warnings, (verdict.message, verdict.warnings)
        for _ in range(10):
            start = time.perf_counter()
            validate_object(claim, operation="CREATE", inventory=inventory, config=config)
            repeats.append((time.perf_counter() - start) * 1000)
        for _ in range(3):
            inventory._index = _index(fleet, nodes)
            start = time.perf_counter()
            validate_object(claim, operation="CREATE", inventory=inventory, config=config)
            changed.append((time.perf_counter() - start) * 1000)
        print(f"trial {trial}: first {firsts[-1]:.1f} ms, repeat {statistics.median(repeats[-10:]):.2f} ms",
              file=sys.stderr)
    return {
        "first_ms": round(statistics.median(firsts), 2),
        "repeat_ms": round(statistics.median(repeats), 2),
        "repeat_max_ms": round(max(repeats), 2),
        "repeat_after_change_ms": round(statistics.median(changed), 2),
        "devices": len(fleet),
        "nodes": nodes,
        "selectors": 2,
    }
