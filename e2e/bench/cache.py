"""`python -m e2e.bench cache`: memory and sync time of the cluster cache at fleet scale.

Generates 5,000 nodes with one H100-like ResourceSlice each (8 devices: 40,000 devices) and
20,000 ResourceClaims with allocations, serves them from the API double as a separate process
over TLS, syncs a ClusterCache in this process and reports its RSS growth (`rss_mb`: RSS after
sync minus RSS before the cache existed, both measured after a GC) and the total.
The double loads with --no-validate (see `e2e.bench.procs.serving_double`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from e2e.bench.procs import rss_mb, serving_double

DRIVER = "gpu.nvidia.com"


def _node(i: int) -> dict[str, Any]:
    name = f"gpu-node-{i:05d}.cluster.internal"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone": f"zone-{i % 3}",
              "topology.kubernetes.io/region": "region-1", "nvidia.com/gpu.present": "true",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": {"cpu": "192", "memory": "2063937064Ki", "pods": "110"},
                       "nodeInfo": {"kubeletVersion": "v1.34.1", "osImage": "Amazon Linux 2023",
                                    "containerRuntimeVersion": "containerd://1.7.27", "architecture": "amd64",
                                    "bootID": f"boot-{i}", "machineID": f"m-{i}", "systemUUID": f"u-{i}",
                                    "kernelVersion": "6.1.0", "operatingSystem": "linux",
                                    "kubeProxyVersion": "v1.34.1"}}}


def _device(node: int, index: int) -> dict[str, Any]:
    root = 0x10 * (index // 2)
    return {"name": f"gpu-{index}", "attributes": {
        "addressingMode": {"string": "HMM"}, "architecture": {"string": "Hopper"}, "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": "9.0.0"}, "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.105.8"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{root + 0x18 + index % 2:02x}:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{root:02x}"}, "type": {"string": "gpu"},
        "uuid": {"string": f"GPU-{node:08x}-{index:04x}-4a1b-9c2d-{node * 8 + index:012x}"},
        "index": {"int": index}, "minor": {"int": index},
    }, "capacity": {"memory": {"value": "81559Mi"}}}


def _slice(i: int) -> dict[str, Any]:
    node = f"gpu-node-{i:05d}.cluster.internal"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-x7k2p", "generateName": f"{node}-{DRIVER}-",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": f"uid-{i}",
                                              "controller": True}]},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [_device(i, d) for d in range(8)]}}


def _claim(i: int, nodes: int, namespaces: int) -> dict[str, Any]:
    node_index, device = i % nodes, (i // nodes) % 8
    node = f"gpu-node-{node_index:05d}.cluster.internal"
    pod = f"train-{i:05d}"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{pod}-gpu-b6x9q", "namespace": f"team-{i % namespaces:02d}",
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                         "finalizers": ["resource.kubernetes.io/delete-protection"],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": f"pod-uid-{i}",
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{device}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": f"pod-uid-{i}"}]}}


def generate(directory: Path, *, nodes: int, claims: int, namespaces: int = 40) -> None:
    def write(name: str, items: list[dict[str, Any]]) -> None:
        (directory / name).write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    write("00-namespaces.json", [{"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": f"team-{n:02d}", "labels": {"team": f"t{n}"}}}
                                 for n in range(namespaces)])
    write("01-nodes.json", [_node(i) for i in range(nodes)])
    write("02-slices.json", [_slice(i) for i in range(nodes)])
    write("03-claims.json", [_claim(i, nodes, namespaces) for i in range(claims)])
    write("04-classes.json", [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                               "metadata": {"name": DRIVER}, "spec": {"selectors": [
                                   {"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}}])


async def _sync(kubeconfig: Path) -> dict[str, Any]:
    from gpuclaim.kube import config
    from gpuclaim.kube.cache import ClusterCache
    from gpuclaim.kube.client import KubeClient

    gc.collect()
    before = rss_mb()
    client = KubeClient(config.from_kubeconfig(kubeconfig), timeout=120.0)
    cache = ClusterCache(client, registry=CollectorRegistry())
    started = time.perf_counter()
    await cache.start()
    await cache.wait_synced(600)
    sync_s = time.perf_counter() - started
    gc.collect()
    after = rss_mb()
    devices = sum(len(s["spec"].get("devices") or ()) for s in cache.objects("ResourceSlice").values())
    figures = {"rss_mb": round(after - before, 1), "rss_measure": "growth of this process's RSS from before "
               "the cache was created to after sync (GC'd)", "rss_total_mb": round(after, 1),
               "rss_peak_mb": round(rss_mb(field="VmHWM"), 1), "sync_s": round(sync_s, 2),
               "nodes": len(cache.objects("Node")), "devices": devices, "claims": len(cache.objects("ResourceClaim")),
               "allocated_devices": len(cache.allocated_devices())}
    await cache.stop()
    await client.close()
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    nodes, claims = (500, 2000) if args.quick else (5000, 20000)
    with tempfile.TemporaryDirectory(prefix="gpuclaim-bench-cache-") as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        data.mkdir()
        print(f"generating {nodes} nodes / {nodes * 8} devices / {claims} claims", file=sys.stderr)
        generate(data, nodes=nodes, claims=claims)
        started = time.perf_counter()
        with serving_double(data, work) as kubeconfig:
            print(f"API double loaded and serving after {time.perf_counter() - started:.1f}s", file=sys.stderr)
            figures = asyncio.run(_sync(Path(kubeconfig)))
    figures["double_load_s"] = round(time.perf_counter() - started - figures["sync_s"], 1)
    return figures
