"""A bounded memo of :func:`convert_pod` results, keyed by exactly the parts of the pod that conversion reads.

Pods of one ReplicaSet, Job or StatefulSet differ in their names, generated volumes (`kube-api-access-<random>`
is injected before webhooks run), env values and images, none of which conversion reads; they share one
entry. The key (:func:`conversion_key`) holds, byte for byte, what `convert_pod` looks at:

- `metadata.namespace`, and of `metadata.annotations` only the opt-out and sharing-group annotations;
- `spec.nodeSelector`, `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`,
  `spec.resourceClaims`, `spec.schedulerName`;
- per init and app container, in order: `name`, `restartPolicy`, `resources` (and whether it is present);
- the admission request's namespace, gpuclaim's own namespace and the namespace's labels.

The config and the DeviceClass set are not in the key: the cache is emptied when either is a different object
than the last call's (the caller passes a new mapping when a DeviceClass changes; see `webhook.admit`).
`tests/webhook/convert/test_convert_cache.py` records every read `convert_pod` makes and checks each is covered.

Cached results are shared between requests: callers must treat a returned :class:`Conversion` as read-only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from gpuclaim.dra.api import DeviceClass
from gpuclaim.dra.config import Config, ConversionConfig

from .containers import APP, INIT
from .pod import Conversion, convert_pod

DEFAULT_MAX_ENTRIES = 4096
#: the cache's budget in bytes (issue 14, finding 4: bounded by entries alone, 250 distinct 1.47 MB pods took the
#: webhook from 82 to 1,092 MB). An entry is charged its key plus its encoded patch and objects, times
#: _OBJECT_OVERHEAD for what the same data costs as Python objects (measured ~3x the JSON size for decoded pods)
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
#: an entry charged more than this is not kept: pods that size are not the shapes ReplicaSets repeat
DEFAULT_MAX_ENTRY_BYTES = 256 * 1024
_OBJECT_OVERHEAD = 3


_SPEC_FIELDS = ("nodeSelector", "resourceClaims", "schedulerName")
_CONTAINER_FIELDS = ("name", "restartPolicy", "resources")
_REQUIRED = ("requiredDuringSchedulingIgnoredDuringExecution",)


def _is_map(node: Any) -> TypeGuard[Mapping[str, Any]]:
    # decoded JSON is all dicts and the ABC check costs more than the rest of the key: exact types first
    return type(node) is dict or (node is not None and isinstance(node, Mapping))


def _pick(node: Any, keys: tuple[str, ...]) -> Any:
    """The listed fields of a mapping (an absent field stays absent, a null stays null); anything else tagged,
    so that no two different inputs encode alike (a JSON object, an array and null never do)."""
    if _is_map(node):
        return {k: node[k] for k in keys if k in node}
    return None if node is None else ["other", node]


def _containers(spec: Any, kind: str) -> Any:
    containers = spec.get(kind) if _is_map(spec) else None
    if isinstance(containers, list):
        return [_pick(c, _CONTAINER_FIELDS) for c in containers]
    return {"other": containers}  # conversion looks at no container here; still kept apart from a list


def conversion_key(pod: Mapping[str, Any], conv: ConversionConfig, *, namespace: str | None,
                   namespace_labels: Mapping[str, str] | None, own_namespace: str | None) -> bytes | None:
    """The bytes two pods share exactly when `convert_pod` gives them the same result (for one config and
    DeviceClass set); None when the pod holds something JSON cannot express (then it is not cached)."""
    meta = pod.get("metadata")
    spec = pod.get("spec")
    annotations = meta.get("annotations") if _is_map(meta) else None
    node_affinity = None
    if _is_map(spec):
        affinity = spec.get("affinity")
        node_affinity = affinity.get("nodeAffinity") if _is_map(affinity) else None
    parts = (
        namespace, own_namespace, _pick(meta, ("namespace",)),
        None if namespace_labels is None else list(namespace_labels.items()),
        _pick(annotations, (conv.opt_out.annotation, conv.sharing.annotation)),
        _pick(spec, _SPEC_FIELDS), _pick(node_affinity, _REQUIRED),
        _containers(spec, INIT), _containers(spec, APP),
    )
    try:
        return orjson.dumps(parts)
    except (TypeError, orjson.JSONEncodeError):  # a Mapping that is not a dict, a non-str key: compute, not cache
        return None


@dataclass(frozen=True, slots=True)
class Entry:
    """One cached result, with `derived`: room for what a caller computes from it once (the webhook keeps the
    encoded patch there), dropped with the entry."""

    conversion: Conversion
    derived: dict[str, Any] = field(default_factory=dict)


def _charge(key: bytes, conversion: Conversion) -> int:
    try:
        body = len(orjson.dumps((conversion.patch, conversion.objects)))
    except (TypeError, orjson.JSONEncodeError):
        body = len(key)  # a patch carries the pod's own values: never encodes worse than the key does
    return (len(key) + body) * _OBJECT_OVERHEAD + 512


class ConversionCache:
    """`convert` is `convert_pod` with an LRU memo in front, bounded in entries and in bytes (`max_bytes` over
    every entry's charge, see `_charge`; an entry charged over `max_entry_bytes` is computed, never kept).
    Owned by one webhook process: `webhook.admit.CoreChecks` (no locking: the event loop is single-threaded)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self.bytes = 0  # the charge of what is held now
        self._charges: dict[bytes, int] = {}
        self._entries: OrderedDict[bytes, Entry] = OrderedDict()
        self._config: ConversionConfig | None = None
        self._classes: Mapping[str, DeviceClass] | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._charges.clear()
        self.bytes = 0

    def convert(self, pod: Mapping[str, Any], *, config: Config | ConversionConfig,
                device_classes: Mapping[str, DeviceClass], namespace_labels: Mapping[str, str] | None = None,
                namespace: str | None = None, own_namespace: str | None = None) -> Conversion:
        return self.lookup(pod, config=config, device_classes=device_classes, namespace_labels=namespace_labels,
                           namespace=namespace, own_namespace=own_namespace).conversion

    def lookup(self, pod: Mapping[str, Any], *, config: Config | ConversionConfig,
               device_classes: Mapping[str, DeviceClass], namespace_labels: Mapping[str, str] | None = None,
               namespace: str | None = None, own_namespace: str | None = None) -> Entry:
        conv = config.conversion if isinstance(config, Config) else config
        if conv is not self._config or device_classes is not self._classes:
            # identity, not equality: comparing every DeviceClass per pod would cost what the cache saves
            self.clear()
            self._config, self._classes = conv, device_classes
        key = conversion_key(pod, conv, namespace=namespace, namespace_labels=namespace_labels,
                             own_namespace=own_namespace)
        if key is not None:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
        self.misses += 1
        result = Entry(convert_pod(pod, config=conv, device_classes=device_classes,
                                   namespace_labels=namespace_labels, namespace=namespace,
                                   own_namespace=own_namespace))
        if key is not None and len(key) * _OBJECT_OVERHEAD <= self.max_entry_bytes:
            charge = _charge(key, result.conversion)
            if charge <= self.max_entry_bytes:
                self._entries[key] = result
                self._charges[key] = charge
                self.bytes += charge
                while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                    old, _ = self._entries.popitem(last=False)
                    self.bytes -= self._charges.pop(old)
        return result
