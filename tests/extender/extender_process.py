"""`gpuclaim extender` as a real process against the API double, for the tests that call it as kube-scheduler does:
the double seeded with two nodes of GPU pairs and a gpuclaim template, the process on free loopback ports, and the
wait for its /readyz."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from gpuclaim.double.apiserver import RunningDouble

from . import fleet


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(double: RunningDouble, *objects: dict[str, object]) -> None:
    """Nodes `a` and `b` (four GPU pairs each), the GPU classes, `objects`, and the template `two` (two GPUs, tight
    first) labelled as gpuclaim's, so the extender's view takes it for one of the webhook's."""
    for obj in (fleet.pairs_node("a"), fleet.pairs_node("b"), *fleet.gpu_classes(), *objects):
        double.store.restore(obj)
    template = fleet.template("two", fleet.tight_or_any(2))
    template["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuclaim"}
    double.store.restore(template)


@dataclass(frozen=True)
class Extender:
    process: asyncio.subprocess.Process
    port: int
    metrics_port: int

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def metrics(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    async def wait_ready(self, session: aiohttp.ClientSession, url: str) -> None:
        """Poll `url` (a /readyz) through `session` until it answers 200 with the cluster synced."""
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        assert "[+]cluster ok" in await resp.text()
                        return
            assert self.process.returncode is None, "the extender exited"
            assert time.monotonic() < deadline, "not ready in 30 s"
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def running(double: RunningDouble, *, cert: Path, key: Path, args: tuple[str, ...] = ()
                  ) -> AsyncIterator[Extender]:
    """The process, serving TLS with `cert`/`key` and metrics in plain HTTP; on leaving, SIGTERM must be a clean
    shutdown (exit 0)."""
    port, metrics_port = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpuclaim", "extender", "--kubeconfig", str(double.kubeconfig),
        "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics_port}",
        "--tls-cert", str(cert), "--tls-key", str(key), *args,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""})  # fmt: skip
    try:
        yield Extender(process, port, metrics_port)
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 30) == 0
