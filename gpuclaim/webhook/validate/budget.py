"""Bounded compile work per admission request (issue 14, finding 2).

Compiling a CEL selector costs about 10-40 us per byte on the 2-core reference machine (measured: a 10 KiB
OR-chain of `productName == '...'` took 125-380 ms), and a valid ResourceClaim can hold 32 requests x 8
subrequests of 10 KiB selectors: a 1 MB claim of 104 distinct ones blocked the server 11.4 s. Two bounds:

- a budget over the whole object: the UTF-8 bytes of all its `cel.expression` strings together at most
  `validation.maxSelectorBytes` (default 64 KiB, ~100x what real claims hold). Over it, nothing is compiled;
- the object's selectors that are not trivially small are compiled off the event loop, in one worker thread
  (so a flood of them takes one core at most and /healthz and other admissions keep being served), under
  `validation.compileDeadlineSeconds` (default 2 s); the worker stops at the next selector past it.

Either way such an object is still valid Kubernetes (the apiserver allows ~1.5 MB of 10 KiB selectors, which no
webhook compiles in its timeout), so it is never denied for it: it is admitted with a warning naming the selector
where the budget ran out, and only the checks that compile nothing run (the adminAccess namespace rule, gated
fields). kube-apiserver's own validation of every selector still applies.

Compiled selectors land in the process-wide selector cache, where `validate_object` finds them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuclaim.dra import cel
from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.dra.schemas import selectors as schema_selectors

from .verdict import Notice

__all__ = ["INLINE_BYTES", "UNCHECKED", "Expression", "compile_guarded", "expressions", "over_budget",
           "precompile"]


#: selectors up to this size are compiled inline on the event loop (well under a millisecond each)
INLINE_BYTES = 512
_MAX_DEPTH = 64  # Kubernetes objects are shallow; a deeper JSON document is not walked further


@dataclass(frozen=True, slots=True)
class Expression:
    path: Path
    text: str
    size: int  # UTF-8 bytes


def expressions(obj: Any) -> Iterator[Expression]:
    """Every `cel: {expression: <string>}` in the object, in document order, with its field path."""
    stack: list[tuple[Any, Path, int]] = [(obj, Path.root(), 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > _MAX_DEPTH:
            continue
        if isinstance(node, Mapping):
            celnode = node.get("cel")
            if isinstance(celnode, Mapping) and isinstance(celnode.get("expression"), str):
                text = celnode["expression"]
                yield Expression(path.child("cel", "expression"), text, len(text.encode("utf-8", "surrogatepass")))
            children = [(v, path.child(k), depth + 1) for k, v in node.items()
                        if k != "cel" and isinstance(k, str) and isinstance(v, Mapping | list)]
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(reversed([(v, path.index(i), depth + 1) for i, v in enumerate(node)
                                   if isinstance(v, Mapping | list)]))


#: what the warning for an object past the budget or the deadline says gpuclaim did and did not do
UNCHECKED = ("gpuclaim did not check this object's CEL selectors (no selector, dry-run or driver-schema check; "
             "kube-apiserver still validates every selector)")


def over_budget(found: list[Expression], max_bytes: int) -> Notice | None:
    """A warning at the first selector past the byte budget (deterministic: the same object always gets the same
    answer, whatever is cached), or None within it."""
    total = 0
    for n, expression in enumerate(found):
        total += expression.size
        if total > max_bytes:
            whole = sum(e.size for e in found)
            return Notice(expression.path, (
                f"{UNCHECKED}: they add up to {whole} bytes in {len(found)} expressions, more than the {max_bytes} "
                f"bytes it compiles for one object (validation.maxSelectorBytes); the budget ran out at this "
                f"selector (number {n + 1})"))
    return None


class GuardedCompileError(cel.CelCompileError):
    """What `compile_guarded` made of an interpreter limit (not cached by the selector cache: remembered by the
    caller, so the expensive failure is not run twice)."""


def compile_guarded(text: str, *, mode: cel.Mode) -> cel.CompiledSelector:
    """`cel.compile_selector`, with what a hostile expression can make the engine raise turned into a compile
    error: nesting deeper than the interpreter's stack, numbers too large for a float, memory."""
    try:
        return cel.compile_selector(text, mode=mode)
    except RecursionError:
        raise GuardedCompileError("expression nested too deeply to compile (parentheses, operators or calls "
                                  "nested hundreds of levels)") from None
    except OverflowError:
        raise GuardedCompileError("a number in the expression is too large") from None
    except MemoryError:
        raise GuardedCompileError("expression too large to compile") from None


def precompile(found: list[Expression], *, modes: tuple[cel.Mode, ...], stop: threading.Event,
               progress: list[int]) -> list[FieldError]:
    """Compile into the process-wide cache (run in the worker thread); compile errors stay in the cache for
    `validate_object` to report at their paths, except the interpreter limits (`GuardedCompileError`), which
    are returned as field errors: the object is denied with them, without compiling those again on the loop.
    Stops between two selectors when `stop` is set; `progress[0]` counts the selectors done."""
    guarded: list[FieldError] = []
    for expression in found:
        if stop.is_set():
            break
        failed = False
        for mode in modes:
            try:
                compile_guarded(expression.text, mode=mode)
            except GuardedCompileError as err:
                guarded.append(FieldError.invalid(expression.path, expression.text, err.message))
                failed = True
                break
            except cel.CelCompileError:
                pass  # cached by the selector cache; validate_object reports it at its path
        if not failed:
            schema_selectors.facts(expression.text)  # the driver-schema checks read the same tree: parse it here too
        progress[0] += 1
    return guarded
