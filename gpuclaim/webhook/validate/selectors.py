"""Compile every CEL selector as kube-apiserver does, and report what it would refuse at the selector's path.

``new`` mode for created or changed expressions (the NewExpressions environment of a 1.34 apiserver),
``stored`` mode for expressions already in the cluster (what the scheduler evaluates). The field error
types are the apiserver's: Invalid for a compile error, Forbidden for the cost limit, TooLong for the
length; the detail keeps the engine's ``<input>:line:column`` and caret lines and adds gpuclaim's hint.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuclaim.dra import cel
from gpuclaim.dra.api import Selector
from gpuclaim.dra.fieldpath import ErrorType, FieldError

from .budget import compile_guarded
from .verdict import Findings

__all__ = ["compile_all", "compile_error"]


def compile_error(selector: Selector, err: cel.CelCompileError) -> FieldError:
    if err.kind == "too_long":
        return FieldError.too_long(selector.path, selector.expression, cel.MAX_LENGTH)
    detail = err.message if err.hint is None else f"{err.message}\nhint: {err.hint}"
    if err.kind == "too_complex":
        if err.cost is not None:
            detail += f"\n(estimated cost {err.cost}, limit {cel.MAX_COST})"
        return FieldError.forbidden(selector.path, detail)
    return FieldError.invalid(selector.path, selector.expression, detail)


def compile_all(
    selectors: Iterable[Selector], *, mode: cel.Mode, findings: Findings, already: Iterable[FieldError] = ()
) -> list[cel.CompiledSelector | None]:
    """Compile each selector; a failure is denied at its path (unless the parser already reported a TooLong there).

    Returns the compiled selectors in order, None where compilation failed.
    """
    too_long = {e.path for e in already if e.type is ErrorType.TOO_LONG}
    out: list[cel.CompiledSelector | None] = []
    for selector in selectors:
        try:
            out.append(compile_guarded(selector.expression, mode=mode))
        except cel.CelCompileError as err:
            out.append(None)
            if not (err.kind == "too_long" and selector.path in too_long):
                findings.deny(compile_error(selector, err))
    return out
