"""Objects for cluster cache tests: H100-like slices, nodes, claims with allocations (all 1.34-valid)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.nvidia.com"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)},
            "status": {"capacity": {"cpu": "192", "memory": "2Ti"}}}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}


def gpu(index: int, node_name: str) -> dict[str, Any]:
    return {"name": f"gpu-{index}", "attributes": {
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "architecture": {"string": "Hopper"},
        "uuid": {"string": f"GPU-{abs(hash((node_name, index))) % 10**12:012d}"},
        "driverVersion": {"version": "580.105.8"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{0x10 * (index // 2):02x}"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + index:02x}:00.0"},
        "index": {"int": index},
    }, "capacity": {"memory": {"value": "81559Mi"}}}


def node_slice(node_name: str, *, devices: int = 8, generation: int = 1, suffix: str = "") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{DRIVER}{suffix}"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
                     "devices": [gpu(i, node_name) for i in range(devices)]}}


def selector_slice(name: str, *, label: str, value: str, devices: int = 2) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "nic.example.com", "nodeSelector": {"nodeSelectorTerms": [term]},
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"nic-{i}"} for i in range(devices)]}}


def claim(name: str, namespace: str = "default", *, count: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER,
                                                                          "count": count}}]}}}


def allocation(node_name: str, devices: list[int], *, admin: bool = False) -> dict[str, Any]:
    results = []
    for index in devices:
        result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": f"gpu-{index}"}
        if admin:
            result["adminAccess"] = True
        results.append(result)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    return {"allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [term]}}}
