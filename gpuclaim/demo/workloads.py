"""The legacy workloads the demo submits, written the way teams write them for the NVIDIA device plugin, plus the
DRA claims a validating webhook must stop. Each has the outcome the demo expects, which the report checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpuclaim.demo.inventory import UNLABELED_NAMESPACE, WORKLOAD_NAMESPACE

Obj = dict[str, Any]
Expect = Literal["converted", "denied", "untouched"]
SHARING_ANNOTATION = "gpuclaim.io/sharing-group"


@dataclass(frozen=True, slots=True)
class Workload:
    key: str
    title: str
    obj: Obj
    expect: Expect

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def path(self) -> str:
        if self.kind == "Pod":
            return f"/api/v1/namespaces/{self.namespace}/pods"
        return f"/apis/resource.k8s.io/v1/namespaces/{self.namespace}/resourceclaims"


def _pod(name: str, limits: dict[str, Any], *, image: str = "nvcr.io/nvidia/pytorch:25.01-py3",
         annotations: dict[str, str] | None = None, node_selector: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": WORKLOAD_NAMESPACE, "labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    spec: Obj = {"containers": [{"name": "main", "image": image,
                                 "resources": {"limits": limits, "requests": {"cpu": "1", "memory": "4Gi"}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _claim(name: str, namespace: str, exactly: Obj) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def my_gpu_pod() -> Obj:
    """The pod `gpuclaim demo --keep` writes for its `kubectl create -f` example: a legacy 1-GPU pod, which the
    running webhook converts."""
    return _pod("my-gpu-pod", {"nvidia.com/gpu": 1})


def workloads() -> list[Workload]:
    shared = {SHARING_ANNOTATION: "inference"}
    return [
        Workload("single-gpu", "single GPU pod (nvidia.com/gpu: 1)",
                 _pod("single-gpu", {"nvidia.com/gpu": 1, "memory": "8Gi"}), "converted"),
        Workload("train-4gpu", "4-GPU training pod (nvidia.com/gpu: 4)",
                 _pod("train-4gpu", {"nvidia.com/gpu": "4", "memory": "64Gi"}), "converted"),
        Workload("mig-1g", "MIG pod (nvidia.com/mig-1g.5gb: 1)",
                 _pod("mig-1g", {"nvidia.com/mig-1g.5gb": 1}), "converted"),
        Workload("gfd-pinned", "GFD-pinned pod (nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB)",
                 _pod("gfd-pinned", {"nvidia.com/gpu": 1},
                      node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}), "converted"),
        Workload("shared-a", f"shared-GPU pair, first pod ({SHARING_ANNOTATION}: inference)",
                 _pod("infer-a", {"nvidia.com/gpu": 1}, image="nvcr.io/nvidia/tritonserver:25.01-py3",
                      annotations=shared), "converted"),
        Workload("shared-b", f"shared-GPU pair, second pod ({SHARING_ANNOTATION}: inference)",
                 _pod("infer-b", {"nvidia.com/gpu": 1}, image="nvcr.io/nvidia/tritonserver:25.01-py3",
                      annotations=shared), "converted"),
        Workload("cpu-only", "ordinary CPU pod (no GPU: never sent to the webhook)",
                 {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "cpu-only", "namespace": WORKLOAD_NAMESPACE},
                  "spec": {"containers": [{"name": "main", "image": "busybox:1.37",
                                           "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}},
                 "untouched"),
        Workload("bad-quantity", "ResourceClaim comparing a quantity with >= (no such operator)",
                 _claim("big-memory", WORKLOAD_NAMESPACE, {
                     "deviceClassName": "gpu.nvidia.com",
                     "selectors": [{"cel": {"expression":
                                            "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')"}}]}),
                 "denied"),
        Workload("bad-unguarded", "ResourceClaim reading an attribute whole GPUs lack (unguarded `profile`)",
                 _claim("by-profile", WORKLOAD_NAMESPACE, {
                     "deviceClassName": "gpu.nvidia.com",
                     "selectors": [{"cel": {"expression":
                                            "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]}),
                 "denied"),
        Workload("admin-access", f"adminAccess claim in namespace {UNLABELED_NAMESPACE} (not labelled for it)",
                 _claim("gpu-debug", UNLABELED_NAMESPACE, {"deviceClassName": "gpu.nvidia.com",
                                                           "allocationMode": "All", "adminAccess": True}),
                 "denied"),
    ]
