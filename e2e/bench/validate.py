"""`python -m e2e.bench validate [--quick]`: validating a ResourceClaim against a 5,000-node x 8-GPU fleet.

The fleet is e2e.bench.cel's (copies of the real EKS p5 H100 devices with per-device uuid, bus id and PCIe
root), one node per pool; the class is NVIDIA's real `gpu.nvidia.com` DeviceClass. The claim has two
selectors (memory via compareTo, product name). Figures:

- ``first_ms``: validate_object on a claim whose selectors were never seen, on a fresh inventory (compile +
  dry-run over every device; the process's parser tables are warmed up first);
- ``repeat_ms``: the median of validating the same claim again (what the webhook does for the next pod): the
  dry-run summary is remembered by the device index, so this is parse + compile-cache lookups;
- ``repeat_after_change_ms``: the same claim after one slice changed (a device health update: a new
  resourceVersion and a new device object), index update included: the slice is patched into the index and
  only its devices are evaluated; the result starts from the previous index's;
- ``repeat_after_rebuild_ms``: the same claim after the index was built again from all slices (what a slice
  addition or deletion costs): every slice keeps its segment and summary, the sums are redone;
- ``devices``: how many devices the dry-run covered.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from argparse import Namespace
from typing import Any

from e2e.bench.cel import build_fleet
from gpuclaim.dra import api
from gpuclaim.dra.config import Config
from gpuclaim.webhook.validate import DeviceIndex, OfflineInventory, validate_object

CLASS_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": CLASS_SELECTOR}}]},
}


def _slices(fleet: list[api.Device], nodes: int) -> list[api.ResourceSlice]:
    """One slice per node, as the NVIDIA driver publishes them (resourceVersion "1")."""
    return [
        api.ResourceSlice(meta=api.ObjectMeta(name=f"node-{n}-gpu", resource_version="1"), driver="gpu.nvidia.com",
                          pool=api.Pool(f"node-{n}", 1, 1), devices=tuple(fleet[n * 8:(n + 1) * 8]),
                          node_name=f"node-{n}")
        for n in range(nodes)
    ]


def _health_update(slices: list[api.ResourceSlice], n: int, version: int) -> None:
    """What a device health update does: slice ``n`` comes back with a new resourceVersion and one device
    whose attributes changed (here a driver-side attribute no selector reads, plus a new device object)."""
    old = slices[n]
    first = old.devices[0]
    changed = dataclasses.replace(first, attributes={**first.attributes, "gpu.nvidia.com/health": f"v{version}"})
    slices[n] = dataclasses.replace(old, meta=dataclasses.replace(old.meta, resource_version=str(version)),
                                    devices=(changed, *old.devices[1:]))


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
    """What ``LiveInventory.devices()`` does after slice events, without a cluster."""

    def __init__(self, slices: list[api.ResourceSlice], device_class: api.DeviceClass) -> None:
        super().__init__(classes=[device_class], namespaces={"default": {}})
        self.slices = slices
        self.index = DeviceIndex.build(slices)

    def changed(self, n: int) -> None:
        """Slice ``n`` was updated in place (the live inventory's MODIFIED path)."""
        patched = self.index.replaced({self.slices[n].name: self.slices[n]})
        self.index = DeviceIndex.build(self.slices, previous=self.index) if patched is None else patched

    def rebuilt(self) -> None:
        """A slice was added or deleted somewhere (the live inventory's full path); here none was."""
        self.index = DeviceIndex.build(self.slices, previous=self.index)

    def devices(self) -> DeviceIndex:
        return self.index


def run(args: Namespace) -> dict[str, Any]:
    nodes = 500 if args.quick else 5000
    print(f"building {nodes} nodes x 8 GPUs ...", file=sys.stderr)
    fleet = build_fleet(nodes)
    slices = _slices(fleet, nodes)
    device_class, errors = api.parse_device_class(CLASS)
    assert device_class is not None and not errors
    config = Config()
    # The parser tables are built on the first compile of the process, not per claim: warm them up.
    validate_object(_claim(0), operation="CREATE", inventory=_Fleet(slices[:1], device_class), config=config)
    firsts, repeats, changed, rebuilds = [], [], [], []
    version = 1
    for trial in range(3):
        inventory = _Fleet(slices, device_class)  # a fresh inventory: no summary of any chain yet
        claim = _claim(trial + 1)
        start = time.perf_counter()
        verdict = validate_object(claim, operation="CREATE", inventory=inventory, config=config)
        firsts.append((time.perf_counter() - start) * 1000)
        assert verdict.allowed and not verdict.warnings, (verdict.message, verdict.warnings)
        for _ in range(10):
            start = time.perf_counter()
            validate_object(claim, operation="CREATE", inventory=inventory, config=config)
            repeats.append((time.perf_counter() - start) * 1000)
        for _ in range(5):
            version += 1
            n = version % nodes
            _health_update(slices, n, version)
            start = time.perf_counter()
            inventory.changed(n)
            again = validate_object(claim, operation="CREATE", inventory=inventory, config=config)
            changed.append((time.perf_counter() - start) * 1000)
            assert again.allowed and not again.warnings, again.message
        for _ in range(3):
            start = time.perf_counter()
            inventory.rebuilt()
            validate_object(claim, operation="CREATE", inventory=inventory, config=config)
            rebuilds.append((time.perf_counter() - start) * 1000)
        print(f"trial {trial}: first {firsts[-1]:.1f} ms, repeat {statistics.median(repeats[-10:]):.2f} ms, "
              f"after a slice change {statistics.median(changed[-5:]):.2f} ms", file=sys.stderr)
    return {
        "first_ms": round(statistics.median(firsts), 2),
        "first_max_ms": round(max(firsts), 2),
        "repeat_ms": round(statistics.median(repeats), 2),
        "repeat_max_ms": round(max(repeats), 2),
        "repeat_after_change_ms": round(statistics.median(changed), 2),
        "repeat_after_change_max_ms": round(max(changed), 2),
        "repeat_after_rebuild_ms": round(statistics.median(rebuilds), 2),
        "devices": len(fleet),
        "nodes": nodes,
        "selectors": 2,
    }
