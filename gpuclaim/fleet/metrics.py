"""The fleet's Prometheus metrics (docs/fleet.md, "Metrics"), read from the FleetIndex at scrape time.

Cardinality is bounded by the fleet's shape, never by its devices or workloads: at most one series per node x
driver x model x state for `gpuclaim_fleet_devices` (free and allocated always, at 0 too; reserved, tainted and
unhealthy while a device is in them), one per node x driver for the other two. No pod, claim, namespace or device
name is ever a label value, so a scrape shows nothing the fleet page's access rules hide.

The families are rebuilt only when the index's revision moved, from per-node samples recomputed only for the nodes
whose entry changed; between changes a scrape re-serves the families of the last revision. The families are built
and formatted in the metrics thread (gpuclaim/serving/metrics.py), off the event loop; FleetIndex is not
thread-safe, so the collector takes from it, on the loop (`serving.metrics.on_loop`), only the node entries of the
current revision: an immutable snapshot (the index replaces an entry when its node changes, never edits it).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from gpuclaim.fleet import model
from gpuclaim.serving.metrics import on_loop

DEVICES = "gpuclaim_fleet_devices"
LARGEST_FREE_TIGHT_GROUP = "gpuclaim_fleet_largest_free_tight_group"
STRANDED = "gpuclaim_fleet_stranded_devices"
#: every metric this module exports (the chart's Grafana dashboard uses these and only these)
NAMES = (DEVICES, LARGEST_FREE_TIGHT_GROUP, STRANDED)


def _empty() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(DEVICES, "Devices by node, driver, model and state (free, allocated, reserved, tainted, "
                          "unhealthy; docs/fleet.md)", labels=("node", "driver", "model", "state")),
        GaugeMetricFamily(LARGEST_FREE_TIGHT_GROUP, "The most free devices of one driver on the node that one tight "
                          "topology group holds: the largest tight job that still fits there",
                          labels=("node", "driver")),
        GaugeMetricFamily(STRANDED, "Free devices of the node no job can take: the counters they need are consumed "
                          "(docs/fleet.md)", labels=("node", "driver")),
    )


#: states whose series exist at 0 too, so "no free device left" reads 0, not "no data"; the others appear when a
#: device is in them (five series a node x driver x model would be 5 x 5,000 at the issue's scale)
ALWAYS = ("free", "allocated")
Sample = tuple[tuple[str, ...], float]


def node_samples(entry: model.NodeEntry) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """One node's samples of the three families."""
    devices: list[Sample] = []
    largest: list[Sample] = []
    stranded: list[Sample] = []
    by_driver: dict[str, list[model.DeviceRow]] = {}
    for row in entry.rows:
        by_driver.setdefault(row.id.driver, []).append(row)
    for driver, rows in sorted(by_driver.items()):
        counts = Counter((r.model or "", r.state) for r in rows)
        for device_model in sorted({m for m, _ in counts}):
            for state in model.STATES:
                n = counts[(device_model, state)]
                if n or state in ALWAYS:
                    devices.append(((entry.name, driver, device_model, state), n))
        # one driver: the node's summary, computed once per change; several: that driver's devices alone
        summary = entry.summary if len(by_driver) == 1 else model.summarize(rows)
        largest.append(((entry.name, driver), summary["largestFreeTightGroup"]))
        stranded.append(((entry.name, driver), summary["stranded"]))
    return devices, largest, stranded


def families(entries: Iterable[model.NodeEntry],
             per_node: dict[str, tuple[model.NodeEntry, tuple[list[Sample], ...]]] | None = None,
             ) -> list[GaugeMetricFamily]:
    """The three gauge families of the fleet's nodes (FleetIndex.nodes(), cluster-wide and unfiltered).
    ``per_node``: node -> (its entry, its samples) from the last call; a node whose entry is the same object (the
    index replaces an entry when the node changes) reuses its samples. Updated in place to the nodes given."""
    out = _empty()
    cache = per_node if per_node is not None else {}
    seen = set()
    for entry in entries:
        seen.add(entry.name)
        kept = cache.get(entry.name)
        if kept is None or kept[0] is not entry:
            kept = (entry, node_samples(entry))
            cache[entry.name] = kept
        for family, samples in zip(out, kept[1], strict=True):
            for labels, value in samples:
                family.add_metric(labels, value)
    for gone in set(cache) - seen:
        del cache[gone]
    return list(out)


class FleetCollector(Collector):
    """A custom collector over a FleetIndex, safe to collect from any thread."""

    def __init__(self, index: model.FleetIndex) -> None:
        self._index = index
        # the families of the last revision and the per-node samples they came from, kept for the next scrape;
        # the lock makes one collect at a time update them (scrapes come from the metrics thread, tests from theirs)
        self._lock = threading.Lock()
        self._cached: tuple[int, list[GaugeMetricFamily]] | None = None
        # one entry per node of the fleet, dropped with the node: bounded by the fleet the index holds
        self._per_node: dict[str, tuple[model.NodeEntry, tuple[list[Sample], ...]]] = {}

    def _snapshot(self) -> tuple[int, tuple[model.NodeEntry, ...]]:
        entries = tuple(self._index.nodes())  # flushes the dirty nodes, so the revision below is current
        return self._index.revision, entries

    def collect(self) -> Iterator[GaugeMetricFamily]:
        revision, entries = on_loop(self._snapshot)
        with self._lock:
            if self._cached is None or self._cached[0] != revision:
                self._cached = (revision, families(entries, self._per_node))
            built = self._cached[1]
        yield from built

    def describe(self) -> Iterable[GaugeMetricFamily]:
        # Described without reading the index: registering must not compute the fleet.
        return list(_empty())


def register(registry: CollectorRegistry, index: model.FleetIndex) -> FleetCollector:
    collector = FleetCollector(index)
    registry.register(collector)
    return collector
