"""The real control plane the `realkube` tests share: started once per session with `python -m e2e.kube up
--detach` (so the CLI contract is exercised too), stopped with `down` at the end; helpers to create workloads, wait
for the scheduler and stop, pause or restart gpuclaim's servers (their command lines are in state.json)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kube_binaries
import orjson

from e2e.kube import build
from e2e.kube.api import Api, collection
from e2e.kube.cluster import Proc, spawn, stop_procs
from e2e.kube.install import wait_default_sa

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]


#: the minors the suite runs on by default, newest first: CI's matrix. 1.36 is opt-in
#: (GPUCLAIM_KUBE_VERSIONS=1.37,1.36,1.35), see docs/dev/real-control-plane.md.
DEFAULT_MINORS = ("1.37", "1.35")


def minors_under_test() -> list[str]:
    """$GPUCLAIM_KUBE_VERSIONS (comma-separated minors), else DEFAULT_MINORS; every realkube test that needs a
    cluster runs once on each."""
    raw = os.environ.get("GPUCLAIM_KUBE_VERSIONS") or ",".join(DEFAULT_MINORS)
    return [build.minor_of(part) for part in raw.split(",") if part.strip()]


def require_binaries(minor: str) -> None:
    """The binaries must be built (CI: .ci/run builds them first); GPUCLAIM_REALKUBE=skip skips instead."""
    kube_binaries.require(minor)


def up(run: Path, minor: str, *extra: str) -> tuple[str, Obj]:
    """`python -m e2e.kube up --detach --kubernetes-version <minor>`; (first stdout line, state.json).

    Every cluster a test starts comes through here, so the `require_binaries` rule holds for all of them: without
    the binaries the test fails, or skips with GPUCLAIM_REALKUBE=skip."""
    require_binaries(minor)
    # --owner-pid: if this test session is killed before its teardown, the cluster stops anyway
    done = subprocess.run([sys.executable, "-m", "e2e.kube", "up", "--kubernetes-version", minor,
                           "--detach", "--run-dir", str(run), "--owner-pid", str(os.getpid()), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    return first, orjson.loads((run / "state.json").read_bytes())


def down(run: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "e2e.kube", "down", "--run-dir", str(run)], capture_output=True,
                          text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stderr


@dataclass
class Kube:
    run: Path
    kubeconfig: str
    state: Obj
    minor: str  # the Kubernetes minor this control plane runs, e.g. "1.37"
    api: Api = field(init=False)
    restarted: list[Proc] = field(default_factory=list)  # children of this process: reaped after `down`

    def __post_init__(self) -> None:
        self.api = Api(self.state["server"], str(self.run / "pki" / "ca.crt"),
                       (self.run / "pki" / "admin.token").read_text().strip())

    @property
    def kubectl(self) -> str:
        """kubectl of this control plane's minor (never one from PATH)."""
        return str(kube_binaries.kubectl(self.minor))

    @property
    def config_path(self) -> Path:
        return self.run / "gpuclaim-config.yaml"

    # ---- gpuclaim's processes ------------------------------------------------------------------------------
    def proc(self, name: str) -> Proc:
        p = self.state["procs"][name]
        return Proc(name, int(p["pid"]), Path(p["log"]), argv=list(p["argv"]))

    def stop(self, name: str) -> None:
        stop_procs([self.proc(name)])

    def start(self, name: str) -> None:
        """Start `name` again with its recorded command line; wait until it is ready; record the new pid."""
        old = self.proc(name)
        if old.alive():
            return
        new = spawn(name, old.argv, self.run / "logs")
        self.restarted.append(new)
        self.state["procs"][name]["pid"] = new.pid
        (self.run / "state.json").write_bytes(orjson.dumps(self.state, option=orjson.OPT_INDENT_2))
        port = self.state["gpuclaimPorts"][name]
        deadline = time.monotonic() + 60
        while not _ready(self.run / "tls" / "ca.crt", port, client=name == "extender"):
            assert new.alive(), f"{name} exited on restart: {new.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"{name} not ready 60 s after restart"
            time.sleep(0.1)

    @contextlib.contextmanager
    def stopped(self, name: str) -> Iterator[None]:
        self.stop(name)
        try:
            yield
        finally:
            self.start(name)

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """SIGSTOP: the process keeps its socket (the kernel completes handshakes) but answers nothing."""
        pid = self.proc(name).pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    # ---- workloads -----------------------------------------------------------------------------------------
    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        wait_default_sa(self.api, name)
        return name

    @contextlib.contextmanager
    def scratch_namespace(self, prefix: str) -> Iterator[str]:
        """A new namespace for one test; its pods (grace 0) and then itself are deleted afterwards."""
        name = self.namespace(prefix)
        try:
            yield name
        finally:
            self.delete_namespace_pods(name)
            self.api.delete(f"/api/v1/namespaces/{name}", grace=None)

    def delete_namespace_pods(self, namespace: str) -> None:
        """Every pod of the namespace, grace 0 (no kubelet), and wait until they are gone."""
        for pod in self.api.list("Pod", namespace):
            self.api.delete(f"{collection('Pod', namespace)}/{pod['metadata']['name']}")
        deadline = time.monotonic() + 60
        while self.api.list("Pod", namespace) and time.monotonic() < deadline:
            time.sleep(0.2)

    def wait_bound(self, namespace: str, name: str, timeout: float = 30) -> Obj:
        deadline = time.monotonic() + timeout
        while True:
            pod = self.api.get(f"{collection('Pod', namespace)}/{name}")
            if pod["spec"].get("nodeName") or time.monotonic() > deadline:
                return pod
            time.sleep(0.1)

    def close(self) -> None:
        self.api.close()

    def reap(self) -> None:
        for proc in self.restarted:
            assert proc.popen is not None
            proc.popen.wait(30)


def _ready(ca: Path, port: int, *, client: bool = False) -> bool:
    """/readyz over TLS; `client`: present kube-scheduler's client certificate (the extender's mutual TLS)."""
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    if client and (ca.parent / "client.crt").exists():
        context.load_cert_chain(str(ca.parent / "client.crt"), str(ca.parent / "client.key"))
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def gpu_pod(name: str, namespace: str, gpus: int | str = 1, resource: str = "nvidia.com/gpu", **meta: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                     "resources": {"limits": {resource: gpus}}}]}}


def cpu_pod(name: str, namespace: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.37",
                                     "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}
