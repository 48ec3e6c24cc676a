"""What the benchmarks share about processes: the API double serving a generated fleet, the extender against it,
the hostile benches' attacker, RSS and CPU time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path


@contextlib.contextmanager
def serving_double(data: Path, work: Path) -> Iterator[str]:
    """`python -m e2e.apiserver` loaded with the manifests in `data`, as its own process; yields its kubeconfig path.

    It loads with --no-validate: schema checks of tens of thousands of generated objects take minutes
    (tests/kube/test_bench_inventory.py validates the generator's objects instead)."""
    server = subprocess.Popen([sys.executable, "-m", "gpuclaim.double.apiserver", "--listen", "127.0.0.1:0",
                               "--load", str(data), "--workdir", str(work), "--no-validate"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        kubeconfig = server.stdout.readline().strip()
        if not kubeconfig:
            raise RuntimeError(f"the API double exited with {server.wait()} before serving")
        yield kubeconfig
    finally:
        _stop(server)


@contextlib.contextmanager
def serving_extender(kubeconfig: str, *listen: str) -> Iterator[subprocess.Popen[str]]:
    """`gpuclaim extender --kubeconfig` against the API double, as its own process, with the `--*-listen` flags in
    `listen`; yields the process (the caller waits for its ports). Not in a cluster: KUBERNETES_SERVICE_HOST is
    blanked, so the kubeconfig is what it reads."""
    extender = subprocess.Popen([sys.executable, "-m", "gpuclaim", "extender", "--kubeconfig", kubeconfig, *listen],
                                env={**os.environ, "KUBERNETES_SERVICE_HOST": ""}, text=True)
    try:
        yield extender
    finally:
        _stop(extender)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM, then up to 30 s for the process to finish its shutdown (both servers' grace period is 25 s)."""
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)


@contextlib.asynccontextmanager
async def attacker(module: str, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m MODULE attack ARGS...`: the side that builds and sends a hostile bench's floods, as its own process
    so that doing so does not slow the measuring one; stdin and stdout piped for the phases' line protocol, stderr
    the bench's. Terminated on leaving."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", module, "attack", *args,
                                                   stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


def cpu_seconds(pid: int | str = "self", thread: int | None = None) -> float:
    """User + system CPU time a process (or one of its threads) used so far, from /proc/<pid>[/task/<tid>]/stat
    (clock ticks: 10 ms steps): a per-request or per-pod cost independent of how busy the machine is."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15 of stat(5)


def rss_mb(pid: int | str = "self", field: str = "VmRSS") -> float:
    """A /proc/<pid>/status memory figure in MB (VmRSS now, VmHWM the peak); NaN where the kernel has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")
