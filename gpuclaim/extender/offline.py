"""A cluster view read from an inventory directory (``gpuclaim score --cluster DIR``) or built in memory (tests).

The directory holds ResourceSlice, ResourceClaim, ResourceClaimTemplate, DeviceClass, Node and DeviceTaintRule
YAML, multi-document
or ``kubectl get -o yaml`` List output, any file name ending in .yaml, .yml or .json, read in sorted order.
Every node that has a Node object or a slice with ``nodeName`` is a candidate. Objects of other kinds are ignored;
an object of one of these kinds that does not parse is an error naming the file, the document and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuclaim.dra import allocator, taints, versions
from gpuclaim.dra.api import (
    DeviceClass,
    DeviceID,
    ResourceClaim,
    ResourceSlice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from gpuclaim.dra.config import ExtenderConfig
from gpuclaim.kube.dump import DumpError, read_dump

from . import extended
from .groups import GroupCache
from .predict import NodeState

KINDS = ("ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "Node", "DeviceTaintRule")


class InventoryError(ValueError):
    """The inventory cannot be read; the message names the file and what is wrong."""


class OfflineView:
    def __init__(self, objects: Iterable[Mapping[str, Any]], *, config: ExtenderConfig,
                 model: versions.KubernetesModel = versions.NEWEST_MODEL) -> None:
        """``model``: the Kubernetes version whose kube-scheduler is predicted (``--kubernetes-version``)."""
        self.config = config
        self.model = model
        self.features = allocator.features_for(model)
        self.rules: list[taints.TaintRule] = []
        self._created: dict[str, str] = {}  # DeviceClass creationTimestamps (KEP-5004: the newer class wins)
        self.slices: list[ResourceSlice] = []
        self.claims: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.templates: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._classes: dict[str, DeviceClass] = {}
        self.nodes: dict[str, Mapping[str, Any]] = {}
        for obj in objects:
            self._add(obj, where="")
        self._states: dict[str, NodeState] = {}
        self._slice_index: _SliceIndex | None = None
        self.verdict_groups = GroupCache()
        self._held: frozenset[DeviceID] | None = None
        self._shared: allocator.SharedUsage = allocator.NO_SHARES

    @classmethod
    def from_directory(cls, directory: Path, *, config: ExtenderConfig,
                       model: versions.KubernetesModel = versions.NEWEST_MODEL) -> OfflineView:
        view = cls((), config=config, model=model)
        try:
            for path, located in read_dump(directory):
                where = f"{path}: document {located.doc + 1}" + (
                    f", item {located.item}" if located.item is not None else "")
                if isinstance(located.obj, Mapping):
                    view._add(located.obj, where=where)
        except DumpError as exc:
            raise InventoryError(str(exc)) from None
        return view

    def _add(self, obj: Mapping[str, Any], *, where: str) -> None:
        kind = obj.get("kind")
        if kind not in KINDS:
            return
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = str(meta.get("name") or "")
        key = (str(meta.get("namespace") or "default"), name)
        if kind == "ResourceSlice":
            parsed, errors = parse_resource_slice(obj)
            if parsed is None or errors:
                raise InventoryError(f"{where or 'ResourceSlice ' + name}: {_errors(errors)}")
            self.slices.append(parsed)
            self._slice_index = None
        elif kind == "DeviceClass":
            klass, errors = parse_device_class(obj)
            if klass is None or errors:
                raise InventoryError(f"{where or 'DeviceClass ' + name}: {_errors(errors)}")
            self._classes[klass.name] = klass
            self._created[klass.name] = str(meta.get("creationTimestamp") or "")
        elif kind == "ResourceClaim":
            self.claims[key] = obj
        elif kind == "ResourceClaimTemplate":
            self.templates[key] = obj
        elif kind == "DeviceTaintRule":
            try:
                self.rules.append(taints.parse_rule(obj))
            except taints.RuleError as exc:
                raise InventoryError(f"{where or 'DeviceTaintRule ' + name}: {exc}") from None
            self.rules.sort(key=lambda r: r.name)
        elif name:
            self.nodes[name] = obj

    # ---- ClusterView -------------------------------------------------------------------------------------------
    def pod_claims(self, pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any] | None]:
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        statuses = {s.get("name"): s.get("resourceClaimName")
                    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or () if isinstance(s, Mapping)}
        out: dict[str, Mapping[str, Any] | None] = {}
        for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
            if not isinstance(entry, Mapping):
                continue
            name = entry.get("resourceClaimName") or statuses.get(entry.get("name"))
            out[str(entry.get("name"))] = self.claims.get((namespace, str(name))) if name else None
        return out

    def template(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.templates.get((namespace, name))

    def classes(self) -> Mapping[str, DeviceClass]:
        return self._classes

    def extended_plan(self, pod: Mapping[str, Any]) -> extended.Plan | None:
        if not self.model.extended_resources.scheduler_claims:
            return None
        return extended.plan(pod, extended.ClassResolver(self._classes, self._created, self.model), self.model)

    def node_allocatable(self, name: str) -> Mapping[str, Any]:
        allocatable = (self.nodes.get(name, {}).get("status") or {}).get("allocatable")
        return allocatable if isinstance(allocatable, Mapping) else {}

    def candidates(self) -> list[str]:
        names = set(self.nodes) | {s.node_name for s in self.slices if s.node_name}
        return sorted(names)

    def node_state(self, name: str) -> NodeState | None:
        state = self._states.get(name)
        if state is not None:
            return state
        if self._slice_index is None:
            self._slice_index = _SliceIndex(self.slices)
        if name not in self.nodes and name not in self._slice_index.pools_of_node:
            return None
        meta = self.nodes.get(name, {}).get("metadata") or {}
        node = allocator.NodeInfo(name, meta.get("labels") or {})
        slices = self._slice_index.for_node(name)
        # as kube-scheduler's slice tracker hands them to its allocator: with every matching DeviceTaintRule's taint
        slices = taints.apply_to_slices(slices, self.rules, self.model, self._classes)
        pools = allocator.gather_pools(node, slices, features=self.features)
        shares_apart = self.features.consumable_capacity  # the scheduler leaves shared devices to others
        if self._held is None:
            parsed = self._parsed_claims()
            self._held = frozenset(allocator.allocated_devices(parsed, shares_apart=shares_apart))
            self._shared = allocator.shared_usage(parsed) if shares_apart else allocator.NO_SHARES
        held, shared = self._held, self._shared
        state = NodeState.build(config=self.config, pools=pools, is_held=held.__contains__,
                                annotations=meta.get("annotations") or {}, features=self.features,
                                shared_of=lambda _devices: shared)
        self._states[name] = state
        return state

    def _parsed_claims(self) -> list[ResourceClaim]:
        out = []
        for obj in self.claims.values():
            claim, _ = parse_resource_claim(obj)
            if claim is not None:
                out.append(claim)
        return out


class _SliceIndex:
    """The slices a node's pools are gathered from, without reading every slice for every node: sorting and
    filtering all of them per node made the first call over 5,000 nodes quadratic (minutes on a loaded machine).

    A node gets every slice of each pool that has a slice with its nodeName or one without a nodeName (allNodes,
    a node selector, per-device selection), in (driver, pool, name) order: the slices gather_pools can see on it,
    and the rest of their pools, which it reads for completeness, generations and counters. Pools with no such
    slice offer the node nothing."""

    def __init__(self, slices: Iterable[ResourceSlice]) -> None:
        ordered = sorted(slices, key=lambda s: (s.driver, s.pool.name, s.name))
        self.by_pool: dict[tuple[str, str], list[tuple[int, ResourceSlice]]] = {}
        self.pools_of_node: dict[str, set[tuple[str, str]]] = {}
        self.unbound_pools: set[tuple[str, str]] = set()
        for position, s in enumerate(ordered):
            key = (s.driver, s.pool.name)
            self.by_pool.setdefault(key, []).append((position, s))
            if s.node_name is not None:
                self.pools_of_node.setdefault(s.node_name, set()).add(key)
            else:
                self.unbound_pools.add(key)

    def for_node(self, name: str) -> list[ResourceSlice]:
        keys = self.pools_of_node.get(name, set()) | self.unbound_pools
        return [s for _, s in sorted(entry for key in keys for entry in self.by_pool[key])]


def _errors(errors: list[Any]) -> str:
    if not errors:
        return "not a usable object"
    head = f"{len(errors)} error{'s' if len(errors) > 1 else ''}: "
    return head + "; ".join(str(e) for e in errors[:5])
