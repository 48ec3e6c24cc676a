"""What the checks need to know about the cluster, as a narrow Protocol, and the offline implementation.

- :class:`DeviceIndex`: the parsed devices (newest pool generation only, slice order then device order), one
  segment per slice with the node scope of each device. Immutable: a new index is built when slices change;
  it keeps the segments of unchanged slices, and the dry-run summaries remembered on them.
- :data:`UNKNOWN`: the answer when the inventory cannot know (``gpuclaim lint`` without ``--slices``, a
  template the live cache does not watch). Checks that would need the answer are skipped, never guessed.

:class:`OfflineInventory` is built from plain objects (``lint --slices/--namespaces``, tests);
``webhook.validate.live.LiveInventory`` adapts the cluster cache.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any, Final, Protocol

from gpuclaim.dra import api

from .segments import ALL_NODES, Segment, SummaryCache

__all__ = ["ALL_NODES", "UNKNOWN", "DeviceIndex", "Inventory", "OfflineInventory", "Unknown"]


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

_DEVICES = attrgetter("devices")


class DeviceIndex:
    """The devices of the current slices, as :class:`~webhook.validate.segments.Segment` s (one per slice,
    ordered by driver, pool and slice name).

    ``summaries`` is the per-chain cache the dry-run reads through; an inventory passes the same one to each
    index it builds (and ``previous=`` to :meth:`build`), so a slice change costs only that slice's devices.
    """

    __slots__ = ("_devices", "_positions", "memo", "parent", "patched", "schemas", "segments", "summaries", "total")
    MEMO_SIZE = 32

    def __init__(self, segments: Iterable[Segment], summaries: SummaryCache | None = None) -> None:
        self.segments: tuple[Segment, ...] = tuple(segments)
        self.summaries = summaries if summaries is not None else SummaryCache()
        self.total = sum(map(len, map(_DEVICES, self.segments)))
        self._devices: list[api.Device] | None = None
        self._positions: dict[str, int] | None = None
        # Set by replaced(): this index is ``parent`` with the segments at ``patched`` positions swapped, so a
        # dry-run can start from the parent's result and redo only those (see dryrun.Result).
        self.parent: DeviceIndex | None = None
        self.patched: tuple[int, ...] = ()
        # Dry-run results by selector chain: valid exactly as long as this index (segments are immutable, and
        # a change of the inventory builds a new index). Owned here so that it dies with the index.
        self.memo: OrderedDict[Any, Any] = OrderedDict()
        # What these devices publish per driver (webhook.validate.schemas), with the registry it was built for.
        self.schemas: Any = None

    @property
    def devices(self) -> list[api.Device]:
        """Every device, segment after segment (built on first use: only reports need the flat list)."""
        if self._devices is None:
            self._devices = [d for segment in self.segments for d in segment.devices]
        return self._devices

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
    def build(cls, slices: Iterable[api.ResourceSlice], *, previous: DeviceIndex | None = None) -> DeviceIndex:
        """An index over the newest generation of each pool; segments of ``previous`` whose slice did not
        change are kept, with everything remembered on them."""
        known = {} if previous is None else {s.name: s for s in previous.segments}
        segments = []
        for slice_ in _newest_generation(slices):
            segment = known.get(slice_.meta.name)
            if segment is None or not segment.same_as(slice_):
                segment = Segment(slice_)
            segments.append(segment)
        return cls(segments, previous.summaries if previous is not None else None)

    def replaced(self, changed: Mapping[str, api.ResourceSlice | None]) -> DeviceIndex | None:
        """This index with the named slices updated in place, or None when a change is not such an update
        (a new or deleted slice, a new pool generation, a slice the cache could not parse): then
        :meth:`build` it. Same driver, pool and generation keep the set of newest-generation slices."""
        if self._positions is None:
            self._positions = {s.name: n for n, s in enumerate(self.segments)}
        segments = list(self.segments)
        patched = []
        for name, source in changed.items():
            n = self._positions.get(name)
            if n is None or source is None:
                return None
            old = segments[n].source
            if (source.driver, source.pool.name, source.pool.generation) != (
                    old.driver, old.pool.name, old.pool.generation):
                return None
            if not segments[n].same_as(source):
                segments[n] = Segment(source)
                patched.append(n)
        if not patched:
            return self
        index = DeviceIndex(segments, self.summaries)
        index._positions, index.parent, index.patched = self._positions, self, tuple(sorted(patched))
        self.parent = None  # one generation back is all a dry-run uses: no chain of old indexes stays alive
        return index

    def __len__(self) -> int:
        return self.total


def _newest_generation(slices: Iterable[api.ResourceSlice]) -> list[api.ResourceSlice]:
    """The allocator only uses the slices of a pool's newest generation; ordered by driver, pool and name.
    (One pass of plain tuples: this runs over every slice whenever one is added or deleted.)"""
    entries = [(s.driver, (pool := s.pool).name, s.meta.name, pool.generation, s) for s in slices]
    newest: dict[tuple[str, str], int] = {}
    for driver, pool_name, _, generation, _ in entries:
        if generation > newest.get((driver, pool_name), -1):
            newest[(driver, pool_name)] = generation
    entries = [e for e in entries if e[3] == newest[(e[0], e[1])]]
    entries.sort(key=_ORDER)
    return [e[4] for e in entries]


_ORDER = itemgetter(0, 1, 2)


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
