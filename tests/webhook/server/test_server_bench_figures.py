"""The webhook benchmark's own arithmetic (the server-side p99 from two scrapes of the duration histogram), and
the whole benchmark behind GPUCLAIM_LONG=1 (it runs real processes for about 30 s)."""

from __future__ import annotations

import argparse
import os

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from e2e.bench import webhook as bench
from gpuclaim.webhook import admit
from gpuclaim.webhook.metrics import WebhookMetrics


def _scrape(registry: CollectorRegistry) -> dict[float, float]:
    return {float(le): float(n) for le, n in bench._BUCKET.findall(generate_latest(registry))}


def test_server_p99_counts_only_the_requests_between_two_scrapes() -> None:
    registry = CollectorRegistry()
    metrics = WebhookMetrics(registry)
    record = admit.Record("mutate", "CREATE", "allowed")
    for _ in range(50):
        metrics.observe(record, 0.020)  # before the window: slow, must not count
    before = _scrape(registry)
    for n in range(1000):
        metrics.observe(record, 0.0042 if n < 985 else 0.0009)  # 98.5 % under 5 ms, 1.5 % under 1 ms
    metrics.observe(admit.Record("validate", "CREATE", "allowed"), 9.0)  # another endpoint
    after = _scrape(registry)
    assert bench._server_p99_ms(before, after) == 5.0
    for _ in range(20):
        metrics.observe(record, 0.3)
    assert bench._server_p99_ms(before, _scrape(registry)) == 500.0  # 0.3 s lies in the (0.25, 0.5] bucket


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GPUCLAIM_LONG") != "1", reason="runs the benchmark's processes (GPUCLAIM_LONG=1)")
def test_the_benchmark_runs_and_reports_every_figure() -> None:
    figures = bench.run(argparse.Namespace(quick=True))
    for name in ("mutate_rps", "mutate_p50_ms", "mutate_p99_ms", "validate_rps", "echo_rps", "ratio_to_echo",
                 "mutate_cpu_ms", "echo_cpu_ms", "mutate_server_p99_ms_at_most"):
        assert figures[name] > 0, name
