"""The hook point for an admission chain (mutating webhooks, then validating webhooks).

The store calls `mutate` before schema validation and `validate` after it, for every CREATE and
UPDATE (and `validate` for DELETE), with dryRun passed through, as kube-apiserver orders its
admission phases. The double ships no chain: whoever builds one implements this Protocol and
passes it as `Store(admission=...)` / `create_app(..., admission=...)`. Denials raise
`e2e.apiserver.errors.ApiError` (the Status the client will see).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpuclaim.double.apiserver.resources import ResourceType


@dataclass(slots=True)
class AdmissionAttributes:
    operation: str  # CREATE | UPDATE | DELETE
    resource: ResourceType
    namespace: str
    name: str
    obj: dict[str, Any]  # the object as it will be stored (for DELETE: the object being deleted)
    old: dict[str, Any] | None
    dry_run: bool


class Admission(Protocol):
    async def mutate(self, attrs: AdmissionAttributes) -> dict[str, Any]:
        """Return the object after every mutating webhook (or `attrs.obj` unchanged)."""
        ...

    async def validate(self, attrs: AdmissionAttributes) -> None:
        """Raise ApiError to deny."""
        ...
