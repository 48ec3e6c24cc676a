"""The objects a conversion needs: a ResourceClaimTemplate named after its spec, or a shared ResourceClaim named
after its group and its spec.

Template name: `gpuclaim-<first 16 hex digits of sha256(canonical JSON of the template's spec)>`, the
canonical JSON being orjson with sorted keys. Pods of the same shape therefore share one template per
namespace, and a template's name says exactly what it holds (a 409 on create with a different spec
means someone edited it, which admission reports instead of using it).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

API_VERSION = "resource.k8s.io/v1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuclaim"}
PREFIX = "gpuclaim-"


def spec_hash(spec: Any) -> str:
    return hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _metadata(name: str, namespace: str | None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(MANAGED_BY)
    if annotations:
        meta["annotations"] = annotations
    return meta


def template(claim_spec: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    # claims made from it carry the label too, so `kubectl get resourceclaims -l` finds them
    spec = {"metadata": {"labels": dict(MANAGED_BY)}, "spec": claim_spec}
    return {"apiVersion": API_VERSION, "kind": "ResourceClaimTemplate",
            "metadata": _metadata(PREFIX + spec_hash(spec), namespace), "spec": spec}


def shared_claim_name(group: str, claim_spec: Any) -> str:
    """`gpuclaim-shared-<group>-<hash of the claim's spec>`: named after its content like a template, so nobody
    can take a group's name with another spec first (issue 14, finding 7: a forged review created
    `gpuclaim-shared-victim-group` and the group's real pods were refused)."""
    return f"{PREFIX}shared-{group}-{spec_hash(claim_spec)}"


def shared_claim(claim_spec: dict[str, Any], namespace: str | None, group: str, annotation: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ResourceClaim",
            "metadata": _metadata(shared_claim_name(group, claim_spec), namespace, {annotation: group}),
            "spec": claim_spec}
