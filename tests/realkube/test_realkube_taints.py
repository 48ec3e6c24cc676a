"""DeviceTaintRules on the real control plane: the scheduler allocates around a tainted GPU and the extender
predicts that same GPU; the extender's live view watches the rules where the cluster serves them.

Per version (gpuclaim.dra.versions): 1.37 serves DeviceTaintRule at resource.k8s.io/v1 and its kube-scheduler
applies the rules (DRADeviceTaintRules GA, on). 1.35 serves none at default gates (v1alpha3 only, gate alpha and
off): the create is refused with 404 and the GPU stays allocatable.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from realkube_cluster import Kube, gpu_pod

from e2e.kube import demo
from e2e.kube.api import collection
from gpuclaim.commands._config import load_config_file
from gpuclaim.dra import taints, versions
from gpuclaim.extender import predict
from gpuclaim.extender.view import LiveView, extender_specs
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.cache import ClusterCache
from gpuclaim.kube.client import KubeClient
from gpuclaim.kube.version import ClusterVersion

RULE = "realkube-gpu-broken"


def _free_node(kube: Kube) -> tuple[str, str, list[str]]:
    """A node none of whose whole GPUs is held: (node, pool, its whole GPUs in slice order)."""
    held = {(r["pool"], r["device"]) for c in kube.api.list("ResourceClaim")
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()}
    for node in kube.state["nodes"]:
        slices = [s for s in kube.api.list("ResourceSlice") if s["spec"].get("nodeName") == node
                  and s["spec"]["driver"] == "gpu.nvidia.com"]
        gpus = [(s["spec"]["pool"]["name"], d["name"]) for s in sorted(slices, key=lambda s: s["metadata"]["name"])
                for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "gpu"]
        if len(gpus) >= 2 and not held & set(gpus):
            return node, gpus[0][0], [name for _, name in gpus]
    raise AssertionError("no node with two free whole GPUs left in the session cluster")


def _pinned(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return pod


async def _live_prediction(kube: Kube, config: Any, pod: dict[str, Any], node: str
                           ) -> tuple[str | None, list[str], tuple[str, ...]]:
    """The extender's live view on the real cluster: (the served DeviceTaintRule version, the rules it holds, its
    devices for `pod` on `node`)."""
    client = KubeClient(kube_config.from_kubeconfig(Path(kube.kubeconfig)), timeout=10.0)
    registry = CollectorRegistry()
    full = load_config_file(Path(kube.config_path))
    cache = ClusterCache(client, registry=registry, rng=random.Random(1), specs=extender_specs(full),
                         version=ClusterVersion(full.kubernetes, registry=registry))
    view = LiveView(cache, full)
    try:
        await cache.start()
        await cache.wait_synced(30)
        for _ in range(100):
            if cache.version is not None and cache.version.cluster is not None:
                break
            await asyncio.sleep(0.1)
        request = predict.resolve(pod, view, config)
        (verdict,) = predict.predict(request, [node], view, config)
        return (cache.reflectors["DeviceTaintRule"].served_version, sorted(cache.taint_rules()), verdict.devices)
    finally:
        await cache.stop()
        await client.close()


def test_a_device_taint_rule_moves_the_allocation_and_the_prediction(kube: Kube) -> None:
    config = load_config_file(Path(kube.config_path)).extender
    model = versions.resolve(kube.api.get("/version")["gitVersion"]).model
    applies = taints.rules_apply(model)
    node, pool, gpus = _free_node(kube)
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": RULE},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": pool, "device": gpus[0]},
                     "taint": {"key": "example.com/broken", "value": "fan", "effect": "NoSchedule"}}}
    status, body = kube.api.request("POST", collection("DeviceTaintRule"), rule)
    if applies:
        assert model.minor >= 37 and status == 201, body
    else:  # 1.35 at default gates: not served at v1, and its scheduler reads no rule
        assert status == 404, body
    try:
        with kube.scratch_namespace("taints") as ns:
            status, created = kube.api.request("POST", collection("Pod", ns), _pinned(gpu_pod("one", ns, 1), node))
            assert status == 201, created
            assert created["spec"].get("resourceClaims"), "the webhook converted the pod"
            pod = kube.wait_bound(ns, "one", timeout=60)
            assert pod["spec"].get("nodeName") == node, demo._unschedulable(pod)
            allocated, predicted, reason = demo.allocated_and_predicted(pod, demo.snapshot(kube.api), config)
            expected = gpus[1] if applies else gpus[0]
            assert allocated == [f"gpu.nvidia.com/{pool}/{expected}"], (allocated, reason)
            assert predicted == allocated, reason

            # the running extender's view (the real watch): it holds the rule where served and, for a second pod,
            # predicts neither the tainted GPU (1.37) nor the one just allocated
            second = {**created, "metadata": {**created["metadata"], "name": "two", "uid": "uid-two"}}
            served, rules, devices = asyncio.run(_live_prediction(kube, config, second, node))
            if applies:
                assert (served, rules) == ("resource.k8s.io/v1", [RULE])
                assert devices == (f"gpu.nvidia.com/{pool}/{gpus[2]}",) if len(gpus) > 2 else devices == ()
            else:
                assert (served, rules) == (None, [])
                assert devices == (f"gpu.nvidia.com/{pool}/{gpus[1]}",)
    finally:
        kube.api.delete(f"{collection('DeviceTaintRule')}/{RULE}", grace=None)
