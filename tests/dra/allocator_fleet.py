"""Test-only builders of small fleets: resource.k8s.io/v1 objects parsed by dra.api."""

from __future__ import annotations

from typing import Any

from gpuclaim.dra import api

DRIVER = "gpu.example.com"


def slice_(node: str | None, devices: list[dict[str, Any]], *, pool: str | None = None, name: str | None = None,
           generation: int = 1, count: int = 1, driver: str = DRIVER, **where: Any) -> api.ResourceSlice:  # fmt: skip
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node or "shared", "generation": generation,
                                                       "resourceSliceCount": count}, "devices": devices}  # fmt: skip
    if node is not None:
        spec["nodeName"] = node
    spec.update(where)
    obj = {"apiVersion": api.API_VERSION, "kind": "ResourceSlice",
           "metadata": {"name": name or f"{node or 'shared'}-{pool or 'p'}-{generation}"}, "spec": spec}  # fmt: skip
    model, errors = api.parse_resource_slice(obj)
    assert model is not None and not errors, errors
    return model


def gpu(name: str, **attrs: Any) -> dict[str, Any]:
    typed = {k: {"bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string": v}
             for k, v in attrs.items()}  # fmt: skip
    return {"name": name, "attributes": typed, "capacity": {"memory": {"value": "80Gi"}}}


def klass(name: str = "gpu", *selectors: str) -> api.DeviceClass:
    exprs = selectors or (f"device.driver == '{DRIVER}'",)
    obj = {"apiVersion": api.API_VERSION, "kind": "DeviceClass", "metadata": {"name": name},
           "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}}  # fmt: skip
    model, errors = api.parse_device_class(obj)
    assert model is not None and not errors, errors
    return model


def claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None, name: str = "c",
          namespace: str = "ns") -> api.ResourceClaim:  # fmt: skip
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    obj = {"apiVersion": api.API_VERSION, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
           "spec": {"devices": devices}}  # fmt: skip
    model, errors = api.parse_resource_claim(obj)
    assert model is not None and not errors, errors
    return model


def exact(name: str = "r", count: int = 1, cls: str = "gpu", *selectors: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "count": count, **extra}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if extra.get("allocationMode") == "All":
        del body["count"]
    return {"name": name, "exactly": body}
