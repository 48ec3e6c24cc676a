"""The real `gpuclaim extender` process with `--fleet-listen`, watching the API double loaded with real p5 and p4d
slices: its metrics port exports the gpuclaim_fleet_* gauges (docs/fleet.md, "Metrics"), counting every device of
the slices, and follows a claim the cluster allocates; the series stay bounded by node x driver x model x state."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from e2e_fleet import FILES, FIXTURES, P4D, P5_A, _objects, load_fleet
from e2e_processes import free_port, start
from prometheus_client.parser import text_string_to_metric_families

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.fleet import metrics

Series = dict[tuple[str, ...], float]


async def scrape(port: int) -> dict[str, Series]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as reply:
        assert reply.status == 200
        text = await reply.text()
    out: dict[str, Series] = {}
    for family in text_string_to_metric_families(text):
        if family.name in metrics.NAMES:
            out[family.name] = {tuple(s.labels[k] for k in sorted(s.labels)): s.value for s in family.samples}
    return out


async def until(port: int, check: Any, within: float = 30.0) -> dict[str, Series]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        got = await scrape(port)
        if check(got):
            return got
        assert asyncio.get_running_loop().time() < deadline, f"metrics never matched: {got}"
        await asyncio.sleep(0.3)


def slice_devices() -> Counter[str]:
    count: Counter[str] = Counter()
    for rel in FILES:
        for obj in _objects(FIXTURES / rel):
            if obj["kind"] == "ResourceSlice" and obj["spec"].get("nodeName"):
                count[obj["spec"]["nodeName"]] += len(obj["spec"].get("devices") or ())
    return count


def total(series: dict[str, Series]) -> float:
    return sum(series.get(metrics.DEVICES, {}).values())


@pytest.mark.timeout(120)
async def test_the_extender_exports_the_fleet_on_its_metrics_port(double: RunningDouble, tmp_path: Path) -> None:
    load_fleet(double.store)
    truth = slice_devices()
    tls = selfsigned.issue(tmp_path / "tls", hosts=("127.0.0.1", "localhost"))
    server = await start("extender", tls=tls, kubeconfig=double.kubeconfig, workdir=tmp_path,
                         args=("--fleet-listen", f"127.0.0.1:{free_port()}"))
    try:
        got = await until(server.metrics_port, lambda s: total(s) == sum(truth.values()))
        # label keys sorted: driver, model, node, state
        per_node: Counter[str] = Counter()
        for (_, _, node, _), value in got[metrics.DEVICES].items():
            per_node[node] += int(value)
        assert per_node == truth
        shapes = {(d, m, n) for d, m, n, _ in got[metrics.DEVICES]}
        assert len(got[metrics.DEVICES]) == len(shapes) * len(metrics.ALWAYS)
        assert {n for _, n in got[metrics.LARGEST_FREE_TIGHT_GROUP]} == set(truth)
        h100 = next(m for d, m, n in shapes if n == P5_A and d == "gpu.nvidia.com")
        assert got[metrics.DEVICES][("gpu.nvidia.com", h100, P5_A, "free")] == 8

        # a claim the cluster allocated to two of P5_A's GPUs, a pod running on it: allocated 2, free 6
        double.store.restore({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "train-gpus", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          "count": 2}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": P5_A, "device": d}
                for d in ("gpu-0", "gpu-1")]}},
                "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "u-train-0"}]}})
        got = await until(server.metrics_port, lambda s: s[metrics.DEVICES].get(
            ("gpu.nvidia.com", h100, P5_A, "allocated")) == 2)
        assert got[metrics.DEVICES][("gpu.nvidia.com", h100, P5_A, "free")] == 6
        assert len(got[metrics.DEVICES]) == len(shapes) * len(metrics.ALWAYS)  # no new series for a claim
        assert P4D in {n for _, n in got[metrics.STRANDED]}
    finally:
        await server.stop()
