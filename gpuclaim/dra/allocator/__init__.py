"""Simulation of kube-scheduler's DRA allocator (structured; 1.34's experimental variant, 1.35-1.37's incubating
one) for one node; ``features_for(model)`` gives a Kubernetes version's features and library minor.

Pure: no I/O, no clock, no randomness. ``allocate(node, claims, slices=..., classes=..., allocated=...)``
or, with pools gathered once per node and cached, ``allocate_on(gather_pools(node, slices), claims, ...)``.
"""

from .capacity import NO_SHARES, SharedUsage, shared_usage
from .model import (
    DEFAULT_FEATURES,
    AllocationOutcome,
    ClaimAllocation,
    Features,
    features_for,
    node_selector_to_dict,
)
from .pools import Candidate, NodeInfo, NodePools, PoolInfo, gather_pools
from .prepare import MAX_DEVICES_PER_CLAIM, AllocationError
from .search import DEFAULT_MAX_STEPS, allocate, allocate_on, allocated_devices

__all__ = [
    "DEFAULT_FEATURES",
    "DEFAULT_MAX_STEPS",
    "MAX_DEVICES_PER_CLAIM",
    "NO_SHARES",
    "AllocationError",
    "AllocationOutcome",
    "Candidate",
    "ClaimAllocation",
    "Features",
    "NodeInfo",
    "NodePools",
    "PoolInfo",
    "SharedUsage",
    "allocate",
    "allocate_on",
    "allocated_devices",
    "features_for",
    "gather_pools",
    "node_selector_to_dict",
    "shared_usage",
]
