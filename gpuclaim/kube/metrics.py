"""Prometheus metrics of the cluster view, registered on a registry the caller owns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")
RESTART_REASONS = ("closed", "expired", "error", "silent")


class _AgeCollector(Collector):
    # collected in the metrics thread (gpuclaim/serving/metrics.py): `ages` and `synced` read the reflectors' fixed
    # dict, floats and Event flags, which another thread may read as the loop writes them
    def __init__(self, ages: Callable[[], Mapping[str, float | None]], synced: Callable[[], bool]) -> None:
        self._ages = ages
        self._synced = synced

    def collect(self) -> Iterable[GaugeMetricFamily]:
        age = GaugeMetricFamily("gpuclaim_kube_last_event_age_seconds",
                                "Seconds since the last watch event, bookmark or successful list, per kind",
                                labels=["kind"])
        for kind, value in sorted(self._ages().items()):
            if value is not None:
                age.add_metric([kind], value)
        yield age
        yield GaugeMetricFamily("gpuclaim_kube_synced", "1 once every kind's initial list completed",
                                value=1.0 if self._synced() else 0.0)


class CacheMetrics:
    def __init__(self, registry: CollectorRegistry, kinds: Iterable[str]) -> None:
        self.events = Counter("gpuclaim_kube_events_total", "Watch events applied, by kind and type",
                              ["kind", "type"], registry=registry)
        self.relists = Counter("gpuclaim_kube_relists_total", "Lists after the initial one (410 or errors)",
                               ["kind"], registry=registry)
        self.restarts = Counter("gpuclaim_kube_watch_restarts_total", "Watches restarted, by reason",
                                ["kind", "reason"], registry=registry)
        self.registry = registry
        for kind in kinds:
            self.relists.labels(kind)
            for event_type in EVENT_TYPES:
                self.events.labels(kind, event_type)
            for reason in RESTART_REASONS:
                self.restarts.labels(kind, reason)

    def watch_ages(self, ages: Callable[[], Mapping[str, float | None]], synced: Callable[[], bool]) -> None:
        self.registry.register(_AgeCollector(ages, synced))
