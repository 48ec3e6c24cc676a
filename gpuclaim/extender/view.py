"""The live cluster view the extender predicts against: ``kube.ClusterCache`` plus per-node device states.

A ``NodeState`` (parsed pools, held devices, topology, cached verdicts) is built on first use and dropped when
an event touches the node:

- a ResourceSlice with ``nodeName`` -> that node; any other slice (allNodes, nodeSelector) -> every node;
- a Node (labels decide nodeSelector slices; the NVLink annotation) -> that node;
- a ResourceClaim whose allocated devices changed -> the nodes of the pools those devices are in (every node
  if a pool is not node-local); claim updates that do not change the allocation (reservedFor, new claims)
  touch nothing;
- a DeviceClass -> every node (selectors changed);
- a DeviceTaintRule -> every node (which devices it taints depends on its selector and the version).

The cache's indexes are updated before subscribers run, so a state rebuilt after an event sees the event.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import Any

from gpuclaim.dra import allocator, taints, versions
from gpuclaim.dra.api import DeviceClass, DeviceID
from gpuclaim.dra.config import Config
from gpuclaim.kube.cache import ClusterCache, compact_node, default_specs, taint_rule_spec
from gpuclaim.kube.reflector import Obj, WatchSpec

from . import extended
from .groups import GroupCache
from .predict import NodeState

log = logging.getLogger(__name__)


def extender_specs(config: Config) -> tuple[WatchSpec, ...]:
    """The cache's default watches, with Nodes kept as name, labels, the NVLink annotation and their extended
    resources (mixed nodes) only, and DeviceTaintRules where the cluster serves them (kube-scheduler taints devices
    with them before allocating)."""
    compact = functools.partial(compact_node, annotations=(config.extender.nvlink_annotation,))

    out = []
    for spec in default_specs():
        if spec.kind == "Node":
            spec = WatchSpec(spec.kind, spec.api_version, spec.plural, spec.label_selector, spec.namespaced,
                             compact)  # fmt: skip
        out.append(spec)
    out.append(taint_rule_spec())
    return tuple(out)


def _allocated(claim: Obj | None) -> frozenset[DeviceID]:
    if claim is None:
        return frozenset()
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
    return frozenset(DeviceID(r["driver"], r["pool"], r["device"]) for r in results
                     if isinstance(r, dict) and not r.get("adminAccess") and {"driver", "pool", "device"} <= r.keys())


class LiveView:
    def __init__(self, cache: ClusterCache, config: Config) -> None:
        self.cache = cache
        self.config = config
        self._states: dict[str, NodeState] = {}
        self.verdict_groups = GroupCache()
        self._pool_nodes: dict[tuple[str, str], set[str]] = {}
        self._claim_devices: dict[tuple[str, str], frozenset[DeviceID]] = {}
        self.parsed_claims: dict[bytes, Any] = {}
        self.rebuilds = 0
        self.needs_warm = True  # every state is gone (start, class change, cluster-wide slice): rebuild ahead
        self.warmed = False  # at least one full warm-up done since the start
        self._model: versions.KubernetesModel | None = None  # the version the states were built for
        self._features = allocator.features_for(versions.NEWEST_MODEL)
        self._rules: list[taints.TaintRule] | None = None  # parsed DeviceTaintRules; None: parse again
        self._resolver: extended.ClassResolver | None = None  # KEP-5004 class names; None: build again
        cache.subscribe(self.on_event)

    # ---- events ------------------------------------------------------------------------------------------------
    def on_event(self, kind: str, event_type: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if kind == "ResourceSlice":
            spec = obj.get("spec") or {}
            node = spec.get("nodeName")
            if node:
                key = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
                self._pool_nodes.setdefault(key, set()).add(node)
                self._states.pop(node, None)
            else:
                self._drop_all()
        elif kind == "Node":
            self._states.pop(meta.get("name", ""), None)
        elif kind == "ResourceClaim":
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            new = frozenset() if event_type == "DELETED" else _allocated(obj)
            old = self._claim_devices.get(key, frozenset())
            if new:
                self._claim_devices[key] = new
            else:
                self._claim_devices.pop(key, None)
            for device in old ^ new:
                nodes = self._pool_nodes.get((device.driver, device.pool))
                if nodes is None:
                    self._drop_all()
                    break
                for node in nodes:
                    self._states.pop(node, None)
        elif kind == "DeviceTaintRule":
            self._rules = None
            self._drop_all()
        elif kind == "DeviceClass":
            self._resolver = None
            self._drop_all()

    def _drop_all(self) -> None:
        self._states.clear()
        self.needs_warm = True

    async def prewarm(self, *, chunk: int = 100) -> int:
        """Build the state of every known node ahead of the scheduler's calls, yielding to the event loop every
        ``chunk`` nodes; at 5,000 nodes this moves seconds of slice parsing off the first /prioritize."""
        self.model()
        self.needs_warm = False
        names = set(self.cache.objects("Node"))
        names.update(str((o.get("spec") or {}).get("nodeName")) for o in self.cache.objects("ResourceSlice").values()
                     if (o.get("spec") or {}).get("nodeName"))
        built = 0
        for name in sorted(names):
            if name not in self._states:
                self.node_state(name)
                built += 1
                if built % chunk == 0:
                    await asyncio.sleep(0)
        self.warmed = True
        return built

    # ---- ClusterView -------------------------------------------------------------------------------------------
    def pod_claims(self, pod: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any] | None]:
        return self.cache.claims_for_pod(pod)

    def template(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.cache.template(namespace, name)

    def classes(self) -> Mapping[str, DeviceClass]:
        # a prediction asks for the classes once, before any node state: the moment to follow a version change
        self.model()
        return self.cache.inventory.parsed_classes()  # parsed once by the cluster view; invalid ones left out

    def model(self) -> versions.KubernetesModel:
        """The Kubernetes version the cluster runs (``/version``, followed; or the pinned one), else the newest.
        When it changes, every node state and shared verdict is dropped: they were predicted with the old one's
        allocator."""
        version = self.cache.version
        model = version.model if version is not None else versions.NEWEST_MODEL
        if model != self._model:
            if self._model is not None:
                log.info("predicting with Kubernetes %s's allocator (was %s)", model.name, self._model.name)
            self._model = model
            self._features = allocator.features_for(model)
            self._rules = None
            self._resolver = None
            self.verdict_groups = GroupCache()
            self._drop_all()
        return model

    def extended_plan(self, pod: Mapping[str, Any]) -> extended.Plan | None:
        model = self._model or self.model()
        if not model.extended_resources.scheduler_claims:
            return None
        if self._resolver is None:
            raw = self.cache.objects("DeviceClass")
            created = {str(k): str((o.get("metadata") or {}).get("creationTimestamp") or "") for k, o in raw.items()}
            self._resolver = extended.ClassResolver(self.cache.inventory.parsed_classes(), created, model)
        return extended.plan(pod, self._resolver, model)

    def node_allocatable(self, name: str) -> Mapping[str, Any]:
        node = self.cache.objects("Node").get(name) or {}
        allocatable = (node.get("status") or {}).get("allocatable")
        return allocatable if isinstance(allocatable, Mapping) else {}

    def taint_rules(self) -> list[taints.TaintRule]:
        """The DeviceTaintRules the cluster's kube-scheduler applies (none where its gate is off)."""
        if self._rules is None:
            rules, problems = taints.parse_rules(self.cache.taint_rules().values())
            for problem in problems:
                log.warning("%s; it taints no device in the prediction", problem)
            self._rules = rules if self._model is None or taints.rules_apply(self._model) else []
        return self._rules

    def node_state(self, name: str) -> NodeState | None:
        state = self._states.get(name)
        if state is not None:
            return state
        labels = self.cache.node_labels(name)
        if labels is None and not self.cache.inventory.may_have_slices(name):
            return None  # a name the cluster does not know: asked for 10,000 at a time by a flood (issue 22)
        # parsed once by the cluster cache when each slice arrived (invalid slices are left out there)
        parsed = self.cache.parsed_slices_for_node(name)
        if labels is None and not parsed:
            return None
        node_obj = self.cache.objects("Node").get(name) or {}
        model = self._model or self.model()
        rules = self.taint_rules()
        if rules:  # as kube-scheduler's slice tracker hands them to its allocator
            parsed = taints.apply_to_slices(parsed, rules, model, self.classes())
        pools = allocator.gather_pools(allocator.NodeInfo(name, labels or {}), parsed, features=self._features)
        shares_apart = self._features.consumable_capacity  # the scheduler leaves shared devices to others
        state = NodeState.build(config=self.config.extender, pools=pools,
                                is_held=self.cache.is_dedicated if shares_apart else self.cache.is_allocated,
                                annotations=(node_obj.get("metadata") or {}).get("annotations") or {},
                                features=self._features,
                                shared_of=self.cache.shared_usage if shares_apart else None)
        self._states[name] = state
        self.rebuilds += 1
        return state

    # ---- readiness ---------------------------------------------------------------------------------------------
    def ready(self) -> tuple[bool, str]:
        if not self.cache.synced:
            return False, "cluster view not synced yet"
        stale = self.cache.stale_kinds(self.config.cluster.stale_after_seconds)
        if stale:
            return False, f"cluster view stale: no event or list for {', '.join(stale)} in " \
                          f"{self.config.cluster.stale_after_seconds:g}s"
        return True, "ok"
