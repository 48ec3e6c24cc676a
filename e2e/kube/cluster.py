"""The four control-plane processes on loopback: etcd, kube-apiserver (TLS, token auth, RBAC),
kube-controller-manager and kube-scheduler, each with free ports, its own identity and its log in `<run>/logs/`.

No kubelet: Nodes are API objects. Hence (docs/dev/real-control-plane.md, "No kubelet"): the TaintNodesByCondition
admission plugin and node-lifecycle-controller are off (nothing would ever lift the not-ready taint), and pods are
deleted with grace 0.

    plane = ControlPlane(run_dir, binaries)
    plane.start_core()                       # etcd, apiserver, controller-manager; admin kubeconfig written
    plane.start_scheduler(extenders=[...])   # once the extender's CA file exists
    plane.stop()                             # SIGTERM, SIGKILL after a grace period
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import requests
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from e2e.kube import admission
from e2e.kube.api import Api, wait_for
from gpuclaim.certs import material, selfsigned

Obj = dict[str, Any]
START_TIMEOUT = float(os.environ.get("GPUCLAIM_KUBE_START_TIMEOUT", "120"))
STOP_GRACE = 10.0
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: identities in --token-auth-file: user, groups. The bootstrap RBAC policy binds the component users to
#: their roles (system:kube-scheduler, system:kube-controller-manager), as in any kubeadm cluster
IDENTITIES = {
    "admin": ("admin", "system:masters"),
    "scheduler": ("system:kube-scheduler", ""),
    "controller-manager": ("system:kube-controller-manager", ""),
}


class PlaneError(Exception):
    """A process did not come up; the message names it and ends with its log's last lines."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Proc:
    name: str
    pid: int
    log: Path
    popen: subprocess.Popen[bytes] | None = None  # None when adopted from a state file (`down`)
    argv: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return _cmdline_is_ours(self.pid, self.name)


def _cmdline_is_ours(pid: int, name: str) -> bool:
    """A recorded pid may have been reused by an unrelated process: only signal one whose command is ours."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(name.encode() in part for part in cmdline[:8])


def spawn(name: str, argv: list[str], logs: Path, *, env: dict[str, str] | None = None) -> Proc:
    log = logs / f"{name}.log"
    with open(log, "ab") as out:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, env=env or {**os.environ, "PYTHONUNBUFFERED": "1"})
    return Proc(name, popen.pid, log, popen, argv)


def stop_procs(procs: list[Proc], grace: float = STOP_GRACE) -> None:
    """SIGTERM all at once, then wait for each up to the grace period (SIGKILL after it)."""
    live = [p for p in procs if p.alive()]
    for proc in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in live:
        while proc.alive() and time.monotonic() < deadline:
            if proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(0.1)
            else:
                time.sleep(0.1)
        if proc.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        if proc.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(grace)


def _healthz(port: int) -> bool:
    """A component's /healthz on its self-signed secure port (always allowed without authentication)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the component made its own throw-away certificate; loopback only
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


def kubeconfig(server: str, ca_pem: bytes, token: str, user: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "gpuclaim-kube", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "gpuclaim-kube", "user": user}}],
    }, sort_keys=False)


@dataclass
class ControlPlane:
    run: Path
    binaries: dict[str, Path]
    procs: dict[str, Proc] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    @property
    def pki(self) -> Path:
        return self.run / "pki"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    def kubeconfig_path(self, who: str = "admin") -> Path:
        return self.run / f"{who}.kubeconfig"

    def api(self, who: str = "admin") -> Api:
        return Api(self.server, str(self.ca_file), self.tokens[who])

    # ---- start ---------------------------------------------------------------------------------------------
    def start_core(self) -> None:
        for d in (self.logs, self.pki):
            d.mkdir(parents=True, exist_ok=True)
        # gpuclaim's webhook too: kube-apiserver's admission kubeconfig names its address (e2e.kube.admission)
        for name in ("etcd-client", "etcd-peer", "apiserver", "controller-manager", "scheduler", "gpuclaim-webhook"):
            self.ports[name] = free_port()
        self._pki()
        self._timed("etcd", self._start_etcd)
        self._timed("kube-apiserver", self._start_apiserver)
        self._timed("kube-controller-manager", self._start_controller_manager)

    def _timed(self, part: str, step: Any) -> None:
        started = time.monotonic()
        step()
        self.timings[part] = round(time.monotonic() - started, 2)

    def _pki(self) -> None:
        now = datetime.now(UTC)
        ca = selfsigned.issue_ca(now=now, name="gpuclaim-kube-ca")
        serving = selfsigned.issue_serving(ca=ca, now=now, names=selfsigned.Names.build(
            ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"], ["127.0.0.1"]))
        self.ca_file.write_bytes(ca.cert_pem)
        admission.write_config(self.pki, client=admission.client_certificate(ca, now=now),
                               webhook_address=f"127.0.0.1:{self.ports['gpuclaim-webhook']}")
        (self.pki / "apiserver.crt").write_bytes(serving.cert_pem)
        (self.pki / "apiserver.key").write_bytes(serving.key_pem)
        (self.pki / "apiserver.key").chmod(0o600)
        # the service-account signing key (RSA: what kube-apiserver's default signer and verifiers expect)
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.pki / "sa.key").write_bytes(material.key_pem(sa_key))
        (self.pki / "sa.key").chmod(0o600)
        lines = []
        for who, (user, groups) in IDENTITIES.items():
            token = self.tokens[who] = secrets.token_hex(24)
            lines.append(f'{token},{user},{user}-uid,"{groups}"' if groups else f"{token},{user},{user}-uid")
        (self.pki / "tokens.csv").write_text("\n".join(lines) + "\n")
        (self.pki / "tokens.csv").chmod(0o600)
        (self.pki / "admin.token").write_text(self.tokens["admin"] + "\n")
        (self.pki / "admin.token").chmod(0o600)

    def _start_etcd(self) -> None:
        client, peer = self.ports["etcd-client"], self.ports["etcd-peer"]
        self.procs["etcd"] = spawn("etcd", [
            str(self.binaries["etcd"]), "--name", "default", "--data-dir", str(self.run / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls",
            f"http://127.0.0.1:{client}", "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
            # a throw-away test store: fsync buys nothing and costs the 2-core machine seconds
            "--unsafe-no-fsync", "--log-level", "warn"], self.logs)
        self._wait("etcd", lambda: requests.get(f"http://127.0.0.1:{client}/health", timeout=2).json()
                   .get("health") == "true")

    def _start_apiserver(self) -> None:
        pki = self.pki
        self.procs["kube-apiserver"] = spawn("kube-apiserver", [
            str(self.binaries["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd-client']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--cert-dir={pki}", "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}", f"--service-account-key-file={pki / 'sa.key'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            # no kubelet and no node-lifecycle-controller: nothing would ever lift the creation-time not-ready taint
            "--disable-admission-plugins=TaintNodesByCondition",
            # its client certificate for gpuclaim's webhook, as docs/hardening.md tells a cluster admin
            f"--admission-control-config-file={pki / 'admission.yaml'}",
            "--profiling=false", "--v=1"], self.logs)
        api = self.api()
        try:
            self._wait("kube-apiserver", lambda: api.request("GET", "/readyz")[0] == 200)
        finally:
            api.close()
        ca_pem = self.ca_file.read_bytes()
        for who, (user, _groups) in IDENTITIES.items():
            self.kubeconfig_path(who).write_text(kubeconfig(self.server, ca_pem, self.tokens[who], user))
            self.kubeconfig_path(who).chmod(0o600)

    def _start_controller_manager(self) -> None:
        kc = self.kubeconfig_path("controller-manager")
        self.procs["kube-controller-manager"] = spawn("kube-controller-manager", [
            str(self.binaries["kube-controller-manager"]), f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports['controller-manager']}", "--leader-elect=false",
            # each controller with its own ServiceAccount, as kubeadm runs it: their RBAC is the bootstrap policy's
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.pki / 'sa.key'}", f"--root-ca-file={self.ca_file}",
            # node-lifecycle would taint every fake Node unreachable (no kubelet renews its Lease)
            f"--controllers={','.join(self._controllers())}",
            "--v=1"], self.logs)
        self._wait_healthz("kube-controller-manager", self.ports["controller-manager"])

    def _controllers(self) -> list[str]:
        # 1.37 dropped cloud-node-lifecycle-controller and refuses to exclude a controller it does not know: ask the
        # binary (its --help lists the known controllers) rather than pin a version
        binary = str(self.binaries["kube-controller-manager"])
        known = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, check=False).stdout
        return ["*", "-node-lifecycle-controller",
                *(["-cloud-node-lifecycle-controller"] if "cloud-node-lifecycle-controller" in known else [])]

    def start_scheduler(self, extenders: list[Obj]) -> None:
        kc = self.kubeconfig_path("scheduler")
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kc), "qps": 500, "burst": 1000},
            "leaderElection": {"leaderElect": False},
            # the default profile: DynamicResources is in it (DRA is GA in 1.34)
            "profiles": [{"schedulerName": "default-scheduler"}],
            "extenders": extenders,
        }
        path = self.run / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        started = time.monotonic()
        self.procs["kube-scheduler"] = spawn("kube-scheduler", [
            str(self.binaries["kube-scheduler"]), f"--config={path}", "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['scheduler']}", f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}", "--v=1"], self.logs)
        self._wait_healthz("kube-scheduler", self.ports["scheduler"])
        self.timings["kube-scheduler"] = round(time.monotonic() - started, 2)

    def restart_scheduler(self, extenders: list[Obj]) -> None:
        proc = self.procs.pop("kube-scheduler", None)
        if proc is not None:
            stop_procs([proc])
        self.start_scheduler(extenders)

    def _wait_healthz(self, name: str, port: int) -> None:
        self._wait(name, lambda: _healthz(port))

    def _wait(self, name: str, check: Any) -> None:
        proc = self.procs[name]

        def alive_and_ready() -> bool:
            if not proc.alive():
                raise PlaneError(f"{name} exited while starting (log {proc.log}):\n{tail(proc.log)}")
            return bool(check())

        try:
            wait_for(name, alive_and_ready, timeout=START_TIMEOUT)
        except TimeoutError as exc:
            raise PlaneError(f"{exc} (log {proc.log}):\n{tail(proc.log)}") from None

    # ---- stop / record -------------------------------------------------------------------------------------
    def stop(self) -> None:
        order = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]
        procs = [self.procs.pop(n) for n in [*[n for n in self.procs if n not in order], *order] if n in self.procs]
        stop_procs(procs)

    def state(self) -> Obj:
        return {"run": str(self.run), "server": self.server, "ports": self.ports,
                "procs": {n: {"pid": p.pid, "log": str(p.log), "argv": p.argv} for n, p in self.procs.items()}}

    def save_state(self, extra: Obj | None = None) -> None:
        (self.run / "state.json").write_bytes(orjson.dumps({**self.state(), **(extra or {})},
                                                           option=orjson.OPT_INDENT_2))
