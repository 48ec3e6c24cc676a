"""The CEL abstract syntax tree gpuclaim checks, costs and compiles (cel-go's shape, macros expanded).

Every node carries its source offset (``pos``): cel-go reports an error at the operator, the `.` of a
selection, the `[` of an index or the `(` of a call, so the parser records exactly those offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from typing import TypeAlias

_ids = count(1)
_field = field


def _next_id() -> int:
    return next(_ids)


@dataclass(eq=False, slots=True)
class Const:
    value: object
    kind: str  # int, uint, double, string, bytes, bool, null
    pos: int
    id: int = field(default_factory=_next_id)


@dataclass(eq=False, slots=True)
class Ident:
    name: str
    pos: int
    id: int = field(default_factory=_next_id)


@dataclass(eq=False, slots=True)
class Select:
    operand: Expr
    field: str
    pos: int
    test_only: bool = False  # has(operand.field)
    id: int = _field(default_factory=_next_id)  # `field` is the attribute above in this class body


@dataclass(eq=False, slots=True)
class Call:
    function: str
    args: list[Expr]
    pos: int
    target: Expr | None = None
    id: int = field(default_factory=_next_id)


@dataclass(eq=False, slots=True)
class ListExpr:
    elements: list[Expr]
    pos: int
    optional: frozenset[int] = frozenset()  # indices of `?x` elements: included only when present
    id: int = field(default_factory=_next_id)


@dataclass(eq=False, slots=True)
class MapExpr:
    entries: list[tuple[Expr, Expr]]
    pos: int
    optional: frozenset[int] = frozenset()  # indices of `?k: v` entries: included only when v is present
    id: int = field(default_factory=_next_id)


@dataclass(eq=False, slots=True)
class Comprehension:
    """cel-go's comprehension: every macro (all, exists, map, cel.bind, ...) expands to one."""

    iter_var: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_cond: Expr
    loop_step: Expr
    result: Expr
    pos: int
    macro: str = ""  # the macro it came from: "all", "exists", "exists_one", "map", "filter", "bind", or a
    # two-variable one (iter_var2 set): "all2", "exists2", "existsOne2", "transformList", "transformMap",
    # "transformMapEntry", whose user expression is loop_step (and the optional filter, ``filter``)
    iter_var2: str | None = None
    filter: Expr | None = None
    id: int = field(default_factory=_next_id)


Expr: TypeAlias = Const | Ident | Select | Call | ListExpr | MapExpr | Comprehension

ACCU = "__result__"


def children(e: Expr) -> list[Expr]:
    match e:
        case Select():
            return [e.operand]
        case Call():
            return ([e.target] if e.target is not None else []) + list(e.args)
        case ListExpr():
            return list(e.elements)
        case MapExpr():
            return [x for kv in e.entries for x in kv]
        case Comprehension():
            out = [e.iter_range, e.accu_init, e.loop_cond, e.loop_step, e.result]
            return out if e.filter is None else [*out, e.filter]
    return []
