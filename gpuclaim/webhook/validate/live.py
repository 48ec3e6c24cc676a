"""The :class:`~webhook.validate.inventory.Inventory` over the live cluster cache (``kube.ClusterCache``).

ResourceSlices are parsed once, by the cache, when they arrive (``ClusterCache.parsed_slices()``); this
module never parses one. After slice events the :class:`DeviceIndex` is renewed lazily, on the next request:
slices updated in place (a device health update) are patched into it, and the dry-run redoes only those
(:meth:`DeviceIndex.replaced`); an added or deleted slice rebuilds it, keeping the segment of every unchanged
slice with the summaries remembered on it. DeviceClasses are parsed by the cache too, once per event.

By default the cache watches every ResourceClaimTemplate, so a template it does not hold is missing. A cache
narrowed to gpuclaim's own templates (named ``gpuclaim-<hash>``) cannot tell: for any other name a template
lookup then answers UNKNOWN rather than "missing".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gpuclaim.dra import api
from gpuclaim.kube.cache import ClusterCache

from .inventory import UNKNOWN, DeviceIndex, Unknown

__all__ = ["MANAGED_TEMPLATE_PREFIX", "LiveInventory"]

MANAGED_TEMPLATE_PREFIX = "gpuclaim-"
log = logging.getLogger(__name__)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("name", "")), str(meta.get("resourceVersion", ""))


class LiveInventory:
    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache
        self._templates: dict[tuple[str, str], tuple[str, api.ResourceClaimTemplate | None]] = {}
        self._index: DeviceIndex | None = None
        # Slices changed since self._index was built: names updated in place, or None after an addition or
        # deletion (which may change pool generations and order: the index is then built again).
        self._changed: set[str] | None = None
        specs = getattr(cache, "specs", ())
        self._all_templates = any(s.kind == "ResourceClaimTemplate" and not s.label_selector for s in specs)
        cache.subscribe(self._on_event)

    def _on_event(self, kind: str, event_type: str, obj: Mapping[str, Any]) -> None:
        if kind == "ResourceSlice":
            # The cache parsed the slice already; the next request patches or rebuilds the index from that.
            if event_type == "MODIFIED" and self._changed is not None:
                self._changed.add(_key(obj)[0])
            else:
                self._changed = None

    # ---- Inventory ------------------------------------------------------------------------------------
    def devices(self) -> DeviceIndex | Unknown:
        if not self._cache.synced:
            return UNKNOWN
        if self._index is None or self._changed is None:
            self._index = DeviceIndex.build(self._cache.parsed_slices(), previous=self._index)
        elif self._changed:
            parsed = self._cache.inventory.parsed_slice
            patched = self._index.replaced({name: parsed(name) for name in self._changed})
            if patched is None:
                patched = DeviceIndex.build(self._cache.parsed_slices(), previous=self._index)
            self._index = patched
        self._changed = set()
        return self._index

    def device_class(self, name: str) -> api.DeviceClass | Unknown | None:
        if not self._cache.synced:
            return UNKNOWN
        if self._cache.inventory.class_refused(name):
            return UNKNOWN  # an invalid class: not ours to judge here
        return self._cache.inventory.parsed_class(name)

    def namespace_labels(self, name: str) -> Mapping[str, str] | Unknown | None:
        return self._cache.namespace_labels(name) if self._cache.synced else UNKNOWN

    def template(self, namespace: str, name: str) -> api.ResourceClaimTemplate | Unknown | None:
        if not self._cache.synced or not (self._all_templates or name.startswith(MANAGED_TEMPLATE_PREFIX)):
            return UNKNOWN
        obj = self._cache.template(namespace, name)
        if obj is None:
            return None
        version = _key(obj)[1]
        known = self._templates.get((namespace, name))
        if known is None or known[0] != version:
            model, errors = api.parse_resource_claim_template(obj)
            known = self._templates[(namespace, name)] = (version, None if errors else model)
        return UNKNOWN if known[1] is None else known[1]
