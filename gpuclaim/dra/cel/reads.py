"""Which parts of a device a selector reads, for caching results by projection.

``device.attributes["gpu.nvidia.com"].productName`` (also ``["productName"]``, ``.?productName``,
``has(...)``, ``"productName" in ...`` and the same through a ``cel.bind`` alias) reads one attribute;
any other use of a domain map (iteration, ``size()``, passing it around) reads the whole domain; any
other use of ``device.attributes`` / ``device.capacity`` or of ``device`` itself reads everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuclaim.dra.cel import ast

Kind = Literal["driver", "attribute", "capacity", "allowMultipleAllocations"]
_KIND = {"attributes": "attribute", "capacity": "capacity"}


@dataclass(frozen=True, slots=True, order=True)
class Read:
    """One projection item: ``("attribute", "gpu.nvidia.com", "productName")``; ``name`` None = the
    whole domain, ``domain`` None = every domain of that kind."""

    kind: Kind
    domain: str | None = None
    name: str | None = None


EVERYTHING = frozenset({Read("attribute"), Read("capacity"), Read("driver"), Read("allowMultipleAllocations")})


def analyse(expr: ast.Expr) -> frozenset[Read]:
    out: set[Read] = set()
    _walk(expr, {}, out)
    if any(r.domain is None and r.kind in ("attribute", "capacity") for r in out):
        # A whole kind: keep the reads simple (and the key cheap): read everything of that kind.
        out = {r for r in out if r.domain is None or r.kind in ("driver", "allowMultipleAllocations")}
    return frozenset(out)


Alias = tuple[str, str | None]  # (kind, domain or None for the whole kind map)


def _kind_map(e: ast.Expr, aliases: dict[str, Alias]) -> str | None:
    if (
        isinstance(e, ast.Select) and not e.test_only and isinstance(e.operand, ast.Ident)
        and e.operand.name == "device" and "device" not in aliases and e.field in _KIND
    ):
        return _KIND[e.field]
    if isinstance(e, ast.Ident) and e.name in aliases and aliases[e.name][1] is None:
        return aliases[e.name][0]
    return None


def _domain(e: ast.Expr, aliases: dict[str, Alias]) -> Alias | None:
    if isinstance(e, ast.Call) and e.function == "_[_]" and isinstance(e.args[1], ast.Const):
        kind = _kind_map(e.args[0], aliases)
        if kind is not None and e.args[1].kind == "string":
            return kind, e.args[1].value  # type: ignore[return-value]
    if isinstance(e, ast.Ident) and e.name in aliases and aliases[e.name][1] is not None:
        return aliases[e.name]
    return None


def _const_str(e: ast.Expr) -> str | None:
    return e.value if isinstance(e, ast.Const) and e.kind == "string" else None  # type: ignore[return-value]


def _walk(e: ast.Expr, aliases: dict[str, Alias], out: set[Read]) -> None:
    # one attribute: select / optional select / index / `in` on a domain map
    if isinstance(e, ast.Select) and (d := _domain(e.operand, aliases)):
        out.add(Read(d[0], d[1], e.field))  # type: ignore[arg-type]
        return
    if isinstance(e, ast.Call) and e.function in ("_?._", "_[_]", "_[?_]") and (d := _domain(e.args[0], aliases)):
        name = _const_str(e.args[1])
        if name is not None:
            out.add(Read(d[0], d[1], name))  # type: ignore[arg-type]
            return
        out.add(Read(d[0], d[1]))  # type: ignore[arg-type]
        _walk(e.args[1], aliases, out)
        return
    if isinstance(e, ast.Call) and e.function == "@in" and (d := _domain(e.args[1], aliases)):
        name = _const_str(e.args[0])
        if name is not None:
            out.add(Read(d[0], d[1], name))  # type: ignore[arg-type]
            return
    if (d := _domain(e, aliases)) is not None:
        out.add(Read(d[0], d[1]))  # type: ignore[arg-type]
        return
    if (
        isinstance(e, ast.Call) and e.function == "@in" and (k := _kind_map(e.args[1], aliases))
        and _const_str(e.args[0]) is not None
    ):
        out.add(Read(k, _const_str(e.args[0])))  # type: ignore[arg-type]
        return
    if (k := _kind_map(e, aliases)) is not None:
        out.add(Read(k))  # type: ignore[arg-type]
        return
    if isinstance(e, ast.Select) and isinstance(e.operand, ast.Ident) and e.operand.name == "device" and (
        "device" not in aliases
    ):
        if e.field in ("driver", "allowMultipleAllocations"):
            out.add(Read(e.field))  # type: ignore[arg-type]
        return
    if isinstance(e, ast.Ident):
        if e.name == "device" and "device" not in aliases:
            out.update(EVERYTHING)
        return
    if isinstance(e, ast.Comprehension):
        _walk(e.iter_range, aliases, out)
        inner = {k: v for k, v in aliases.items() if k not in (e.iter_var, e.iter_var2, e.accu_var)}
        if e.macro == "bind":
            d = _domain(e.accu_init, aliases)
            k = _kind_map(e.accu_init, aliases)
            if d is not None:
                inner[e.accu_var] = d
            elif k is not None:
                inner[e.accu_var] = (k, None)
            else:
                _walk(e.accu_init, aliases, out)
            _walk(e.result, inner, out)
            return
        for part in (e.accu_init, e.loop_cond, e.loop_step, e.result, e.filter):
            if part is not None:
                _walk(part, inner, out)
        return
    for child in ast.children(e):
        _walk(child, aliases, out)
