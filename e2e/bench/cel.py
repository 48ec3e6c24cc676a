"""`python -m e2e.bench cel [--quick]`: DRA CEL selectors over a 5,000-node x 8-GPU fleet.

Devices are copies of the 8 real H100 devices of the EKS p5 slice fixture, with a per-device uuid,
PCI bus id and PCIe root (as real fleets have), so a projection cache that keyed on those would
miss every time. Figures:

- ``compile_ms``: compiling a typical request selector without any cache (parse, check, cost, closures);
- ``first_eval_ms``: a new class selector + request selector pair over every device (compile included);
- ``repeat_eval_ms``: the same pair over the same devices again (what the next scheduling cycle does);
- ``evaluations``: how many real CEL evaluations the first pass needed (the rest were cache hits).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

import yaml

from gpuclaim.dra import cel
from gpuclaim.dra.api.documents import flatten_documents
from gpuclaim.dra.api.slices import Device, parse_resource_slice

_FIXTURE = Path(__file__).parents[2] / "tests/fixtures/resourceslices/aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"
CLASS_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
REQUEST_SELECTOR = (
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 && "
    "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100') && "
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))"
)


def _template_gpus() -> list[Device]:
    for doc in flatten_documents(yaml.safe_load_all(_FIXTURE.read_text())):
        parsed, errors = parse_resource_slice(doc)
        if parsed is not None and not errors and parsed.driver == "gpu.nvidia.com":
            return list(parsed.devices)
    raise RuntimeError(f"no gpu.nvidia.com slice in {_FIXTURE}")


def build_fleet(nodes: int) -> list[Device]:
    templates = _template_gpus()
    fleet: list[Device] = []
    for n in range(nodes):
        for g, t in enumerate(templates):
            attrs = dict(t.attributes)
            attrs["gpu.nvidia.com/uuid"] = f"GPU-{n:08x}-{g:04x}-0000-0000-000000000000"
            attrs["resource.kubernetes.io/pciBusID"] = f"0000:{(n * 8 + g) % 256:02x}:00.0"
            attrs["resource.kubernetes.io/pcieRoot"] = f"pci{n % 65536:04x}:{g:02x}"
            fleet.append(dataclasses.replace(t, attributes=attrs, pool=f"node-{n}", name=f"gpu-{g}"))
    return fleet


def run(args: Namespace) -> dict[str, Any]:
    nodes = 500 if args.quick else 5000
    print(f"building {nodes} nodes x 8 GPUs ...", file=sys.stderr)
    fleet = build_fleet(nodes)

    compiles = []
    for _ in range(20):
        start = time.perf_counter()
        cel.compile_uncached(REQUEST_SELECTOR, mode="new")
        compiles.append((time.perf_counter() - start) * 1000)

    cache = cel.SelectorCache(maxsize=16)
    start = time.perf_counter()
    selectors = [cache.compile(CLASS_SELECTOR, mode="stored"), cache.compile(REQUEST_SELECTOR, mode="stored")]
    first = cel.match_devices(selectors, fleet)
    first_ms = (time.perf_counter() - start) * 1000
    evaluations = sum(len(s._results) for s in selectors)

    repeats = []
    for _ in range(5):
        start = time.perf_counter()
        again = cel.match_devices(
            [cache.compile(CLASS_SELECTOR, mode="stored"), cache.compile(REQUEST_SELECTOR, mode="stored")], fleet
        )
        repeats.append((time.perf_counter() - start) * 1000)
    assert again == first
    matched = sum(o.matched for o in first)
    print(f"{matched} of {len(fleet)} devices match", file=sys.stderr)
    return {
        "devices": len(fleet),
        "nodes": nodes,
        "matched": matched,
        "evaluations": evaluations,
        "compile_ms": round(statistics.median(compiles), 3),
        "first_eval_ms": round(first_ms, 1),
        "repeat_eval_ms": round(statistics.median(repeats), 1),
        "targets": {"first_eval_ms": 300, "repeat_eval_ms": 20},
        "selectors": [CLASS_SELECTOR, REQUEST_SELECTOR],
    }
