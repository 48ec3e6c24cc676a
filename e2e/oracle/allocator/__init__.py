"""The upstream DRA structured allocator (k8s.io/dynamic-resource-allocation v0.34.4) as a test oracle.

``AllocatorOracle`` starts the Go program once and exchanges JSON lines with it; see
docs/dev/allocator-oracle.md for the scenario and reply shapes.
"""

from e2e.oracle.jsonlines import OracleError

from .client import SCHEDULER_FEATURES, AllocatorOracle, binary

__all__ = ["SCHEDULER_FEATURES", "AllocatorOracle", "OracleError", "binary"]
