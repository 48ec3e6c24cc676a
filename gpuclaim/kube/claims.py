"""Incremental indexes over ResourceClaims: allocated devices, claims by pod.

Allocated devices are what kube-scheduler counts as taken: every `status.allocation.devices.results`
entry of every claim, except adminAccess results (those never block anybody else). A reference
count per device keeps deletes exact even if two claims list the same device.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuclaim.dra.api import DeviceID

Obj = dict[str, Any]
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def _allocated(claim: Obj | None) -> tuple[DeviceID, ...]:
    if claim is None:
        return ()
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    return tuple(DeviceID(r["driver"], r["pool"], r["device"]) for r in results
                 if not r.get("adminAccess") and {"driver", "pool", "device"} <= r.keys())


def _owner_pod_uid(claim: Obj) -> str | None:
    for ref in claim["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1" and ref.get("controller"):
            return str(ref.get("uid"))
    return None


class ClaimIndex:
    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], Obj] = {}
        self._refcount: dict[DeviceID, int] = {}
        self._by_owner: dict[str, set[tuple[str, str]]] = {}

    def on_claim(self, old: Obj | None, new: Obj | None) -> None:
        for device in _allocated(old):
            left = self._refcount.get(device, 0) - 1
            if left > 0:
                self._refcount[device] = left
            else:
                self._refcount.pop(device, None)
        if old is not None:
            key = (old["metadata"].get("namespace", ""), old["metadata"]["name"])
            self.claims.pop(key, None)
            owner = _owner_pod_uid(old)
            if owner is not None:
                self._by_owner.get(owner, set()).discard(key)
                if not self._by_owner.get(owner):
                    self._by_owner.pop(owner, None)
        if new is not None:
            key = (new["metadata"].get("namespace", ""), new["metadata"]["name"])
            self.claims[key] = new
            for device in _allocated(new):
                self._refcount[device] = self._refcount.get(device, 0) + 1
            owner = _owner_pod_uid(new)
            if owner is not None:
                self._by_owner.setdefault(owner, set()).add(key)

    def is_allocated(self, device: DeviceID) -> bool:
        return device in self._refcount

    def allocated(self) -> frozenset[DeviceID]:
        return frozenset(self._refcount)

    def claims_for_pod(self, pod: Mapping[str, Any]) -> dict[str, Obj | None]:
        """pod.spec.resourceClaims[].name → the claim (None: not created yet, or no claim needed).

        `resourceClaimName` names the claim directly; template claims are found through
        `pod.status.resourceClaimStatuses` as upstream requires, and, while the pod's status is not
        written yet, through the claim's controller ownerReference to the pod plus the
        `resource.kubernetes.io/pod-claim-name` annotation the resourceclaim controller sets.
        """
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        statuses = {s.get("name"): s.get("resourceClaimName")
                    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
        owned = {self.claims[k]["metadata"].get("annotations", {}).get(POD_CLAIM_NAME_ANNOTATION): self.claims[k]
                 for k in self._by_owner.get(str(meta.get("uid")), ()) if k in self.claims}
        out: dict[str, Obj | None] = {}
        for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
            name = entry.get("name")
            if entry.get("resourceClaimName"):
                out[name] = self.claims.get((namespace, entry["resourceClaimName"]))
            elif statuses.get(name):
                out[name] = self.claims.get((namespace, statuses[name]))
            else:
                out[name] = owned.get(name)
        return out
