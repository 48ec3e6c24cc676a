"""The upstream DRA structured allocator (k8s.io/dynamic-resource-allocation v0.34-v0.37) as a test oracle.

``AllocatorOracle(version="1.37")`` starts that version's Go program once and exchanges JSON lines with it; see
docs/dev/allocator-oracle.md for the scenario and reply shapes.
"""

from e2e.oracle.jsonlines import OracleError

from .client import AllocatorOracle, binary

__all__ = ["AllocatorOracle", "OracleError", "binary"]
