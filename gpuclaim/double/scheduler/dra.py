"""The DynamicResources plugin of kube-scheduler (PreEnqueue, PreFilter, Filter) on a snapshot of the double.

The version is the control plane's (its /version): its allocator features, and the DeviceTaintRules its slice
tracker applies to the slices before allocating (`dra.taints`).
Feasibility on a node is `dra.allocator` run on the slices that node sees, with the devices every claim's
`status.allocation` already holds (adminAccess results excluded) and the pod's unallocated claims in pod order.
A claim already allocated only constrains the node through its `allocation.nodeSelector`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    _pools: dict[str, allocator.NodePools] = field(default_factory=dict)

    @classmethod
    def build(cls, *, claims: list[Obj], classes: list[Obj], slices: list[Obj], nodes: list[Obj],
              model: versions.KubernetesModel = versions.NEWEST_MODEL, taint_rules: Sequence[Obj] = ()) -> Snapshot:
        parsed_classes = {}
        for raw in classes:
            parsed, _ = parse_device_class(raw)
            if parsed is not None:
                parsed_classes[parsed.name] = parsed
        parsed_slices = [m for m in (parse_resource_slice(raw)[0] for raw in slices) if m is not None]
        rules, _ = taints.parse_rules(taint_rules)  # the double's apiserver validated them
        parsed_slices = taints.apply_to_slices(parsed_slices, rules, model, parsed_classes)
        parsed_claims = [m for m in (parse_resource_claim(raw)[0] for raw in claims) if m is not None]
        by_key = {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in claims}
        return cls(by_key, parsed_classes, parsed_slices, nodes, allocator.allocated_devices(parsed_claims),
                   allocator.features_for(model))

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
    """The pod's claims by pod claim name: (the claim object, its parsed model)."""

    all: dict[str, Obj]
    pending: list[tuple[str, ResourceClaim]]  # not allocated yet, in pod order


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
    return PodClaims(found, pending)


@dataclass(frozen=True, slots=True)
class NodeFit:
    ok: bool
    reason: str | None = None
    error: str | None = None  # the allocator failed: the pod's cycle fails (status Error upstream)
    allocations: Mapping[str, allocator.ClaimAllocation] = field(default_factory=dict)


def filter_node(node: Obj, claims: PodClaims, snapshot: Snapshot) -> NodeFit:
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    for claim in claims.all.values():
        selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
        if selector and not node_selector(selector).matches(labels=labels, name=name):
            return NodeFit(False, NOT_ON_NODE)
    if not claims.pending:
        return NodeFit(True)
    outcome = allocator.allocate_on(snapshot.pools(node), [model for _, model in claims.pending],
                                    classes=snapshot.classes, allocated=snapshot.allocated,
                                    features=snapshot.features)
    if outcome.status == "error":
        return NodeFit(False, error=outcome.error)
    if not outcome.ok:
        return NodeFit(False, CANNOT_ALLOCATE)
    return NodeFit(True, allocations={pod_name: alloc for (pod_name, _), alloc in zip(claims.pending,
                                                                                      outcome.claims, strict=True)})
