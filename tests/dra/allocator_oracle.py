"""Test-only: one allocator scenario (resource.k8s.io/v1 JSON objects), run through gpuclaim's simulation and
through the upstream allocator (``e2e.oracle.allocator``), and the comparison of the two outcomes.

A scenario is exactly what the oracle reads: ``{features, node, slices, classes, allocatedDevices, claims}``.
gpuclaim gets the same objects through its real parsers (``dra.api``). Each comparison is for one Kubernetes
version: that version's oracle (``oracle.version_name``) and gpuclaim's allocator model of that version
(``dra.allocator.features_for``); ``features`` are named as that version's ``structured.Features`` are.

Comparison: the status (allocated / unsatisfiable / error) must be the same; for an allocation, gpuclaim's
picks (per claim, in pick order: request, driver, pool, device, adminAccess, share, consumed capacity, the copied
tolerations and binding conditions; and the node selector) must be one
of the outcomes upstream produces. Upstream visits pools in Go map order (pools_experimental.go:55), which
varies between calls, so with several pools the oracle is asked for every distinct outcome of many calls; with
at most 8 pools the order is a rotation of the order in which pools first appear in the slice list, and the
scenarios list pools sorted by (driver, pool) as gpuclaim visits them, so gpuclaim's order is one upstream
takes. Errors must agree on the upstream wording up to where the CEL library's own diagnostics begin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpuclaim.dra import api, versions
from gpuclaim.dra.allocator import (
    NO_SHARES,
    AllocationOutcome,
    Features,
    NodeInfo,
    allocate,
    allocated_devices,
    features_for,
    shared_usage,
)
from gpuclaim.dra.quantity import parse_quantity

FEATURE_NAMES = {
    "adminAccess": ("admin_access",), "prioritizedList": ("prioritized_list",), "deviceStatus": ("device_status",),
    "partitionableDevices": ("partitionable_devices",), "deviceTaints": ("device_taints",),
    "deviceBinding": ("device_binding",), "consumableCapacity": ("consumable_capacity",),
    "deviceBindingAndStatus": ("device_binding", "device_status"),  # one flag from 0.35 on
}  # fmt: skip
CASE_FEATURES = {
    "AdminAccess": "adminAccess", "PrioritizedList": "prioritizedList", "DeviceStatus": "deviceStatus",
    "PartitionableDevices": "partitionableDevices", "DeviceTaints": "deviceTaints", "DeviceBinding": "deviceBinding",
    "ConsumableCapacity": "consumableCapacity",
}  # fmt: skip
REPEAT = 24  # Allocate calls per multi-pool scenario; a miss is re-asked with RETRY_REPEAT before it counts
RETRY_REPEAT = 400

Canonical = tuple[str, Any]


def minor(version: str) -> int:
    return versions.parse_version(version).minor


def features(scenario: Mapping[str, Any], version: str = "1.34") -> Features:
    """As the oracle of ``version`` reads them: no ``features`` = that scheduler's defaults; given = exactly those
    on."""
    raw = scenario.get("features")
    if raw is None:
        return features_for(versions.model_for(version))
    flags = {name: False for names in FEATURE_NAMES.values() for name in names}
    for key, value in raw.items():
        if key not in FEATURE_NAMES and not value:
            continue  # a newer library's flag gpuclaim does not model, off (listTypeAttributes, ...)
        for name in FEATURE_NAMES[key]:
            flags[name] = bool(value)
    return Features(**flags, minor=minor(version))


def run_gpuclaim(scenario: Mapping[str, Any], version: str = "1.34") -> AllocationOutcome:
    """gpuclaim's outcome. Objects must parse; upstream's own test table has objects the apiserver would refuse
    (``"lenient": true`` in the scenario), generated scenarios must also be free of validation errors."""
    strict = not scenario.get("lenient")
    slices = []
    for obj in scenario["slices"]:
        model, errors = api.parse_resource_slice(obj)
        assert model is not None and not (strict and errors), (obj, errors)
        slices.append(model)
    classes = {}
    for obj in scenario["classes"]:
        klass, errors = api.parse_device_class(obj)
        assert klass is not None and not (strict and errors), (obj, errors)
        classes[klass.name] = klass
    claims = []
    for obj in scenario["claims"]:
        claim, errors = api.parse_resource_claim(obj)
        assert claim is not None and not (strict and errors), (obj, errors)
        claims.append(claim)
    holders = []
    for obj in scenario.get("allocatedClaims") or ():
        claim, errors = api.parse_resource_claim(obj)
        assert claim is not None and not (strict and errors), (obj, errors)
        holders.append(claim)
    raw_node = scenario.get("node") or {}
    node = NodeInfo(raw_node.get("name", ""), dict(raw_node.get("labels") or {}))
    wanted = features(scenario, version)
    held = {api.DeviceID(*text.split("/")) for text in scenario.get("allocatedDevices") or ()}
    # as the scheduler's tracker: with ConsumableCapacity, results with a shareID are shares, not dedicated devices
    held |= allocated_devices(holders, shares_apart=wanted.consumable_capacity)
    shared = shared_usage(holders) if wanted.consumable_capacity else NO_SHARES
    return allocate(node, claims, slices=slices, classes=classes, allocated=held, features=wanted, shared=shared)


def canonical_upstream(outcome: Mapping[str, Any]) -> Canonical:
    status = outcome["status"]
    if status == "allocated":
        claims = []
        for result in outcome.get("results") or []:
            devices = tuple(_device_key(d) for d in (result.get("devices") or {}).get("results") or [])
            claims.append((devices, _selector_key(result.get("nodeSelector"))))
        return ("allocated", tuple(claims))
    if status == "error":
        return ("error", outcome.get("error") or "")
    if status == "timeout":  # the scheduler's filter timeout: the node counts as not fitting, as gpuclaim's budget
        return ("gave-up", None)
    return (status, None)


def canonical_gpuclaim(outcome: AllocationOutcome) -> Canonical:
    if outcome.status == "allocated":
        claims = []
        for claim in outcome.claims:
            raw = claim.to_dict()
            devices = tuple(_device_key(d) for d in raw["devices"]["results"])
            claims.append((devices, _selector_key(raw.get("nodeSelector"))))
        return ("allocated", tuple(claims))
    if outcome.status == "error":
        return ("error", outcome.error or "")
    if outcome.status == "budget":
        return ("gave-up", None)
    return (outcome.status, None)


def _device_key(d: Mapping[str, Any]) -> tuple[Any, ...]:
    """A result as compared: whether it is a share (upstream's shareID is a random UUID, so only its presence
    counts), what it consumes, by value, and the copies the allocator makes: the request's tolerations and the
    device's binding conditions (absent and empty are the same, as Go's omitempty writes them)."""
    consumed = tuple(sorted((name, str(parse_quantity(str(q)).value))
                            for name, q in (d.get("consumedCapacity") or {}).items()))  # fmt: skip
    tolerations = tuple(json.dumps({k: v for k, v in t.items() if v not in (None, "")}, sort_keys=True)
                        for t in d.get("tolerations") or ())  # fmt: skip
    return (d["request"], d["driver"], d["pool"], d["device"], bool(d.get("adminAccess") or False),
            d.get("shareID") is not None, consumed, tolerations, tuple(d.get("bindingConditions") or ()),
            tuple(d.get("bindingFailureConditions") or ()))  # fmt: skip


def _selector_key(selector: Mapping[str, Any] | None) -> str | None:
    if selector is None:
        return None
    terms = []
    for term in selector.get("nodeSelectorTerms") or []:
        terms.append({k: v for k, v in term.items() if v})  # empty lists and absent keys are the same selector
    return json.dumps({"nodeSelectorTerms": terms}, sort_keys=True)


def error_phrase(message: str) -> str:
    """The part of an upstream error gpuclaim must reproduce: the first line, cut where the wording of the CEL
    library (its compile diagnostics and runtime messages) begins."""
    first = message.split("\n")[0]
    # (and where upstream prints a Go struct dump of the node selector)
    for marker in ("CEL compile error:", "CEL runtime error:", "failed to parse node selector"):
        at = first.find(marker)
        if at >= 0:
            return first[: at + len(marker)]
    return first


def difference(ours: Canonical, upstream: Sequence[Canonical]) -> str | None:
    """None when gpuclaim's outcome is one of upstream's, else a description."""
    if ours[0] == "error":
        errors = [u for u in upstream if u[0] == "error"]
        if errors and any(error_phrase(u[1]) in ours[1] or error_phrase(u[1]) == error_phrase(ours[1])
                          for u in errors):  # fmt: skip
            return None
        return f"gpuclaim: error {ours[1]!r}; upstream: {_show(upstream)}"
    if ours in upstream:
        return None
    return f"gpuclaim: {_show([ours])}; upstream: {_show(upstream)}"


def _show(outcomes: Sequence[Canonical]) -> str:
    return " | ".join(f"{status} {detail}" if detail is not None else status for status, detail in outcomes)


def upstream_outcomes(reply: Mapping[str, Any]) -> list[Canonical]:
    if reply.get("outcomes"):
        return [canonical_upstream(o) for o in reply["outcomes"]]
    return [canonical_upstream(reply)]


def multi_pool(scenario: Mapping[str, Any]) -> bool:
    return len({(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in scenario["slices"]}) > 1


def compare_batch(oracle: Any, scenarios: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """One difference (or None) per scenario; scenarios go to the oracle in one stream."""
    return [diff for diff, _ in compare_all(oracle, scenarios)]


def compare_all(oracle: Any, scenarios: Sequence[Mapping[str, Any]]) -> list[tuple[str | None, str]]:
    """Per scenario: the difference (or None) and gpuclaim's status, for the oracle's version."""
    sent = [_wire(s, REPEAT if multi_pool(s) else 0) for s in scenarios]
    replies = oracle.run_many(sent)
    ours = [canonical_gpuclaim(run_gpuclaim(s, oracle.version_name)) for s in scenarios]
    out = [difference(o, upstream_outcomes(r)) for o, r in zip(ours, replies, strict=True)]
    retry = [i for i, d in enumerate(out) if d is not None and multi_pool(scenarios[i])]
    if retry:  # a rotation not yet seen in REPEAT calls: ask far more often before calling it a disagreement
        again = oracle.run_many([_wire(scenarios[i], RETRY_REPEAT) for i in retry])
        for i, reply in zip(retry, again, strict=True):
            out[i] = difference(ours[i], upstream_outcomes(reply))
    return [(d, o[0]) for d, o in zip(out, ours, strict=True)]


def _wire(scenario: Mapping[str, Any], repeat: int) -> dict[str, Any]:
    out = {k: v for k, v in scenario.items() if k != "lenient"}
    if repeat:
        out["repeat"] = repeat
    return out


def case_features(case: Mapping[str, Any], version: str) -> dict[str, bool]:
    """A case's ``requiredFeatures`` (v0.34's flag names) as ``version``'s: from 0.35 DeviceBinding and DeviceStatus
    are one flag, on only when the case asks for both."""
    on = {CASE_FEATURES[f] for f in case["requiredFeatures"]}
    if minor(version) >= 35:
        both = {"deviceBinding", "deviceStatus"} <= on
        on -= {"deviceBinding", "deviceStatus"}
        if both:
            on.add("deviceBindingAndStatus")
    return dict.fromkeys(sorted(on), True)


def scenario_from_case(case: Mapping[str, Any], version: str = "1.34") -> dict[str, Any]:
    """An upstream TestAllocator case (tests/fixtures/allocator) as an oracle scenario, with the case's features."""
    import allocator_cases as ac

    slices = [ac.slice_object(raw) for raw in case["slices"]]
    slices.sort(key=lambda s: (s["spec"]["driver"], s["spec"]["pool"]["name"]))  # stable: listing order in a pool
    return {
        "features": case_features(case, version),
        "node": case.get("node") or None,
        "slices": slices,
        "classes": [ac.class_object(raw) for raw in case["classes"]],
        "allocatedDevices": list(case["allocatedDevices"]),
        "allocatedClaims": ac.allocated_claims(case),
        "claims": [ac.claim_object(raw) for raw in case["claims"]],
        "lenient": True,
    }
