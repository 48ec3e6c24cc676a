"""KEP-5004 on the real control plane, webhook absent: kube-scheduler serves an unconverted `nvidia.com/gpu` pod
with a claim of its own (1.36+), calls the extender for it, and the extender scores it by topology: its
prediction for the node the scheduler chose is the devices the scheduler allocated. On 1.35 (DRAExtendedResource
alpha, off) the pod stays Pending and the extender builds no claim for it."""

from __future__ import annotations

import copy
import re
import time
import urllib.request
from pathlib import Path

from realkube_cluster import Kube, gpu_pod

from e2e.kube import demo
from e2e.kube.api import collection
from gpuclaim.commands._config import load_config_file
from gpuclaim.demo.scenario import predictions
from gpuclaim.dra import versions

_SAMPLE = re.compile(r'^gpuclaim_extender_(pods_total|node_scores_total)\{(claims|score)="([^"]+)"\} (\S+)$', re.M)


def _extender_metrics(kube: Kube) -> dict[tuple[str, str], float]:
    argv = kube.state["procs"]["extender"]["argv"]
    address = argv[argv.index("--metrics-listen") + 1]
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {(m.group(1), m.group(3)): float(m.group(4)) for m in _SAMPLE.finditer(text)}


def _wait_claim(kube: Kube, ns: str, pod: str) -> dict:
    deadline = time.monotonic() + 30
    while True:
        status = kube.api.get(f"{collection('Pod', ns)}/{pod}").get("status") or {}
        name = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if name:
            return kube.api.get(f"{collection('ResourceClaim', ns)}/{name}")
        assert time.monotonic() < deadline, f"no extendedResourceClaimStatus on {pod}: {status}"
        time.sleep(0.2)


def test_an_unconverted_gpu_pod_gets_topology_scores_from_the_extender(kube: Kube) -> None:
    config = load_config_file(Path(kube.config_path)).extender
    model = versions.model_for(kube.minor)
    with kube.scratch_namespace("kep5004") as ns, kube.stopped("webhook"):
        before = _extender_metrics(kube)
        status, created = kube.api.request("POST", collection("Pod", ns), gpu_pod("two", ns, 2))
        assert status == 201 and not created["spec"].get("resourceClaims"), created  # Ignore: stored as written
        snapshot = demo.snapshot(kube.api)  # the state the scheduler allocates from
        if not model.extended_resources.scheduler_claims:
            pod = kube.wait_bound(ns, "two", timeout=3)
            assert not pod["spec"].get("nodeName")  # 1.35: no native path, Pending
            rows = predictions(created, snapshot, config)
            assert all(r["score"] == 0 and r["devices"] == [] for r in rows)
            return
        pod = kube.wait_bound(ns, "two", timeout=60)
        node = pod["spec"].get("nodeName")
        assert node, pod["status"]
        claim = _wait_claim(kube, ns, "two")
        allocated = sorted(f"{r['driver']}/{r['pool']}/{r['device']}"
                           for r in claim["status"]["allocation"]["devices"]["results"])
        assert len(allocated) == 2 and {r["request"] for r in claim["status"]["allocation"]["devices"]["results"]} \
            == {"container-0-request-0"}
        # the claim's shape, which the scheduler double makes the same way (tests/e2e/test_scheduler.py
        # test_an_unconverted_gpu_pod_gets_the_schedulers_own_claim asserts these same fields on the double)
        assert claim["metadata"]["name"].startswith("two-extended-resources-")
        assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
        assert [(o["kind"], o["name"], o.get("controller")) for o in claim["metadata"]["ownerReferences"]] == [
            ("Pod", "two", True)]
        assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}]
        status = kube.api.get(f"{collection('Pod', ns)}/two")["status"]["extendedResourceClaimStatus"]
        assert status == {"requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                                               "requestName": "container-0-request-0"}],
                          "resourceClaimName": claim["metadata"]["name"]}
        # the extender was called for this pod and scored it as a pod with a claim
        after = _extender_metrics(kube)
        assert after.get(("pods_total", "with"), 0) > before.get(("pods_total", "with"), 0)
        scored = {k[1]: v - before.get(k, 0) for k, v in after.items() if k[0] == "node_scores_total"}
        assert any(v > 0 for s, v in scored.items() if s not in ("0", "unfit")), scored
        # and its prediction for the chosen node is what the scheduler allocated there (the snapshot may already
        # hold the scheduler's claim: it did not exist when the scheduler chose)
        snapshot["ResourceClaim"] = [c for c in snapshot["ResourceClaim"]
                                     if c["metadata"]["name"] != claim["metadata"]["name"]]
        rows = {r["node"]: r for r in predictions(copy.deepcopy(created), snapshot, config)}
        assert sorted(rows[node]["devices"]) == allocated, rows[node]["reason"]
