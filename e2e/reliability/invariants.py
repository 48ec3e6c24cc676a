"""What must hold after chaos: no admission lost or applied twice, no template made twice with different specs.

Checked against the double's final state, not against what the client was told, so a pod created by an attempt
whose answer was lost still counts once.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any

from e2e.reliability.traffic import LEGACY_PREFIXES, Record

Obj = dict[str, Any]


def _legacy(container: Obj) -> list[str]:
    resources = container.get("resources") or {}
    return [k for part in ("limits", "requests") for k in (resources.get(part) or {}) if k.startswith(LEGACY_PREFIXES)]


def pod_problems(record: Record, stored: Obj | None) -> list[str]:
    """Why the stored pod is not what one conversion of the submitted shape gives (empty: it is)."""
    shape = record.shape
    if stored is None:
        return [f"{record.name}: answered {record.outcome} but not in the API"]
    spec = stored.get("spec") or {}
    claims = spec.get("resourceClaims") or []
    problems = []
    if shape.expect == "untouched":
        if claims:
            problems.append(f"{record.name}: a pod without GPUs got claims {claims}")
        return problems
    if len(claims) != 1:
        problems.append(f"{record.name}: {len(claims)} spec.resourceClaims entries, want exactly 1 "
                        f"({'lost' if not claims else 'applied twice'})")
    for container in spec.get("containers") or ():
        refs = [(c.get("name"), c.get("request")) for c in (container.get("resources") or {}).get("claims") or ()]
        if len(refs) != len(set(refs)):
            problems.append(f"{record.name}: container {container.get('name')} lists a claim twice: {refs}")
        if not refs:
            problems.append(f"{record.name}: container {container.get('name')} uses no claim")
        if legacy := _legacy(container):
            problems.append(f"{record.name}: legacy resources left in container {container.get('name')}: {legacy}")
    return problems


def _template_count(template: Obj) -> int:
    total = 0
    for request in ((template.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests") or ():
        if "exactly" in request:
            total += int(request["exactly"].get("count", 1))
        elif request.get("firstAvailable"):
            counts = {int(sub.get("count", 1)) for sub in request["firstAvailable"]}
            total += counts.pop() if len(counts) == 1 else -1000  # alternatives must agree on the count
    return total


def check(records: Iterable[Record], pods: Mapping[str, Obj], templates: Mapping[str, Obj]) -> Obj:
    """`pods` and `templates` by name, as the double holds them now."""
    records = list(records)
    lost = [r.name for r in records if r.outcome in ("lost", "pending")]
    wrong_outcome = [f"{r.name}: expected {r.shape.expect}, got {r.outcome} ({r.message[:200]})" for r in records
                     if r.outcome in ("created", "denied")
                     and (r.outcome == "denied") != (r.shape.expect == "denied")]
    unexplained = [r.name for r in records if r.outcome == "denied" and not r.message]
    problems: list[str] = []
    shapes_by_template: dict[str, set[str]] = collections.defaultdict(set)
    for r in records:
        if r.outcome != "created":
            continue
        stored = pods.get(r.name)
        problems.extend(pod_problems(r, stored))
        for claim in ((stored or {}).get("spec") or {}).get("resourceClaims") or ():
            name = claim.get("resourceClaimTemplateName")
            if name:
                shapes_by_template[name].add(r.shape.key)
                template = templates.get(name)
                if template is None:
                    problems.append(f"{r.name}: its template {name} does not exist")
                elif _template_count(template) != r.shape.gpus:
                    problems.append(f"{r.name}: template {name} requests {_template_count(template)} devices, "
                                    f"the pod asked for {r.shape.gpus}")
    # one template per spec: a name reached from two different pod shapes would be two specs under one name
    shared = {name: sorted(keys) for name, keys in shapes_by_template.items() if len(keys) > 1}
    outcomes = collections.Counter(r.outcome for r in records)
    converted = sum(1 for r in records if r.outcome == "created" and r.shape.expect == "converted")
    return {
        "submitted": len(records),
        "converted": converted,
        "untouched": sum(1 for r in records if r.outcome == "created" and r.shape.expect == "untouched"),
        "denied": outcomes.get("denied", 0),
        "lost": len(lost),
        "wrongOutcome": len(wrong_outcome),
        "deniedWithoutReason": len(unexplained),
        "podProblems": len(problems),
        "templatesShapeConflicts": len(shared),
        "templates": len(shapes_by_template),
        "examples": (lost[:3] + wrong_outcome[:3] + unexplained[:3] + problems[:5]
                     + [f"template {n} reached from shapes {k}" for n, k in list(shared.items())[:3]]),
        "ok": not (lost or wrong_outcome or unexplained or problems or shared),
    }
