"""Builders for made-up fleets and the real fixture inventories the extender tests score against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuclaim.dra.api import flatten_documents

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SLICES = FIXTURES / "resourceslices"
WIRE = FIXTURES / "extender"
GPU_CLASS_EXPR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
MIG_CLASS_EXPR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


def load(name: str) -> list[dict[str, Any]]:
    return [o for o in flatten_documents(yaml.safe_load_all((SLICES / name).read_text())) if isinstance(o, dict)]


def device_class(name: str, expression: str | None = None) -> dict[str, Any]:
    spec = {"selectors": [{"cel": {"expression": expression}}]} if expression else {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def gpu_classes() -> list[dict[str, Any]]:
    return [device_class("gpu.nvidia.com", GPU_CLASS_EXPR), device_class("mig.nvidia.com", MIG_CLASS_EXPR)]


def gpu(name: str, *, root: str | None = None, product: str = "NVIDIA A100-SXM4-40GB", numa: int | None = None,
        kind: str = "gpu", parent: str | None = None, uuid: str | None = None, **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"type": {"string": kind}, "productName": {"string": product},
                             "uuid": {"string": uuid or f"GPU-{name}"}}
    if root is not None:
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": root}
    if numa is not None:
        attrs["resource.kubernetes.io/numaNode"] = {"int": numa}
    if parent is not None:
        attrs["parentUUID"] = {"string": parent}
    for key, value in extra.items():
        attrs[key] = value
    return {"name": name, "attributes": attrs}


def node_slice(node: str, devices: list[dict[str, Any]], *, driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }  # fmt: skip


def pairs_node(node: str, *, product: str = "NVIDIA A100-SXM4-40GB") -> dict[str, Any]:
    """8 GPUs, two per PCIe root, roots 0-1 on NUMA 0 and 2-3 on NUMA 1 (the p4d shape)."""
    return node_slice(node, [gpu(f"gpu-{i}", root=f"pci{i // 2}", numa=i // 4, product=product) for i in range(8)])


def allocated_claim(name: str, devices: list[tuple[str, str]], *, driver: str = "gpu.nvidia.com",
                    admin: bool = False, namespace: str = "default") -> dict[str, Any]:
    """A claim holding (pool, device) pairs."""
    results = [{"request": "r", "driver": driver, "pool": pool, "device": dev, **({"adminAccess": True} if admin
                                                                                  else {})}
               for pool, dev in devices]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                    **({"adminAccess": True} if admin else {}),
                                                                    "count": len(devices)}}]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }  # fmt: skip


def template(name: str, devices: dict[str, Any], *, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": {"devices": devices}}}


def exact(name: str, count: int = 1, cls: str = "gpu.nvidia.com", **more: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **more}}


def tight_or_any(count: int, attribute: str = "resource.kubernetes.io/pcieRoot") -> dict[str, Any]:
    """What the webhook writes for N>1 GPUs: a firstAvailable request, tight subrequest first."""
    return {
        "requests": [{"name": "gpu", "firstAvailable": [
            {"name": "tight", "deviceClassName": "gpu.nvidia.com", "count": count},
            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": count}]}],
        "constraints": [{"requests": ["gpu/tight"], "matchAttribute": attribute}],
    }  # fmt: skip


def pod(*templates: str, name: str = "p", namespace: str = "default",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": t} for t in templates]}}],
        "resourceClaims": [{"name": t, "resourceClaimTemplateName": t} for t in templates]}}
