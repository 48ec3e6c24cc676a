"""`kubectl gpuclaim fleet` (the CLI) on the real control plane, every minor under test (docs/fleet.md): the real
kubectl finds the `kubectl-gpuclaim` plugin on PATH; a GPU pod converted by the webhook and scheduled by the real
kube-scheduler shows the devices its claim's status.allocation names, read as a namespace viewer bound only to the
chart's fleet Role (rendered with fleet.rbac.namespaceViewers and applied here), who may not read the whole fleet;
a ServiceAccount bound to the chart's fleet-viewer ClusterRole reads `fleet nodes` with every slice's device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from realkube_cluster import REPO, Kube, gpu_pod

from e2e.kube.api import collection
from e2e.kube.cluster import kubeconfig
from e2e.kube.install import BASE_VALUES, merge_values, render_chart, request_token

#: the venv's bin, where pip put the `kubectl-gpuclaim` console script
BIN = Path(sys.executable).parent


def viewer_kubeconfig(kube: Kube, ns: str, account: str, tmp_path: Path) -> Path:
    token = request_token(kube.api, ns, account)
    path = tmp_path / f"{account}.kubeconfig"
    path.write_text(kubeconfig(kube.state["server"], (kube.run / "pki" / "ca.crt").read_bytes(), token,
                               f"system:serviceaccount:{ns}:{account}"))
    return path


def kubectl_gpuclaim(kube: Kube, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([kube.kubectl, "gpuclaim", "fleet", *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=env, check=False)


def chart_fleet_roles(ns: str, account: str) -> list[dict]:
    """The chart's fleet objects for a namespace viewer of `ns` (the realkube install renders none)."""
    values = merge_values(BASE_VALUES, {"fleet": {"rbac": {"namespaceViewers": [
        {"namespace": ns, "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]}]}}})
    return [o for o in render_chart(values) if o["kind"] in ("Role", "RoleBinding", "ClusterRoleBinding",
                                                              "ClusterRole")
            and ("fleet-devices" in o["metadata"]["name"] or o["kind"] in ("Role", "RoleBinding"))
            and o["metadata"]["name"].endswith(("-fleet-viewer", "-fleet-devices"))]


def allocated_devices(kube: Kube, ns: str, pod_name: str, timeout: float = 30) -> tuple[str, list[dict]]:
    """The claim the scheduler allocated for the pod and its allocation results, from the apiserver."""
    deadline = time.monotonic() + timeout
    while True:
        pod = kube.api.get(f"{collection('Pod', ns)}/{pod_name}")
        names = [s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()]
        for name in names:
            claim = kube.api.get(f"{collection('ResourceClaim', ns)}/{name}")
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")
            if results:
                return str(name), results
        assert time.monotonic() < deadline, f"no allocated claim for {ns}/{pod_name}: {pod.get('status')}"
        time.sleep(0.2)


def test_kubectl_gpuclaim_fleet_pods_shows_the_scheduled_pods_devices(kube: Kube, tmp_path: Path) -> None:
    with kube.scratch_namespace("fleet") as ns:
        kube.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "viewer",
                                                                                    "namespace": ns}})
        roles = chart_fleet_roles(ns, "viewer")
        assert {o["kind"] for o in roles} == {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
        kube.api.apply_all(roles)
        try:
            kube.api.create(gpu_pod("train-0", ns, 2))
            pod = kube.wait_bound(ns, "train-0")
            node = pod["spec"].get("nodeName")
            assert node, f"GPU pod not scheduled: {pod.get('status')}"
            claim, results = allocated_devices(kube, ns, "train-0")
            path = viewer_kubeconfig(kube, ns, "viewer", tmp_path)

            done = kubectl_gpuclaim(kube, "pods", "-n", ns, "--kubeconfig", str(path), "-o", "json")
            assert done.returncode == 0, done.stderr
            view = json.loads(done.stdout)
            (shown,) = view["pods"]
            assert (shown["namespace"], shown["name"], shown["node"]) == (ns, "train-0", node)
            (held,) = shown["claims"]
            assert held["name"] == claim
            assert sorted((d["driver"], d["pool"], d["name"]) for d in held["devices"]) == sorted(
                (r["driver"], r["pool"], r["device"]) for r in results)
            assert all(d["state"] == "allocated" and d["group"]["name"] for d in held["devices"])
            assert view["kubernetesVersion"].startswith(f"v{kube.minor}.")

            text = kubectl_gpuclaim(kube, "pods", "-n", ns, "--kubeconfig", str(path))
            assert text.returncode == 0, text.stderr
            for r in results:
                assert f"{r['driver']}/{r['pool']}/{r['device']}" in text.stdout

            # the namespace Role is all this viewer has: the whole fleet and other namespaces are refused, exit 2
            for args in (("nodes",), ("pods", "-A"), ("pods", "-n", "default")):
                refused = kubectl_gpuclaim(kube, *args, "--kubeconfig", str(path))
                assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
                assert "refused" in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
        finally:
            for obj in roles:
                kind, meta = obj["kind"], obj["metadata"]
                kube.api.delete(f"{collection(kind, meta.get('namespace'))}/{meta['name']}")


def test_the_fleet_viewer_cluster_role_reads_every_node(kube: Kube, tmp_path: Path) -> None:
    with kube.scratch_namespace("fleet-admin") as ns:
        kube.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "admin",
                                                                                    "namespace": ns}})
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": f"{ns}-fleet"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "gpuclaim-fleet-viewer"},
                   "subjects": [{"kind": "ServiceAccount", "name": "admin", "namespace": ns}]}
        kube.api.create(binding)
        try:
            done = kubectl_gpuclaim(kube, "nodes", "--kubeconfig",
                                    str(viewer_kubeconfig(kube, ns, "admin", tmp_path)), "-o", "json")
        finally:
            kube.api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ns}-fleet")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    truth: dict[str, int] = {}
    for s in kube.api.list("ResourceSlice"):
        if s["spec"].get("nodeName"):
            truth[s["spec"]["nodeName"]] = truth.get(s["spec"]["nodeName"], 0) + len(s["spec"].get("devices") or ())
    assert {n["name"]: n["summary"]["devices"]["total"] for n in doc["nodes"]} == {
        n: c for n, c in truth.items() if c}
    # the demo fleet's busy pods hold devices before any test runs
    assert doc["summary"]["devices"]["allocated"] >= 1


def test_the_charts_review_role_lets_the_extender_ask_who_a_viewer_is(kube: Kube) -> None:
    """The extender's ServiceAccount, with the chart's RBAC only, may create the TokenReview and the
    SubjectAccessReview the fleet page's access check sends (gpuclaim/fleet/access.py), and nothing else new."""
    extender = kube.run / "sa-extender.kubeconfig"
    assert extender.is_file()
    token = request_token(kube.api, "default", "default")
    reviews = [{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
               {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "system:serviceaccount:default:default",
                         "resourceAttributes": {"verb": "list", "resource": "pods"}}}]
    for review in reviews:
        # --validate=false: kubectl's client-side schema check would list CRDs, which the extender may not
        done = subprocess.run([kube.kubectl, "--kubeconfig", str(extender), "create", "--validate=false", "-f", "-",
                               "-o", "json"], input=json.dumps(review), capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)["status"]
        if review["kind"] == "TokenReview":
            assert status["authenticated"] is True
            assert status["user"]["username"] == "system:serviceaccount:default:default"
        else:
            assert status["allowed"] is False  # the default ServiceAccount may not list pods cluster-wide
    # still no write: the extender may not create a pod
    refused = subprocess.run([kube.kubectl, "--kubeconfig", str(extender), "auth", "can-i", "create", "pods", "-A"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.stdout.strip() == "no"
