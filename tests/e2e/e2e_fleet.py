"""A small real fleet for the e2e tests: two AWS p5 nodes (8x H100) and one p4d (8x A100), NVIDIA's DeviceClasses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuclaim.double.apiserver import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
P5_A, P5_B = "ip-10-0-171-111.ec2.internal", "ip-10-0-206-2.ec2.internal"
P4D = "ip-192-168-153-160.ec2.internal"
NODE_LABELS = {P5_A: {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
               P5_B: {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
               P4D: {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}
FILES = ("resourceslices/aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml",
         "resourceslices/aws-p4d-8xA100-SXM4-40GB-nvidia.yaml", "deviceclasses/ALL-rendered-resource.k8s.io-v1.yaml")


def _objects(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            out.extend(doc["items"] if str(doc.get("kind", "")).endswith("List") else [doc])
    return out


def load_fleet(store: Store) -> None:
    for name, labels in NODE_LABELS.items():
        store.restore({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}})
    for rel in FILES:
        for obj in _objects(FIXTURES / rel):
            if obj["kind"] == "ResourceSlice":
                obj["apiVersion"] = "resource.k8s.io/v1"
            meta = obj["metadata"]
            obj["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
            store.restore(obj)


def gpu_request(count: int = 1, *, selector: str | None = None, name: str = "gpu") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": name, "exactly": exactly}]}}


def template(name: str, spec: dict[str, Any], namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"metadata": meta, "spec": spec}}


def claim_pod(name: str, claims: dict[str, str], *, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A pod whose claims come from templates: {pod claim name: template name}."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "cuda",
                                     "resources": {"claims": [{"name": c} for c in claims]}}],
                     "resourceClaims": [{"name": c, "resourceClaimTemplateName": t} for c, t in claims.items()],
                     **spec}}
