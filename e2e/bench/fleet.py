"""`python -m e2e.bench fleet [--quick]`: the fleet view at 5,000 nodes x 8 GPUs (issue 26).

The fleet of the extender benchmark (5,000 nodes x 8 H100-like GPUs in PCIe-root pairs, 20,000 allocated claims,
`e2e/bench/cache.py`'s generator), served by the API double as its own process; ``gpuclaim extender`` runs as
another process with its fleet port on, exactly as deployed. Figures:

- ``snapshot``: in this process, from the same objects: ``build_ms`` (a whole FleetIndex from nothing),
  ``assemble_ms`` (one /api/v1/fleet body from the built index: what each request costs), ``update_ms`` (one
  node's claim changes, then the next body), and ``bytes``.
- ``api``: GET /api/v1/fleet on the extender's fleet port over HTTP, ``p50_ms``/``p99_ms`` of the whole fleet
  and ``p99_ms_unchanged`` (``?since=<revision>``, answered 304).
- ``page``: /fleet in headless Chromium (e2e.browser): ``render_ms`` from navigation start to the last cell
  drawn (fleet.js's ``fleet-drawn-<revision>`` mark), ``cells``, and the browser's console errors.
- ``prioritize``: the extender's /prioritize p99 over 500 random candidate nodes, ``p99_ms_without_page`` and
  ``p99_ms_with_page`` (the same calls while the page is open and polls every 2 s), with ``page_polls``.

Progress goes to stderr; one JSON object to stdout (e2e/bench/__main__.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from e2e.bench import cache as cache_bench
from e2e.bench import extender as extender_bench
from e2e.bench.procs import rss_mb, serving_double, serving_extender
from gpuclaim.demo import viewers
from gpuclaim.dra.config import Config
from gpuclaim.fleet import model
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.client import KubeClient


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2)


class Prioritize:
    """/prioritize over one keep-alive HTTP/1.1 connection, as kube-scheduler's Go client calls it."""

    def __init__(self, base: str) -> None:
        self.host, port = base.removeprefix("http://").split(":")
        self.port = int(port)

    async def __aenter__(self) -> Prioritize:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    async def call(self, pod: dict[str, Any], names: list[str]) -> float:
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
        head = (f"POST /prioritize HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        start = time.perf_counter()
        self.writer.write(head + body)
        status_line, _, headers = (await self.reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        payload = await self.reader.readexactly(length)
        elapsed = (time.perf_counter() - start) * 1000
        if b" 200 " not in status_line or len(orjson.loads(payload)) != len(names):
            raise RuntimeError(f"bad /prioritize answer {status_line!r}: {payload[:200]!r}")
        return elapsed


async def prioritize_p99(base: str, nodes: list[str], *, seconds: float, seed: int) -> dict[str, Any]:
    """Calls over 500 random candidates for ``seconds`` (long enough to span several of the page's polls), the pod
    shapes of the extender benchmark in turn, 20 ms apart (kube-scheduler's pace for a stream of pods)."""
    rng = random.Random(seed)
    shapes = list(extender_bench.SHAPES)
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    async with Prioritize(base) as client:
        while time.monotonic() < deadline:
            i = len(samples)
            samples.append(await client.call(extender_bench._pod(i, shapes[i % len(shapes)]),
                                             rng.sample(nodes, min(500, len(nodes)))))
            await asyncio.sleep(0.02)
    return {"p99_ms": _p99(samples), "median_ms": round(statistics.median(samples), 2), "calls": len(samples)}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _objects(data: Path) -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(data.glob("*.json")):
        for item in orjson.loads(path.read_bytes())["items"]:
            by_kind.setdefault(item["kind"], []).append(item)
    return by_kind


def snapshot_figures(data: Path, *, repeats: int) -> dict[str, Any]:
    """FleetIndex in this process, fed the generated objects as cache events."""
    objects = _objects(data)
    index = model.FleetIndex(Config())
    started = time.perf_counter()
    for kind in ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim"):
        for obj in objects.get(kind, ()):
            index.on_event(kind, "ADDED", obj)
    body = index.snapshot()
    build_ms = (time.perf_counter() - started) * 1000
    assemble = []
    for _ in range(repeats):
        start = time.perf_counter()
        index.snapshot()
        assemble.append((time.perf_counter() - start) * 1000)
    # one pod's claim released and taken again: the next body recomputes that node alone
    claim = objects["ResourceClaim"][0]
    released = {**claim, "status": {}}
    update = []
    for k in range(repeats):
        start = time.perf_counter()
        index.on_event("ResourceClaim", "MODIFIED", released if k % 2 == 0 else claim)
        index.snapshot()
        update.append((time.perf_counter() - start) * 1000)
    parsed = orjson.loads(body)
    return {"build_ms": round(build_ms, 1), "assemble_ms_median": round(statistics.median(assemble), 2),
            "assemble_ms_p99": _p99(assemble), "update_ms_median": round(statistics.median(update), 2),
            "update_ms_p99": _p99(update), "bytes": len(body), "revision": parsed["revision"],
            "nodes": len(parsed["nodes"]), "devices": parsed["summary"]["devices"]}


async def api_latency(url: str, headers: dict[str, str], *, calls: int) -> dict[str, Any]:
    """GET /api/v1/fleet, whole bodies, then ``?since=<revision>`` (unchanged: 304)."""
    async with aiohttp.ClientSession(headers=headers) as session:
        full: list[float] = []
        revision = None
        size = 0
        unavailable = 0   # 503: the apiserver did not answer a review in time (the verdict had expired); retried
        while len(full) < calls:
            start = time.perf_counter()
            async with session.get(url) as resp:
                body = await resp.read()
                status = resp.status
            if status == 503 and unavailable < 10:
                unavailable += 1
                await asyncio.sleep(1)
                continue
            if status != 200:
                raise RuntimeError(f"GET {url}: HTTP {status}: {body[:200]!r}")
            full.append((time.perf_counter() - start) * 1000)
            revision, size = orjson.loads(body)["revision"], len(body)
        unchanged: list[float] = []
        for _ in range(calls):
            start = time.perf_counter()
            async with session.get(url, params={"since": str(revision)}) as resp:
                await resp.read()
                status = resp.status
            unchanged.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": round(statistics.median(full), 1), "p99_ms": _p99(full), "bytes": size,
            "p99_ms_unchanged": _p99(unchanged), "unchanged_status": status, "calls": calls,
            "review_unavailable_503": unavailable}


def page_render(browser: Any, url: str) -> dict[str, Any]:
    """Open /fleet; from navigation start to fleet.js's mark for the last cell drawn."""
    browser.driver.get(url)
    revision = browser.drawn(timeout=120)
    timing = browser.driver.execute_script(
        "const n = performance.getEntriesByType('navigation')[0];"
        f"const m = performance.getEntriesByName('fleet-drawn-{revision}')[0];"
        "return {render_ms: m.startTime, html_ms: n.responseEnd, dom_ready_ms: n.domContentLoadedEventEnd,"
        " cells: document.querySelectorAll('.cell').length,"
        " rows: document.querySelectorAll('#fleet-rows .row').length};")
    return {**{k: round(v, 1) if isinstance(v, float) else v for k, v in timing.items()},
            "console_errors": browser.console_errors()}


def page_polls(browser: Any) -> int:
    return int(browser.driver.execute_script(
        "return performance.getEntriesByType('resource').filter(r => r.name.includes('since=')).length"))


def _viewer_objects() -> list[dict[str, Any]]:
    """The demo's fleet viewers (ServiceAccounts, the viewer ClusterRole, bindings) and their namespaces."""
    namespaces = sorted({ns for ns, _ in viewers.ACCOUNTS.values()})
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces] + \
        viewers.objects()


def _admin_token(kubeconfig: str) -> str:
    """A TokenRequest for the fleet-admin ServiceAccount (bound to the viewer ClusterRole), as the demo asks."""
    async def ask() -> str:
        client = KubeClient(kube_config.from_kubeconfig(kubeconfig), timeout=30.0)
        try:
            ns, name = viewers.ACCOUNTS["admin"]
            answer = await client.create(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                          "spec": {"expirationSeconds": 86400}})
            return str(answer["status"]["token"])
        finally:
            await client.close()

    return asyncio.run(ask())


def _wait_fleet(url: str, headers: dict[str, str], nodes: int, timeout: float = 900) -> float:
    """Until /api/v1/fleet holds every node (the extender's cache synced, its index flushed); seconds taken."""
    started = time.monotonic()

    async def poll() -> None:
        async with aiohttp.ClientSession(headers=headers) as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(url) as resp:
                        if resp.status == 200 and len(orjson.loads(await resp.read())["nodes"]) >= nodes:
                            return
                if time.monotonic() - started > timeout:
                    raise RuntimeError(f"{url}: not {nodes} nodes after {timeout} s")
                await asyncio.sleep(1)

    asyncio.run(poll())
    return round(time.monotonic() - started, 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    nodes, claims = (500, 2000) if args.quick else (5000, 20000)
    seconds = 8.0 if args.quick else 30.0
    figures: dict[str, Any] = {"nodes": nodes, "gpus": nodes * 8, "allocated_claims": claims,
                               "targets": {"page.render_ms": 2000}}
    with tempfile.TemporaryDirectory(prefix="gpuclaim-bench-fleet-") as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        data.mkdir()
        _say(f"generating {nodes} nodes / {nodes * 8} GPUs / {claims} allocated claims")
        cache_bench.generate(data, nodes=nodes, claims=claims)
        figures["snapshot"] = snapshot_figures(data, repeats=20)
        _say(f"snapshot: {figures['snapshot']}")
        (data / "05-templates.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List",
                                                               "items": extender_bench._templates()}))
        (data / "06-viewers.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List",
                                                             "items": _viewer_objects()}))
        names = [f"gpu-node-{i:05d}.cluster.internal" for i in range(nodes)]
        with serving_double(data, work) as kubeconfig:
            port, metrics_port, fleet_port = (extender_bench._free_port() for _ in range(3))
            browser = None
            with serving_extender(kubeconfig, "--listen", f"127.0.0.1:{port}", "--metrics-listen",
                                  f"127.0.0.1:{metrics_port}", "--fleet-listen", f"127.0.0.1:{fleet_port}"
                                  ) as extender:
                try:
                    headers = {"Authorization": f"Bearer {_admin_token(kubeconfig)}"}
                    fleet = f"http://127.0.0.1:{fleet_port}"
                    figures["fleet_ready_s"] = _wait_fleet(fleet + "/api/v1/fleet", headers, nodes)
                    _say(f"fleet API holds {nodes} nodes after {figures['fleet_ready_s']} s")
                    figures["api"] = asyncio.run(api_latency(fleet + "/api/v1/fleet", headers, calls=20))
                    _say(f"api: {figures['api']}")
                    base = f"http://127.0.0.1:{port}"
                    asyncio.run(prioritize_p99(base, names, seconds=3, seed=1))   # warm: one verdict per shape
                    without = asyncio.run(prioritize_p99(base, names, seconds=seconds, seed=2))
                    _say(f"prioritize without the page: {without}")
                    from e2e.browser import Browser, missing

                    reason = missing()
                    if reason:
                        figures["page"] = {"skipped": reason}
                        figures["prioritize"] = {"without_page": without, "with_page": None}
                    else:
                        browser = Browser()
                        browser.driver.execute_cdp_cmd("Network.enable", {})
                        browser.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers})
                        renders = [page_render(browser, fleet + "/fleet") for _ in range(3)]
                        figures["page"] = {**renders[-1], "render_ms_runs": [r["render_ms"] for r in renders],
                                           "render_ms": min(r["render_ms"] for r in renders)}
                        _say(f"page: {figures['page']}")
                        polls_before = page_polls(browser)
                        with_page = asyncio.run(prioritize_p99(base, names, seconds=seconds, seed=2))
                        with_page["page_polls"] = page_polls(browser) - polls_before
                        figures["page"]["console_errors"] += browser.console_errors()
                        _say(f"prioritize with the page polling: {with_page}")
                        figures["prioritize"] = {"p99_ms_without_page": without["p99_ms"],
                                                 "p99_ms_with_page": with_page["p99_ms"],
                                                 "without_page": without, "with_page": with_page}
                    figures["extender_rss_mb"] = round(rss_mb(extender.pid), 1)
                finally:
                    if browser is not None:
                        browser.close()
    return figures
