"""`python -m e2e.bench webhook [--quick]`: the admission server as a real process over TLS, driven as
kube-apiserver drives it (a pool of keep-alive HTTPS connections, the CA pinned).

Processes: the API double (preloaded with the driver DeviceClasses, two real p5 nodes' ResourceSlices and a
namespace), `gpuclaim webhook --kubeconfig` against it, and a minimal aiohttp TLS echo server (the same TLS
and HTTP stack with no work: the ceiling). The load generator runs in this process.

Figures: `mutate_rps` and `validate_rps` (closed loop, `concurrency` requests in flight), `mutate_p50_ms` /
`mutate_p99_ms` (open loop at a fixed 200 requests/s), `echo_rps` (closed loop, same bodies, same
concurrency), `ratio_to_echo` = mutate_rps / echo_rps, the mutate and echo loops alternating in three rounds
(so both see the same load on a shared machine), and each server's CPU time per request. The mutated pod is a
typical 2-container pod asking for one `nvidia.com/gpu` each; its template exists after the warm-up (the steady
state: no API call per pod).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from e2e.bench.procs import cpu_seconds
from gpuclaim.certs import client_context
from gpuclaim.double import tls as selfsigned

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
NAMESPACE = "bench"


def _progress(text: str) -> None:
    print(f"bench webhook: {text}", file=sys.stderr, flush=True)


def pod_review(uid: str, *, dry_run: bool = False) -> bytes:
    containers = [{"name": name, "image": "nvcr.io/nvidia/pytorch:25.01-py3", "command": ["python", "train.py"],
                   "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                   "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"},
                                 "requests": {"cpu": "2", "memory": "8Gi"}}}
                  for name in ("trainer", "evaluator")]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"train-{uid}", "namespace": NAMESPACE, "labels": {"app": "train"}},
           "spec": {"containers": containers, "restartPolicy": "Never"}, "status": {}}
    return orjson.dumps(_review(uid, pod, "Pod", "", "pods", dry_run=dry_run))


def claim_review(uid: str) -> bytes:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"claim-{uid}", "namespace": NAMESPACE},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [{"cel": {"expression": (
                     "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
                     "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")}}]}}]}}}
    return orjson.dumps(_review(uid, claim, "ResourceClaim", "resource.k8s.io", "resourceclaims"))


def _review(uid: str, obj: dict[str, Any], kind: str, group: str, resource: str, *, dry_run: bool = False
            ) -> dict[str, Any]:
    version = "v1"
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
        "uid": uid, "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": obj["metadata"]["name"], "namespace": NAMESPACE, "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller",
                     "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


# ---- the echo server: the same stack doing nothing -------------------------------------------------------------


def echo_main(cert: str, key: str) -> None:
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="application/json")

    async def main() -> None:
        app = web.Application(client_max_size=3 * 1024 * 1024)
        app.router.add_post("/echo", echo)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context, backlog=1024)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        print(f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---- load generation ---------------------------------------------------------------------------------------------


REQUESTS = [0]  # requests completed by closed loops, for the CPU-per-request figures


async def _closed_loop(session: aiohttp.ClientSession, url: str, body: Callable[[int], bytes], *, concurrency: int,
                       seconds: float, check: Callable[[int, bytes], None]) -> float:
    """Requests per second with `concurrency` requests always in flight."""
    deadline = time.perf_counter() + seconds
    done = 0
    counter = iter(range(10**9))

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            async with session.post(url, data=body(next(counter)),
                                    headers={"Content-Type": "application/json"}) as response:
                check(response.status, await response.read())
            done += 1
            REQUESTS[0] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


async def _fixed_rate(session: aiohttp.ClientSession, url: str, body: Callable[[int], bytes], *, rate: float,
                      seconds: float, check: Callable[[int, bytes], None]) -> list[float]:
    """Latencies (s) of requests sent at `rate`/s on schedule (open loop: a slow answer does not delay the next)."""
    latencies: list[float] = []

    async def one(i: int) -> None:
        payload = body(i)
        started = time.perf_counter()
        async with session.post(url, data=payload, headers={"Content-Type": "application/json"}) as response:
            data = await response.read()
        latencies.append(time.perf_counter() - started)
        check(response.status, data)

    tasks = []
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return latencies


async def _measured(pid: int, run: Callable[[], Any], count: Callable[[], int]) -> tuple[Any, float]:
    """Run a phase; return its result and the server's CPU milliseconds per request in it."""
    before, n0 = cpu_seconds(pid), count()
    result = await run()
    return result, (cpu_seconds(pid) - before) * 1000 / max(1, count() - n0)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _expect(kind: str, *, patch: bool | None = None) -> Callable[[int, bytes], None]:
    def check(status: int, data: bytes) -> None:
        if status != 200:
            raise RuntimeError(f"{kind}: HTTP {status}: {data[:300]!r}")
        if kind == "echo":
            return
        response = orjson.loads(data)["response"]
        if patch is not None and ("patch" in response) != patch:
            raise RuntimeError(f"{kind}: unexpected answer {response}")
    return check


# ---- processes ---------------------------------------------------------------------------------------------------


async def _first_line(process: asyncio.subprocess.Process, what: str, within: float = 60.0) -> str:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), within)
    if not line:
        raise RuntimeError(f"{what} exited before it was ready (exit {await process.wait()})")
    return line.decode().strip()


async def _serving_urls(process: asyncio.subprocess.Process, within: float = 60.0) -> tuple[str, str]:
    """The webhook logs `serving` with its URLs (JSON on stderr): (https, metrics); keep draining stderr."""
    assert process.stderr is not None
    stderr = process.stderr
    async with asyncio.timeout(within):
        while line := await stderr.readline():
            if b'"msg":"serving"' in line:
                break
        else:
            raise RuntimeError(f"the webhook exited before serving (exit {await process.wait()})")

    async def drain() -> None:
        while await stderr.readline():
            pass

    process_tasks.add(asyncio.get_running_loop().create_task(drain()))
    urls = orjson.loads(line)["urls"]
    return str(urls[0]), str(urls[1])


process_tasks: set[asyncio.Task[None]] = set()


@contextlib.asynccontextmanager
async def _process(*args: str, stderr: bool = False) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


def _load_dir(directory: Path) -> Path:
    directory.mkdir()
    (directory / "00-namespace.yaml").write_text(f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n")
    shutil.copy(FIXTURES / "deviceclasses" / "ALL-rendered-resource.k8s.io-v1.yaml", directory / "10-classes.yaml")
    shutil.copy(FIXTURES / "resourceslices" / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml",
                directory / "20-slices.yaml")
    return directory


@contextlib.asynccontextmanager
async def webhook_on_double(tmp: Path, tls: selfsigned.TlsFiles
                            ) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, str]]:
    """The API double (loaded as `_load_dir` writes, state under `tmp`) and `gpuclaim webhook --kubeconfig` against
    it over TLS, each its own process, both serving; yields the webhook's process and its (https, metrics) URLs."""
    python = sys.executable
    async with _process(python, "-m", "gpuclaim.double.apiserver", "--load", str(_load_dir(tmp / "load")),
                        "--workdir", str(tmp / "double"), "--no-validate") as double:
        kubeconfig = await _first_line(double, "the API double")
        async with _process(python, "-m", "gpuclaim", "webhook", "--kubeconfig", kubeconfig,
                            "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                            "--tls-cert", str(tls.cert_path), "--tls-key", str(tls.key_path),
                            stderr=True) as webhook:
            url, metrics_url = await _serving_urls(webhook)
            yield webhook, url, metrics_url


async def _bench(quick: bool) -> dict[str, Any]:
    seconds = 3.0 if quick else 10.0
    concurrency = 16
    with tempfile.TemporaryDirectory(prefix="gpuclaim-bench-webhook-") as tmp_name:
        tmp = Path(tmp_name)
        tls = selfsigned.issue(tmp / "tls", hosts=("127.0.0.1",))
        async with (
            _process(sys.executable, "-m", "e2e.bench.webhook", "echo", str(tls.cert_path), str(tls.key_path)
                     ) as echo,
            webhook_on_double(tmp, tls) as (webhook, url, metrics_url),
        ):
            echo_url = await _first_line(echo, "the echo server")
            return await _drive(url, echo_url, tls.ca_pem, seconds=seconds, concurrency=concurrency,
                                pids=(webhook.pid, echo.pid), metrics_url=metrics_url)


async def _interleaved(pids: tuple[int, int], phases: tuple[Callable[[], Any], Callable[[], Any]], rounds: int
                       ) -> tuple[tuple[float, float], tuple[float, float], list[float]]:
    """Alternate the two closed loops (mutate, echo) `rounds` times: the machine's load changes by the second,
    and a ratio of two phases run a minute apart measures the load as much as the servers. Returns, per phase,
    (requests per second over all its rounds, server CPU ms per request), and the per-round ratios."""
    seconds = [0.0, 0.0]
    requests = [0, 0]
    cpu = [0.0, 0.0]
    ratios: list[float] = []
    for _ in range(rounds):
        rates = []
        for i, phase in enumerate(phases):
            before_cpu, before_n, started = cpu_seconds(pids[i]), REQUESTS[0], time.perf_counter()
            await phase()
            seconds[i] += time.perf_counter() - started
            requests[i] += REQUESTS[0] - before_n
            cpu[i] += cpu_seconds(pids[i]) - before_cpu
            rates.append((REQUESTS[0] - before_n) / (time.perf_counter() - started))
        ratios.append(rates[0] / rates[1])
    result = tuple((requests[i] / seconds[i], cpu[i] * 1000 / max(1, requests[i])) for i in range(2))
    return result[0], result[1], ratios


_BUCKET = re.compile(rb'^gpuclaim_webhook_admission_duration_seconds_bucket\{endpoint="mutate",le="([^"]+)"\} (\S+)$',
                     re.MULTILINE)


async def _mutate_histogram(session: aiohttp.ClientSession, metrics_url: str) -> dict[float, float]:
    """The webhook's own duration histogram for /mutate: cumulative count per upper bound (seconds)."""
    async with session.get(metrics_url + "/metrics") as response:
        text = await response.read()
    return {float(le): float(count) for le, count in _BUCKET.findall(text)}


def _server_p99_ms(before: dict[float, float], after: dict[float, float]) -> float:
    """The bucket bound under which 99 % of the requests between two scrapes were answered, as the server
    measured them (body read to response written): the latency the machine's scheduling did not add."""
    bounds = sorted(after)
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    for bound in bounds:
        if after[bound] - before.get(bound, 0.0) >= 0.99 * total:
            return bound * 1000
    return float("inf")


async def _drive(url: str, echo_url: str, ca_pem: bytes, *, seconds: float, concurrency: int,
                 pids: tuple[int, int], metrics_url: str) -> dict[str, Any]:
    context = client_context(ca_pem=ca_pem)
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency, keepalive_timeout=60)
    rounds = 3
    async with aiohttp.ClientSession(connector=connector) as session:
        await _wait_ready(session, url)
        _progress("server ready; warm-up (creates the template once)")
        await _closed_loop(session, url + "/mutate", lambda i: pod_review(f"warm-{i}"), concurrency=4,
                           seconds=1.0, check=_expect("mutate", patch=True))
        await _closed_loop(session, echo_url + "/echo", lambda i: pod_review(f"warm-{i}"), concurrency=concurrency,
                           seconds=0.5, check=_expect("echo"))
        mutate_body: Callable[[int], bytes] = lambda i: pod_review(f"m-{i}")  # noqa: E731
        _progress(f"mutate and echo closed loops, {concurrency} in flight, {rounds} alternating rounds of "
                  f"{seconds / rounds:g}s each")
        load_before = os.getloadavg()[0]
        (mutate_rps, mutate_cpu), (echo_rps, echo_cpu), ratios = await _interleaved(pids, (
            lambda: _closed_loop(session, url + "/mutate", mutate_body, concurrency=concurrency,
                                 seconds=seconds / rounds, check=_expect("mutate", patch=True)),
            lambda: _closed_loop(session, echo_url + "/echo", mutate_body, concurrency=concurrency,
                                 seconds=seconds / rounds, check=_expect("echo"))), rounds)
        _progress("mutate at a fixed 200/s")
        histogram = await _mutate_histogram(session, metrics_url)
        latencies = await _fixed_rate(session, url + "/mutate", mutate_body, rate=200, seconds=seconds,
                                      check=_expect("mutate", patch=True))
        server_p99 = _server_p99_ms(histogram, await _mutate_histogram(session, metrics_url))
        _progress("validate closed loop")
        validate_rps, validate_cpu = await _measured(pids[0], lambda: _closed_loop(
            session, url + "/validate", lambda i: claim_review(f"v-{i}"), concurrency=concurrency,
            seconds=seconds, check=_expect("validate")), lambda: REQUESTS[0])
    return {
        "mutate_rps": round(mutate_rps, 1),
        "mutate_p50_ms": round(_percentile(latencies, 0.50) * 1000, 3),
        "mutate_p99_ms": round(_percentile(latencies, 0.99) * 1000, 3),
        # the same requests by the server's own histogram: an upper bucket bound, transport and scheduling excluded
        "mutate_server_p99_ms_at_most": server_p99,
        "validate_rps": round(validate_rps, 1),
        "echo_rps": round(echo_rps, 1),
        "ratio_to_echo": round(mutate_rps / echo_rps, 3),
        "ratio_to_echo_per_round": [round(r, 3) for r in ratios],
        # server CPU per request: what a dedicated core would sustain, whatever else the machine runs
        "mutate_cpu_ms": round(mutate_cpu, 3),
        "validate_cpu_ms": round(validate_cpu, 3),
        "echo_cpu_ms": round(echo_cpu, 3),
        "cpu_ratio_to_echo": round(echo_cpu / mutate_cpu, 3) if mutate_cpu else None,
        "inputs": {"seconds_per_phase": seconds, "rounds": rounds, "concurrency": concurrency,
                   "fixed_rate_per_s": 200, "latency_samples": len(latencies),
                   "mutate_body_bytes": len(pod_review("m-0")), "validate_body_bytes": len(claim_review("v-0")),
                   "load_average_1m": round(load_before, 2), "cpus": os.cpu_count(),
                   "note": "load generator, webhook, echo server and API double share this machine's CPUs"},
    }


async def _wait_ready(session: aiohttp.ClientSession, url: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    last = ""
    while time.monotonic() < deadline:
        try:
            async with session.get(url + "/readyz") as response:
                last = await response.text()
                if response.status == 200:
                    return
        except aiohttp.ClientError as exc:
            last = str(exc)
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the webhook did not become ready within {within:g}s: {last}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(_bench(bool(args.quick)))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "echo":
        echo_main(sys.argv[2], sys.argv[3])
