"""Compile every CEL selector as kube-apiserver does, and report what it would refuse at the selector's path.

The environment is the Kubernetes version's (``dra.versions``): its apiserver's new-expression environment for
created or changed expressions, the scheduler's stored one for expressions already in the cluster.

``gpuclaim lint`` has no apiserver in front of it: a compile error is an error there, with the apiserver's field
error types (Invalid for a compile error, Forbidden for the cost limit, TooLong for the length; the detail keeps
the engine's ``<input>:line:column`` and caret lines and adds gpuclaim's hint). The validating webhook runs after
kube-apiserver validated the object, CEL compile included: a selector gpuclaim cannot compile was admitted by
the apiserver, so gpuclaim's model is behind, and the webhook admits it with a warning saying it was not checked.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuclaim.dra import cel
from gpuclaim.dra.api import Selector
from gpuclaim.dra.fieldpath import ErrorType, FieldError

from .budget import compile_guarded
from .verdict import Findings

__all__ = ["compile_all", "compile_error", "not_checked"]


def compile_error(selector: Selector, err: cel.CelCompileError) -> FieldError:
    if err.kind == "too_long":
        return FieldError.too_long(selector.path, selector.expression, cel.MAX_LENGTH)
    detail = err.message if err.hint is None else f"{err.message}\nhint: {err.hint}"
    if err.kind == "too_complex":
        if err.cost is not None:
            detail += f"\n(estimated cost {err.cost}, limit {cel.MAX_COST})"
        return FieldError.forbidden(selector.path, detail)
    return FieldError.invalid(selector.path, selector.expression, detail)


def not_checked(err: cel.CelCompileError, env: cel.Environment) -> str:
    first = err.message.splitlines()[0] if err.message else err.kind
    return (f"not checked: kube-apiserver admitted this selector, but gpuclaim's model of the {env.label} does not "
            f"compile it ({first}); gpuclaim is behind the cluster here (is kubernetes.version right?), so neither "
            "its devices nor its driver attributes were checked")


def compile_all(
    selectors: Iterable[Selector], *, env: cel.Environment, findings: Findings, lint: bool,
    already: Iterable[FieldError] = (),
) -> list[cel.CompiledSelector | None]:
    """Compile each selector in ``env``; a failure is denied at its path with ``lint`` (unless the parser already
    reported a TooLong there), else a warning that the selector was not checked.

    Returns the compiled selectors in order, None where compilation failed.
    """
    too_long = {e.path for e in already if e.type is ErrorType.TOO_LONG}
    out: list[cel.CompiledSelector | None] = []
    for selector in selectors:
        try:
            out.append(compile_guarded(selector.expression, mode=env))
        except cel.CelCompileError as err:
            out.append(None)
            if err.kind == "too_long" and selector.path in too_long:
                continue
            if lint:
                findings.deny(compile_error(selector, err))
            else:
                findings.warn(selector.path, not_checked(err, env))
    return out
