"""Simulation of kube-scheduler 1.34's DRA allocator (structured, *experimental* variant) for one node.

Pure: no I/O, no clock, no randomness. ``allocate(node, claims, slices=..., classes=..., allocated=...)``
or, with pools gathered once per node and cached, ``allocate_on(gather_pools(node, slices), claims, ...)``.
"""

from .model import DEFAULT_FEATURES, AllocationOutcome, ClaimAllocation, Features, node_selector_to_dict
from .pools import Candidate, NodeInfo, NodePools, PoolInfo, gather_pools
from .prepare import MAX_DEVICES_PER_CLAIM, AllocationError
from .search import DEFAULT_MAX_STEPS, allocate, allocate_on, allocated_devices

__all__ = [
    "DEFAULT_FEATURES", "DEFAULT_MAX_STEPS", "MAX_DEVICES_PER_CLAIM", "AllocationError", "AllocationOutcome",
    "Candidate", "ClaimAllocation", "Features", "NodeInfo", "NodePools", "PoolInfo", "allocate",
    "allocate_on", "allocated_devices", "gather_pools", "node_selector_to_dict",
]
