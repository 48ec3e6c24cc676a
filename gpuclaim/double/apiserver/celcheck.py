"""kube-apiserver's own CEL check of DRA selectors, which runs before any validating webhook.

A created object's selectors, and an updated one's changed selectors, are compiled in the NewExpressions
environment of the Kubernetes version the double plays (``Settings.git_version``), with gpuclaim's CEL as the
stand-in for the apiserver's; a failure is a 422 with the selector's field path, as the apiserver words it.
Unchanged selectors of an UPDATE are stored expressions: not compiled again (pkg/apis/resource/validation).
"""

from __future__ import annotations

from typing import Any

from gpuclaim.dra import api, cel
from gpuclaim.dra.api.selectors import Selector

KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass"})


def _selectors(obj: dict[str, Any]) -> list[Selector]:
    model, _ = api.parse_object(obj)
    if isinstance(model, api.DeviceClass):
        return list(model.selectors)
    if isinstance(model, api.ResourceClaim | api.ResourceClaimTemplate):
        return [s for request in model.spec.requests for alt in request.alternatives for s in alt.selectors]
    return []


def first_error(obj: dict[str, Any], old: dict[str, Any] | None, env: cel.Environment) -> tuple[str, str] | None:
    """(field path, message) of the first selector the apiserver would refuse, or None."""
    stored = {s.expression for s in _selectors(old)} if old is not None else set()
    for selector in _selectors(obj):
        if selector.expression in stored:
            continue
        try:
            cel.compile_selector(selector.expression, mode=env)
        except cel.CelCompileError as err:
            value = selector.expression.replace("\\", "\\\\").replace('"', '\\"')
            return str(selector.path), f'Invalid value: "{value}": {err.message}'
    return None
