"""The validating webhook's core: pure checks of DRA objects and pods against the cluster's inventory.

    verdict = validate_object(obj, operation="CREATE", namespace="team-a", inventory=inv, config=cfg)
    verdict.allowed, verdict.message, verdict.warnings

``inventory`` is anything with the :class:`Inventory` methods: :class:`OfflineInventory` (objects: lint,
tests) or :class:`webhook.validate.live.LiveInventory` (the cluster cache).
"""

from gpuclaim.webhook.validate.core import CHECKED_KINDS, Operation, validate_object
from gpuclaim.webhook.validate.inventory import UNKNOWN, DeviceIndex, Inventory, OfflineInventory, Unknown
from gpuclaim.webhook.validate.manifests import WORKLOAD_TEMPLATES, validate_manifest
from gpuclaim.webhook.validate.verdict import Notice, Verdict

__all__ = [
    "CHECKED_KINDS",
    "UNKNOWN",
    "WORKLOAD_TEMPLATES",
    "DeviceIndex",
    "Inventory",
    "Notice",
    "OfflineInventory",
    "Operation",
    "Unknown",
    "Verdict",
    "validate_manifest",
    "validate_object",
]
