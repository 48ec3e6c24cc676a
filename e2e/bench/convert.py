"""`python -m e2e.bench convert [--quick]`: in-process conversions per second of a typical 2-container pod.

The pod: a trainer with `nvidia.com/gpu: 2` (topology firstAvailable + constraint) and a sidecar-style
exporter with `nvidia.com/gpu: 1`, CPU/memory limits kept, a GFD product nodeSelector migrated into a
selector; DeviceClasses are the NVIDIA classes of the test fixtures. Each round converts a fresh
pod object (as the webhook would after decoding the review) and serialises the patch with orjson.
Figures: ``conversions_per_s`` (best round, by the process's CPU time: one core, and not skewed when the
machine is shared), ``wall_conversions_per_s`` (the same round by the wall clock), ``us_per_conversion``,
``patch_bytes``.
"""

from __future__ import annotations

import copy
import sys
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

import orjson
import yaml

from gpuclaim.dra.api import DeviceClass, parse_device_class
from gpuclaim.dra.config import load_config
from gpuclaim.webhook.convert import convert_pod

_CLASSES = Path(__file__).parents[2] / "tests/fixtures/deviceclasses/ALL-rendered-resource.k8s.io-v1.yaml"

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"generateName": "trainer-7d9f-", "namespace": "ml", "labels": {"app": "trainer"}},
    "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "containers": [
            {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
             "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "8", "memory": "64Gi"},
                           "requests": {"cpu": "4", "memory": "64Gi"}}},
            {"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5",
             "resources": {"limits": {"nvidia.com/gpu": 1}}},
        ],
    },
}


def device_classes() -> dict[str, DeviceClass]:
    out: dict[str, DeviceClass] = {}
    for doc in yaml.safe_load_all(_CLASSES.read_text()):
        model, errors = parse_device_class(doc)
        if model is not None and not errors:
            out[model.name] = model
    return out


def run(args: Namespace) -> dict[str, Any]:
    config = load_config(None)
    classes = device_classes()
    n = 2_000 if args.quick else 20_000
    rounds = 3 if args.quick else 5
    pods = [copy.deepcopy(POD) for _ in range(n)]  # outside the timing: decoding is the webhook's cost
    first = convert_pod(POD, config=config, device_classes=classes)
    assert first.patch and not first.refusals, first
    best, best_wall = float("inf"), float("inf")
    for r in range(rounds):
        cpu, wall = time.process_time(), time.perf_counter()
        for pod in pods:
            orjson.dumps(convert_pod(pod, config=config, device_classes=classes).patch)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if cpu < best:
            best, best_wall = cpu, wall
        print(f"round {r + 1}/{rounds}: {n / cpu:,.0f} conversions per CPU second ({n / wall:,.0f}/s wall)",
              file=sys.stderr)
    return {
        "conversions_per_s": round(n / best),
        "wall_conversions_per_s": round(n / best_wall),
        "us_per_conversion": round(best / n * 1e6, 1),
        "pods_per_round": n,
        "rounds": rounds,
        "patch_bytes": len(orjson.dumps(first.patch)),
        "template_name": first.templates[0]["metadata"]["name"],
    }
