"""Fleet snapshots shaped as the contract of /api/v1/fleet (docs/fleet.md), for the page's own tests.

Hand-written to cover what the page draws: every state, pods and claims, a redacted device, taints, a MIG parent
with slices, more than one topology group per node, and sizes up to 5,000 nodes x 8 GPUs. The page draws what it
is given, so the summaries here only need the contract's shape, counted from the devices.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

STATES = ("free", "allocated", "reserved", "tainted", "unhealthy")
MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB")


def _device(node: str, index: int, state: str, *, model: str, namespace: str = "team-a") -> dict[str, Any]:
    used = state in ("allocated", "reserved")
    claim = {"namespace": namespace, "name": f"train-{node[-4:]}-{index}-gpu"} if used else None
    pod = {"namespace": namespace, "name": f"train-{node[-4:]}-{index}"} if state == "allocated" else None
    taints = {"tainted": [{"key": "example.com/maintenance", "effect": "NoSchedule"}],
              "unhealthy": [{"key": "gpu.nvidia.com/unhealthy", "effect": "NoExecute"}]}.get(state, [])
    return {"driver": "gpu.nvidia.com", "pool": node, "name": f"gpu-{index}", "model": model, "state": state,
            "claims": [claim] if claim else [], "pods": [pod] if pod else [], "redacted": False,
            "migParent": None, "taints": taints}


def _summary(devices: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(d["state"] for d in devices)
    free = counts["free"]
    return {"devices": {"total": len(devices), **{s: counts[s] for s in STATES}},
            "tightFits": {"1": free, "2": free // 2, "4": free // 4, "8": free // 8},
            "stranded": 0, "freeMigSlices": 0}


def node(name: str, *, gpus: int = 8, states: list[str] | None = None, model: str = MODELS[0],
         namespace: str = "team-a", zone: str = "a") -> dict[str, Any]:
    """One node: its GPUs in two PCIe-root groups, with the given states (default: all free)."""
    states = states or ["free"] * gpus
    devices = [_device(name, i, states[i], model=model, namespace=namespace) for i in range(gpus)]
    half = max(1, gpus // 2)
    groups = [{"kind": "pcieRoot", "name": f"pci0000:{k:02x}", "devices": devices[k * half:(k + 1) * half]}
              for k in range((gpus + half - 1) // half)]
    summary = _summary(devices)
    summary["largestFreeTightGroup"] = max((sum(d["state"] == "free" for d in g["devices"]) for g in groups),
                                           default=0)
    return {"name": name, "labels": {"nvidia.com/gpu.product": model.replace(" ", "-"),
                                      "topology.kubernetes.io/zone": zone},
            "drivers": ["gpu.nvidia.com"], "summary": summary, "groups": groups, "migParents": []}


def with_mig(entry: dict[str, Any]) -> dict[str, Any]:
    """Turn the node's last GPU into a MIG parent with three 1g.10gb slices, one of them used."""
    entry = copy.deepcopy(entry)
    group = entry["groups"][-1]
    parent = group["devices"].pop()
    for k, state in enumerate(("allocated", "free", "free")):
        slice_ = _device(entry["name"], 70 + k, state, model=parent["model"])
        slice_.update(name=f"{parent['name']}-mig-1g.10gb-{k}", migParent=parent["name"])
        group["devices"].append(slice_)
    entry["migParents"] = [{"device": parent["name"], "freeSlices": {"1g.10gb": 2}}]
    entry["summary"]["freeMigSlices"] = 2
    entry["summary"]["stranded"] = 2
    return entry


def fleet(nodes: list[dict[str, Any]], *, revision: int = 1, cluster_wide: bool = True,
          namespaces: list[str] | None = None, filters: dict[str, Any] | None = None) -> dict[str, Any]:
    devices = [d for n in nodes for g in n["groups"] for d in g["devices"]]
    summary = _summary(devices)
    summary["stranded"] = sum(n["summary"]["stranded"] for n in nodes)
    summary["freeMigSlices"] = sum(n["summary"]["freeMigSlices"] for n in nodes)
    return {"apiVersion": "gpuclaim.io/v1alpha1", "kind": "Fleet", "revision": revision,
            "generatedAt": "2026-11-26T22:30:00Z", "kubernetesVersion": "v1.37.2",
            "scope": {"clusterWide": cluster_wide, "namespaces": namespaces or []},
            "filters": {"driver": None, "model": None, "namespace": None, "nodeSelector": None, **(filters or {})},
            "summary": summary, "nodes": nodes}


def small(revision: int = 1) -> dict[str, Any]:
    """Three nodes: one busy H100 node with every state and a redacted device, one MIG node, one idle A100."""
    busy = node("gpu-node-1", states=["allocated", "allocated", "reserved", "free",
                                      "tainted", "unhealthy", "free", "allocated"])
    busy["groups"][1]["devices"][3].update(redacted=True, claims=[], pods=[])
    return fleet([busy, with_mig(node("gpu-node-2", zone="b")), node("gpu-node-3", model=MODELS[1], zone="b")],
                 revision=revision)


def large(nodes: int = 5000, gpus: int = 8, *, revision: int = 1) -> dict[str, Any]:
    """``nodes`` nodes of ``gpus`` GPUs, a deterministic mix of states (about half the devices in use)."""
    cycle = ("allocated", "free", "allocated", "reserved", "free", "allocated", "tainted", "free", "unhealthy")
    entries = [node(f"gpu-node-{i:05d}", gpus=gpus, states=[cycle[(i + k) % len(cycle)] for k in range(gpus)],
                    model=MODELS[i % 2], namespace=f"team-{i % 7}") for i in range(nodes)]
    return fleet(entries, revision=revision)
