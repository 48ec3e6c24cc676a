"""Sustained admissions with the webhook's RSS sampled: after warm-up, memory must not grow beyond 10 %.

Pods are deleted once admitted (as finished jobs are), so the double's size stays flat and what is measured is
the webhook's own footprint. RSS is read from /proc/<pid>/status (VmRSS) of the webhook process.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from pathlib import Path
from typing import Any

from e2e.reliability.traffic import BASE_SHAPES, Traffic

Obj = dict[str, Any]
MAX_GROWTH_PCT = 10.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def sustained(traffic: Traffic, *, pid: int, count: int, rate: float, warmup_fraction: float = 0.2,
                    concurrency: int = 8) -> Obj:
    shapes = [s for s in BASE_SHAPES if s.expect != "denied"]
    cycle = itertools.cycle(shapes)
    samples: list[tuple[int, float]] = []  # (admissions done, RSS MB)
    start_index = len(traffic.records)
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            samples.append((len(traffic.records) - start_index, rss_mb(pid)))
            await asyncio.sleep(0.25)

    async def reap() -> None:
        # delete admitted pods behind the stream, so the double does not grow
        reaped = start_index
        while not stop.is_set() or reaped < len(traffic.records):
            records = traffic.records[reaped:]
            done = [r for r in records if r.outcome != "pending"]
            if len(done) < len(records) and not stop.is_set():
                await asyncio.sleep(0.2)
                continue
            for r in done:
                if r.outcome == "created":
                    await traffic.api.delete(f"/api/v1/namespaces/{r.namespace}/pods/{r.name}")
            reaped += len(done)
            if stop.is_set() and reaped >= len(traffic.records):
                break
            await asyncio.sleep(0.2)

    sampler = asyncio.create_task(sample())
    reaper = asyncio.create_task(reap())
    started = time.monotonic()
    try:
        await traffic.stream(lambda _i: next(cycle), rate=rate, stop=asyncio.Event(), limit=count,
                             concurrency=concurrency)
    finally:
        elapsed = time.monotonic() - started
        stop.set()
        await sampler
        await reaper
    records = traffic.records[start_index:]
    errors = [r for r in records if r.outcome not in ("created", "denied") or r.transient]
    wrong = [r for r in records if (r.outcome == "denied") != (r.shape.expect == "denied")]
    warm_at = int(count * warmup_fraction)
    warm = [mb for done, mb in samples if done >= warm_at]
    warm_rss = warm[0] if warm else samples[-1][1]
    final_rss = samples[-1][1]
    latencies = sorted(r.latency_s * 1000 for r in records)
    growth = (max(warm) - warm_rss) / warm_rss * 100 if warm else 0.0
    after = [(done, mb) for done, mb in samples if done >= warm_at]
    slope = statistics.linear_regression([d for d, _ in after], [mb for _, mb in after]).slope * 1000 \
        if len({d for d, _ in after}) > 1 else 0.0
    return {
        "admissions": len(records),
        "seconds": round(elapsed, 2),
        "rate_per_s": round(len(records) / elapsed, 1) if elapsed else None,
        "errors": len(errors) + len(wrong),
        "latency_ms": {"p50": round(statistics.median(latencies), 1),
                       "p99": round(latencies[int(len(latencies) * 0.99) - 1], 1), "max": round(latencies[-1], 1)},
        "rss_mb": {"start": round(samples[0][1], 1), "afterWarmup": round(warm_rss, 1),
                   "max": round(max(mb for _, mb in samples), 1), "final": round(final_rss, 1)},
        "rss_growth_after_warmup_pct": round(growth, 2),
        # a trend the 10 % bound alone would hide on a short run: MB per 1000 admissions after warm-up
        "rss_slope_mb_per_1000_admissions": round(slope, 3),
        "warmup_admissions": warm_at,
        "ok": not errors and not wrong and growth <= MAX_GROWTH_PCT,
    }
