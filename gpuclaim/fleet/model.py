"""The fleet: every node's devices, their state, who holds them, and what tight jobs still fit (docs/fleet.md).

Pure, no I/O. :class:`FleetIndex` is fed the cluster cache's events (``on_event(kind, type, obj)``) and keeps
one JSON fragment per node; an event only marks the nodes it touches dirty, and the next read recomputes those
nodes alone, so ``snapshot()`` at 5,000 nodes joins fragments instead of rebuilding the fleet.
:func:`build_fleet` is the same computation over lists of objects (a dump directory, the CLI).

States, one per device, precedence unhealthy > allocated > reserved > tainted > free:

- unhealthy: a taint with effect NoExecute, or whose key contains "unhealthy" or "health" (drivers report health
  as taints; DeviceTaintRules count as the scheduler applies them, dra/taints.py);
- allocated: in a claim's ``status.allocation`` and the claim is reserved for a consumer (a pod runs);
- reserved: in an allocation, ``status.reservedFor`` empty (held, nobody running);
- tainted: a NoSchedule taint (slice or rule) keeps new claims off it;
- free: none of these.

Tight fits use the conversion's first ``firstAvailable`` alternative (webhook/convert/topology.py): N devices
of one driver sharing the value of ``conversion.topology.attributes[0]`` (any N when the mode is ``off``). Only
whole devices (not MIG slices) that are free and whose shared counters still have room take part; per node,
jobs are counted disjointly (a group of k free devices holds k // N jobs). ``stranded``: free devices nothing
can take because the counters they need are consumed by allocated devices (a GPU part of which is carved into
MIG devices in use). ``freeMigSlices``: free MIG devices (those carrying a ``parentUUID``) with room.
Pods come from the claims' ``reservedFor`` (what kube-scheduler writes), so no Pod watch is needed.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import orjson

from gpuclaim.dra import cel, versions
from gpuclaim.dra import taints as dra_taints
from gpuclaim.dra.allocator import pools as alloc_pools
from gpuclaim.dra.api import (
    Device,
    DeviceClass,
    DeviceID,
    ResourceSlice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from gpuclaim.dra.config import Config
from gpuclaim.dra.topology import NVLINK, NodeTopology

API_VERSION = "gpuclaim.io/v1alpha1"
KIND = "Fleet"
STATES = ("free", "allocated", "reserved", "tainted", "unhealthy")
SHAPES = (1, 2, 4, 8)
KINDS = ("ResourceSlice", "ResourceClaim", "Node", "DeviceTaintRule", "DeviceClass")
_BLOCKING = ("NoSchedule", "NoExecute")
_NATURAL = re.compile(r"(\d+)")
Obj = Mapping[str, Any]
NsName = tuple[str, str]


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _NATURAL.split(text))


def is_unhealthy(taint: Mapping[str, Any]) -> bool:
    key = str(taint.get("key", "")).lower()
    return taint.get("effect") == "NoExecute" or "unhealthy" in key or "health" in key


@dataclass(frozen=True, slots=True)
class Scope:
    """What a viewer may see: the whole fleet, or the claims and pods of some namespaces."""

    cluster_wide: bool = True
    namespaces: frozenset[str] = frozenset()

    def sees(self, namespace: str) -> bool:
        return self.cluster_wide or namespace in self.namespaces


CLUSTER = Scope()


@dataclass(frozen=True, slots=True)
class Filters:
    driver: str | None = None
    model: str | None = None  # case-insensitive substring of the device's productName
    namespace: str | None = None  # devices held by a claim of this namespace
    node_selector: tuple[tuple[str, str, frozenset[str]], ...] | None = None  # (key, "=" | "in", values)
    node_selector_text: str | None = None

    @property
    def empty(self) -> bool:
        return self.driver is None and self.model is None and self.namespace is None and self.node_selector is None

    def node_matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) in values for key, _, values in self.node_selector or ())

    def as_json(self) -> dict[str, str | None]:
        return {"driver": self.driver, "model": self.model, "namespace": self.namespace,
                "nodeSelector": self.node_selector_text}


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One device cell, as computed for its node."""

    id: DeviceID
    model: str | None
    state: str
    claims: tuple[NsName, ...]
    pods: tuple[NsName, ...]
    mig_parent: str | None
    profile: str | None
    taints: tuple[tuple[str, str], ...]
    group: tuple[str, str]  # (kind, name)
    usable: bool  # free, and its counters have room
    job: bool  # a whole device a converted N-device job can take (its mapping's DeviceClass selects it)
    tight_key: Hashable | None  # devices with one key form a tight group (None: only 1-device jobs)

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(ns for ns, _ in self.claims) | frozenset(ns for ns, _ in self.pods)

    def as_json(self, scope: Scope) -> dict[str, Any]:
        visible = [c for c in self.claims if scope.sees(c[0])]
        pods = [p for p in self.pods if scope.sees(p[0])]
        redacted = len(visible) != len(self.claims) or len(pods) != len(self.pods)
        return {"driver": self.id.driver, "pool": self.id.pool, "name": self.id.device, "model": self.model,
                "state": self.state,
                "claims": [{"namespace": ns, "name": n} for ns, n in visible],
                "pods": [{"namespace": ns, "name": n} for ns, n in pods],
                "redacted": redacted, "migParent": self.mig_parent,
                "taints": [{"key": k, "effect": e} for k, e in self.taints]}


def summarize(rows: Sequence[DeviceRow]) -> dict[str, Any]:
    """The summary of a node (or of any set of one node's devices): counts, tight fits, stranded, MIG slices."""
    counts = Counter(r.state for r in rows)
    whole_free: Counter[Hashable] = Counter()
    singles = 0
    stranded = mig_free = 0
    for r in rows:
        if r.state != "free":
            continue
        if not r.usable:
            stranded += 1
        elif r.mig_parent is not None:
            mig_free += 1
        elif r.job:
            singles += 1
            if r.tight_key is not None:
                whole_free[r.tight_key] += 1
    fits = {str(n): (singles if n == 1 else sum(k // n for k in whole_free.values())) for n in SHAPES}
    largest = max(whole_free.values(), default=0) or min(singles, 1)
    return {"devices": {"total": len(rows), **{s: counts.get(s, 0) for s in STATES}},
            "tightFits": fits, "stranded": stranded, "freeMigSlices": mig_free, "largestFreeTightGroup": largest}


def add_summaries(summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"devices": {"total": 0, **{s: 0 for s in STATES}}, "tightFits": {str(n): 0 for n in SHAPES},
                           "stranded": 0, "freeMigSlices": 0}
    for s in summaries:
        for k, v in s["devices"].items():
            out["devices"][k] += v
        for k, v in s["tightFits"].items():
            out["tightFits"][k] += v
        out["stranded"] += s["stranded"]
        out["freeMigSlices"] += s["freeMigSlices"]
    return out


@dataclass(slots=True)
class _Claim:
    namespace: str
    name: str
    devices: frozenset[DeviceID]
    pods: tuple[NsName, ...]
    in_use: bool


@dataclass(slots=True)
class NodeEntry:
    """One node's computed state; ``fragment`` is its JSON for a viewer who sees everything."""

    name: str
    labels: Mapping[str, str]
    rows: tuple[DeviceRow, ...]
    summary: dict[str, Any]
    fragment: bytes
    namespaces: frozenset[str]
    drivers: tuple[str, ...]
    shown_labels: dict[str, str] = field(default_factory=dict)

    def driver_summaries(self) -> dict[str, dict[str, Any]]:
        """The summary per driver of the node (metrics label by node and driver)."""
        return {d: summarize([r for r in self.rows if r.id.driver == d]) for d in self.drivers}

    def as_json(self, scope: Scope, rows: Sequence[DeviceRow] | None = None) -> dict[str, Any]:
        rows = self.rows if rows is None else rows
        summary = self.summary if rows is self.rows else summarize(rows)
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault(r.group, []).append(r.as_json(scope))
        parents: dict[str, Counter[str]] = {}
        for r in rows:
            if r.mig_parent is not None:
                free = parents.setdefault(r.mig_parent, Counter())
                if r.state == "free" and r.usable:
                    free[r.profile or "unknown"] += 1
        return {"name": self.name, "labels": self.shown_labels,
                "drivers": sorted({r.id.driver for r in rows}),
                "summary": summary,
                "groups": [{"kind": k, "name": n, "devices": devs} for (k, n), devs in groups.items()],
                "migParents": [{"device": p, "freeSlices": dict(sorted(c.items()))}
                               for p, c in sorted(parents.items(), key=lambda i: _natural(i[0]))]}


class FleetIndex:
    """The fleet, kept current from cache events. Owned by the server; not thread-safe (one event loop)."""

    def __init__(self, config: Config, *, model: versions.KubernetesModel | None = None) -> None:
        self.config = config
        self.kube_model = model or versions.NEWEST_MODEL
        self.kubernetes_version: str | None = None
        self.revision = 0
        self._slices: dict[str, tuple[ResourceSlice, frozenset[str]]] = {}  # name -> (parsed, nodes)
        self._node_slices: dict[str, set[str]] = defaultdict(set)
        self._claims: dict[NsName, _Claim] = {}
        self._device_claims: dict[DeviceID, set[NsName]] = defaultdict(set)
        self._device_node: dict[DeviceID, str] = {}
        self._node_devices: dict[str, list[DeviceID]] = {}
        self._node_meta: dict[str, tuple[Mapping[str, str], Mapping[str, str]]] = {}  # labels, annotations
        self._rules: dict[str, dra_taints.TaintRule] = {}
        self._rule_list: tuple[dra_taints.TaintRule, ...] = ()
        self._classes: dict[str, tuple[str, ...]] = {}  # DeviceClass name -> its CEL selectors
        self._class_objs: dict[str, DeviceClass] = {}  # 1.34's DeviceTaintRules select by class too
        self._chains: list[tuple[cel.CompiledSelector, ...]] | None = None
        self._nodes: dict[str, NodeEntry] = {}
        self._order: list[str] | None = []
        self._dirty: set[str] = set()
        self._all_dirty = False
        self._fleet_summary: tuple[int, dict[str, Any]] | None = None

    # ---- events --------------------------------------------------------------------------------------------
    def on_event(self, kind: str, event_type: str, obj: Obj) -> None:
        """A cache subscriber: ``(kind, "ADDED" | "MODIFIED" | "DELETED", object)``. Other kinds are ignored."""
        deleted = event_type == "DELETED"
        if kind == "ResourceSlice":
            self._on_slice(obj, deleted)
        elif kind == "ResourceClaim":
            self._on_claim(obj, deleted)
        elif kind == "Node":
            self._on_node(obj, deleted)
        elif kind == "DeviceTaintRule":
            self._on_rule(obj, deleted)
        elif kind == "DeviceClass":
            self._on_class(obj, deleted)

    def set_model(self, model: versions.KubernetesModel) -> None:
        """The cluster's version decides whether DeviceTaintRules apply (dra/taints.py)."""
        if model != self.kube_model:
            self.kube_model = model
            self._all_dirty = True

    @staticmethod
    def _name(obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        return str(meta.get("name", ""))

    def _on_slice(self, obj: Obj, deleted: bool) -> None:
        name = self._name(obj)
        old = self._slices.pop(name, None)
        if old is not None:
            for node in old[1]:
                self._node_slices[node].discard(name)
                self._dirty.add(node)
        if deleted:
            return
        parsed, _ = parse_resource_slice(obj)
        if parsed is None:
            return  # the apiserver refuses what does not parse; a broken object shows nothing rather than crash
        nodes = set()
        if parsed.node_name:
            nodes.add(parsed.node_name)
        elif parsed.per_device_node_selection:
            nodes.update(d.node_name for d in parsed.devices if d.node_name)
        self._slices[name] = (parsed, frozenset(nodes))
        for node in nodes:
            self._node_slices[node].add(name)
            self._dirty.add(node)

    def _on_claim(self, obj: Obj, deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        old = self._claims.pop(key, None)
        if old is not None:
            for dev in old.devices:
                holders = self._device_claims.get(dev)
                if holders is not None:
                    holders.discard(key)
                    if not holders:
                        del self._device_claims[dev]
                self._mark_device(dev)
        if deleted:
            return
        parsed, _ = parse_resource_claim(obj)
        if parsed is None or not parsed.status.allocated:
            return
        devices = frozenset(r.id for r in parsed.status.results if not r.admin_access)
        pods = tuple((key[0], c.name) for c in parsed.status.reserved_for if c.resource == "pods" and not c.api_group)
        claim = _Claim(key[0], key[1], devices, pods, bool(parsed.status.reserved_for))
        if not devices:
            return
        self._claims[key] = claim
        for dev in devices:
            self._device_claims[dev].add(key)
            self._mark_device(dev)

    def _mark_device(self, dev: DeviceID) -> None:
        node = self._device_node.get(dev)
        if node is not None:
            self._dirty.add(node)

    def _on_node(self, obj: Obj, deleted: bool) -> None:
        name = self._name(obj)
        if deleted:
            self._node_meta.pop(name, None)
        else:
            meta = obj.get("metadata") or {}
            self._node_meta[name] = (dict(meta.get("labels") or {}), dict(meta.get("annotations") or {}))
        self._dirty.add(name)

    def _on_rule(self, obj: Obj, deleted: bool) -> None:
        name = self._name(obj)
        self._rules.pop(name, None)
        if not deleted:
            # a rule gpuclaim cannot read taints nothing here; the extender reports it
            with contextlib.suppress(dra_taints.RuleError):
                self._rules[name] = dra_taints.parse_rule(obj)
        self._rule_list = tuple(self._rules[n] for n in sorted(self._rules))
        self._all_dirty = True  # rules select by driver, pool and device anywhere: rare, so recompute all

    def _on_class(self, obj: Obj, deleted: bool) -> None:
        name = self._name(obj)
        before = self._classes.pop(name, None)
        self._class_objs.pop(name, None)
        if not deleted:
            parsed, _ = parse_device_class(obj)
            if parsed is not None:
                self._classes[name] = tuple(s.expression for s in parsed.selectors)
                self._class_objs[name] = parsed
        if self._classes.get(name) != before:
            self._chains = None
            self._all_dirty = True

    def _job_chains(self) -> list[tuple[cel.CompiledSelector, ...]]:
        """One selector chain per whole-device mapping (``nvidia.com/gpu`` -> class ``gpu.nvidia.com``) whose class
        is known: the devices a converted job asks for. Templated selectors (``{suffix}``) belong to ``mig-*``."""
        if self._chains is None:
            chains = []
            for mapping in self.config.conversion.mappings:
                selectors = self._classes.get(mapping.device_class_name)
                if mapping.resource.endswith("*") or selectors is None:
                    continue
                try:
                    chains.append(tuple(cel.compile_selector(e, mode="stored")
                                        for e in (*selectors, *mapping.selectors) if "{" not in e))
                except cel.CelCompileError:
                    continue  # the webhook reports a class it cannot compile; such a class selects nothing here
            self._chains = chains
        return self._chains

    # ---- computation ---------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Nodes waiting to be recomputed (all known ones after a change that touches every node)."""
        return len(self._dirty) + (len(self._nodes) if self._all_dirty else 0)

    def flush(self, limit: int | None = None) -> int:
        """Recompute the dirty nodes (at most ``limit`` of them); bump ``revision`` when any node's JSON changed.
        Returns how many dirty nodes are left (a background task flushes in steps, so no read waits long)."""
        if self._all_dirty:
            self._dirty.update(self._nodes)
            self._dirty.update(n for n, s in self._node_slices.items() if s)
            self._all_dirty = False
        if not self._dirty:
            return 0
        batch = self._dirty if limit is None or len(self._dirty) <= limit else \
            {self._dirty.pop() for _ in range(limit)}
        changed = False
        for node in sorted(batch):
            entry = self._compute(node)
            old = self._nodes.get(node)
            if entry is None:
                if old is not None:
                    del self._nodes[node]
                    self._order = None
                    changed = True
            elif old is None or old.fragment != entry.fragment:
                if old is None:
                    self._order = None
                self._nodes[node] = entry
                changed = True
        if batch is self._dirty:
            self._dirty = set()
        if changed:
            self.revision += 1
        return len(self._dirty)

    def _compute(self, node: str) -> NodeEntry | None:
        names = self._node_slices.get(node) or set()
        slices = [self._slices[n][0] for n in names if n in self._slices]
        newest: dict[tuple[str, str], int] = {}
        for s in slices:
            key = (s.driver, s.pool.name)
            newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
        slices = sorted((s for s in slices if s.pool.generation == newest[(s.driver, s.pool.name)]),
                        key=lambda s: s.name)
        for dev in self._node_devices.pop(node, ()):
            if self._device_node.get(dev) == node:
                del self._device_node[dev]
        if not slices:
            return None
        labels, annotations = self._node_meta.get(node, ({}, {}))
        devices: list[tuple[DeviceID, Device, ResourceSlice]] = []
        counters: dict[tuple[str, str, str, str], Fraction] = {}
        for s in slices:
            for counter_set in s.shared_counters:
                set_name = str(counter_set.get("name", ""))
                for cname, amount in alloc_pools.counter_values(counter_set.get("counters")):
                    counters[(s.driver, s.pool.name, set_name, cname)] = amount
            for d in s.devices:
                if s.per_device_node_selection and d.node_name != node:
                    continue
                devices.append((d.id, d, s))
                self._device_node[d.id] = node
        self._node_devices[node] = [i for i, _, _ in devices]
        devices.sort(key=lambda t: (t[0].driver, t[0].pool, _natural(t[0].device)))
        topology = NodeTopology(config=self.config.extender, devices=[(i, d) for i, d, _ in devices],
                                annotations=annotations)
        # held devices first: what they consume is gone for everyone else
        held: dict[DeviceID, list[_Claim]] = {}
        for dev_id, _, _ in devices:
            keys = self._device_claims.get(dev_id)
            if keys:
                held[dev_id] = [self._claims[k] for k in sorted(keys)]
        left = dict(counters)
        for dev_id, device, _ in devices:
            if dev_id in held:
                for set_name, cname, amount in alloc_pools.consumption(device):
                    counter = (dev_id.driver, dev_id.pool, set_name, cname)
                    if counter in left:
                        left[counter] -= amount
        uuids = {str(d.attributes.get(f"{d.driver}/uuid")): i.device for i, d, _ in devices
                 if isinstance(d.attributes.get(f"{d.driver}/uuid"), str)}  # fmt: skip
        tight = self.config.conversion.topology
        tight_attr = tight.attributes[0] if tight.attributes and tight.mode != "off" else None
        chains = self._job_chains()
        rows = []
        for dev_id, device, slice_ in devices:
            taint_list = dra_taints.device_taints(slice_, device, self._rule_list, self.kube_model, self._class_objs)
            claims = held.get(dev_id, [])
            state = _state(taint_list, claims)
            parent_uuid = _parent_uuid(device)
            mig_parent = None
            if parent_uuid is not None:
                mig_parent = uuids.get(parent_uuid) or (dev_id.device.partition("-mig-")[0]
                                                        if "-mig-" in dev_id.device else parent_uuid)
            room = all(left.get((dev_id.driver, dev_id.pool, sn, cn), amount) >= amount
                       for sn, cn, amount in alloc_pools.consumption(device))
            if tight_attr is None:
                tight_key: Hashable | None = (dev_id.driver,)
            else:
                value = device.attributes.get(tight_attr)
                tight_key = None if value is None else (dev_id.driver, type(value).__name__, value)
            profile = device.attributes.get(f"{device.driver}/profile")
            model = device.attributes.get(f"{device.driver}/productName")
            rows.append(DeviceRow(
                id=dev_id, model=model if isinstance(model, str) else None, state=state,
                claims=tuple((c.namespace, c.name) for c in claims),
                pods=tuple(sorted({p for c in claims for p in c.pods})),
                mig_parent=mig_parent, profile=profile if isinstance(profile, str) else None,
                taints=tuple((str(t.get("key", "")), str(t.get("effect", ""))) for t in taint_list),
                group=_group(node, dev_id, topology), usable=state == "free" and room, tight_key=tight_key,
                job=parent_uuid is None and (_selected(device, chains) if self._classes else True)))
        rows_t = tuple(rows)
        entry = NodeEntry(name=node, labels=labels, rows=rows_t, summary=summarize(rows_t), fragment=b"",
                          namespaces=frozenset().union(*(r.namespaces for r in rows_t)),
                          drivers=tuple(sorted({r.id.driver for r in rows_t})),
                          shown_labels={k: labels[k] for k in self.config.fleet.labels if k in labels})
        entry.fragment = orjson.dumps(entry.as_json(CLUSTER))
        return entry

    # ---- reads ---------------------------------------------------------------------------------------------
    def nodes(self) -> list[NodeEntry]:
        """Every GPU node's entry, in name order (metrics and the CLI read these)."""
        self.flush()
        if self._order is None:
            self._order = sorted(self._nodes, key=_natural)
        return [self._nodes[n] for n in self._order]

    def namespaces(self) -> frozenset[str]:
        """Namespaces holding any device: the ones worth asking a viewer's rights about."""
        self.flush()
        return frozenset(k[0] for k in self._claims)

    def fleet_summary(self) -> dict[str, Any]:
        self.flush()
        if self._fleet_summary is None or self._fleet_summary[0] != self.revision:
            self._fleet_summary = (self.revision, add_summaries(e.summary for e in self._nodes.values()))
        return self._fleet_summary[1]

    def snapshot_dict(self, scope: Scope = CLUSTER, filters: Filters = Filters(), *,
                      generated_at: str = "") -> dict[str, Any]:
        return dict(orjson.loads(self.snapshot(scope, filters, generated_at=generated_at)))

    def snapshot(self, scope: Scope = CLUSTER, filters: Filters = Filters(), *, generated_at: str = "") -> bytes:
        """The fleet JSON for ``scope`` under ``filters``. Unfiltered nodes whose holders the viewer may all see
        are the stored fragments, joined."""
        return self.frozen().assemble(scope, filters, generated_at=generated_at)

    def frozen(self) -> Frozen:
        """The fleet as of now, safe to assemble from another thread while events keep coming (node entries are
        replaced, never changed, so the list holds this revision's)."""
        entries = self.nodes()
        return Frozen(entries=tuple(entries), revision=self.revision, summary=self.fleet_summary(),
                      kubernetes_version=self.kubernetes_version)


@dataclass(frozen=True, slots=True)
class Frozen:
    entries: tuple[NodeEntry, ...]
    revision: int
    summary: Mapping[str, Any]
    kubernetes_version: str | None

    def assemble(self, scope: Scope = CLUSTER, filters: Filters = Filters(), *, generated_at: str = "") -> bytes:
        parts: list[bytes] = []
        summaries: list[Mapping[str, Any]] = []
        for e in self.entries:
            if filters.node_selector is not None and not filters.node_matches(e.labels):
                continue
            rows = e.rows
            if filters.driver is not None or filters.model is not None or filters.namespace is not None:
                rows = tuple(r for r in rows if _row_matches(r, filters, scope))
                if not rows:
                    continue
            if rows is e.rows:
                summaries.append(e.summary)
                if scope.cluster_wide or e.namespaces <= scope.namespaces:
                    parts.append(e.fragment)
                    continue
                parts.append(orjson.dumps(e.as_json(scope)))
            else:
                body = e.as_json(scope, rows)
                summaries.append(body["summary"])
                parts.append(orjson.dumps(body))
        if filters.empty and len(summaries) == len(self.entries):
            summary = self.summary
        else:
            summary = add_summaries(summaries)
        head = {"apiVersion": API_VERSION, "kind": KIND, "revision": self.revision, "generatedAt": generated_at,
                "kubernetesVersion": self.kubernetes_version,
                "scope": {"clusterWide": scope.cluster_wide, "namespaces": sorted(scope.namespaces)},
                "filters": filters.as_json(), "summary": summary}
        return orjson.dumps(head)[:-1] + b',"nodes":[' + b",".join(parts) + b"]}"


def _row_matches(row: DeviceRow, filters: Filters, scope: Scope) -> bool:
    if filters.driver is not None and row.id.driver != filters.driver:
        return False
    if filters.model is not None and (row.model is None or filters.model.lower() not in row.model.lower()):
        return False
    return filters.namespace is None or (scope.sees(filters.namespace) and filters.namespace in row.namespaces)


def _state(taint_list: Sequence[Mapping[str, Any]], claims: Sequence[_Claim]) -> str:
    if any(is_unhealthy(t) for t in taint_list):
        return "unhealthy"
    if any(c.in_use for c in claims):
        return "allocated"
    if claims:
        return "reserved"
    if any(t.get("effect") in _BLOCKING for t in taint_list):
        return "tainted"
    return "free"


def _selected(device: Device, chains: Sequence[tuple[cel.CompiledSelector, ...]]) -> bool:
    return any(all(s.outcome(device) is True for s in chain) for chain in chains)


def _parent_uuid(device: Device) -> str | None:
    value = device.attributes.get(f"{device.driver}/parentUUID")
    if value is None:
        for name, v in device.attributes.items():
            if name.endswith("/parentUUID"):
                value = v
                break
    return value if isinstance(value, str) else None


def _group(node: str, dev_id: DeviceID, topology: NodeTopology) -> tuple[str, str]:
    """The drawing group: the PCIe root (the conversion's tight attribute by default), else an NVLink domain, else
    the NUMA node, else the node itself."""
    keys = topology.keys.get(dev_id, ())
    by_source = {s.name: k for s, k in zip(topology.sources, keys, strict=False) if k is not None}
    for name, value in by_source.items():
        if name.endswith("/pcieRoot"):
            return ("pcieRoot", str(value))
    nvlink = by_source.get(NVLINK)
    if isinstance(nvlink, tuple) and nvlink and nvlink[0] == "annotation":
        return ("nvlink", f"nvlink-{nvlink[1]}")
    if isinstance(nvlink, tuple) and nvlink and nvlink[0] == "node":
        return ("nvlink", f"nvlink-{nvlink[1]}")
    for name, value in by_source.items():
        if name.endswith("/numaNode"):
            return ("numa", str(value))
    return ("node", node)


def build_fleet(*, slices: Iterable[Obj] = (), claims: Iterable[Obj] = (), nodes: Iterable[Obj] = (),
                taint_rules: Iterable[Obj] = (), classes: Iterable[Obj] = (), config: Config,
                scope: Scope = CLUSTER, filters: Filters = Filters(),
                model: versions.KubernetesModel | None = None, kubernetes_version: str | None = None,
                generated_at: str = "") -> dict[str, Any]:
    """The fleet JSON (as a dict) from lists of objects, e.g. a cluster dump: the index fed once."""
    index = FleetIndex(config, model=model)
    index.kubernetes_version = kubernetes_version
    for kind, objs in (("Node", nodes), ("DeviceClass", classes), ("ResourceSlice", slices),
                       ("ResourceClaim", claims), ("DeviceTaintRule", taint_rules)):
        for obj in objs:
            index.on_event(kind, "ADDED", obj)
    return index.snapshot_dict(scope, filters, generated_at=generated_at)
