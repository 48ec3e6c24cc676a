"""The demo's processes on loopback: the API double (with its webhook chain), `gpuclaim certs`, `gpuclaim webhook`
and `gpuclaim extender` over TLS, each a real child process with its log in `<workdir>/logs/`.

    stack = Stack(workdir)
    try:
        stack.start(fleet_objects)      # raises StackError naming the part that did not come up
        ...
    finally:
        stack.stop()                    # SIGTERM, then SIGKILL after a grace period; idempotent

Children run in their own session, so `--keep` can leave them running after the demo exits; `stop()` is what
ends them otherwise (the caller runs it on success, errors, Ctrl-C and SIGTERM alike).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from gpuclaim.demo import inventory, viewers

Obj = dict[str, Any]
SERVICE_NAMESPACE = inventory.SYSTEM_NAMESPACE
WEBHOOK_SERVICE = "gpuclaim-webhook"
EXTENDER_HOST = "gpuclaim-extender.gpuclaim.svc"
START_TIMEOUT = 30.0
STOP_GRACE = 5.0
#: certificates reloaded within a second, so the reliability suite's rotation is seen quickly
DEMO_CONFIG: Obj = {"logging": {"level": "warning", "format": "json"}, "certs": {"reloadIntervalSeconds": 1}}


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive inside the block are delivered, to the handlers in force before it, when it
    ends. Only the main thread can set handlers; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    deferred = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, _frame: pending.append(signum)) for sig in deferred}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


class StackError(Exception):
    """A part did not come up; the message names it, says why, and points at its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


@dataclass
class Stack:
    workdir: Path
    python: str = sys.executable
    procs: dict[str, Proc] = field(default_factory=dict)
    kubeconfig: Path | None = None
    api_url: str = ""
    api_ca: bytes = b""
    tls_dir: Path | None = None
    webhook_port: int = 0
    webhook_metrics_port: int = 0
    extender_port: int = 0
    extender_metrics_port: int = 0
    fleet_port: int = 0  # the extender's fleet listener (gpuclaim/fleet/api.py)
    fleet_tokens: Path | None = None  # the viewers' tokens (demo/viewers.py)
    certs_report: Obj = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # part -> why it is not running
    config: Obj = field(default_factory=lambda: dict(DEMO_CONFIG))  # the gpuclaim config both servers read

    # ---- lifecycle -----------------------------------------------------------------------------------------
    def start(self, objects: list[Obj]) -> None:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.webhook_port, self.webhook_metrics_port = free_port(), free_port()
        self.extender_port, self.extender_metrics_port = free_port(), free_port()
        self.fleet_port = free_port()
        self.config_path = self.workdir / "gpuclaim-config.yaml"
        self.config_path.write_text(yaml.safe_dump(self.config))
        self._timed("apiserver", lambda: self._start_double(objects))
        self._timed("certs", self._issue_certs)
        self._timed("viewers", lambda: setattr(self, "fleet_tokens", viewers.set_up(self.api_post, self.workdir)))
        # both servers start at once (each takes a couple of seconds to import and sync); either may fail alone:
        # the demo then runs without it and says so
        started = time.monotonic()
        procs = {"webhook": self._spawn("webhook", self._server_argv("webhook", self.webhook_port,
                                                                    self.webhook_metrics_port)),
                 "extender": self._spawn("extender", self._server_argv("extender", self.extender_port,
                                                                      self.extender_metrics_port))}
        for name, proc in procs.items():
            try:
                self.wait_ready(proc, self.webhook_port if name == "webhook" else self.extender_port)
            except StackError as exc:
                self.skipped[name] = str(exc)
                self.stop_part(name)
            self.timings[name] = round(time.monotonic() - started, 3)

    def _timed(self, part: str, step: Any) -> None:
        started = time.monotonic()
        step()
        self.timings[part] = round(time.monotonic() - started, 3)

    def stop(self) -> None:
        """SIGTERM every child at once, then wait for each up to the grace period (SIGKILL after it). A second
        Ctrl-C while waiting must not strand the rest (they run in their own sessions): whatever is still
        running then is killed before the interrupt goes on."""
        procs = [self.procs.pop(name) for name in list(self.procs)]
        try:
            for proc in procs:
                if proc.popen.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.popen.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            for proc in procs:
                try:
                    proc.popen.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.popen.kill()
                    proc.popen.wait()
        except BaseException:
            for proc in procs:
                if proc.popen.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.popen.kill()
            raise

    def stop_part(self, name: str, *, sig: int = signal.SIGTERM) -> int | None:
        """End one child (SIGTERM, or `sig`), waiting up to the grace period before SIGKILL; its exit code."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(sig)
            try:
                proc.popen.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        return proc.popen.returncode

    def pids(self) -> dict[str, int]:
        return {name: p.popen.pid for name, p in self.procs.items()}

    # ---- the parts -----------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], *, stdout: Path | None = None) -> Proc:
        log = self.workdir / "logs" / f"{name}.log"
        # Popen returns only once the child has exec'd; a Ctrl-C or SIGTERM raised inside it would leave a child
        # in its own session that stop() never hears of, so the interrupt waits until the child is recorded
        with _interrupts_deferred(), open(log, "ab") as err, open(stdout or log, "ab") as out:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=self.workdir,
                                     start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            proc = self.procs[name] = Proc(name, popen, log)
        return proc

    def _start_double(self, objects: list[Obj]) -> None:
        load = self.workdir / "fleet"
        load.mkdir(exist_ok=True)
        (load / "fleet.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
        first_line = self.workdir / "apiserver.stdout"
        service = f"{SERVICE_NAMESPACE}/{WEBHOOK_SERVICE}:443=127.0.0.1:{self.webhook_port}"
        proc = self._spawn("apiserver", [self.python, "-m", "gpuclaim.double.apiserver", "--load", str(load),
                                         "--webhook-service", service, "--workdir", str(self.workdir / "apiserver")],
                           stdout=first_line)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            lines = first_line.read_text().splitlines() if first_line.exists() else []
            if lines:
                self.kubeconfig = Path(lines[0].strip())
                break
            self._check_alive(proc)
            time.sleep(0.05)
        else:
            raise StackError(f"apiserver: no kubeconfig after {START_TIMEOUT:.0f}s (log: {proc.log})")
        config = yaml.safe_load(self.kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.api_url = cluster["server"]
        self.api_ca = base64.b64decode(cluster["certificate-authority-data"])

    def _issue_certs(self) -> None:
        """`gpuclaim certs` against the double: Secret gpuclaim/gpuclaim-webhook-tls, caBundle injected into the
        chart's two webhook configurations, and the three files the servers read in `<workdir>/tls`."""
        assert self.kubeconfig is not None
        self.tls_dir = self.workdir / "tls"
        argv = [self.python, "-m", "gpuclaim", "certs", "--kubeconfig", str(self.kubeconfig),
                "--namespace", SERVICE_NAMESPACE, "--service", WEBHOOK_SERVICE, "--dns", EXTENDER_HOST,
                "--ip", "127.0.0.1", "--out-dir", str(self.tls_dir), "-o", "json"]
        self.certs_report = self.run_certs(argv)

    def run_certs(self, argv: list[str]) -> Obj:
        done = subprocess.run(argv, capture_output=True, cwd=self.workdir, timeout=START_TIMEOUT, check=False)
        (self.workdir / "logs" / "certs.log").write_bytes(done.stderr)
        if done.returncode != 0:
            raise StackError(f"gpuclaim certs exited {done.returncode}: {done.stderr.decode(errors='replace')[-400:]}")
        return dict(orjson.loads(done.stdout))

    def rotate_certs(self, generation: int) -> Obj:
        """A serving-certificate rotation as a SAN change triggers it: `gpuclaim certs` again with one more DNS
        name, so it issues a new serving certificate (same CA, so the injected caBundle stays valid), updates the
        Secret and rewrites the files the servers reload."""
        assert self.kubeconfig is not None and self.tls_dir is not None
        return self.run_certs([self.python, "-m", "gpuclaim", "certs", "--kubeconfig", str(self.kubeconfig),
                               "--namespace", SERVICE_NAMESPACE, "--service", WEBHOOK_SERVICE, "--dns", EXTENDER_HOST,
                               "--dns", f"rotation-{generation}.{SERVICE_NAMESPACE}.svc", "--ip", "127.0.0.1",
                               "--out-dir", str(self.tls_dir), "-o", "json"])

    def _server_argv(self, command: str, port: int, metrics_port: int) -> list[str]:
        assert self.tls_dir is not None and self.kubeconfig is not None
        argv = [self.python, "-m", "gpuclaim", command, "--config", str(self.config_path),
                "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics_port}",
                "--tls-cert", str(self.tls_dir / "tls.crt"), "--tls-key", str(self.tls_dir / "tls.key"),
                "--kubeconfig", str(self.kubeconfig)]
        if command == "extender":
            argv += ["--fleet-listen", f"127.0.0.1:{self.fleet_port}"]
        return argv

    @property
    def fleet_url(self) -> str:
        return f"https://127.0.0.1:{self.fleet_port}/fleet"

    def api_post(self, path: str, body: Obj) -> Obj:
        """POST to the API double (as the demo's own admin client) and return the answer."""
        context = ssl.create_default_context(cadata=self.api_ca.decode())
        request = urllib.request.Request(self.api_url + path, data=orjson.dumps(body), method="POST",
                                         headers={"Authorization": "Bearer double-token",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=START_TIMEOUT) as reply:
            return dict(orjson.loads(reply.read()))

    def start_webhook(self) -> None:
        proc = self._spawn("webhook", self._server_argv("webhook", self.webhook_port, self.webhook_metrics_port))
        self.wait_ready(proc, self.webhook_port)

    def start_extender(self) -> None:
        proc = self._spawn("extender", self._server_argv("extender", self.extender_port,
                                                         self.extender_metrics_port))
        self.wait_ready(proc, self.extender_port)

    def _check_alive(self, proc: Proc) -> None:
        if proc.popen.poll() is not None:
            self.procs.pop(proc.name, None)
            raise StackError(f"{proc.name} exited with {proc.popen.returncode} while starting: {proc.tail()} "
                             f"(log: {proc.log})")

    def server_ssl(self) -> ssl.SSLContext:
        assert self.tls_dir is not None
        context = ssl.create_default_context(cafile=str(self.tls_dir / "ca.crt"))
        context.check_hostname = False  # the certificate names 127.0.0.1 as an IP SAN; verified by chain
        return context

    def ready(self, port: int) -> tuple[bool, str]:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=self.server_ssl(),
                                        timeout=2) as reply:
                return reply.status == 200, reply.read().decode(errors="replace").strip()
        except urllib.error.HTTPError as exc:
            return False, exc.read().decode(errors="replace").strip()
        except (urllib.error.URLError, OSError) as exc:
            return False, str(exc)

    def wait_ready(self, proc: Proc, port: int, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        why = ""
        while time.monotonic() < deadline:
            self._check_alive(proc)
            ok, why = self.ready(port)
            if ok:
                return
            time.sleep(0.1)
        raise StackError(f"{proc.name}: not ready after {timeout:.0f}s: {why} (log: {proc.log})")

    # ---- what the scheduler double needs -------------------------------------------------------------------
    def extender_entries(self) -> list[Obj]:
        """The chart's extenders[] entry, pointed at the loopback extender and the issued CA."""
        assert self.tls_dir is not None
        entries = []
        for entry in inventory.extender_entries():
            entry = dict(entry)
            entry["urlPrefix"] = f"https://127.0.0.1:{self.extender_port}"
            entry["tlsConfig"] = {**(entry.get("tlsConfig") or {}), "caFile": str(self.tls_dir / "ca.crt")}
            entries.append(entry)
        return entries

    def metrics(self, port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return str(reply.read().decode())
