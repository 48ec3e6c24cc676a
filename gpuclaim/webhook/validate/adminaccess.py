"""adminAccess needs the namespace label ``resource.kubernetes.io/admin-access: "true"`` (KEP-5018).

kube-apiserver 1.34 enforces it in the ResourceClaim(Template) REST strategy; gpuclaim applies the same rule
(also for clusters where the apiserver does not enforce it yet) and says which label on which namespace is
missing. ``validation.adminAccess: off`` turns the check off.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuclaim.dra import api
from gpuclaim.dra.fieldpath import FieldError

from .inventory import Unknown
from .verdict import Findings

__all__ = ["ADMIN_LABEL", "check_admin_access"]

ADMIN_LABEL = "resource.kubernetes.io/admin-access"
_APISERVER = f"admin access to devices requires the `{ADMIN_LABEL}: true` label on the containing namespace"


def check_admin_access(
    spec: api.DeviceClaim, *, namespace: str, labels: Mapping[str, str] | Unknown | None, findings: Findings
) -> None:
    requests = [r.exactly for r in spec.requests if r.exactly is not None and r.exactly.admin_access]
    if not requests:
        return
    if isinstance(labels, Unknown):
        for exact in requests:
            findings.warn(exact.path.child("adminAccess"),
                          f"cannot check the {ADMIN_LABEL} label: namespace {namespace!r} is not known "
                          "(give its manifest with --namespaces)")
        return
    if labels is None:
        why = f"namespace {namespace!r} does not exist"
    else:
        value = labels.get(ADMIN_LABEL)
        if value == "true":
            return
        why = (f"namespace {namespace!r} has no label {ADMIN_LABEL}" if value is None
               else f'namespace {namespace!r} has {ADMIN_LABEL}: "{value}", not "true"')
    for exact in requests:
        findings.deny(FieldError.forbidden(exact.path.child("adminAccess"), f"{_APISERVER} ({why})"))
