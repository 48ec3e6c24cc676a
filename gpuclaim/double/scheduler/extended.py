"""Extended resources in the scheduler double: NodeResourcesFit's check of a pod's extended resources (e.g.
``nvidia.com/gpu``) against a node's allocatable, and KEP-5004, the claim kube-scheduler makes itself where the
version's DRAExtendedResource gate is on (1.36 beta, 1.37 GA; K37/pkg/scheduler/framework/plugins/
dynamicresources/extendeddynamicresources.go, noderesources/fit.go).

- NodeResourcesFit: per extended resource the pod requests (the larger of its containers' sum and its largest
  init container, as ``PodRequests`` without sidecar arithmetic), the node's allocatable minus what the pods
  bound to it request must cover it, else "Insufficient <name>". A resource the node does not serve through a
  device plugin (allocatable 0 or absent) but a DeviceClass answers to is delegated to DRA where the gate is on
  (``shouldDelegateResourceToDRA``).
- DynamicResources: the delegated resources of the node become one claim (``gpuclaim.extender.extended``: one
  ExactCount request per container and resource, ``container-<i>-request-<j>``), allocated after the pod's own
  claims. At bind it is created with generateName ``<pod>-extended-resources-``, the pod as controller owner and
  the annotation ``resource.kubernetes.io/extended-resource-claim: "true"``, allocated and reserved like any
  claim, and the pod's ``status.extendedResourceClaimStatus`` names it with the request mappings.

The claim's shape comes from the extender's own module (the double and the extender agree by construction); the
real control plane is the judge of both (tests/realkube/test_realkube_extended.py). CPU, memory and the other
scalar resources are not modelled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from gpuclaim.dra.api.names import check_extended_resource_name
from gpuclaim.dra.mapping import IMPLICIT_PREFIX
from gpuclaim.dra.quantity import QuantityError, parse_quantity
from gpuclaim.extender.extended import Plan

Obj = dict[str, Any]
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
#: the key of the scheduler's claim among a decision's devices (pod claim names are DNS labels: no clash)
CLAIM_KEY = "<extended-resources>"


def is_extended(name: str) -> bool:
    """An extended resource name (a domain, not ``kubernetes.io``), or a class's implicit name."""
    return name.startswith(IMPLICIT_PREFIX) or not check_extended_resource_name(name)


def _count(raw: Any) -> int:
    try:
        return parse_quantity(str(raw)).as_int64() or 0
    except QuantityError:
        return 0  # the apiserver refuses a non-integer extended resource; nothing to count


def _container_requests(container: Mapping[str, Any]) -> Counter[str]:
    """Extended resources of one container as stored: a limit alone is defaulted to a request."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return Counter({k: _count(v) for k, v in merged.items() if isinstance(k, str) and is_extended(k)})


def pod_requests(pod: Mapping[str, Any]) -> Counter[str]:
    """What a pod requests of each extended resource: its containers together, or its largest init container."""
    spec = pod.get("spec") or {}
    total: Counter[str] = Counter()
    for container in spec.get("containers") or ():
        total.update(_container_requests(container))
    for container in spec.get("initContainers") or ():
        for name, amount in _container_requests(container).items():
            total[name] = max(total[name], amount)
    return +total


def node_usage(pods: Iterable[Obj]) -> dict[str, Counter[str]]:
    """Per node, the extended resources the pods bound to it and not finished request."""
    used: dict[str, Counter[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used.setdefault(node, Counter()).update(pod_requests(pod))
    return used


def allocatable(node: Obj) -> Mapping[str, Any]:
    return (node.get("status") or {}).get("allocatable") or {}


def delegated(plan: Plan | None, node: Obj) -> frozenset[str]:
    """The resources this node leaves to DRA (none without a plan: the gate is off or no class answers)."""
    return frozenset() if plan is None else plan.via_dra(allocatable(node))


def insufficient(wanted: Mapping[str, int], node: Obj, used: Mapping[str, int], plan: Plan | None) -> str | None:
    """NodeResourcesFit's reason for the first extended resource the node cannot give, or None."""
    have = allocatable(node)
    to_dra = delegated(plan, node)
    for name in sorted(wanted):
        if name in to_dra:
            continue
        if wanted[name] > _count(have.get(name, 0)) - used.get(name, 0):
            return f"Insufficient {name}"
    return None


def claim_object(pod: Obj, spec: Mapping[str, Any]) -> Obj:
    """The claim as kube-scheduler's PreBind creates it."""
    meta = pod["metadata"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": f"{meta['name']}-extended-resources-", "namespace": meta.get("namespace", ""),
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True}],
                         "annotations": {ANNOTATION: "true"}},
            "spec": dict(spec)}
