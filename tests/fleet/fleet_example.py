"""The small fleet docs/fleet.md's JSON example is computed from (tests/fleet/test_fleet_doc.py checks it)."""

from __future__ import annotations

from typing import Any

from test_model import CONFIG, claim, gpu, node, slice_

from gpuclaim.fleet import model


def example() -> dict[str, Any]:
    devices = [gpu("gpu-0", "pci0000:00"), gpu("gpu-1", "pci0000:00"), gpu("gpu-2", "pci0000:80"),
               gpu("gpu-3", "pci0000:80", taint={"key": "example.com/maintenance", "effect": "NoSchedule"})]
    for d in devices:
        d["attributes"]["productName"] = {"string": "NVIDIA H100 80GB HBM3"}
    n = node("gpu-node-1", "NVIDIA-H100-80GB-HBM3")
    s = slice_("gpu-node-1", devices)
    return model.build_fleet(
        slices=[s], nodes=[n], config=CONFIG, claims=[claim("team-a", "train-gpu-abcde", "gpu-node-1", ["gpu-0"],
                                                             "train-0")],
        kubernetes_version="v1.37.2", generated_at="2026-11-26T22:30:00Z")
