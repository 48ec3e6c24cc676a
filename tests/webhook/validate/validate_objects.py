"""Builders for the validator's tests: claims, templates, classes, slices, inventories from real fixtures."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpuclaim.dra import api
from gpuclaim.dra.config import Config, load_config
from gpuclaim.webhook.validate import OfflineInventory

FIXTURES = Path(__file__).parents[2] / "fixtures"
H100_SLICES = FIXTURES / "resourceslices/aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"
A100_SLICES = FIXTURES / "resourceslices/aws-p4d-8xA100-SXM4-40GB-nvidia.yaml"
CLASSES = FIXTURES / "deviceclasses/ALL-rendered-resource.k8s.io-v1.yaml"
EXAMPLES = FIXTURES / "examples"


def load(path: Path) -> list[Any]:
    return api.flatten_documents(yaml.safe_load_all(path.read_text()))


@cache
def slices(*paths: Path) -> tuple[api.ResourceSlice, ...]:
    out = []
    for path in paths:
        for obj in load(path):
            if isinstance(obj, dict) and obj.get("kind") == "ResourceSlice":
                parsed, errors = api.parse_resource_slice(obj)
                assert parsed is not None and not errors, errors
                out.append(parsed)
    return tuple(out)


@cache
def classes() -> tuple[api.DeviceClass, ...]:
    out = []
    for obj in load(CLASSES):
        if isinstance(obj, dict) and obj.get("kind") == "DeviceClass":
            parsed, errors = api.parse_device_class(obj)
            assert parsed is not None and not errors, errors
            out.append(parsed)
    return tuple(out)


def inventory(*, namespaces: dict[str, dict[str, str]] | None = None, extra_slices: tuple[api.ResourceSlice, ...] = (),
              templates: tuple[api.ResourceClaimTemplate, ...] = ()) -> OfflineInventory:
    """The two real p5 nodes (16 H100, plus compute-domain channels) and every upstream DeviceClass."""
    return OfflineInventory(slices=[*slices(H100_SLICES), *extra_slices], classes=list(classes()),
                            namespaces={"default": {}} if namespaces is None else namespaces, templates=list(templates))


def config(**validation: str) -> Config:
    return load_config({"validation": validation}) if validation else Config()


def exact(*selectors: str, cls: str = "gpu.nvidia.com", **fields: Any) -> dict[str, Any]:
    return {"deviceClassName": cls, **({"selectors": [{"cel": {"expression": s}} for s in selectors]} if selectors
                                       else {}), **fields}


def claim_spec(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def claim(*requests: dict[str, Any], namespace: str = "default", name: str = "c", **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": claim_spec(*requests, **kw)}


def template(*requests: dict[str, Any], namespace: str = "default", name: str = "t", **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": claim_spec(*requests, **kw)}}


def request(name: str = "gpu", *selectors: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": exact(*selectors, **fields)}


def device_class(name: str, *selectors: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": s}} for s in selectors]}}


def pod(spec: dict[str, Any], *, name: str = "p", namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **meta}, "spec": spec}


def paths(errors: Any) -> list[tuple[str, str]]:
    return [(str(e.path), e.type.value) for e in errors]
