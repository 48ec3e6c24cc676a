"""The demo story and the up/down contract on the real control plane."""

from __future__ import annotations

import subprocess
import sys
import time

import orjson
from realkube_cluster import REPO, Kube, down, minors_under_test, up

from e2e.kube import build
from e2e.kube.cluster import Proc
from gpuclaim.demo import workloads as wl


def test_up_prints_the_admin_kubeconfig_first_and_kubectl_works(kube: Kube) -> None:
    assert kube.kubeconfig == str(kube.run / "admin.kubeconfig")
    done = subprocess.run([kube.kubectl, "--kubeconfig", kube.kubeconfig, "get", "nodes", "-o", "json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    nodes = orjson.loads(done.stdout)["items"]
    assert len(nodes) == 19
    assert all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]) for n in nodes)
    assert not any(n["spec"].get("taints") for n in nodes)  # no not-ready taint: nothing would lift it


def test_demo_json_on_the_running_cluster(kube: Kube) -> None:
    done = subprocess.run([sys.executable, "-m", "e2e.kube", "demo", "-o", "json", "--run-dir", str(kube.run)],
                          capture_output=True, cwd=REPO, timeout=300, check=False)
    report = orjson.loads(done.stdout)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert report["kubernetes"] == build.release(kube.minor)
    by_name = {w["name"]: w for w in report["workloads"]}
    assert len(by_name) == len(wl.workloads())
    for w in wl.workloads():
        entry = by_name[w.name]
        assert set(entry) >= {"name", "expected", "outcome", "node", "allocated", "predicted"}
        assert entry["outcome"] == {"converted": "converted-scheduled", "untouched": "untouched-scheduled",
                                    "denied": "denied"}[w.expect], entry
        assert entry["allocated"] == entry["predicted"], entry
    gpu = [e for e in report["workloads"] if e["outcome"] == "converted-scheduled"]
    assert gpu and all(e["allocated"] and all(d.count("/") == 2 for d in e["allocated"]) for e in gpu)
    # the sharing pair shares one device, on one node
    assert by_name["infer-a"]["allocated"] == by_name["infer-b"]["allocated"]
    assert by_name["mig-1g"]["allocated"][0].split("/")[2].startswith("gpu-") and "mig-1g" in \
        by_name["mig-1g"]["allocated"][0]
    pinned = kube.api.get(f"/api/v1/nodes/{by_name['gfd-pinned']['node']}")
    assert pinned["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    # the claims the resourceclaim controller made carry the pod as owner
    claims = kube.api.list("ResourceClaim", wl.WORKLOAD_NAMESPACE)
    owned = [c for c in claims if any(o["kind"] == "Pod" for o in c["metadata"].get("ownerReferences") or ())]
    assert len(owned) == 4  # single-gpu, train-4gpu, mig-1g, gfd-pinned (the sharing pair uses a named claim)
    kube.delete_namespace_pods(wl.WORKLOAD_NAMESPACE)


def test_down_stops_everything_and_leaves_nothing(tmp_path) -> None:
    run = tmp_path / "run"
    first_line, state = up(run, minors_under_test()[0], "--nodes", "2")
    assert first_line == str(run / "admin.kubeconfig")
    procs = [Proc(n, int(p["pid"]), tmp_path) for n, p in state["procs"].items()]
    assert {p.name for p in procs} == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                       "webhook", "extender"}
    assert all(p.alive() for p in procs)
    said = down(run)
    assert "stopped" in said
    assert not run.exists()
    assert not any(p.alive() for p in procs)


def test_a_cluster_whose_owner_dies_is_stopped(tmp_path) -> None:
    """`up --detach --owner-pid`: the watchdog stops the cluster when the owner ends without `down`."""
    owner = subprocess.Popen(["sleep", "600"])
    run = tmp_path / "run"
    try:
        _, state = up(run, minors_under_test()[0], "--nodes", "1", "--owner-pid", str(owner.pid))
        procs = [Proc(n, int(p["pid"]), tmp_path) for n, p in state["procs"].items()]
        assert all(p.alive() for p in procs)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 60
    while (run.exists() or any(p.alive() for p in procs)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not run.exists() and not any(p.alive() for p in procs)
