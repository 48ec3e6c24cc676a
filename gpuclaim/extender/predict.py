"""From a Pod and a cluster view to one verdict per candidate node: resolve the pod's pending claims, run the
allocator simulation on each node, score the pick. Pure apart from the view it is given.

Which claims: ``pod.spec.resourceClaims`` in order. A claim found (``resourceClaimName``, or the name in
``status.resourceClaimStatuses``, or the claim the resourceclaim controller created for the pod) and already
allocated is not simulated: its devices are fixed. Its allocation's node selector pins the pod, as
kube-scheduler's DynamicResources Filter does (dynamicresources.go:947, "resourceclaim not available on the
node"): a node it does not select is unfit, whatever the other claims would get there. A template claim
that does not exist yet is predicted from its ResourceClaimTemplate (the claim will be created from it
unchanged); a claim or template the view cannot see is left out, and said so in every reason.

Caching: a verdict depends on the node's device state (its pools, labels, the devices other claims hold,
the classes) and on the pending claims' specs. ``NodeState`` is that device state, rebuilt by the view when
an event touches the node, and it keeps the verdicts it produced keyed by the claims' spec hash, the
placement policy and the hard topology request. Claims are renamed to the pod's claim entry names before
the simulation, so pods of one shape (one template) share every cached verdict.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gpuclaim.dra import allocator, cel, versions
from gpuclaim.dra.api import Device, DeviceClass, DeviceID, NodeSelector, ResourceClaim, parse_resource_claim
from gpuclaim.dra.api._read import Reader
from gpuclaim.dra.api.nodeselector import parse_node_selector
from gpuclaim.dra.config import ExtenderConfig
from gpuclaim.dra.fieldpath import Path
from gpuclaim.dra.topology import NVLINK, NodeTopology

from . import extended, groups, score
from . import fragmentation as frag

_MAX_VERDICTS_PER_NODE = 64
_UNKNOWN_NODE = "no ResourceSlice or Node known for this node"
#: the verdict of a node the view does not know, but its name: made once, not per name (a call may name 15,000
#: nodes it does not know, and 50 such calls at once is a flood of issue 22)
_UNKNOWN: score.Packed = (None, (), _UNKNOWN_NODE, (), False, False)
#: where no version is known (a view built in memory): the newest supported kube-scheduler at default gates
NEWEST_FEATURES = allocator.features_for(versions.NEWEST_MODEL)


@dataclass(eq=False)
class NodeState:
    """Everything about one node a verdict depends on; replaced (never mutated) when the node changes."""

    pools: allocator.NodePools
    held: frozenset[DeviceID]  # devices on this node other claims hold (adminAccess results excluded)
    topology: NodeTopology
    verdicts: dict[bytes, score.Packed] = field(default_factory=dict)
    # the candidates' ``driver/pool/device`` names, made once: the verdicts of every shape share these strings
    # (a node keeps up to 64 verdicts, and a fresh string per picked device was half of each verdict's bytes)
    device_names: tuple[str, ...] = ()
    # the allocator the cluster's kube-scheduler runs (its version's features); `pools` were gathered with them
    features: allocator.Features = NEWEST_FEATURES
    # with ConsumableCapacity: shares other claims hold of this node's devices (not in `held`), by consumed capacity
    shared: allocator.SharedUsage = allocator.NO_SHARES
    # the part of the node's group signature that no pod changes (groups.base), made on first use; False: none
    signature_base: tuple[Any, ...] | bool | None = None

    @property
    def name(self) -> str:
        return self.pools.node.name

    @classmethod
    def build(cls, *, config: ExtenderConfig, pools: allocator.NodePools, is_held: Callable[[DeviceID], bool],
              annotations: Mapping[str, str] | None = None,
              features: allocator.Features = NEWEST_FEATURES,
              shared_of: Callable[[Sequence[DeviceID]], allocator.SharedUsage] | None = None) -> NodeState:
        """``is_held``: taken whole; with ConsumableCapacity the caller passes only dedicated devices there and
        ``shared_of`` gives what shares use of the node's devices."""
        devices = [(c.id, c.device) for c in pools.candidates]
        held = frozenset(d for d, _ in devices if is_held(d))
        shared = shared_of([d for d, _ in devices]) if shared_of is not None else allocator.NO_SHARES
        return cls(pools=pools, held=held, topology=NodeTopology(config=config, devices=devices,
                                                                  annotations=annotations),
                   device_names=tuple(str(d) for d, _ in devices), features=features, shared=shared)  # fmt: skip


class ClusterView(Protocol):
    verdict_groups: groups.GroupCache  # shared verdicts of nodes that look the same to a pod

    def pod_claims(self, pod: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any] | None]: ...

    def template(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def classes(self) -> Mapping[str, DeviceClass]: ...

    def node_state(self, name: str) -> NodeState | None: ...

    def extended_plan(self, pod: Mapping[str, Any]) -> extended.Plan | None:
        """The claim kube-scheduler makes itself for the pod's extended resources (KEP-5004), where it does."""
        ...

    def node_allocatable(self, name: str) -> Mapping[str, Any]:
        """The node's extended resources in ``status.allocatable`` (a device plugin's count)."""
        ...


@dataclass(frozen=True, slots=True)
class PodRequest:
    claims: tuple[ResourceClaim, ...]  # pending claims, named after the pod's claim entries
    key: bytes  # what verdicts are cached by
    policy: frag.Policy
    required: tuple[str, ...]  # hard topology sources (annotation)
    notes: tuple[str, ...]  # claims left out and why
    # allocated claims whose allocation is restricted to some nodes: (pod claim entry name, node selector)
    pinned: tuple[tuple[str, NodeSelector], ...] = ()
    # KEP-5004: the claim kube-scheduler makes itself for the pod's extended resources, per node (`for_node`)
    extended: extended.Plan | None = None

    @property
    def empty(self) -> bool:
        """Nothing to decide per node: no pending claim, no allocated claim pinning the pod, no scheduler claim."""
        return not self.claims and not self.pinned and self.extended is None

    def for_node(self, via_dra: frozenset[str]) -> PodRequest:
        """This request with the scheduler's claim for the resources a node serves through DRA (its own key)."""
        if self.extended is None or not via_dra:
            return dataclasses.replace(self, extended=None)
        spec = self.extended.spec(via_dra)
        claim, errors = parse_resource_claim({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                              "metadata": {"name": extended.CLAIM_NAME}, "spec": spec})
        if claim is None or errors:  # cannot happen for what extended.py builds: a bug, named
            raise PodError(f"the scheduler's claim for {sorted(via_dra)}: {'; '.join(str(e) for e in errors[:3])}")
        key = hashlib.blake2b(self.key + orjson.dumps(sorted(via_dra)), digest_size=16).digest()
        return dataclasses.replace(self, claims=(*self.claims, claim), key=key, extended=None)

    def pinned_elsewhere(self, node: allocator.NodeInfo) -> str | None:
        """Why an allocated claim rules ``node`` out (its allocation's node selector does not select it), or None."""
        for name, selector in self.pinned:
            if not selector.matches(labels=node.labels, name=node.name):
                return (f"resourceclaim not available on the node: claim {name} is allocated, and its "
                        "allocation's node selector does not select this node")  # fmt: skip
        return None


class PodError(ValueError):
    """The pod's claims cannot be read (bad spec, bad annotation); the message names the field."""


def has_claims(pod: Mapping[str, Any]) -> bool:
    """The fast path: no ``spec.resourceClaims`` means nothing to predict (no cache access)."""
    spec = pod.get("spec")
    return isinstance(spec, dict) and bool(spec.get("resourceClaims"))


def needs_prediction(pod: Mapping[str, Any]) -> bool:
    """The fast path: claims, or a resource name with a domain that kube-scheduler may turn into its own claim
    (KEP-5004); a pod with neither gets equal scores without a cache access."""
    return has_claims(pod) or extended.may_have_extended(pod)


def check_pod(pod: Mapping[str, Any]) -> None:
    """The Pod fields the extender reads have the types the API guarantees; PodError names the first that does not
    (the cluster view's lookups assume them)."""

    def obj(value: object, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise PodError(f"{path}: expected an object")
        return value

    def strings(value: Mapping[str, Any], keys: tuple[str, ...], path: str) -> None:
        for key in keys:
            if value.get(key) is not None and not isinstance(value[key], str):
                raise PodError(f"{path}.{key}: expected a string")

    def item(value: object, path: str) -> Mapping[str, Any]:
        # list items may not be null, unlike optional fields
        if not isinstance(value, Mapping):
            raise PodError(f"{path}: expected an object")
        return value

    def array(value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise PodError(f"{path}: expected an array")
        return value

    meta = obj(pod.get("metadata"), "metadata")
    strings(meta, ("name", "namespace", "uid"), "metadata")
    annotations = obj(meta.get("annotations"), "metadata.annotations")
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise PodError(f"metadata.annotations[{key}]: expected a string")
    spec = obj(pod.get("spec"), "spec")
    for i, entry in enumerate(array(spec.get("resourceClaims"), "spec.resourceClaims")):
        path = f"spec.resourceClaims[{i}]"
        strings(item(entry, path), ("name", "resourceClaimName", "resourceClaimTemplateName"), path)
    status = obj(pod.get("status"), "status")
    for i, entry in enumerate(array(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")):
        path = f"status.resourceClaimStatuses[{i}]"
        strings(item(entry, path), ("name", "resourceClaimName"), path)


def resolve(pod: Mapping[str, Any], view: ClusterView, config: ExtenderConfig,
            parsed: dict[bytes, ResourceClaim] | None = None) -> PodRequest:
    check_pod(pod)
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    annotations = meta.get("annotations") or {}
    policy = annotations.get(config.policy_annotation, config.policy)
    if policy not in ("binpack", "spread"):
        raise PodError(f"metadata.annotations[{config.policy_annotation}]: must be binpack or spread, got {policy!r}")
    required = _required(annotations.get(config.hard_topology_annotation), config)
    entries = (pod.get("spec") or {}).get("resourceClaims") or []
    found = view.pod_claims(pod)
    claims: list[ResourceClaim] = []
    key_parts: list[Any] = [policy, required]
    notes: list[str] = []
    pinned: list[tuple[str, NodeSelector]] = []
    for i, entry in enumerate(entries):
        name = entry.get("name")
        if not name:
            raise PodError(f"spec.resourceClaims[{i}].name: required")
        raw = found.get(name)
        if raw is not None:
            allocation = (raw.get("status") or {}).get("allocation")
            if allocation is not None:  # allocated: the devices are fixed, the node may be too
                selector = _allocation_selector(name, allocation, notes)
                if selector is not None:
                    pinned.append((name, selector))
                continue
            spec = (raw.get("spec") or {})
        elif entry.get("resourceClaimName"):
            notes.append(f"claim {name}: ResourceClaim {namespace}/{entry['resourceClaimName']} not found, left out")
            continue
        elif entry.get("resourceClaimTemplateName"):
            template = view.template(namespace, entry["resourceClaimTemplateName"])
            if template is None:
                notes.append(f"claim {name}: ResourceClaimTemplate {namespace}/{entry['resourceClaimTemplateName']} "
                             "not visible, left out")
                continue
            spec = ((template.get("spec") or {}).get("spec") or {})
        else:
            raise PodError(f"spec.resourceClaims[{i}]: one of resourceClaimName, resourceClaimTemplateName required")
        body = orjson.dumps([name, spec], option=orjson.OPT_SORT_KEYS)
        key_parts.append(body)
        digest = hashlib.blake2b(body, digest_size=16).digest()
        claim = parsed.get(digest) if parsed is not None else None
        if claim is None:
            claim, errors = parse_resource_claim(
                {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                 "spec": spec})  # fmt: skip
            if claim is None or errors:
                detail = "; ".join(str(e) for e in errors[:3]) or "not a claim spec"
                raise PodError(f"claim {name}: {detail}")
            if parsed is not None:
                if len(parsed) > 4096:
                    parsed.clear()
                parsed[digest] = claim
        claims.append(claim)
    plan = view.extended_plan(pod) if extended.may_have_extended(pod) else None
    if plan is not None:
        key_parts.append(orjson.dumps([plan.classes, [(c.index, c.short_lived, sorted(c.requests.items(), key=str))
                                                      for c in plan.containers]], default=str))
    key = hashlib.blake2b(orjson.dumps(key_parts, default=repr), digest_size=16).digest()
    return PodRequest(claims=tuple(claims), key=key, policy=policy, required=required, notes=tuple(notes),
                      pinned=tuple(pinned), extended=plan)  # fmt: skip


def _allocation_selector(name: str, allocation: object, notes: list[str]) -> NodeSelector | None:
    raw = allocation.get("nodeSelector") if isinstance(allocation, Mapping) else None
    if raw is None:
        return None  # network-attached devices usable everywhere
    reader = Reader()
    selector = parse_node_selector(raw, Path.root("status").child("allocation").child("nodeSelector"), reader)
    if selector is None or reader.errors:
        notes.append(f"claim {name}: status.allocation.nodeSelector unreadable, not used to rule nodes out")
        return None
    return selector


def _required(value: object, config: ExtenderConfig) -> tuple[str, ...]:
    """The hard topology annotation: ``nvlink`` or configured attribute names (short names accepted),
    comma-separated; the pick must lie inside one domain of each."""
    if value is None or value == "":
        return ()
    known = {a.name: a.name for a in config.topology_attributes}
    known.update({a.name.rsplit("/", 1)[-1]: a.name for a in config.topology_attributes})
    known[NVLINK] = NVLINK
    out = []
    for part in str(value).split(","):
        name = part.strip()
        if name not in known:
            raise PodError(f"metadata.annotations[{config.hard_topology_annotation}]: unknown topology {name!r}; "
                           f"known: {', '.join(sorted(set(known.values())))}")
        out.append(known[name])
    return tuple(out)


@dataclass(slots=True)
class _Shared:
    """Per call, built on the first cache miss: the selector chains and constraint names signatures need."""

    cache: groups.GroupCache
    chains: list[groups.Chain] | None = None
    attributes: tuple[str, ...] = ()
    ready: bool = False


def node_verdict(state: NodeState, request: PodRequest, *, classes: Mapping[str, DeviceClass],
                 config: ExtenderConfig, shared: _Shared | None = None) -> score.NodeVerdict:
    """The verdict for one node: from the node state's cache when the same shape was asked before, else from a
    node with the same signature (``groups``), else simulated."""
    cached = state.verdicts.get(request.key)
    if cached is not None:
        return score.NodeVerdict.unpack(state.name, cached)
    sig = None
    if shared is not None:
        if not shared.ready:
            shared.chains = groups.chains(request.claims, classes)
            shared.attributes = groups.constraint_attributes(request.claims)
            shared.ready = True
        if shared.chains is not None:
            sig = groups.signature(state, request.key, shared.chains, shared.attributes)
        if sig is not None:
            grouped = shared.cache.get(sig, state)
            if grouped is not None:
                _remember(state, request.key, grouped)
                return grouped
    result = _simulate(state, request, classes=classes, config=config)
    if sig is not None and shared is not None:
        shared.cache.put(sig, state, result)
    _remember(state, request.key, result)
    return result


def _remember(state: NodeState, key: bytes, verdict: score.NodeVerdict) -> None:
    if len(state.verdicts) >= _MAX_VERDICTS_PER_NODE:
        del state.verdicts[next(iter(state.verdicts))]  # the least recently used (see `verdicts`)
    state.verdicts[key] = verdict.packed()


def _short_of_devices(state: NodeState, claims: Sequence[ResourceClaim]) -> str | None:
    """Why the pod cannot fit before any search, or None: a device goes to at most one request of a pod, so the
    pod needs at least as many free devices as its requests' smallest counts add up to. Without this check, 9
    single-GPU claims on an 8-GPU node ran the whole search budget (200,000 steps, 0.2 s) on every node shape."""
    needed = 0
    for claim in claims:
        for request in claim.spec.requests:
            # adminAccess takes held devices and All may match none: neither is counted
            needed += min(alt.count if alt.allocation_mode == "ExactCount" and not alt.admin_access else 0
                          for alt in request.alternatives)  # fmt: skip
    if needed <= 1:
        return None
    free = 0
    for candidate in state.pools.candidates:
        if candidate.device.allow_multiple_allocations:
            return None  # consumable capacity: one device may serve several requests
        free += candidate.on_node and not candidate.blocked and candidate.id not in state.held
    if needed <= free:
        return None
    return f"the pod's claims do not fit on this node's free devices: they ask for at least {needed}, it has {free}"


def _simulate(state: NodeState, request: PodRequest, *, classes: Mapping[str, DeviceClass],
              config: ExtenderConfig) -> score.NodeVerdict:
    claims = request.claims
    short = _short_of_devices(state, claims)
    if short is not None:
        return score.NodeVerdict(node=state.name, score=None, devices=(), reason=short, strict=score.NO_DOMAINS)
    outcome = allocator.allocate_on(state.pools, claims, classes=classes, allocated=state.held,
                                    features=state.features, shared=state.shared)
    if not outcome.ok:
        result = score.unfit(state.name, outcome)
    else:
        picked = {r.id for c in outcome.claims for r in c.results if not r.admin_access}
        all_ids = [c.id for c in state.pools.candidates]
        fr = frag.fragmentation(policy=request.policy, matching=matching_devices(state, claims, classes),
                                held=state.held, picked=picked, all_devices=all_ids, topology=state.topology)
        result = score.verdict(node=state.name, claims=claims, outcome=outcome, topology=state.topology, frag=fr,
                               policy=request.policy, weights=config.weights)  # fmt: skip
    return result


def matching_devices(state: NodeState, claims: Sequence[ResourceClaim],
                     classes: Mapping[str, DeviceClass]) -> list[DeviceID]:
    """Devices any alternative of the claims could take (class then request selectors; an error is no match)."""
    chains: list[list[cel.CompiledSelector]] = []
    for claim in claims:
        for request in claim.spec.requests:
            for alt in request.alternatives:
                klass = classes.get(alt.device_class_name)
                if klass is None:
                    continue
                try:
                    chains.append([cel.compile_selector(s.expression, mode="stored")
                                   for s in (*klass.selectors, *alt.selectors)])  # fmt: skip
                except cel.CelCompileError:
                    continue
    out = []
    for candidate in state.pools.candidates:
        if candidate.on_node and any(_all_true(chain, candidate.device) for chain in chains):
            out.append(candidate.id)
    return out


def _all_true(chain: Sequence[cel.CompiledSelector], device: Device) -> bool:
    try:
        return all(s.evaluate(device) for s in chain)
    except cel.CelRuntimeError:
        return False


def predict(pod_request: PodRequest, names: Sequence[str], view: ClusterView,
            config: ExtenderConfig) -> list[score.NodeVerdict]:
    """One verdict per name, in order; a node the view does not know is unfit with that reason."""
    return list(verdicts(pod_request, names, view, config))


def verdicts(pod_request: PodRequest, names: Sequence[str], view: ClusterView,
             config: ExtenderConfig) -> Iterator[score.NodeVerdict]:
    """`predict` one node at a time: a caller on an event loop can yield it between two nodes (the first call of
    a pod shape simulates every node, and a node state rebuilt after an event is parsed anew)."""
    classes = view.classes()
    node_state = view.node_state
    plan = pod_request.extended
    if plan is not None:
        yield from _extended_verdicts(pod_request, plan, names, view, config)
        return
    key = pod_request.key
    shared = _Shared(view.verdict_groups)
    pinned = pod_request.pinned
    for name in names:  # the hot loop: 5,000 nodes per call, almost always two dict hits
        state = node_state(name)
        if state is None:
            yield score.NodeVerdict.unpack(name, _UNKNOWN)
            continue
        if pinned:
            why = pod_request.pinned_elsewhere(state.pools.node)
            if why is not None:
                yield score.NodeVerdict(node=name, score=None, devices=(), reason=why, strict=score.NO_DOMAINS,
                                        pinned=True)  # fmt: skip
                continue
            if not pod_request.claims:
                yield score.NodeVerdict(node=name, score=0, devices=(), strict=score.NO_DOMAINS,
                                        reason="every claim is allocated and available on this node")
                continue
        cache = state.verdicts
        packed = cache.pop(key, None)
        if packed is not None:
            # moved to the end: the cache forgets the least recently used shape, so a burst of new shapes (64
            # over every node in the hostile bench) does not make the shapes in steady use cold again
            cache[key] = packed
            yield score.NodeVerdict.unpack(name, packed)
        else:
            yield node_verdict(state, pod_request, classes=classes, config=config, shared=shared)


def _extended_verdicts(pod_request: PodRequest, plan: extended.Plan, names: Sequence[str], view: ClusterView,
                       config: ExtenderConfig) -> Iterator[score.NodeVerdict]:
    """KEP-5004: the scheduler's claim differs per node (a device plugin serves a resource where the node has it in
    allocatable), so the nodes are predicted per variant of the request, each with its own verdict cache key,
    and answered in the order asked."""
    groups_: dict[frozenset[str], list[str]] = {}
    for name in names:
        groups_.setdefault(plan.via_dra(view.node_allocatable(name)), []).append(name)
    out: dict[str, score.NodeVerdict] = {}
    for via_dra, members in groups_.items():
        variant = pod_request.for_node(via_dra)
        if variant.empty:
            for name in members:
                out[name] = score.NodeVerdict(node=name, score=0, devices=(), strict=score.NO_DOMAINS,
                                              reason="the device plugin serves the pod's extended resources here")
            continue
        for verdict in verdicts(variant, members, view, config):
            out[verdict.node] = verdict
    for name in names:
        yield out[name]
