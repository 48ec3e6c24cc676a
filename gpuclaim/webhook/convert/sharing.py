"""Sharing groups: pods of one namespace that name the same group use one named ResourceClaim.

The pod annotation `conversion.sharing.annotation` (default `gpuclaim.io/sharing-group: <group>`) makes
the conversion reference the ResourceClaim `gpuclaim-shared-<group>-<hash of its spec>` (`resourceClaimName`)
instead of a template, so every pod of the group with the same shape gets the *same* devices (the shared
inference GPU pattern). The name is derived from the content, as a template's: a claim by that name holds
exactly that spec, so no one (a forged AdmissionReview included) can create the group's claim with another
spec first and lock the group's pods out.

Lifecycle:
- created by the webhook when the first pod of the group is admitted (never on dryRun), in the pod's
  namespace, labelled `app.kubernetes.io/managed-by: gpuclaim` and annotated with the group; its spec
  is the claim the first pod's shape needs;
- a later pod of the group whose shape needs a different spec gets a claim of its own (another hash), so
  it does not share devices with the first shape: keep one shape per group;
- it has no owner: it outlives the pods. When the last pod using it goes, the resourceclaim controller
  removes the reservation and clears the allocation, so an idle shared claim holds no device;
- it goes away when an admin deletes it (`kubectl delete resourceclaim -l app.kubernetes.io/managed-by=gpuclaim`
  in the namespace); a pod admitted afterwards creates it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuclaim.dra.api import names
from gpuclaim.dra.fieldpath import FieldError, Path

from .templates import shared_claim_name


def group_of(metadata: Mapping[str, Any], annotation: str) -> tuple[str | None, list[FieldError]]:
    annotations = metadata.get("annotations")
    if not isinstance(annotations, Mapping) or annotation not in annotations:
        return None, []
    group = annotations[annotation]
    path = Path.root("metadata", "annotations").key(annotation)
    problems = names.check_dns1123_label(group) if isinstance(group, str) else ["must be a string"]
    if not problems and names.check_dns1123_subdomain(shared_claim_name(group, None)):
        problems = ["is too long for a ResourceClaim name"]
    if problems:
        detail = "a sharing group must be a DNS label (lowercase letters, digits, '-'): " + "; ".join(problems)
        return None, [FieldError.invalid(path, group, detail)]
    return group, []
