"""`gpuclaim webhook` and `gpuclaim extender` as real processes on loopback, TLS from a throwaway CA."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from gpuclaim.double import tls as selfsigned

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    command: str
    port: int
    proc: asyncio.subprocess.Process
    log: Path
    metrics_port: int = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def start(command: str, *, tls: selfsigned.TlsFiles, kubeconfig: Path, workdir: Path,
                ready_within: float = 40.0, args: tuple[str, ...] = ()) -> Server:
    """Run `gpuclaim <command> [args]` and wait until its /readyz answers 200 over TLS verified against our CA."""
    port, metrics_port = free_port(), free_port()
    log = workdir / f"{command}.log"
    handle = log.open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpuclaim", command, "--listen", f"127.0.0.1:{port}", "--tls-cert", str(tls.cert_path),
        "--tls-key", str(tls.key_path), "--metrics-listen", f"127.0.0.1:{metrics_port}",
        "--kubeconfig", str(kubeconfig), *args, cwd=REPO, stdout=handle, stderr=handle,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    handle.close()
    server = Server(command, port, proc, log, metrics_port)
    context = ssl.create_default_context(cadata=tls.ca_pem.decode())
    deadline = asyncio.get_running_loop().time() + ready_within
    async with aiohttp.ClientSession() as session:
        while True:
            if proc.returncode is not None:
                raise RuntimeError(f"gpuclaim {command} exited {proc.returncode}: {log.read_text()[-2000:]}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(f"{server.url}/readyz", ssl=context) as reply:
                    if reply.status == 200:
                        return server
            if asyncio.get_running_loop().time() > deadline:
                await server.stop()
                raise RuntimeError(f"gpuclaim {command} not ready in {ready_within}s: {log.read_text()[-2000:]}")
            await asyncio.sleep(0.2)
