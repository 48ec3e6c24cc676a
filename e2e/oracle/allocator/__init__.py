"""The upstream DRA structured allocator (k8s.io/dynamic-resource-allocation v0.34.4) as a test oracle.

``AllocatorOracle`` starts the Go program once and exchanges JSON lines with it; see
docs/dev/allocator-oracle.md for the scenario and reply shapes.
"""

from .client import SCHEDULER_FEATURES, AllocatorOracle, OracleError, binary

__all__ = ["SCHEDULER_FEATURES", "AllocatorOracle", "OracleError", "binary"]
