"""GPU quotas across the conversion on the real control plane (issue 25, docs/migration.md), on every minor under
test: the e2e stack runs the quota controller (e2e/kube/install.py BASE_VALUES).

A namespace limited to `requests.nvidia.com/gpu: 1` (or a MIG profile) gets exactly one device allocated: the
first pod is converted and bound, the next ones are refused at create with the quota's own message, as the device
plugin's pods were; a ReplicaSet over quota reports FailedCreate; a claim written by hand past the limit is refused
by kube-apiserver itself (the hard bound is its charging of the mirror's entry, not gpuclaim's counting).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from realkube_cluster import Kube, gpu_pod

from e2e.kube.api import collection
from gpuclaim.dra import versions

QUOTAS = "/api/v1/namespaces/{ns}/resourcequotas"


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with kube.scratch_namespace("quota") as name:
        yield name


def legacy_quota(kube: Kube, ns: str, resource: str, limit: str = "1") -> dict:
    """The admin's quota, and the mirror the controller keeps beside it once the apiserver filled its status."""
    kube.api.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": ns},
                     "spec": {"hard": {f"requests.{resource}": limit}}})
    deadline = time.monotonic() + 30
    while True:
        status, mirror = kube.api.request("GET", QUOTAS.format(ns=ns) + "/gpuclaim-gpu-quota")
        if status == 200 and (mirror.get("status") or {}).get("hard"):
            return mirror
        assert time.monotonic() < deadline, f"no mirror of gpu-quota in {ns} after 30 s: {status} {mirror}"
        time.sleep(0.2)


def create(kube: Kube, pod: dict) -> tuple[int, dict]:
    return kube.api.request("POST", collection("Pod", pod["metadata"]["namespace"]), pod)


def allocated_devices(kube: Kube, ns: str) -> list[str]:
    return [r["pool"] + "/" + r["device"] for c in kube.api.list("ResourceClaim", ns)
            for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", ())]


def wait_allocated(kube: Kube, ns: str, count: int, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(devices := allocated_devices(kube, ns)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return devices


@pytest.mark.parametrize(("resource", "device_class"), [("nvidia.com/gpu", "gpu.nvidia.com"),
                                                         ("nvidia.com/mig-1g.5gb", "mig.nvidia.com")],
                         ids=["gpu", "mig"])
def test_a_quota_of_one_allocates_one_device_and_refuses_the_rest_at_create(kube: Kube, ns: str, resource: str,
                                                                            device_class: str) -> None:
    mirror = legacy_quota(kube, ns, resource)
    entry = f"{device_class}.deviceclass.resource.k8s.io/devices"
    assert mirror["spec"]["hard"] == {entry: "1"}
    assert mirror["metadata"]["ownerReferences"][0]["name"] == "gpu-quota"
    status, first = create(kube, gpu_pod("p1", ns, 1, resource))
    assert status == 201 and first["spec"].get("resourceClaims"), first
    for name in ("p2", "p3"):  # at once: p1's claim may not exist yet, the webhook counts what it admitted
        status, body = create(kube, gpu_pod(name, ns, 1, resource))
        assert status == 403, f"{name} over quota was admitted: {status} {body.get('spec', body)}"
        assert body["reason"] == "Forbidden"
        assert (f"exceeded quota: gpu-quota, requested: requests.{resource}=1, used: requests.{resource}=1, "
                f"limited: requests.{resource}=1") in body["message"], body["message"]
    assert kube.wait_bound(ns, "p1")["spec"].get("nodeName"), "p1 within quota not scheduled"
    assert len(wait_allocated(kube, ns, 1)) == 1
    assert [p["metadata"]["name"] for p in kube.api.list("Pod", ns)] == ["p1"]
    used = kube.api.get(QUOTAS.format(ns=ns) + "/gpuclaim-gpu-quota")["status"]["used"]
    assert used == {entry: "1"}
    # the hard bound is kube-apiserver's: a claim written by hand past the limit is refused by the apiserver itself
    status, body = kube.api.request("POST", collection("ResourceClaim", ns), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "by-hand", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}})
    assert status == 403, body
    # charged to the mirror's entry on every version; where KEP-5004's quota is on (1.36+) and the class declares
    # the legacy name, to the admin's entry as well, and the apiserver names the first quota it finds full
    extended = kube.api.get(f"{collection('DeviceClass')}/{device_class}")["spec"].get("extendedResourceName")
    names = versions.model_for(kube.minor).quota_names(device_class, extended)
    full = ["gpuclaim-gpu-quota"] + (["gpu-quota"] if f"requests.{resource}" in names else [])
    assert any(f"exceeded quota: {q}," in body["message"] for q in full), (full, body["message"])
    # room again once p1 is gone: the next pod is admitted
    kube.delete_namespace_pods(ns)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, body = create(kube, gpu_pod("p4", ns, 1, resource))
        if status == 201:
            break
        time.sleep(0.5)  # the claim of p1 goes with it (kube-controller-manager's garbage collector)
    assert status == 201, body


def test_a_deployment_over_quota_gets_failed_create(kube: Kube, ns: str) -> None:
    legacy_quota(kube, ns, "nvidia.com/gpu")
    kube.api.create({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": ns},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "trainer"}},
                 "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": gpu_pod("x", ns)["spec"]}}})
    deadline = time.monotonic() + 60
    failed: list[dict] = []
    while time.monotonic() < deadline:
        failed = [e for e in kube.api.list("Event", ns) if e.get("reason") == "FailedCreate"
                  and e["involvedObject"]["kind"] == "ReplicaSet"]
        if failed and len(allocated_devices(kube, ns)) == 1:
            break
        time.sleep(0.5)
    assert failed, "no FailedCreate on the ReplicaSet"
    assert "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1" in failed[0]["message"], failed[0]
    time.sleep(2)  # a moment for a pod that should not exist to show up
    assert len(kube.api.list("Pod", ns)) == 1
    assert len(allocated_devices(kube, ns)) == 1
    kube.api.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/trainer", grace=None)
