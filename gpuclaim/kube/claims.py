"""Incremental indexes over ResourceClaims: allocated devices, claims by pod.

Allocated devices are what kube-scheduler counts as taken: every `status.allocation.devices.results`
entry of every claim, except adminAccess results (those never block anybody else). A reference
count per device keeps deletes exact even if two claims list the same device. A result with a `shareID`
(DRAConsumableCapacity, on by default from 1.36) is a share of a device that allows multiple allocations: a
scheduler with the gate on leaves that device to other claims while capacity remains, so shares are also
counted apart, with the capacity they consume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from gpuclaim.dra.allocator import SharedUsage
from gpuclaim.dra.api import DeviceID
from gpuclaim.dra.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def _allocated(claim: Obj | None) -> tuple[DeviceID, ...]:
    if claim is None:
        return ()
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    return tuple(DeviceID(r["driver"], r["pool"], r["device"]) for r in results
                 if not r.get("adminAccess") and {"driver", "pool", "device"} <= r.keys())


def _shares(claim: Obj | None) -> tuple[tuple[DeviceID, dict[str, Fraction]], ...]:
    """The claim's shares: (device, consumed capacity) of each non-adminAccess result with a shareID."""
    if claim is None:
        return ()
    allocation = (claim.get("status") or {}).get("allocation") or {}
    out = []
    for r in (allocation.get("devices") or {}).get("results") or ():
        if r.get("adminAccess") or not r.get("shareID") or not {"driver", "pool", "device"} <= r.keys():
            continue
        consumed: dict[str, Fraction] = {}
        for name, value in (r.get("consumedCapacity") or {}).items():
            try:
                consumed[str(name)] = parse_quantity(str(value)).value
            except QuantityError:  # the apiserver validated it; an unreadable one consumes nothing we can count
                continue
        out.append((DeviceID(r["driver"], r["pool"], r["device"]), consumed))
    return tuple(out)


def _owner_pod_uid(claim: Obj) -> str | None:
    for ref in claim["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1" and ref.get("controller"):
            return str(ref.get("uid"))
    return None


class ClaimIndex:
    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], Obj] = {}
        self._refcount: dict[DeviceID, int] = {}
        self._share_count: dict[DeviceID, int] = {}
        self._share_consumed: dict[DeviceID, dict[str, Fraction]] = {}
        self._by_owner: dict[str, set[tuple[str, str]]] = {}

    def on_claim(self, old: Obj | None, new: Obj | None) -> None:
        for device in _allocated(old):
            left = self._refcount.get(device, 0) - 1
            if left > 0:
                self._refcount[device] = left
            else:
                self._refcount.pop(device, None)
        for device, consumed in _shares(old):
            self._count_share(device, consumed, -1)
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
            for device, consumed in _shares(new):
                self._count_share(device, consumed, +1)
            owner = _owner_pod_uid(new)
            if owner is not None:
                self._by_owner.setdefault(owner, set()).add(key)

    def _count_share(self, device: DeviceID, consumed: Mapping[str, Fraction], sign: int) -> None:
        left = self._share_count.get(device, 0) + sign
        if left <= 0:
            self._share_count.pop(device, None)
            self._share_consumed.pop(device, None)
            return
        self._share_count[device] = left
        total = self._share_consumed.setdefault(device, {})
        for name, value in consumed.items():
            total[name] = total.get(name, Fraction(0)) + sign * value

    def is_allocated(self, device: DeviceID) -> bool:
        return device in self._refcount

    def is_dedicated(self, device: DeviceID) -> bool:
        """Allocated by a result that is not a share: taken whole, even where ConsumableCapacity is on."""
        return self._refcount.get(device, 0) > self._share_count.get(device, 0)

    def shared_usage(self, devices: Iterable[DeviceID]) -> SharedUsage:
        """What shares take of `devices` (the allocator's ``shared`` for one node)."""
        held = frozenset(d for d in devices if d in self._share_count)
        return SharedUsage(held, {d: dict(self._share_consumed.get(d, {})) for d in held})

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
