"""gpuclaim's answer to a selector in the shape of the CEL oracle's, and the comparison of the two.

The pipeline is the one a user meets: the validating webhook / ``gpuclaim lint`` compile a new selector as
kube-apiserver does (mode "new": NewExpressions environment, cost limit); the extender / ``gpuclaim score``
evaluate it as kube-scheduler does (mode "stored"). Values and error stages must agree; error texts are
compared where users read them (the compile error detail) by :func:`same_text`.
"""

from __future__ import annotations

from typing import Any

from gpuclaim.dra import cel


def gpuclaim_match(expr: str, device: cel.Device, *, env: str = "new") -> dict[str, Any]:
    try:
        if env == "new":
            cel.compile_uncached(expr, mode="new")
        compiled = cel.compile_uncached(expr, mode="stored")
    except cel.CelCompileError as err:
        return {"stage": "compile", "error": err.message}
    outcome = compiled.outcome(device)
    if isinstance(outcome, cel.CelRuntimeError):
        return {"stage": "runtime", "error": outcome.message}
    return {"matched": outcome}


def gpuclaim_eval(expr: str, device: cel.Device) -> dict[str, Any]:
    from e2e.oracle.cel.client import render

    try:
        compiled = cel.compile_uncached(expr, mode="stored", any_result=True)
    except cel.CelCompileError as err:
        return {"stage": "compile", "error": err.message}
    try:
        value = compiled.value(device)
    except cel.CelRuntimeError as err:
        return {"stage": "runtime", "error": err.message}
    return {"value": render(value)}


def verdict(reply: dict[str, Any]) -> tuple[Any, ...]:
    """What must agree: the stage of the error, or the value."""
    from e2e.oracle.cel.client import canonical

    if reply.get("stage"):
        return ("error", reply["stage"])
    if "matched" in reply:
        return ("matched", reply["matched"])
    return ("value", canonical(reply.get("value")))


TOO_COMPLEX = "too complex, exceeds cost limit"


def known_cost_difference(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """The one open class of difference: the cost estimate puts the expression on the other side of the 1,000,000
    limit (estimated sizes of strings built by functions whose result size cel-go or Kubernetes estimate
    differently). Exactly one side must say "too complex"; everything else must agree."""
    return (ours.get("error") == TOO_COMPLEX) != (theirs.get("error") == TOO_COMPLEX)
