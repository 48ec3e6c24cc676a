"""`python -m e2e.bench extender [--quick]`: /prioritize latency of the extender as kube-scheduler calls it.

Fleet: 5,000 nodes x 8 H100-like GPUs (PCIe roots in pairs) with 20,000 allocated claims (the generator of the
cache benchmark), plus gpuclaim-managed ResourceClaimTemplates for three pod shapes (1 GPU; 2 and 4 GPUs as the
webhook writes them: firstAvailable, tight pcieRoot subrequest first). The API double serves it over TLS as
its own process; ``gpuclaim extender --kubeconfig`` runs as another process, exactly as deployed (plain HTTP
on loopback), and is driven over HTTP with ExtenderArgs in the nodeCacheCapable form.

Figures: ``p99_ms_500_nodes`` (500 random candidate names per call, what kube-scheduler sends at 5,000 nodes),
``p99_ms_all_nodes`` (all 5,000), ``p99_ms_no_claims`` (a pod without claims, 500 names), each measured after
one warm-up call per shape over all nodes (the steady state: pods of one shape share cached per-node verdicts;
an event re-predicts only the nodes it touches); ``cold_ms_all_nodes`` is that first call per shape, which
builds every node's state. ``rss_mb`` is the extender process's RSS after those calls.

Then ``hostile``: issue 22's floods against the same process while ordinary calls and probes go on (64 pod
shapes over every node, 250,000 unknown names in one body, 50 clients of 50,000 names, 50 clients at
``extender.maxNodes``), with the RSS peak and the p99s of each phase (``e2e/bench/extender_hostile.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from e2e.bench import cache as cache_bench
from e2e.bench import extender_hostile
from e2e.bench.procs import rss_mb, serving_double, serving_extender

SHAPES: dict[str, dict[str, Any]] = {
    "one": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]},
}
for _n in (2, 4):
    SHAPES[f"tight{_n}"] = {
        "requests": [{"name": "gpu", "firstAvailable": [
            {"name": "tight", "deviceClassName": "gpu.nvidia.com", "count": _n},
            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": _n}]}],
        "constraints": [{"requests": ["gpu/tight"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    }  # fmt: skip


def _templates() -> list[dict[str, Any]]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": f"gpuclaim-{name}", "namespace": "team-00",
                          "labels": {"app.kubernetes.io/managed-by": "gpuclaim"}},
             "spec": {"spec": {"devices": devices}}} for name, devices in SHAPES.items()]


def _pod(i: int, shape: str | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": f"bench-{i}", "namespace": "team-00", "uid": f"bench-uid-{i}"},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    if shape is not None:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"gpuclaim-{shape}"}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return pod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _buckets(text: str) -> dict[float, float]:
    """Cumulative counts of the prioritize latency histogram from a /metrics page."""
    out = {}
    for line in text.splitlines():
        if line.startswith("gpuclaim_extender_request_duration_seconds_bucket") and 'verb="prioritize"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def _server_p99_ms(before: dict[float, float], after: dict[float, float]) -> float:
    """The upper bound of the histogram bucket holding the 99th percentile of the calls in between."""
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts[float("inf")]
    for le, count in counts.items():
        if count >= 0.99 * total:
            return le * 1000
    return float("inf")


async def _drive(base: str, metrics: str, nodes: list[str], *, calls: int, all_calls: int) -> dict[str, Any]:
    rng = random.Random(7)
    shapes = list(SHAPES)
    started = time.monotonic()
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + 900
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{base}/readyz") as resp:
                    if resp.status == 200:
                        break
            if time.monotonic() > deadline:
                raise RuntimeError("extender not ready after 900 s")
            await asyncio.sleep(0.5)

        host, port = base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))

        async def call(pod: dict[str, Any], names: list[str]) -> float:
            # a bare keep-alive HTTP/1.1 exchange, like Go's client: aiohttp's client alone costs ~1 ms a call
            body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
            head = (f"POST /prioritize HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            start = time.perf_counter()
            writer.write(head + body)
            status_line, _, headers = (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            payload = await reader.readexactly(length)
            elapsed = (time.perf_counter() - start) * 1000
            if b" 200 " not in status_line or len(orjson.loads(payload)) != len(names):
                raise RuntimeError(f"bad answer {status_line!r}: {payload[:200]!r}")
            return elapsed

        ready_s = round(time.monotonic() - started, 1)

        async def histogram() -> dict[float, float]:
            async with session.get(metrics) as resp:
                return _buckets(await resp.text())

        cold = {}
        for k, shape in enumerate(shapes):
            cold[shape] = round(await call(_pod(k, shape), nodes), 1)
            print(f"cold call, shape {shape}, {len(nodes)} nodes: {cold[shape]} ms", file=sys.stderr)
        before = await histogram()
        no_claims = [await call(_pod(i, None), rng.sample(nodes, min(500, len(nodes)))) for i in range(calls)]
        server_no_claims = _server_p99_ms(before, await histogram())
        some = [await call(_pod(i, shapes[i % len(shapes)]), rng.sample(nodes, min(500, len(nodes))))
                for i in range(calls)]
        every = [await call(_pod(i, shapes[i % len(shapes)]), nodes) for i in range(all_calls)]
        writer.close()
        await writer.wait_closed()
    return {
        "p99_ms_500_nodes": round(_p99(some), 2), "median_ms_500_nodes": round(statistics.median(some), 2),
        "p99_ms_all_nodes": round(_p99(every), 2), "median_ms_all_nodes": round(statistics.median(every), 2),
        "p99_ms_no_claims": round(_p99(no_claims), 3), "median_ms_no_claims": round(statistics.median(no_claims), 3),
        "server_p99_ms_no_claims_at_most": server_no_claims, "ready_s": ready_s,
        "slowest_ms_no_claims": [round(x, 2) for x in sorted(no_claims)[-4:]],
        "cold_ms_all_nodes": cold, "calls": {"500_nodes": calls, "all_nodes": all_calls, "no_claims": calls},
    }  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    nodes, claims = (500, 2000) if args.quick else (5000, 20000)
    with tempfile.TemporaryDirectory(prefix="gpuclaim-bench-extender-") as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        data.mkdir()
        print(f"generating {nodes} nodes / {nodes * 8} GPUs / {claims} allocated claims", file=sys.stderr)
        cache_bench.generate(data, nodes=nodes, claims=claims)
        flood_shapes = [extender_hostile.shape_template(i) for i in range(64)]
        (data / "05-templates.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List",
                                                               "items": _templates() + flood_shapes}))
        names = [f"gpu-node-{i:05d}.cluster.internal" for i in range(nodes)]
        with serving_double(data, work) as kubeconfig:
            port, metrics_port = _free_port(), _free_port()
            with serving_extender(kubeconfig, "--listen", f"127.0.0.1:{port}",
                                  "--metrics-listen", f"127.0.0.1:{metrics_port}") as extender:
                started = time.perf_counter()
                base = f"http://127.0.0.1:{port}"
                figures = asyncio.run(_drive(base, f"http://127.0.0.1:{metrics_port}/metrics", names,
                                             calls=100 if args.quick else 200, all_calls=20 if args.quick else 50))
                figures["rss_mb"] = round(rss_mb(extender.pid), 1)
                figures["hostile"] = asyncio.run(extender_hostile.run_phases(
                    base, f"http://127.0.0.1:{metrics_port}", extender.pid, names, quick=args.quick,
                    ordinary_shapes=[f"gpuclaim-{shape}" for shape in SHAPES]))
                figures["run_s"] = round(time.perf_counter() - started, 1)
    figures.update({"nodes": nodes, "gpus": nodes * 8, "allocated_claims": claims,
                    "targets": {"p99_ms_500_nodes": 20, "p99_ms_all_nodes": 150, "p99_ms_no_claims": 1}})
    return figures
