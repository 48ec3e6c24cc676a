"""gpuclaim's answer to a selector in the shape of the CEL oracle's, and the comparison of the two.

The pipeline is the one a user meets: the validating webhook / ``gpuclaim lint`` compile a new selector as
kube-apiserver does (mode "new": NewExpressions environment, cost limit); the extender / ``gpuclaim score``
evaluate it as kube-scheduler does (mode "stored"). Values and error stages must agree; error texts are
compared where users read them (the compile error detail) by :func:`same_text`.
"""

from __future__ import annotations

from typing import Any

from gpuclaim.dra import cel, versions


def environments(version: str) -> tuple[cel.Environment, cel.Environment]:
    """Kubernetes ``version``'s (new-expression, stored-expression) environments at default gates."""
    model = versions.model_for(version)
    return model.cel_new, model.cel_stored


def gpuclaim_match(expr: str, device: cel.Device, *, env: str = "new", version: str = "1.34") -> dict[str, Any]:
    """The oracle's reply shape; ``maxCost`` is the NewExpressions cost estimate where one was made."""
    new, stored = environments(version)
    cost: dict[str, str] = {}
    try:
        if env == "new":
            cost = {"maxCost": str(cel.compile_uncached(expr, mode=new).estimated_cost)}
        compiled = cel.compile_uncached(expr, mode=stored)
    except cel.CelCompileError as err:
        if err.cost is not None:
            cost = {"maxCost": str(err.cost)}
        return {"stage": "compile", "error": err.message, **cost}
    outcome = compiled.outcome(device)
    if isinstance(outcome, cel.CelRuntimeError):
        return {"stage": "runtime", "error": outcome.message, **cost}
    return {"matched": outcome, **cost}


def gpuclaim_eval(expr: str, device: cel.Device, *, version: str = "1.34") -> dict[str, Any]:
    from e2e.oracle.cel.client import render

    try:
        compiled = cel.compile_uncached(expr, mode=environments(version)[1], any_result=True)
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


def estimated_cost(reply: dict[str, Any]) -> int | None:
    """The cost estimate of an expression that compiled (or was refused only for its cost), else None: the
    oracle reports one for every expression, meaningless when compilation failed before estimating."""
    if "maxCost" not in reply or (reply.get("stage") == "compile" and reply.get("error") != TOO_COMPLEX):
        return None
    return int(reply["maxCost"])


def same_cost(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """gpuclaim's estimate is cel-go's with Kubernetes' estimators, to the unit, wherever both made one."""
    a, b = estimated_cost(ours), estimated_cost(theirs)
    return a is None or b is None or a == b
