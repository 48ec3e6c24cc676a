"""Defaulting the apiserver applies on write (the parts clients observe when they read back)."""

from __future__ import annotations

from typing import Any


def _exact(request: dict[str, Any]) -> None:
    request.setdefault("allocationMode", "ExactCount")
    if request["allocationMode"] == "ExactCount":
        request.setdefault("count", 1)


def _claim_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    for request in (spec.get("devices") or {}).get("requests") or ():
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            _exact(request["exactly"])
        for sub in request.get("firstAvailable") or ():
            if isinstance(sub, dict):
                _exact(sub)


def apply(kind: str, obj: dict[str, Any]) -> None:
    """resource.k8s.io/v1 SetDefaults: allocationMode ExactCount, count 1 (requests and subrequests)."""
    if kind == "ResourceClaim":
        _claim_spec(obj.get("spec"))
    elif kind == "ResourceClaimTemplate" and isinstance(obj.get("spec"), dict):
        _claim_spec(obj["spec"].get("spec"))
