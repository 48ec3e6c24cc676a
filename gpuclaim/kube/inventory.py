"""Incremental indexes over ResourceSlices and Nodes: which devices each node can use, and pools.

Kept up to date on every event, so a per-node lookup is a dict access, never a scan:
- nodeName slices are indexed by that node;
- nodeSelector slices are matched against every node when they change, and every such slice is
  re-matched against a node when the node's labels change (few selector slices, many nodes);
- allNodes slices apply everywhere;
- per pool (driver, pool name) only the newest generation counts, and the pool is complete when
  that generation's slice count reaches `resourceSliceCount` (the allocator's rule).

Each slice is parsed into a `dra.api.ResourceSlice` once, when it arrives: the validator, the extender and
the allocator simulation read the parsed model, so no request ever parses a slice. Node selectors are
matched with the model's own matcher (one implementation of Kubernetes' NodeSelector rules).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gpuclaim.dra.api import (
    DeviceClass,
    DeviceID,
    ResourceSlice,
    device_available_on,
    parse_device_class,
    parse_resource_slice,
)

Obj = dict[str, Any]
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PoolView:
    driver: str
    name: str
    generation: int
    slice_names: tuple[str, ...]  # slices of the newest generation, sorted
    resource_slice_count: int

    @property
    def complete(self) -> bool:
        return len(self.slice_names) >= self.resource_slice_count


@dataclass
class _Pool:
    slices: dict[str, Obj] = field(default_factory=dict)  # every generation still present, by slice name
    view: PoolView | None = None


class Inventory:
    def __init__(self) -> None:
        self.node_labels: dict[str, Mapping[str, str]] = {}
        self._slices: dict[str, Obj] = {}
        self._parsed: dict[str, ResourceSlice] = {}  # valid slices only; others match no node
        # DeviceClasses by name, parsed once per event; None marks one the model refuses (the apiserver would
        # have): present but unusable, which consumers may tell apart from missing
        self._classes: dict[str, DeviceClass | None] = {}
        self._valid_classes: Mapping[str, DeviceClass] = MappingProxyType({})
        self._by_node: dict[str, set[str]] = {}  # nodeName slices, plus nodeSelector slices that match
        self._selector_slices: set[str] = set()
        self._all_nodes: set[str] = set()
        self._pools: dict[tuple[str, str], _Pool] = {}

    # ---- events --------------------------------------------------------------------------------------------
    def on_node(self, old: Obj | None, new: Obj | None) -> None:
        name = (new or old or {}).get("metadata", {}).get("name", "")
        if new is None:
            self.node_labels.pop(name, None)
            for slice_name in self._selector_slices:
                self._by_node.get(name, set()).discard(slice_name)
            return
        labels = new["metadata"].get("labels") or {}
        if old is not None and self.node_labels.get(name) == labels:
            return
        self.node_labels[name] = labels
        for slice_name in self._selector_slices:
            if self._selector_matches(slice_name, name, labels):
                self._by_node.setdefault(name, set()).add(slice_name)
            else:
                self._by_node.get(name, set()).discard(slice_name)

    def on_class(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            self._classes.pop(str((old or {}).get("metadata", {}).get("name", "")), None)
        else:
            name = str(new.get("metadata", {}).get("name", ""))
            model, errors = parse_device_class(new)
            if model is None or errors:
                log.warning("DeviceClass %s ignored: %s", name, "; ".join(str(e) for e in errors[:3]))
                model = None
            self._classes[name] = model
        # a new mapping object only when a parsed class differs (models are frozen dataclasses, metadata
        # included): consumers key caches on its identity, so a relist of unchanged classes keeps them
        valid = {n: c for n, c in self._classes.items() if c is not None}
        if valid != self._valid_classes:
            self._valid_classes = MappingProxyType(valid)

    def parsed_class(self, name: str) -> DeviceClass | None:
        """The parsed DeviceClass; None when missing or refused (see `class_refused`)."""
        return self._classes.get(name)

    def class_refused(self, name: str) -> bool:
        return name in self._classes and self._classes[name] is None

    def parsed_classes(self) -> Mapping[str, DeviceClass]:
        """Every valid DeviceClass by name; the same object until a DeviceClass event."""
        return self._valid_classes

    def on_slice(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            self._unindex(old)
        if new is not None:
            self._index(new)

    def _index(self, obj: Obj) -> None:
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        self._slices[name] = obj
        parsed, errors = parse_resource_slice(obj)
        if parsed is not None and not errors:
            self._parsed[name] = parsed
        else:
            # the allocator skips what the apiserver would have refused; so do all of gpuclaim's consumers
            log.warning("ResourceSlice %s ignored: %s", name, "; ".join(str(e) for e in errors[:3]))
        if spec.get("nodeName"):
            self._by_node.setdefault(spec["nodeName"], set()).add(name)
        elif spec.get("nodeSelector"):
            self._selector_slices.add(name)
            for node, labels in self.node_labels.items():
                if self._selector_matches(name, node, labels):
                    self._by_node.setdefault(node, set()).add(name)
        else:  # allNodes, or perDeviceNodeSelection (filtered per device at lookup)
            self._all_nodes.add(name)
        key = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        pool = self._pools.setdefault(key, _Pool())
        pool.slices[name] = obj
        self._refresh_pool(key, pool)

    def _unindex(self, obj: Obj) -> None:
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        self._slices.pop(name, None)
        self._parsed.pop(name, None)
        if spec.get("nodeName"):
            self._by_node.get(spec["nodeName"], set()).discard(name)
        elif spec.get("nodeSelector"):
            self._selector_slices.discard(name)
            for members in self._by_node.values():
                members.discard(name)
        self._all_nodes.discard(name)
        key = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        pool = self._pools.get(key)
        if pool is not None:
            pool.slices.pop(name, None)
            if pool.slices:
                self._refresh_pool(key, pool)
            else:
                del self._pools[key]

    def _selector_matches(self, slice_name: str, node: str, labels: Mapping[str, str]) -> bool:
        parsed = self._parsed.get(slice_name)
        return bool(parsed and parsed.node_selector and parsed.node_selector.matches(labels=labels, name=node))

    @staticmethod
    def _refresh_pool(key: tuple[str, str], pool: _Pool) -> None:
        def generation(o: Obj) -> int:
            return int((o.get("spec", {}).get("pool") or {}).get("generation", 0) or 0)

        newest = max(generation(o) for o in pool.slices.values())
        current = sorted(n for n, o in pool.slices.items() if generation(o) == newest)
        count = int((pool.slices[current[0]]["spec"].get("pool") or {}).get("resourceSliceCount", 1) or 1)
        pool.view = PoolView(key[0], key[1], newest, tuple(current), count)

    # ---- queries -------------------------------------------------------------------------------------------
    def pool(self, driver: str, name: str) -> PoolView | None:
        pool = self._pools.get((driver, name))
        return pool.view if pool else None

    def pools(self) -> list[PoolView]:
        return [p.view for p in self._pools.values() if p.view is not None]

    def _current(self, slice_name: str) -> bool:
        spec = self._slices[slice_name].get("spec") or {}
        view = self.pool(str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        return view is not None and slice_name in view.slice_names

    def slices_for_node(self, node: str) -> list[Obj]:
        """Slices usable on `node`, newest pool generation only, ordered by (driver, pool, slice name)."""
        names = self._by_node.get(node, set()) | self._all_nodes
        chosen = [self._slices[n] for n in names if self._current(n)]
        chosen.sort(key=lambda o: (o["spec"].get("driver", ""), o["spec"]["pool"].get("name", ""),
                                   o["metadata"]["name"]))
        return chosen

    def may_have_slices(self, node: str) -> bool:
        """False when no slice can be usable on `node` (`slices_for_node` is empty): the quick answer for a name
        the cluster does not know, without building and sorting an empty list."""
        return bool(self._by_node.get(node)) or bool(self._all_nodes)

    def parsed_slices_for_node(self, node: str) -> list[ResourceSlice]:
        """`slices_for_node` as parsed models, same order; what the allocator simulation takes."""
        return [p for o in self.slices_for_node(node) if (p := self._parsed.get(o["metadata"]["name"])) is not None]

    def parsed_slice(self, name: str) -> ResourceSlice | None:
        return self._parsed.get(name)

    def parsed_slices(self) -> Iterator[ResourceSlice]:
        """Every current (newest-generation) slice the model could read, in no particular order."""
        return (p for n, p in self._parsed.items() if self._current(n))

    def devices_for_node(self, node: str) -> Iterator[tuple[DeviceID, Obj, Obj]]:
        """(id, device, slice) for every device available on `node`, in slice order then device order."""
        labels = self.node_labels.get(node, {})
        for slice_obj in self.slices_for_node(node):
            spec = slice_obj["spec"]
            per_device = None
            if spec.get("perDeviceNodeSelection"):
                per_device = self._parsed_devices_on(slice_obj, node, labels)
            for device in spec.get("devices") or ():
                if per_device is not None and device.get("name") not in per_device:
                    continue
                yield DeviceID(spec["driver"], spec["pool"]["name"], device["name"]), device, slice_obj

    def _parsed_devices_on(self, slice_obj: Obj, node: str, labels: Mapping[str, str]) -> set[str]:
        parsed = self._parsed.get(slice_obj["metadata"]["name"])
        if parsed is None:
            return set()
        return {d.name for d in parsed.devices if device_available_on(d, node_name=node, node_labels=labels)}

    def slice_count(self) -> int:
        return len(self._slices)

