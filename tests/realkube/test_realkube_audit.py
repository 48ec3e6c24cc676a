"""`gpuclaim audit` against the real control plane, on every minor under test (docs/audit.md): run live as a
ServiceAccount bound only to the chart's `gpuclaim-audit` ClusterRole (read-only RBAC is enough), on a cluster
prepared with a GPU Deployment, a GPU quota kept by the quota controller, a second quota with a scope (which cannot
be kept), an opted-out namespace and a mixed node; the JSON checked field by field, exit 1 for the hazards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from realkube_cluster import REPO, Kube, gpu_pod
from test_realkube_mixed_nodes import roomy_node, set_device_plugin

from e2e.kube.cluster import kubeconfig
from e2e.kube.install import request_token
from gpuclaim.dra import versions


def audit_kubeconfig(kube: Kube, ns: str, tmp_path: Path) -> Path:
    """A kubeconfig for a ServiceAccount of `ns` bound to nothing but the chart's audit ClusterRole."""
    kube.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "auditor", "namespace": ns}})
    kube.api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                     "metadata": {"name": f"{ns}-auditor"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                 "name": "gpuclaim-audit"},
                     "subjects": [{"kind": "ServiceAccount", "name": "auditor", "namespace": ns}]})
    token = request_token(kube.api, ns, "auditor")
    path = tmp_path / "auditor.kubeconfig"
    path.write_text(kubeconfig(kube.state["server"], (kube.run / "pki" / "ca.crt").read_bytes(), token,
                               f"system:serviceaccount:{ns}:auditor"))
    return path


def run_audit(path: Path) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "gpuclaim", "audit", "--kubeconfig", str(path), "-o", "json"],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_audit_report_on_a_prepared_cluster(kube: Kube, tmp_path: Path) -> None:
    with kube.scratch_namespace("audit") as ns, kube.scratch_namespace("audit-out") as out:
        kube.api.call("PATCH", f"/api/v1/namespaces/{out}", {"metadata": {"labels": {"gpuclaim.io/webhook":
                                                                                     "disabled"}}},
                      content_type="application/merge-patch+json")
        template = {"metadata": {"labels": {"app": "t"}}, "spec": gpu_pod("x", ns, 2)["spec"]}
        spec = {"replicas": 0, "selector": {"matchLabels": {"app": "t"}}, "template": template}
        kube.api.create({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "trainer", "namespace": ns}, "spec": spec})
        kube.api.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": ns},
                         "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}})
        kube.api.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "scoped", "namespace": ns},
                         "spec": {"hard": {"requests.nvidia.com/gpu": "1"}, "scopes": ["NotBestEffort"]}})
        deadline = time.monotonic() + 30
        while kube.api.request("GET", f"/api/v1/namespaces/{ns}/resourcequotas/gpuclaim-gpus")[0] != 200:
            assert time.monotonic() < deadline, "the quota controller did not keep gpus"
            time.sleep(0.2)
        node = roomy_node(kube)
        set_device_plugin(kube, node, "8")
        try:
            code, report = run_audit(audit_kubeconfig(kube, ns, tmp_path))
        finally:
            set_device_plugin(kube, node, None)
            kube.api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ns}-auditor")
    assert code == 1 and report["version"] == "1"
    model = versions.model_for(kube.minor)
    assert report["kubernetes"]["model"] == kube.minor
    assert report["kubernetes"]["version"].startswith(f"v{kube.minor}.")
    assert report["kubernetes"]["gates"]["DRAExtendedResource"] is model.gate("DRAExtendedResource")
    (trainer,) = [w for w in report["workloads"] if w.get("namespace") == ns]
    assert (trainer["kind"], trainer["name"], trainer["outcome"]) == ("Deployment", "trainer", "converted")
    assert trainer["resources"] == {"nvidia.com/gpu": 2} and trainer["devices"] == {"gpu.nvidia.com": 2}
    assert {"namespace": out, "why": "label gpuclaim.io/webhook=disabled"} in report["optedOutNamespaces"]
    quotas = {q["name"]: q for q in report["quotas"] if q["namespace"] == ns}
    assert quotas["gpus"]["state"] == "kept" and quotas["gpus"]["mirror"] == "gpuclaim-gpus"
    (entry,) = quotas["gpus"]["entries"]
    assert entry == {"legacy": "requests.nvidia.com/gpu", "limit": "4",
                     "keptBy": "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
                     "chargedNatively": model.extended_resources.quota_by_extended_name}
    assert quotas["scoped"]["state"] == "not-keepable" and "scopes" in quotas["scoped"]["problems"][0]
    mixed = {m["node"]: m for m in report["mixedNodes"]}
    assert mixed[node]["overlaps"] == [{"resource": "nvidia.com/gpu", "allocatable": "8",
                                        "deviceClass": "gpu.nvidia.com", "driver": "gpu.nvidia.com"}]
    classes = {c["name"]: c for c in report["deviceClasses"]}
    if model.extended_resources.scheduler_claims:  # 1.36+ keep the field and serve nvidia.com/gpu natively
        assert classes["gpu.nvidia.com"]["gpuclaimMapsTo"] == "gpu.nvidia.com"
        assert ("locked on" in classes["gpu.nvidia.com"]["effect"]) is model.extended_resources.locked
    else:  # 1.35: the apiserver drops extendedResourceName with the gate off
        assert "gpu.nvidia.com" not in classes
    assert report["devicesInUse"]["dra"].get("gpu.nvidia.com", 0) >= 1  # the demo fleet's busy claims
    kinds = {(h["kind"], h["object"]) for h in report["hazards"]}
    assert ("mixed-node", f"Node {node}") in kinds and ("quota", f"ResourceQuota {ns}/scoped") in kinds
    assert ("quota", f"ResourceQuota {ns}/gpus") not in kinds
