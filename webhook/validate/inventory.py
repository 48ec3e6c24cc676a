"""What the checks need to know about the cluster, as a narrow Protocol, and the offline implementation.

- :class:`DeviceIndex`: the parsed devices (newest pool generation only, slice order then device order) with
  the node scope each is usable in. Immutable: a new index is built when slices change, and the CEL engine's
  per-device outcome cache stays valid because unchanged devices are the same objects.
- :data:`UNKNOWN`: the answer when the inventory cannot know (``gpuclaim lint`` without ``--slices``, a
  template the live cache does not watch). Checks that would need the answer are skipped, never guessed.

:class:`OfflineInventory` is built from plain objects (``lint --slices/--namespaces``, tests);
``webhook.validate.live.LiveInventory`` adapts the cluster cache.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from dra import api

__all__ = ["UNKNOWN", "DeviceIndex", "Inventory", "OfflineInventory", "Unknown"]


class Unknown:
    """The inventory cannot tell (as opposed to None: it knows the thing does not exist)."""

    _instance: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = Unknown()
ALL_NODES = "all nodes"


@dataclass(frozen=True, slots=True)
class DeviceIndex:
    """Devices and where they are usable: ``scopes[i]`` indexes ``scope_names`` for ``devices[i]``.

    A scope is a node name, ``all nodes``, or ``nodes selected by ResourceSlice <name>``; ``single_node[s]``
    says whether scope ``s`` is one named node (the count check adds ``all nodes`` devices to each of those).
    """

    devices: list[api.Device]
    scopes: list[int]
    scope_names: tuple[str, ...]
    single_node: tuple[bool, ...]
    # Dry-run results by selector chain: valid exactly as long as this index (devices are immutable, and a
    # change of the inventory builds a new index). Owned here so that it dies with the index.
    memo: OrderedDict[Any, Any] = field(default_factory=OrderedDict, compare=False, repr=False)
    MEMO_SIZE = 32

    def remember(self, key: Any, compute: Any) -> Any:
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = compute()
            if len(self.memo) > self.MEMO_SIZE:
                self.memo.popitem(last=False)
        else:
            self.memo.move_to_end(key)
        return found

    @classmethod
    def build(cls, slices: Iterable[api.ResourceSlice]) -> DeviceIndex:
        current = _newest_generation(slices)
        current.sort(key=lambda s: (s.driver, s.pool.name, s.name))
        devices: list[api.Device] = []
        scopes: list[int] = []
        names: dict[str, int] = {}
        single: list[bool] = []

        def scope(name: str, is_node: bool) -> int:
            index = names.get(name)
            if index is None:
                index = names[name] = len(single)
                single.append(is_node)
            return index

        for slice_ in current:
            slice_scope = _scope_of(slice_.node_name, slice_.node_selector, slice_.all_nodes, slice_.name)
            for device in slice_.devices:
                where = slice_scope
                if slice_.per_device_node_selection:
                    where = _scope_of(device.node_name, device.node_selector, device.all_nodes, slice_.name)
                if where is None:
                    continue
                devices.append(device)
                scopes.append(scope(*where))
        return cls(devices, scopes, tuple(names), tuple(single))

    def __len__(self) -> int:
        return len(self.devices)


def _scope_of(node_name: str | None, selector: object, all_nodes: bool, slice_name: str) -> tuple[str, bool] | None:
    if node_name:
        return node_name, True
    if selector is not None:
        return f"nodes selected by ResourceSlice {slice_name}", False
    if all_nodes:
        return ALL_NODES, False
    return None


def _newest_generation(slices: Iterable[api.ResourceSlice]) -> list[api.ResourceSlice]:
    """The allocator only uses the slices of a pool's newest generation."""
    newest: dict[tuple[str, str], int] = {}
    all_slices = list(slices)
    for s in all_slices:
        key = (s.driver, s.pool.name)
        newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
    return [s for s in all_slices if s.pool.generation == newest[(s.driver, s.pool.name)]]


class Inventory(Protocol):
    """The cluster as the validator sees it."""

    def devices(self) -> DeviceIndex | Unknown: ...

    def device_class(self, name: str) -> api.DeviceClass | Unknown | None: ...

    def namespace_labels(self, name: str) -> Mapping[str, str] | Unknown | None: ...

    def template(self, namespace: str, name: str) -> api.ResourceClaimTemplate | Unknown | None: ...


class OfflineInventory:
    """An inventory from objects: whatever was not given at all is UNKNOWN rather than missing."""

    def __init__(
        self,
        *,
        slices: Sequence[api.ResourceSlice] | None = None,
        classes: Sequence[api.DeviceClass] | None = None,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        templates: Sequence[api.ResourceClaimTemplate] | None = None,
        namespaces_complete: bool = True,
        classes_complete: bool = True,
    ) -> None:
        """``*_complete`` False: a namespace or class not given is UNKNOWN rather than missing (lint of files
        that define some of them, without a snapshot of the cluster). Objects without a namespace are in
        ``default``, as kubectl puts them."""
        self._index: DeviceIndex | Unknown = UNKNOWN if slices is None else DeviceIndex.build(slices)
        self._classes = None if classes is None else {c.name: c for c in classes}
        self._namespaces = None if namespaces is None else dict(namespaces)
        self._namespaces_complete = namespaces_complete
        self._classes_complete = classes_complete
        self._templates = None if templates is None else {(t.namespace or "default", t.name): t for t in templates}

    def devices(self) -> DeviceIndex | Unknown:
        return self._index

    def device_class(self, name: str) -> api.DeviceClass | Unknown | None:
        if self._classes is None:
            return UNKNOWN
        found = self._classes.get(name)
        return UNKNOWN if found is None and not self._classes_complete else found

    def namespace_labels(self, name: str) -> Mapping[str, str] | Unknown | None:
        if self._namespaces is None:
            return UNKNOWN
        labels = self._namespaces.get(name)
        return UNKNOWN if labels is None and not self._namespaces_complete else labels

    def template(self, namespace: str, name: str) -> api.ResourceClaimTemplate | Unknown | None:
        return UNKNOWN if self._templates is None else self._templates.get((namespace, name))
