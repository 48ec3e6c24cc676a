"""What a selector says about device attributes, read from its CEL syntax tree (no evaluation).

``facts(expression)`` finds every ``device.attributes["<domain>"].<name>`` / ``device.capacity["<domain>"].<name>``
read (also ``["name"]``, ``.?name``, ``has(...)``, ``"name" in ...`` and through a ``cel.bind`` alias of a domain
map), every comparison of such a read with a literal (``productName == 80``), the drivers named by
``device.driver == "..."``, and the reads the whole expression evaluates to (a bare ``...productName``, or the
branches of ``c ? a : b``). Cached by expression text: the same selectors come back on every admission.

A read is ``guarded`` when it cannot fail at run time for a missing name: it is a presence test or an optional
read itself (``has(...)``, ``"name" in ...``, ``.?name``, ``[?"name"]``), or a presence test of the same name
decides whether it is evaluated (``has(d.x) && d.x == 1``, ``!has(d.x) || ...``, ``has(d.x) ? d.x : 0``). CEL's
``&&`` and ``||`` are commutative for errors (``error && false`` is false), so the test may stand on either side.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from gpuclaim.dra.cel import ast, parser
from gpuclaim.dra.cel.errors import CelCompileError

__all__ = ["Comparison", "Facts", "Read", "facts"]

Kind = Literal["attribute", "capacity"]
_KINDS: dict[str, Kind] = {"attributes": "attribute", "capacity": "capacity"}
_OPS = {"_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_LITERAL_CALLS = {"semver": "version", "quantity": "quantity"}


@dataclass(frozen=True, slots=True)
class Read:
    kind: Kind
    domain: str
    name: str
    pos: int
    guarded: bool = False  # cannot fail at run time when the device lacks the name (see the module docstring)

    @property
    def qualified(self) -> str:
        return f"{self.domain}/{self.name}"

    def source(self) -> str:
        return f'device.{"attributes" if self.kind == "attribute" else "capacity"}["{self.domain}"].{self.name}'


@dataclass(frozen=True, slots=True)
class Comparison:
    read: Read
    op: str  # ==, !=, <, <=, >, >= with the read on the left
    literal_type: str  # int, uint, double, string, bool, bytes, null, version, quantity
    literal: object


@dataclass(frozen=True, slots=True)
class Facts:
    reads: tuple[Read, ...]
    comparisons: tuple[Comparison, ...]
    drivers: tuple[str, ...]
    result: tuple[Read, ...]  # the reads the expression's value is (empty: anything else)


Aliases = dict[str, tuple[Kind, str | None]]  # variable -> (kind, domain); domain None = the whole kind map


@lru_cache(maxsize=256)  # like the compile cache: keys are whole expressions (up to 10 KiB)
def facts(expression: str) -> Facts | None:
    """None when the expression does not parse (its compile error is reported elsewhere)."""
    try:
        root = parser.parse(expression)
    except (CelCompileError, RecursionError):
        return None
    walker = _Walker()
    walker.walk(root, {})
    return Facts(tuple(walker.reads), tuple(walker.comparisons), tuple(dict.fromkeys(walker.drivers)),
                 tuple(_result(root, {})))


def _kind_map(e: ast.Expr, aliases: Aliases) -> Kind | None:
    if isinstance(e, ast.Select) and not e.test_only and isinstance(e.operand, ast.Ident) and (
        e.operand.name == "device" and "device" not in aliases and e.field in _KINDS
    ):
        return _KINDS[e.field]
    if isinstance(e, ast.Ident) and e.name in aliases and aliases[e.name][1] is None:
        return aliases[e.name][0]
    return None


def _string(e: ast.Expr) -> str | None:
    return e.value if isinstance(e, ast.Const) and e.kind == "string" else None  # type: ignore[return-value]


def _domain(e: ast.Expr, aliases: Aliases) -> tuple[Kind, str] | None:
    if isinstance(e, ast.Call) and e.function in ("_[_]", "_[?_]", "_?._") and len(e.args) == 2:
        kind = _kind_map(e.args[0], aliases)
        name = _string(e.args[1])
        if kind is not None and name is not None:
            return kind, name
    if isinstance(e, ast.Ident) and e.name in aliases:
        kind, domain = aliases[e.name]
        if domain is not None:
            return kind, domain
    return None


def _read(e: ast.Expr, aliases: Aliases) -> Read | None:
    """``e`` itself reads one attribute or capacity."""
    if isinstance(e, ast.Select) and (d := _domain(e.operand, aliases)):
        return Read(d[0], d[1], e.field, e.pos)
    if isinstance(e, ast.Call) and e.function in ("_[_]", "_[?_]", "_?._") and len(e.args) == 2 and (
        d := _domain(e.args[0], aliases)
    ) and (name := _string(e.args[1])) is not None:
        return Read(d[0], d[1], name, e.pos)
    if isinstance(e, ast.Call) and e.function == "@in" and len(e.args) == 2 and (
        d := _domain(e.args[1], aliases)
    ) and (name := _string(e.args[0])) is not None:
        return Read(d[0], d[1], name, e.pos)
    return None


_Present = frozenset[tuple[Kind, str, str]]  # (kind, domain, name) known to exist where an expression is evaluated
_NONE: _Present = frozenset()


def _optional(e: ast.Expr) -> bool:
    """A read that is a presence test or an optional lookup: it never fails for a missing name."""
    return (isinstance(e, ast.Select) and e.test_only) or (
        isinstance(e, ast.Call) and e.function in ("@in", "_?._", "_[?_]"))


def _present_if(e: ast.Expr, aliases: Aliases, outcome: bool) -> _Present:
    """The names ``e`` proves present when it evaluates to ``outcome``."""
    if isinstance(e, ast.Call) and e.function == "!_" and len(e.args) == 1:
        return _present_if(e.args[0], aliases, not outcome)
    if isinstance(e, ast.Call) and e.function in ("_&&_", "_||_") and len(e.args) == 2:
        left, right = (_present_if(a, aliases, outcome) for a in e.args)
        # a && b true: both true; a || b false: both false. Otherwise only what both sides prove.
        return left | right if (e.function == "_&&_") == outcome else left & right
    if not outcome:
        return _NONE
    if isinstance(e, ast.Call) and e.function == "hasValue" and e.target is not None and not e.args:
        e = e.target  # `.?name.hasValue()`
    read = _read(e, aliases) if _optional(e) else None
    return frozenset({(read.kind, read.domain, read.name)}) if read is not None else _NONE


def _literal(e: ast.Expr) -> tuple[str, object] | None:
    if isinstance(e, ast.Const):
        return ("null" if e.kind == "null" else e.kind), e.value
    if isinstance(e, ast.Call) and e.target is None and e.function in _LITERAL_CALLS and len(e.args) == 1:
        value = _string(e.args[0])
        if value is not None:
            return _LITERAL_CALLS[e.function], value
    return None


def _bind(e: ast.Comprehension, aliases: Aliases) -> Aliases:
    inner = {k: v for k, v in aliases.items() if k not in (e.iter_var, e.accu_var)}
    if e.macro == "bind":
        if (d := _domain(e.accu_init, aliases)) is not None:
            inner[e.accu_var] = d
        elif (k := _kind_map(e.accu_init, aliases)) is not None:
            inner[e.accu_var] = (k, None)
    return inner


def _result(e: ast.Expr, aliases: Aliases) -> list[Read]:
    read = _read(e, aliases)
    if read is not None and not (isinstance(e, ast.Select) and e.test_only) and not (
        isinstance(e, ast.Call) and e.function in ("@in", "_?._", "_[?_]")
    ):
        return [read]
    if isinstance(e, ast.Call) and e.function == "_?_:_":
        branches = [_result(b, aliases) for b in e.args[1:]]
        return branches[0] + branches[1] if all(branches) else []
    if isinstance(e, ast.Comprehension) and e.macro == "bind":
        return _result(e.result, _bind(e, aliases))
    return []


class _Walker:
    def __init__(self) -> None:
        self.reads: list[Read] = []
        self.comparisons: list[Comparison] = []
        self.drivers: list[str] = []

    def walk(self, e: ast.Expr, aliases: Aliases, present: _Present = _NONE) -> None:
        read = _read(e, aliases)
        if read is not None:
            guarded = _optional(e) or (read.kind, read.domain, read.name) in present
            # what is inside is the domain map and the name literal
            self.reads.append(Read(read.kind, read.domain, read.name, read.pos, guarded))
            return
        if isinstance(e, ast.Call) and e.function in _OPS and len(e.args) == 2:
            self._comparison(_OPS[e.function], e.args[0], e.args[1], aliases)
        if isinstance(e, ast.Call) and e.function in ("_&&_", "_||_") and len(e.args) == 2:
            # the other side's outcome that lets this side decide the result: true for &&, false for ||
            proves = e.function == "_&&_"
            left, right = e.args
            self.walk(left, aliases, present | _present_if(right, aliases, proves))
            self.walk(right, aliases, present | _present_if(left, aliases, proves))
            return
        if isinstance(e, ast.Call) and e.function == "_?_:_" and len(e.args) == 3:
            cond, yes, no = e.args
            self.walk(cond, aliases, present)
            self.walk(yes, aliases, present | _present_if(cond, aliases, True))
            self.walk(no, aliases, present | _present_if(cond, aliases, False))
            return
        if isinstance(e, ast.Comprehension):
            self.walk(e.iter_range, aliases, present)
            inner = _bind(e, aliases)
            if e.macro == "bind" and (_domain(e.accu_init, aliases) or _kind_map(e.accu_init, aliases)):
                self.walk(e.result, inner, present)
                return
            for part in (e.accu_init, e.loop_cond, e.loop_step, e.result):
                self.walk(part, inner, present)
            return
        for child in ast.children(e):
            self.walk(child, aliases, present)

    def _comparison(self, op: str, left: ast.Expr, right: ast.Expr, aliases: Aliases) -> None:
        for a, b, o in ((left, right, op), (right, left, _FLIP[op])):
            read = _read(a, aliases)
            literal = _literal(b)
            if read is not None and read.kind == "attribute" and literal is not None and not (
                isinstance(a, ast.Call) and a.function in ("@in", "_?._", "_[?_]")
            ) and not (isinstance(a, ast.Select) and a.test_only):
                self.comparisons.append(Comparison(read, o, literal[0], literal[1]))
                return
        # device.driver == "x"
        for a, b in ((left, right), (right, left)):
            if op == "==" and isinstance(a, ast.Select) and a.field == "driver" and isinstance(a.operand, ast.Ident) \
                    and a.operand.name == "device" and "device" not in aliases and (name := _string(b)) is not None:
                self.drivers.append(name)
