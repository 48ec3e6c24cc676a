"""How many objects of gpuclaim's own each namespace holds: the ResourceClaimTemplates and shared ResourceClaims
its webhook made (`gpuclaim-<hash>`, `gpuclaim-shared-<group>-<hash>`), kept up to date from the watch events.

The webhook refuses a pod that would need one more past `conversion.maxObjectsPerNamespace` (issue 22, item 6).
What counts is what the garbage collector calls gpuclaim's: the managed-by label, the `gpuclaim-` name and no
owner. A claim the resourceclaim controller made from one of gpuclaim's templates carries the label too, but has
its pod as owner: it is the pod's, not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuclaim.kube.garbage import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NAME_PREFIX

__all__ = ["OwnedCount", "is_owned"]


def is_owned(obj: Mapping[str, Any] | None) -> bool:
    meta = (obj or {}).get("metadata") or {}
    return ((meta.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
            and str(meta.get("name", "")).startswith(NAME_PREFIX) and not meta.get("ownerReferences"))


class OwnedCount:
    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def on_object(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        delta = int(is_owned(new)) - int(is_owned(old))
        if not delta:
            return
        namespace = str((((new or old) or {}).get("metadata") or {}).get("namespace", ""))
        count = self._counts.get(namespace, 0) + delta
        if count > 0:
            self._counts[namespace] = count
        else:
            self._counts.pop(namespace, None)

    def count(self, namespace: str) -> int:
        return self._counts.get(namespace, 0)
