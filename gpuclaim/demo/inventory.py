"""The demo's embedded sample fleet, built from the real ResourceSlices in `gpuclaim/demo/fleet/` (see its README.md).

- 8 H100 nodes (`p5-h100-0..7`): the `gpu.nvidia.com` and `compute-domain.nvidia.com` slices of the two real AWS
  p5.48xlarge nodes, each GPU on its own PCIe root;
- 8 A100 nodes (`p4d-a100-0..7`): the real AWS p4d.24xlarge slice, GPUs paired on four PCIe roots; on
  `p4d-a100-6` and `-7` GPUs 4-7 are in MIG mode (constructed MIG devices, `e2e/demo/mig.py`);
- 3 T4 nodes (`gcp-t4-0..2`): the real 2x Tesla T4 GCP slice (OpenShift 4.22);
- the DeviceClasses the NVIDIA driver (v25.12) installs;
- some GPUs already in use: running pods holding ResourceClaims with `status.allocation` (constructed).

Real: the device lists, attributes and capacities. Constructed (and said so in the report): node names, GFD
node labels, device UUIDs of the cloned nodes (derived from the real ones), the MIG devices, the running pods.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from gpuclaim.demo import mig

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
WORKLOAD_NAMESPACE = "ml-team"
SYSTEM_NAMESPACE = "gpuclaim"
UNLABELED_NAMESPACE = "ops-debug"
_P5 = "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"
_P4D = "aws-p4d-8xA100-SXM4-40GB-nvidia.yaml"
_T4 = "openshift-4.22-gcp-2xT4-nvidia-condensed.yaml"
_CLASSES = "nvidia-deviceclasses.yaml"
WEBHOOK_CONFIGURATIONS = "gpuclaim-webhookconfigurations.yaml"
SCHEDULER_EXTENDERS = "gpuclaim-scheduler-extenders.yaml"


@dataclass(frozen=True, slots=True)
class NodeKind:
    prefix: str
    count: int
    instance_type: str
    gfd_product: str  # GFD writes the product name with spaces replaced by '-'
    gfd_memory_mib: int
    mig_nodes: tuple[int, ...] = ()


H100 = NodeKind("p5-h100", 8, "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", 81559)
A100 = NodeKind("p4d-a100", 8, "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB", 40960, mig_nodes=(6, 7))
T4 = NodeKind("gcp-t4", 3, "n1-standard-8", "Tesla-T4", 15360)
MIG_GPUS = ("gpu-4", "gpu-5", "gpu-6", "gpu-7")


@dataclass
class Fleet:
    objects: list[Obj] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == kind]


def read_text(name: str) -> str:
    return resources.files("gpuclaim.demo").joinpath("fleet", name).read_text(encoding="utf-8")


def _documents(name: str) -> list[Obj]:
    # the T4 dump's author elided its metadata with a bare "..." line inside the mapping: not YAML, drop it
    text = "\n".join(line for line in read_text(name).splitlines() if line.strip() != "...")
    out: list[Obj] = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            out.extend(doc.get("items") or ())
        elif isinstance(doc, dict):
            out.append(doc)
    return out


def _derived_uuid(prefix: str, real: str, node: str) -> str:
    digest = hashlib.sha256(f"{real}@{node}".encode()).digest()
    return prefix + str(uuid.UUID(bytes=digest[:16], version=4))


def _clone_slice(source: Obj, node: str, *, keep_uuids: bool) -> Obj:
    spec = copy.deepcopy(source["spec"])
    driver = spec["driver"]
    for device in spec.get("devices") or ():
        attrs = device.get("attributes") or {}
        if not keep_uuids and "uuid" in attrs:
            attrs["uuid"] = {"string": _derived_uuid("GPU-", attrs["uuid"]["string"], node)}
    spec["nodeName"] = node
    spec["pool"] = {"name": node, "generation": 1, "resourceSliceCount": 1}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}"}, "spec": spec}


def _with_mig(gpu_slice: Obj) -> Obj:
    devices: list[Obj] = []
    for device in gpu_slice["spec"]["devices"]:
        devices.extend(mig.mig_devices(device) if device["name"] in MIG_GPUS else [device])
    gpu_slice["spec"]["devices"] = devices
    return gpu_slice


def _node(name: str, kind: NodeKind, gpus: int, *, mig_mode: bool) -> Obj:
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": kind.instance_type,
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": kind.gfd_product,
        "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.memory": str(kind.gfd_memory_mib),
    }
    if mig_mode:
        labels["nvidia.com/mig.strategy"] = "mixed"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def _namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}}


def _nodes_from(fleet: Fleet, kind: NodeKind, sources: list[Obj], extra: list[Obj]) -> None:
    """`sources`: the real gpu slices to cycle through; `extra`: other real slices per source (same index)."""
    for i in range(kind.count):
        name = f"{kind.prefix}-{i}"
        index = i % len(sources)
        gpu_slice = _clone_slice(sources[index], name, keep_uuids=i < len(sources))
        mig_mode = i in kind.mig_nodes
        if mig_mode:
            gpu_slice = _with_mig(gpu_slice)
        whole = sum(1 for d in gpu_slice["spec"]["devices"] if d["attributes"]["type"]["string"] == "gpu")
        fleet.objects.append(_node(name, kind, whole, mig_mode=mig_mode))
        fleet.objects.append(gpu_slice)
        if extra:
            fleet.objects.append(_clone_slice(extra[index], name, keep_uuids=True))
        fleet.nodes.append(name)


def _in_use(fleet: Fleet, *, namespace: str, pod: str, node: str, devices: list[str], class_name: str) -> None:
    """A running pod holding a named claim allocated on `node` (what the cluster looked like before the demo)."""
    pod_uid = str(uuid.UUID(bytes=hashlib.sha256(f"{namespace}/{pod}".encode()).digest()[:16], version=4))
    claim_name = f"{pod}-gpus"
    fleet.objects.append({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod, "namespace": namespace, "uid": pod_uid, "labels": {"app": pod}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                                   "resources": {"claims": [{"name": "gpus"}]}}],
                 "resourceClaims": [{"name": "gpus", "resourceClaimName": claim_name}]},
        "status": {"phase": "Running"},
    })
    fleet.objects.append({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": namespace,
                     "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": class_name, "allocationMode": "ExactCount", "count": len(devices)}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpus", "driver": DRIVER, "pool": node, "device": d}
                                        for d in devices]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": pod_uid}],
        },
    })


def build() -> Fleet:
    fleet = Fleet()
    for name, labels in (("default", None), ("kube-system", None), (SYSTEM_NAMESPACE, None),
                         (WORKLOAD_NAMESPACE, {"team": "ml"}), ("research", {"team": "research"}),
                         (UNLABELED_NAMESPACE, None)):
        fleet.objects.append(_namespace(name, labels))
    fleet.objects.extend(_documents(_CLASSES))
    p5 = _documents(_P5)
    _nodes_from(fleet, H100, [s for s in p5 if s["spec"]["driver"] == DRIVER],
                [s for s in p5 if s["spec"]["driver"] == "compute-domain.nvidia.com"])
    _nodes_from(fleet, A100, _documents(_P4D), [])
    _nodes_from(fleet, T4, [s for s in _documents(_T4) if s.get("kind") == "ResourceSlice"], [])
    # busy GPUs: a fine-tune holding 6 of p5-h100-1's 8, an inference pod on one GPU of a p4d pair,
    # a notebook on a MIG slice, a T4 in use
    _in_use(fleet, namespace="research", pod="llm-finetune-0", node="p5-h100-1",
            devices=["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"], class_name="gpu.nvidia.com")
    _in_use(fleet, namespace="research", pod="batch-infer-0", node="p4d-a100-0", devices=["gpu-0"],
            class_name="gpu.nvidia.com")
    _in_use(fleet, namespace="research", pod="notebook-0", node="p4d-a100-6", devices=["gpu-4-mig-1g5gb-19-0"],
            class_name="mig.nvidia.com")
    _in_use(fleet, namespace="research", pod="t4-infer-0", node="gcp-t4-0", devices=["gpu-0"],
            class_name="gpu.nvidia.com")
    fleet.provenance = [
        f"H100 nodes: ResourceSlices of 2 real AWS p5.48xlarge nodes ({_P5}), cloned to {H100.count} nodes",
        f"A100 nodes: the real AWS p4d.24xlarge ResourceSlice ({_P4D}), cloned to {A100.count} nodes; MIG devices "
        f"on {', '.join(f'{A100.prefix}-{i}' for i in A100.mig_nodes)} GPUs 4-7 are constructed from the v25.12 "
        "MIG attribute schema (A100-40GB profiles 1g.5gb x2, 2g.10gb, 3g.20gb per GPU)",
        f"T4 nodes: the real 2x Tesla T4 ResourceSlice of an OpenShift 4.22 GCP node ({_T4}), cloned to {T4.count}",
        f"DeviceClasses: the NVIDIA driver's v25.12 classes ({_CLASSES})",
        "constructed: node names and GFD labels, device UUIDs of cloned nodes, the 4 running pods and their "
        "allocated claims in namespace research",
    ]
    return fleet


def registrations() -> list[Obj]:
    """The chart's Mutating/ValidatingWebhookConfiguration, as rendered (no caBundle: `gpuclaim certs` injects)."""
    return [d for d in yaml.safe_load_all(read_text(WEBHOOK_CONFIGURATIONS)) if d]


def extender_entries() -> list[Obj]:
    """The chart's KubeSchedulerConfiguration `extenders[]` entries."""
    return list((yaml.safe_load(read_text(SCHEDULER_EXTENDERS)) or {}).get("extenders") or [])
