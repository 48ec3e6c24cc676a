"""Mixed nodes on the real control plane (issue 25, docs/migration.md#mixed-nodes), on every minor under test.

One fleet node is made mixed: its status says the device plugin advertises `nvidia.com/gpu: 8` beside the
gpu.nvidia.com ResourceSlices it already has. An unconverted pod (opted out) is placed there by kube-scheduler's
device-plugin path (NodeResourcesFit; on 1.37 KEP-5004's DRA path is skipped because allocatable is above zero),
with no claim. A converted pod that may only go to that node stays Pending, and its FailedScheduling event carries
the extender's reason (the chart registers the filter verb for mixedNodes: avoid); once the node is no longer
mixed a converted pod is scheduled there again. A converted pod free to go anywhere lands on another node.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from realkube_cluster import Kube, gpu_pod

from e2e.kube.api import collection


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with kube.scratch_namespace("mixed") as name:
        yield name


def roomy_node(kube: Kube) -> str:
    """The node with the most free whole gpu.nvidia.com GPUs."""
    taken = {(r["pool"], r["device"]) for c in kube.api.list("ResourceClaim")
             for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", ())}
    free: dict[str, int] = {}
    for s in kube.api.list("ResourceSlice"):
        spec = s["spec"]
        if spec["driver"] != "gpu.nvidia.com" or not spec.get("nodeName"):
            continue
        free[spec["nodeName"]] = free.get(spec["nodeName"], 0) + sum(
            1 for d in spec.get("devices") or () if d["attributes"]["type"]["string"] == "gpu"
            and (spec["pool"]["name"], d["name"]) not in taken)
    return max(sorted(free), key=lambda n: free[n])


def on_node(pod: dict, node: str) -> dict:
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return pod


def set_device_plugin(kube: Kube, node: str, count: str | None) -> None:
    """The node's status as a kubelet with the NVIDIA device plugin would report it (None: without)."""
    obj = kube.api.get(f"{collection('Node')}/{node}")
    kube.api.patch_status(obj, {"capacity": {"nvidia.com/gpu": count}, "allocatable": {"nvidia.com/gpu": count}})


def failed_scheduling(kube: Kube, ns: str, pod: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in kube.api.list("Event", ns):
            if event["involvedObject"].get("name") == pod and event.get("reason") == "FailedScheduling" \
                    and "gpuclaim" in event.get("message", ""):
                return str(event["message"])
        time.sleep(0.3)
    pytest.fail(f"no FailedScheduling event from gpuclaim for {pod}: "
                f"{[e.get('message') for e in kube.api.list('Event', ns)]}")


def test_a_mixed_node_is_avoided_by_converted_pods(kube: Kube, ns: str, tmp_path: Path) -> None:
    node = roomy_node(kube)
    set_device_plugin(kube, node, "8")
    try:
        time.sleep(3)  # the extender's view: the node watch, then its mixed-node memo (2 s)
        # an unconverted pod: the device plugin's path, no DRA claim, on 1.35 and 1.37 alike
        legacy = on_node(gpu_pod("legacy", ns, annotations={"gpuclaim.io/webhook": "disabled"}), node)
        status, body = kube.api.request("POST", collection("Pod", ns), legacy)
        assert status == 201 and not body["spec"].get("resourceClaims"), body
        bound = kube.wait_bound(ns, "legacy")
        assert bound["spec"].get("nodeName") == node, bound["status"]
        assert not (bound.get("status") or {}).get("extendedResourceClaimStatus")
        assert kube.api.list("ResourceClaim", ns) == []
        # a converted pod that may only go there: kept off, with the reason in its event; kubectl shows the
        # webhook's warning at create
        manifest = tmp_path / "pinned.yaml"
        manifest.write_text(yaml.safe_dump(on_node(gpu_pod("pinned", ns), node)))
        done = subprocess.run(["kubectl", "--kubeconfig", kube.kubeconfig, "create", "-f", str(manifest)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert f"gpuclaim: 1 node is mixed ({node})" in done.stderr and "mixedNodes: avoid" in done.stderr, \
            done.stderr
        assert kube.api.get(f"{collection('Pod', ns)}/pinned")["spec"].get("resourceClaims")
        message = failed_scheduling(kube, ns, "pinned")
        assert f"gpuclaim: node {node} is mixed: the device plugin advertises nvidia.com/gpu=8 and driver " \
               "gpu.nvidia.com publishes ResourceSlices" in message, message
        assert not kube.wait_bound(ns, "pinned", timeout=2)["spec"].get("nodeName")
        # free to go anywhere: anywhere but there
        status, body = kube.api.request("POST", collection("Pod", ns), gpu_pod("free", ns))
        assert status == 201, body
        free = kube.wait_bound(ns, "free")
        assert free["spec"].get("nodeName") not in (None, node), free["spec"].get("nodeName")
    finally:
        set_device_plugin(kube, node, None)
    # no longer mixed: a converted pod is scheduled there again (a new one: kube-scheduler requeues a pod an
    # extender refused only at its periodic flush of unschedulable pods, 5 minutes)
    time.sleep(3)
    status, body = kube.api.request("POST", collection("Pod", ns), on_node(gpu_pod("pinned-again", ns), node))
    assert status == 201, body
    again = kube.wait_bound(ns, "pinned-again")
    assert again["spec"].get("nodeName") == node, again["status"]
