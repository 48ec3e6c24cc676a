"""Test-only: turn the upstream allocator cases (tests/fixtures/allocator) into resource.k8s.io/v1 objects.

Objects go through the real parsers (``dra.api``), so the cases also exercise the model the allocator gets
in production.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpuclaim.dra import api
from gpuclaim.dra.allocator import AllocationOutcome, Features, NodeInfo, SharedUsage, shared_usage
from gpuclaim.dra.quantity import parse_quantity

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES_FILE = FIXTURES / "allocator" / "upstream-allocator-cases.jsonl"

FEATURE_FLAGS = {
    "AdminAccess": "admin_access",
    "PrioritizedList": "prioritized_list",
    "PartitionableDevices": "partitionable_devices",
    "DeviceTaints": "device_taints",
    "DeviceStatus": "device_status",
    "DeviceBinding": "device_binding",
    "ConsumableCapacity": "consumable_capacity",
}
# Cases the object model cannot express: the apiserver refuses these objects, so the allocator never sees them.
NOT_REPRESENTABLE = {
    "unknown-selector": "a selector without `cel` is dropped by the parser (FieldValueRequired), never allocated",
    "unknown-allocation-mode": "allocationMode `future-mode` is FieldValueNotSupported in the model",
}


def load_cases() -> list[dict[str, Any]]:
    with CASES_FILE.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def skip_reason(case: dict[str, Any]) -> str | None:
    if case["name"] in NOT_REPRESENTABLE:
        return NOT_REPRESENTABLE[case["name"]]
    return None


def features(case: dict[str, Any]) -> Features:
    """Upstream runs each case with exactly its features (all of them off otherwise, DeviceStatus included)."""
    on = {FEATURE_FLAGS[f]: True for f in case["requiredFeatures"]}
    return Features(**{"admin_access": False, "prioritized_list": False, "device_status": False, **on})


def node(case: dict[str, Any]) -> NodeInfo:
    raw = case.get("node") or {}  # some error cases run without a node
    return NodeInfo(raw.get("name", ""), dict(raw.get("labels") or {}))


def _selectors(raw: list[Any] | None) -> list[Any]:
    return [{"cel": {"expression": s}} if isinstance(s, str) else s for s in raw or []]


def _capacity(raw: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v if isinstance(v, dict) else {"value": v} for k, v in (raw or {}).items()}


def slice_object(raw: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": raw["driver"], "pool": raw["pool"]}
    for key in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection", "sharedCounters"):
        if key in raw:
            spec[key] = raw[key]
    devices = []
    for d in raw["devices"]:
        device: dict[str, Any] = {"name": d["name"]}
        if d.get("attrs"):
            device["attributes"] = d["attrs"]
        if d.get("cap"):
            device["capacity"] = _capacity(d["cap"])
        for key in ("consumesCounters", "taints", "nodeName", "nodeSelector", "allNodes", "allowMultipleAllocations",
                    "bindsToNode", "bindingConditions", "bindingFailureConditions"):  # fmt: skip
            if key in d:
                device[key] = d[key]
        devices.append(device)
    spec["devices"] = devices
    return {"apiVersion": api.API_VERSION, "kind": "ResourceSlice", "metadata": {"name": raw["slice"]}, "spec": spec}


def class_object(raw: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": _selectors(raw.get("selectors"))}
    if raw.get("config"):
        spec["config"] = raw["config"]
    return {"apiVersion": api.API_VERSION, "kind": "DeviceClass", "metadata": {"name": raw["class"]}, "spec": spec}


def _exact(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("deviceClassName", "allocationMode", "count", "adminAccess", "tolerations", "capacity"):
        if key in raw:
            out[key] = raw[key]
    if "selectors" in raw:
        out["selectors"] = _selectors(raw["selectors"])
    return out


def claim_object(raw: dict[str, Any]) -> dict[str, Any]:
    requests = []
    for r in raw["requests"]:
        if r.get("firstAvailable"):
            requests.append({"name": r["name"], "firstAvailable": [{"name": s["name"], **_exact(s)} for s in
                                                                   r["firstAvailable"]]})  # fmt: skip
        else:
            requests.append({"name": r["name"], "exactly": _exact(r)})
    devices: dict[str, Any] = {"requests": requests}
    if raw.get("constraints"):
        devices["constraints"] = raw["constraints"]
    if raw.get("config"):
        devices["config"] = raw["config"]
    return {"apiVersion": api.API_VERSION, "kind": "ResourceClaim", "metadata": {"name": raw["claim"]},
            "spec": {"devices": devices}}  # fmt: skip


def parsed(case: dict[str, Any]) -> tuple[list[api.ResourceSlice], dict[str, api.DeviceClass], list[api.ResourceClaim]]:
    slices = []
    for raw in case["slices"]:
        model, _ = api.parse_resource_slice(slice_object(raw))
        assert model is not None, raw
        slices.append(model)
    classes = {}
    for raw in case["classes"]:
        klass, _ = api.parse_device_class(class_object(raw))
        assert klass is not None, raw
        classes[klass.name] = klass
    claims = []
    for raw in case["claims"]:
        claim, _ = api.parse_resource_claim(claim_object(raw))
        assert claim is not None, raw
        claims.append(claim)
    return slices, classes, claims


def allocated(case: dict[str, Any]) -> set[api.DeviceID]:
    return {api.DeviceID(*text.split("/")) for text in case["allocatedDevices"]}


def allocated_capacity(case: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The case's ``allocatedCapacity`` (upstream's AggregatedCapacity, dumped with Go's %v:
    ``map[driver/pool/device:map[name:quantity ...] ...]``) as device -> capacity name -> quantity."""
    text = case.get("allocatedCapacity") or "map[]"
    out: dict[str, dict[str, str]] = {}
    for device, inner in re.findall(r"([^\s\[\]:]+/[^\s\[\]:]+/[^\s\[\]:]+):map\[([^\]]*)\]", text):
        out[device] = dict(item.rsplit(":", 1) for item in inner.split())
    return out


def allocated_claims(case: dict[str, Any]) -> list[dict[str, Any]]:
    """One allocated claim per device with capacity held by shares, its share consuming that capacity: what the
    scheduler's tracker turns into ``AggregatedCapacity``."""
    out = []
    for k, (device, consumed) in enumerate(sorted(allocated_capacity(case).items())):
        driver, pool, name = device.split("/")
        share = {"request": "req", "driver": driver, "pool": pool, "device": name,
                 "shareID": f"00000000-0000-4000-8000-{k:012d}", "consumedCapacity": consumed}
        out.append({"apiVersion": api.API_VERSION, "kind": "ResourceClaim",
                    "metadata": {"name": f"holder-{k}", "namespace": "default"},
                    "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "any"}}]}},
                    "status": {"allocation": {"devices": {"results": [share]}}}})  # fmt: skip
    return out


def shared(case: dict[str, Any]) -> SharedUsage:
    claims = []
    for raw in allocated_claims(case):
        claim, _ = api.parse_resource_claim(raw)
        assert claim is not None, raw
        claims.append(claim)
    return shared_usage(claims)


def key_phrase(message: str) -> str:
    """What our error must contain: upstream's first line, cut where wording comes from elsewhere (the CEL
    library's compile diagnostics, the fake class lister of the upstream test)."""
    first = message.split("\n")[0]
    for marker in ("CEL compile error:", "could not retrieve device class "):
        at = first.find(marker)
        if at >= 0:
            end = at + len(marker)
            if marker.startswith("could"):
                end = first.index(":", end)
            return first[:end]
    return first


def per_request(results: list[dict[str, Any]]) -> list[dict[str, list[tuple[Any, ...]]]]:
    """Per claim: request -> sorted devices (upstream's pool order is a Go map's, so order is not compared), with
    whether each is a share and what it consumes (by value)."""
    out = []
    for claim in results:
        by_request: dict[str, list[tuple[Any, ...]]] = {}
        for d in claim["devices"]:
            consumed = tuple(sorted((k, str(parse_quantity(str(v)).value))
                                    for k, v in (d.get("consumedCapacity") or {}).items()))  # fmt: skip
            by_request.setdefault(d["request"], []).append(
                (d["driver"], d["pool"], d["device"], bool(d.get("adminAccess", False)), "shareID" in d, consumed)
            )
        out.append({k: sorted(v) for k, v in by_request.items()})
    return out


def compare(case: dict[str, Any], outcome: AllocationOutcome) -> str | None:
    """None when the outcome agrees with upstream's expectation, else what differs."""
    expect = case["expect"]
    if "error" in expect:
        phrase = key_phrase(expect["error"])
        if outcome.status != "error" or phrase not in (outcome.error or ""):
            return f"expected error containing {phrase!r}, got {outcome.status}: {outcome.error}"
        return None
    if not case["claims"]:  # upstream returns an empty result list: nothing to allocate is not a failure
        return None if outcome.status == "allocated" and not outcome.claims else f"expected no claims, got {outcome}"
    if expect.get("unsatisfiable") or not expect.get("results"):
        return None if outcome.status == "unsatisfiable" else f"expected unsatisfiable, got {outcome}"
    if outcome.status != "allocated":
        return f"expected an allocation, got {outcome.status}: {outcome.error}"
    ours = [c.to_dict() for c in outcome.claims]
    got = per_request([{"devices": c["devices"]["results"]} for c in ours])
    want = per_request(expect["results"])
    if got != want:
        return f"devices differ: want {want}, got {got}"
    for mine, theirs in zip(ours, expect["results"], strict=True):
        if mine.get("nodeSelector") != theirs.get("nodeSelector"):
            return f"nodeSelector differs: want {theirs.get('nodeSelector')}, got {mine.get('nodeSelector')}"
    return None
