"""The mixed nodes of a cluster view (dra/mixed.py says what makes a node mixed): for the extender's filter, the
webhook's warning at conversion time and the ``gpuclaim_mixed_nodes`` metric of both servers.

Recomputed at most every ``max_age`` seconds, and then only over the nodes whose cached allocatable has an
extended resource (kube/cache.py ``compact_node`` keeps those): a fleet without the device plugin costs a scan of
empty mappings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpuclaim.dra import mixed
from gpuclaim.dra.config import ConversionConfig
from gpuclaim.dra.mapping import MappingTable
from gpuclaim.serving.metrics import on_loop


class MixedNodes:
    def __init__(self, cache: Any, conversion: ConversionConfig, *, policy: str = "avoid", max_age: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.conversion = conversion
        self.policy = policy
        self.max_age = max_age
        self.clock = clock
        self._at: float | None = None
        self._nodes: Mapping[str, tuple[mixed.Overlap, ...]] = {}
        self.avoided: Counter | None = None

    @property
    def avoid(self) -> bool:
        return self.policy == "avoid"

    def nodes(self) -> Mapping[str, tuple[mixed.Overlap, ...]]:
        """node name -> what makes it mixed, for every mixed node of the view."""
        now = self.clock()
        if self._at is not None and now - self._at < self.max_age:
            return self._nodes
        classes = self.cache.inventory.parsed_classes()
        table = MappingTable(self.conversion, classes)
        out: dict[str, tuple[mixed.Overlap, ...]] = {}
        for node in list(self.cache.objects("Node").values()):
            allocatable = (node.get("status") or {}).get("allocatable")
            if not allocatable:
                continue
            name = str(node["metadata"].get("name", ""))
            drivers = {str((s.get("spec") or {}).get("driver", "")) for s in self.cache.inventory.slices_for_node(name)}
            found = mixed.overlaps(allocatable, drivers, table, classes)
            if found:
                out[name] = found
        self._nodes, self._at = out, now
        return out

    def _count(self) -> int:
        return len(self.nodes()) if getattr(self.cache, "synced", True) else 0

    def register(self, registry: CollectorRegistry) -> None:
        gauge = Gauge("gpuclaim_mixed_nodes", "Nodes where the device plugin advertises a resource gpuclaim maps and "
                      "the DRA driver behind it publishes ResourceSlices (one GPU could be handed out twice)",
                      registry=registry)
        # read on the event loop that owns the cache: the scrape is formatted in the metrics thread
        gauge.set_function(lambda: on_loop(self._count))
        self.avoided = Counter("gpuclaim_mixed_nodes_avoided", "Mixed nodes the extender's filter failed for a "
                               "converted pod (mixedNodes: avoid)", registry=registry)
