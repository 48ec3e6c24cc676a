"""The DynamicResources plugin of kube-scheduler (PreEnqueue, PreFilter, Filter) on a snapshot of the double.

The version is the control plane's (its /version): its allocator features, and the DeviceTaintRules its slice
tracker applies to the slices before allocating (`dra.taints`).
Feasibility on a node is `dra.allocator` run on the slices that node sees, with the devices every claim's
`status.allocation` already holds (adminAccess results excluded) and the pod's unallocated claims in pod order.
A claim already allocated only constrains the node through its `allocation.nodeSelector`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpuclaim.double.scheduler import extended
from gpuclaim.dra import allocator, taints, versions
from gpuclaim.dra.api import (
    DeviceClass,
    DeviceID,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
    ResourceSlice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from gpuclaim.extender import extended as kep5004

Obj = dict[str, Any]
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"


class PodNotReady(Exception):
    """PreEnqueue/PreFilter: the pod cannot be tried on any node yet (the message says why)."""


def node_selector(raw: Any) -> NodeSelector:
    """A core/v1 NodeSelector from JSON (already schema-validated by the double)."""
    def reqs(items: Any) -> tuple[NodeSelectorRequirement, ...]:
        return tuple(NodeSelectorRequirement(str(r.get("key")), str(r.get("operator")), tuple(r.get("values") or ()))
                     for r in items or ())

    return NodeSelector(tuple(NodeSelectorTerm(reqs(t.get("matchExpressions")), reqs(t.get("matchFields")))
                              for t in (raw or {}).get("nodeSelectorTerms") or ()))


@dataclass
class Snapshot:
    """What PreFilter reads: claims, classes, slices, nodes; plus the devices allocated so far."""

    claims: dict[tuple[str, str], Obj]
    classes: dict[str, DeviceClass]
    slices: list[ResourceSlice]
    nodes: list[Obj]
    allocated: set[DeviceID] = field(default_factory=set)
    features: allocator.Features = field(default_factory=lambda: allocator.features_for(versions.NEWEST_MODEL))
    # shares of devices that allow multiple allocations (ConsumableCapacity): not in `allocated`, counted by capacity
    shared: allocator.SharedUsage = allocator.NO_SHARES
    model: versions.KubernetesModel = versions.NEWEST_MODEL
    # KEP-5004: resource name -> DeviceClass, as the scheduler's class cache answers (extended.py)
    resolver: kep5004.ClassResolver | None = None
    # per node, the extended resources its bound pods request (NodeResourcesFit's device-plugin accounting)
    used: dict[str, Counter[str]] = field(default_factory=dict)
    _pools: dict[str, allocator.NodePools] = field(default_factory=dict)

    @classmethod
    def build(cls, *, claims: list[Obj], classes: list[Obj], slices: list[Obj], nodes: list[Obj],
              model: versions.KubernetesModel = versions.NEWEST_MODEL, taint_rules: Sequence[Obj] = (),
              pods: Sequence[Obj] = ()) -> Snapshot:
        parsed_classes = {}
        created = {}
        for raw in classes:
            parsed, _ = parse_device_class(raw)
            if parsed is not None:
                parsed_classes[parsed.name] = parsed
                created[parsed.name] = str(raw["metadata"].get("creationTimestamp") or "")
        parsed_slices = [m for m in (parse_resource_slice(raw)[0] for raw in slices) if m is not None]
        rules, _ = taints.parse_rules(taint_rules)  # the double's apiserver validated them
        parsed_slices = taints.apply_to_slices(parsed_slices, rules, model, parsed_classes)
        parsed_claims = [m for m in (parse_resource_claim(raw)[0] for raw in claims) if m is not None]
        by_key = {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in claims}
        features = allocator.features_for(model)
        shares_apart = features.consumable_capacity
        return cls(by_key, parsed_classes, parsed_slices, nodes,
                   allocator.allocated_devices(parsed_claims, shares_apart=shares_apart), features,
                   allocator.shared_usage(parsed_claims) if shares_apart else allocator.NO_SHARES, model,
                   kep5004.ClassResolver(parsed_classes, created, model), extended.node_usage(pods))

    def record(self, allocation: allocator.ClaimAllocation) -> None:
        """The next pod of this pass must not get the devices `allocation` took, nor the capacity its shares used."""
        shares = [r for r in allocation.results
                  if not r.admin_access and r.share_id is not None and self.features.consumable_capacity]
        self.allocated.update(r.id for r in allocation.results if not r.admin_access and r not in shares)
        if shares:
            consumed = {d: dict(c) for d, c in self.shared.consumed.items()}
            for r in shares:
                total = consumed.setdefault(r.id, {})
                for name, q in (r.consumed_capacity or {}).items():
                    total[name] = total.get(name, Fraction(0)) + q.value
            self.shared = allocator.SharedUsage(self.shared.devices | {r.id for r in shares}, consumed)

    def pools(self, node: Obj) -> allocator.NodePools:
        """The node's pools, gathered once per snapshot (their selector caches then serve every pod)."""
        name = node["metadata"]["name"]
        pools = self._pools.get(name)
        if pools is None:
            info = allocator.NodeInfo(name, dict(node["metadata"].get("labels") or {}))
            pools = self._pools[name] = allocator.gather_pools(info, self.slices, features=self.features)
        return pools


@dataclass(frozen=True, slots=True)
class PodClaims:
    """The pod's claims by pod claim name: (the claim object, its parsed model); and its extended resources, with
    the plan of the claim the scheduler makes for those a node leaves to DRA (None: the gate is off, or no
    DeviceClass answers to any of them)."""

    all: dict[str, Obj]
    pending: list[tuple[str, ResourceClaim]]  # not allocated yet, in pod order
    wanted: Counter[str] = field(default_factory=Counter)
    plan: kep5004.Plan | None = None
    namespace: str = ""


def pod_claims(pod: Obj, snapshot: Snapshot) -> PodClaims:
    """PreEnqueue + PreFilter: every claim must exist, not be deleted, and be usable by this pod."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    namespace = meta.get("namespace", "")
    statuses = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get(
        "resourceClaimStatuses") or ()}
    found: dict[str, Obj] = {}
    pending: list[tuple[str, ResourceClaim]] = []
    for entry in spec.get("resourceClaims") or ():
        name = entry.get("resourceClaimName")
        if name is None:
            if entry["name"] not in statuses:
                raise PodNotReady(f'pod "{namespace}/{meta["name"]}": ResourceClaim not created yet')
            name = statuses[entry["name"]]
            if name is None:
                continue  # the controller decided no claim is needed
        claim = snapshot.claims.get((namespace, name))
        if claim is None:
            raise PodNotReady(f'resourceclaim "{name}" not found')
        if claim["metadata"].get("deletionTimestamp"):
            raise PodNotReady(f'resourceclaim "{name}" is being deleted')
        if entry.get("resourceClaimTemplateName"):
            owners = [r.get("uid") for r in claim["metadata"].get("ownerReferences") or () if r.get("controller")]
            if owners != [meta.get("uid")]:
                raise PodNotReady(f'ResourceClaim {namespace}/{name} was not created for pod '
                                  f'{namespace}/{meta["name"]} (pod is not owner)')
        found[entry["name"]] = claim
        if not (claim.get("status") or {}).get("allocation"):
            model, errors = parse_resource_claim(claim)
            if model is None:
                raise PodNotReady(f'resourceclaim "{name}": ' + "; ".join(str(e) for e in errors))
            pending.append((entry["name"], model))
    plan = None
    if snapshot.resolver is not None and kep5004.may_have_extended(pod):
        plan = kep5004.plan(pod, snapshot.resolver, snapshot.model)
    return PodClaims(found, pending, extended.pod_requests(pod), plan, namespace)


@dataclass(frozen=True, slots=True)
class ExtendedClaim:
    """The claim the scheduler makes on one node for the extended resources it leaves to DRA (KEP-5004)."""

    spec: Mapping[str, Any]
    mappings: list[dict[str, str]]  # status.extendedResourceClaimStatus.requestMappings
    allocation: allocator.ClaimAllocation | None = None


@dataclass(frozen=True, slots=True)
class NodeFit:
    ok: bool
    reason: str | None = None
    error: str | None = None  # the allocator failed: the pod's cycle fails (status Error upstream)
    allocations: Mapping[str, allocator.ClaimAllocation] = field(default_factory=dict)
    extended: ExtendedClaim | None = None


def filter_node(node: Obj, claims: PodClaims, snapshot: Snapshot) -> NodeFit:
    """NodeResourcesFit for extended resources, then DynamicResources."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    short = extended.insufficient(claims.wanted, node, snapshot.used.get(name, {}), claims.plan)
    if short is not None:
        return NodeFit(False, short)
    for claim in claims.all.values():
        selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
        if selector and not node_selector(selector).matches(labels=labels, name=name):
            return NodeFit(False, NOT_ON_NODE)
    to_dra = extended.delegated(claims.plan, node)
    own: ExtendedClaim | None = None
    models = [model for _, model in claims.pending]
    if claims.plan is not None and to_dra:
        spec, mappings = claims.plan.claim(to_dra)
        own = ExtendedClaim(spec, mappings)
        parsed, errors = parse_resource_claim({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                               "metadata": {"name": kep5004.CLAIM_NAME,
                                                            "namespace": claims.namespace},
                                               "spec": spec})
        if parsed is None or errors:  # cannot happen for what the plan builds: a bug, named
            return NodeFit(False, error=f"the extended resources' claim: {'; '.join(str(e) for e in errors[:3])}")
        models.append(parsed)  # upstream's claim store puts it after the pod's own claims
    if not models:
        return NodeFit(True)
    outcome = allocator.allocate_on(snapshot.pools(node), models, classes=snapshot.classes,
                                    allocated=snapshot.allocated, features=snapshot.features, shared=snapshot.shared)
    if outcome.status == "error":
        return NodeFit(False, error=outcome.error)
    if not outcome.ok:
        return NodeFit(False, CANNOT_ALLOCATE)
    allocations = dict(zip((pod_name for pod_name, _ in claims.pending), outcome.claims, strict=False))
    if own is not None:
        own = dataclasses.replace(own, allocation=outcome.claims[-1])
    return NodeFit(True, allocations=allocations, extended=own)
