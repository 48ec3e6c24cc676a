"""The extender under issue 22's floods, while kube-scheduler's ordinary calls and the probes go on.

Run by `python -m e2e.bench extender` after its latency figures, against the same extender process and fleet.
Phases, each sent by an attacker process (this module run as `python -m e2e.bench.extender_hostile attack ...`)
so that building and sending the floods does not slow the measuring client:

- `shapes`: distinct claim shapes (64; 16 with --quick), each prioritized once over every node, one after the
  other: the verdict cache at its largest (64 shapes over 5,000 nodes took the extender from 289 to 1,685 MB);
- `names_250k`: one /prioritize of 250,000 unknown node names (6 MB; 50,000 with --quick);
- `clients_50x50k`: 50 clients at once, each one /prioritize of 50,000 unknown names (10 x 10,000 with --quick);
- `clients_50_at_bound`: 50 clients at once, each naming `extender.maxNodes` candidates (every node, then unknown
  names), the most a request may ask for.

Meanwhile this process sends an ordinary /prioritize (500 random nodes, a cached shape) every 50 ms and /healthz
on the serving port and on the metrics port every 50 ms each, and samples the extender's RSS every 50 ms. Figures
per phase: `rss_peak_mb`, `rss_after_mb`, `healthz_p99_ms`, `metrics_healthz_p99_ms`, `ordinary_p99_ms`, the
attacker's answers, and the CPU time the extender's threads used (`loop_cpu_ms`: the event loop's thread, the one
every probe and call waits for; `other_threads_cpu_ms`: the big-body worker and the rest), which the machine's
load changes far less than it changes the p99s; overall: the same p99s over all phases and `rss_peak_mb`.
Targets (issue 22): RSS under the chart's extender limit (1 GiB), /healthz p99 <= 50 ms, ordinary p99 <= 20 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from e2e.bench import procs
from gpuclaim.dra.config import ExtenderConfig

NAMESPACE = "team-00"
MAX_NODES = ExtenderConfig().max_nodes  # the default the extender runs with here
_TARGETS = {"rss_peak_mb": 1024, "healthz_p99_ms": 50, "ordinary_p99_ms": 20}


def shape_template(i: int) -> dict[str, Any]:
    """A gpuclaim-managed template of its own shape: 1-4 GPUs, with a selector no other shape has."""
    expression = f"device.attributes['gpu.nvidia.com'].productName != 'flood-{i}'"
    devices = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1 + i % 4,
                                                        "selectors": [{"cel": {"expression": expression}}]}}]}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"gpuclaim-flood-{i}", "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "gpuclaim"}},
            "spec": {"spec": {"devices": devices}}}  # fmt: skip


def pod(name: str, template: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}  # fmt: skip


def _args(pod_doc: dict[str, Any], names: list[str]) -> bytes:
    return orjson.dumps({"Pod": pod_doc, "Nodes": None, "NodeNames": names})


class Connection:
    """One keep-alive HTTP/1.1 connection, exchanged on by hand like Go's client (aiohttp's costs ~1 ms a call)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port, limit=2**24)
        reader, writer = self._streams
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        writer.write(head + body)
        status_line, _, headers = (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))  # fmt: skip
        return int(status_line.split()[1]), await reader.readexactly(length)

    async def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            with contextlib.suppress(ConnectionError):
                await self._streams[1].wait_closed()


def thread_cpu_ms(pid: int) -> tuple[float, float]:
    """CPU time (user + system) of process `pid`'s main thread, which runs the event loop, and of its other threads
    together, from /proc (clock ticks: 10 ms steps)."""
    main, others = 0.0, 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            spent = procs.cpu_seconds(pid, int(task.name)) * 1000
            if task.name == str(pid):
                main = spent
            else:
                others += spent
    return main, others


def _split(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


# ---- the attacker process ---------------------------------------------------------------------------------------


def _phases(quick: bool, nodes: list[str]) -> dict[str, list[list[bytes]]]:
    """Per phase: the bodies each client sends, in order."""
    shapes = 16 if quick else 64
    names, clients, per_client = (50_000, 10, 10_000) if quick else (250_000, 50, 50_000)
    at_bound = nodes + [f"unknown-{i:06d}.cluster.internal" for i in range(MAX_NODES - len(nodes))]

    def unknown(count: int, tag: str) -> list[str]:
        return [f"{tag}-{i:06d}.unknown.internal" for i in range(count)]

    return {
        "shapes": [[_args(pod(f"shape-{i}", f"gpuclaim-flood-{i}"), nodes) for i in range(shapes)]],
        "names_250k": [[_args(pod("many-names", "gpuclaim-flood-0"), unknown(names, "one"))]],
        "clients_50x50k": [[_args(pod(f"client-{c}", "gpuclaim-flood-0"), unknown(per_client, f"c{c}"))]
                           for c in range(clients)],
        "clients_50_at_bound": [[_args(pod(f"bound-{c}", "gpuclaim-flood-1"), at_bound)] for c in range(clients)],
    }  # fmt: skip


async def _attack(base: str, nodes_count: int, quick: bool) -> None:
    host, port = _split(base)
    nodes = [f"gpu-node-{i:05d}.cluster.internal" for i in range(nodes_count)]
    for phase, clients in _phases(quick, nodes).items():
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # the measuring side is ready
        answers: dict[str, int] = {}

        async def client(bodies: list[bytes], answers: dict[str, int]) -> None:
            connection = Connection(host, port)
            try:
                for body in bodies:
                    status, payload = await connection.request("POST", "/prioritize", body)
                    key = f"{status}/{'[]' if payload == b'[]' else 'scores'}"
                    answers[key] = answers.get(key, 0) + 1
            finally:
                await connection.close()

        started = time.perf_counter()
        await asyncio.gather(*(client(bodies, answers) for bodies in clients))
        line = {"phase": phase, "seconds": round(time.perf_counter() - started, 2), "answers": answers,
                "requests": sum(len(b) for b in clients), "body_mb": round(max(len(b[0]) for b in clients) / 1e6, 2)}
        sys.stdout.write(orjson.dumps(line).decode() + "\n")
        sys.stdout.flush()


# ---- the measuring side -----------------------------------------------------------------------------------------

Samples = list[tuple[float, float]]  # (when the request started, seconds it took)


async def _every(period: float, stop: asyncio.Event, call: Callable[[], Awaitable[None]], errors: list[str]) -> None:
    next_at = time.perf_counter()
    while not stop.is_set():
        try:
            await call()
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:  # a lost call is a failure, not a crash
            errors.append(f"{type(exc).__name__}: {exc}")
        # behind schedule after a stall: go on from now, not with a burst of quick calls that would dilute the p99
        next_at = max(next_at + period, time.perf_counter())
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


def _p99_ms(samples: Samples, t0: float, t1: float) -> float:
    durations = sorted(d for t, d in samples if t0 <= t < t1)
    if not durations:
        return float("nan")
    return round(durations[min(len(durations) - 1, int(0.99 * len(durations)))] * 1000, 2)


async def run_phases(base: str, metrics_base: str, pid: int, nodes: list[str], *, quick: bool,
                     ordinary_shapes: list[str]) -> dict[str, Any]:
    """The phases against a ready extender at `base` (its metrics site at `metrics_base`), process `pid`."""
    rng = random.Random(22)
    ordinary: Samples = []
    healthz: Samples = []
    metrics_healthz: Samples = []
    rss: list[tuple[float, float]] = []
    errors: list[str] = []
    stop = asyncio.Event()
    main, probe, metrics_probe = Connection(*_split(base)), Connection(*_split(base)), Connection(*_split(metrics_base))
    count = [0]

    async def ordinary_call() -> None:
        count[0] += 1
        body = _args(pod(f"ordinary-{count[0]}", ordinary_shapes[count[0] % len(ordinary_shapes)]),
                     rng.sample(nodes, min(500, len(nodes))))
        started = time.perf_counter()
        status, payload = await main.request("POST", "/prioritize", body)
        ordinary.append((started, time.perf_counter() - started))
        if status != 200 or payload == b"[]":
            errors.append(f"ordinary: {status} {payload[:100]!r}")

    def prober(connection: Connection, samples: Samples) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            started = time.perf_counter()
            status, _ = await connection.request("GET", "/healthz")
            samples.append((started, time.perf_counter() - started))
            if status != 200:
                errors.append(f"healthz {status}")
        return call

    async def sample_rss() -> None:
        rss.append((time.perf_counter(), procs.rss_mb(pid)))

    load = [asyncio.create_task(_every(0.05, stop, call, errors)) for call in (
        ordinary_call, prober(probe, healthz), prober(metrics_probe, metrics_healthz), sample_rss)]
    phases: dict[str, Any] = {}
    try:
        async with procs.attacker("e2e.bench.extender_hostile", base, str(len(nodes)), str(int(quick))) as process:
            assert process.stdin is not None and process.stdout is not None
            await asyncio.sleep(2.0)  # the baseline
            marks = [time.perf_counter()]
            cpu = [thread_cpu_ms(pid)]
            while True:
                process.stdin.write(b"go\n")
                with contextlib.suppress(ConnectionError):
                    await process.stdin.drain()
                line = await process.stdout.readline()
                if not line:
                    break
                doc = orjson.loads(line)
                await asyncio.sleep(1.0)  # what the phase left behind
                marks.append(time.perf_counter())
                cpu.append(thread_cpu_ms(pid))
                t0, t1 = marks[-2], marks[-1]
                window = [m for t, m in rss if t0 <= t < t1]
                phases[doc.pop("phase")] = {
                    **doc, "rss_peak_mb": round(max(window), 1), "rss_after_mb": round(window[-1], 1),
                    "healthz_p99_ms": _p99_ms(healthz, t0, t1),
                    "metrics_healthz_p99_ms": _p99_ms(metrics_healthz, t0, t1),
                    "ordinary_p99_ms": _p99_ms(ordinary, t0, t1),
                    "ordinary_calls": sum(1 for t, _ in ordinary if t0 <= t < t1),
                    "loop_cpu_ms": round(cpu[-1][0] - cpu[-2][0]),
                    "other_threads_cpu_ms": round(cpu[-1][1] - cpu[-2][1])}  # fmt: skip
                # the window in perf_counter seconds (CLOCK_MONOTONIC, the same clock in every process of the machine)
                print(f"extender hostile phase: {list(phases)[-1]} [{t0:.3f}, {t1:.3f}]: {phases[list(phases)[-1]]}",
                      file=sys.stderr)
    finally:
        stop.set()
        await asyncio.gather(*load, return_exceptions=True)
        for connection in (main, probe, metrics_probe):
            await connection.close()
    first, last = marks[0], marks[-1]
    return {
        "phases": phases,
        "baseline": {"healthz_p99_ms": _p99_ms(healthz, 0, first), "ordinary_p99_ms": _p99_ms(ordinary, 0, first)},
        "healthz_p99_ms": _p99_ms(healthz, first, last), "ordinary_p99_ms": _p99_ms(ordinary, first, last),
        "metrics_healthz_p99_ms": _p99_ms(metrics_healthz, first, last),
        "rss_peak_mb": round(max(m for _, m in rss), 1), "failures": errors[:10], "failure_count": len(errors),
        "targets": _TARGETS,
    }  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "attack":
        asyncio.run(_attack(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"))
