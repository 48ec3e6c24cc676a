"""The fleet's Prometheus metrics (docs/fleet.md, "Metrics"), read from the FleetIndex at scrape time.

Cardinality is bounded by the fleet's shape, never by its devices or workloads: one series per node x driver x
model x state for `gpuclaim_fleet_devices` (five states), one per node x driver for the other two. No pod, claim,
namespace or device name is ever a label value, so a scrape shows nothing the fleet page's access rules hide.

The families are rebuilt only when the index's revision moved; between changes a scrape re-serves the families of
the last revision (one snapshot's worth of series, owned by the collector).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import orjson
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

STATES = ("free", "allocated", "reserved", "tainted", "unhealthy")
DEVICES = "gpuclaim_fleet_devices"
LARGEST_FREE_TIGHT_GROUP = "gpuclaim_fleet_largest_free_tight_group"
STRANDED = "gpuclaim_fleet_stranded_devices"
#: every metric this module exports (the chart's Grafana dashboard uses these and only these)
NAMES = (DEVICES, LARGEST_FREE_TIGHT_GROUP, STRANDED)


class Index(Protocol):
    """What the collector needs of gpuclaim.fleet.model.FleetIndex."""

    @property
    def revision(self) -> int: ...


def families(fleet: Mapping[str, Any]) -> list[GaugeMetricFamily]:
    """The three gauge families of one snapshot (the contract's `Fleet` document, cluster-wide, unfiltered)."""
    devices = GaugeMetricFamily(DEVICES, "Devices by node, driver, model and state (free, allocated, reserved, "
                                "tainted, unhealthy; docs/fleet.md)", labels=("node", "driver", "model", "state"))
    largest = GaugeMetricFamily(LARGEST_FREE_TIGHT_GROUP, "The most free devices of one driver on the node that "
                                "one tight topology group holds (the largest tight job that still fits there)",
                                labels=("node", "driver"))
    stranded = GaugeMetricFamily(STRANDED, "Free devices of the node no tight job shape can use (docs/fleet.md)",
                                 labels=("node", "driver"))
    for node in fleet.get("nodes") or ():
        name = str(node.get("name", ""))
        counts: dict[tuple[str, str, str], int] = {}
        free_by_group: dict[tuple[str, str, str], int] = {}
        stranded_by_driver: dict[str, int] = {}
        drivers = [str(d) for d in node.get("drivers") or ()]
        for group in node.get("groups") or ():
            for device in group.get("devices") or ():
                driver, model = str(device.get("driver", "")), str(device.get("model") or "")
                state = str(device.get("state", "free"))
                counts[(driver, model, state)] = counts.get((driver, model, state), 0) + 1
                if driver not in drivers:
                    drivers.append(driver)
                if state == "free" and not device.get("migParent"):
                    key = (driver, str(group.get("kind", "")), str(group.get("name", "")))
                    free_by_group[key] = free_by_group.get(key, 0) + 1
                if device.get("stranded"):
                    stranded_by_driver[driver] = stranded_by_driver.get(driver, 0) + 1
        models = sorted({(d, m) for d, m, _ in counts})
        for driver, model in models:
            for state in STATES:  # every state of a present (driver, model): a series never vanishes at 0
                devices.add_metric((name, driver, model, state), counts.get((driver, model, state), 0))
        summary = node.get("summary") or {}
        for driver in sorted(drivers):
            tight = [n for (d, kind, _), n in free_by_group.items() if d == driver and kind != "node"]
            if len(drivers) == 1 and "largestFreeTightGroup" in summary:
                tight = [int(summary["largestFreeTightGroup"])]
            largest.add_metric((name, driver), max(tight, default=0))
            if len(drivers) == 1 and "stranded" in summary:
                stranded.add_metric((name, driver), int(summary["stranded"]))
            else:
                stranded.add_metric((name, driver), stranded_by_driver.get(driver, 0))
    return [devices, largest, stranded]


class FleetCollector(Collector):
    """A custom collector over the FleetIndex: `read()` gives the whole fleet's snapshot (JSON bytes or a dict)."""

    def __init__(self, index: Index, read: Callable[[], bytes | Mapping[str, Any]]) -> None:
        self._index = index
        self._read = read
        self._lock = threading.Lock()  # the scrape may run on the exporter's thread
        self._cached: tuple[int, list[GaugeMetricFamily]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        revision = self._index.revision
        with self._lock:
            if self._cached is None or self._cached[0] != revision:
                raw = self._read()
                fleet = orjson.loads(raw) if isinstance(raw, bytes | bytearray | memoryview) else raw
                self._cached = (revision, families(fleet))
            built = self._cached[1]
        yield from built

    def describe(self) -> Iterable[GaugeMetricFamily]:
        # Described without reading the index: registering must not build a snapshot.
        return [GaugeMetricFamily(name, name) for name in NAMES]


def register(registry: CollectorRegistry, index: Index, read: Callable[[], bytes | Mapping[str, Any]]) -> None:
    registry.register(FleetCollector(index, read))
