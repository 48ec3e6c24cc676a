"""What cel-go refuses after type checking, in the Kubernetes environment: its AST validators and the
program-instantiation errors of its constant folding.

The Kubernetes base environment (k8s.io/apiserver ``pkg/cel/environment/base.go``) turns on
``cel.ASTValidators(ValidateDurationLiterals, ValidateTimestampLiterals, ValidateRegexLiterals,
ValidateHomogeneousAggregateLiterals)``, ext.Strings adds the ``format()`` validator, and
``cel.EvalOptions(OptOptimize)`` folds type conversions of constants while the program is built
(cel-go ``interpreter/decorators.go`` ``maybeOptimizeConstUnary``): ``int("x")`` is refused at create time
("program instantiation failed"), not at evaluation.
"""

from __future__ import annotations

from typing import Any

from gpuclaim.dra.cel import ast, regex
from gpuclaim.dra.cel import types as t
from gpuclaim.dra.cel.checker import Checked
from gpuclaim.dra.cel.errors import CelCompileError, CelRuntimeError, error_at
from gpuclaim.dra.cel.timevalues import Duration, Timestamp

_CONVERSIONS = frozenset({"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"})


def validate(text: str, checked: Checked) -> None:
    """Raise the first error cel-go would report for a checked expression (in cel-go's order)."""
    _literals(text, checked, checked.expr, "duration")
    _literals(text, checked, checked.expr, "timestamp")
    _regexes(text, checked.expr)
    _homogeneous(text, checked, checked.expr, exempt=False)
    _format_calls(text, checked, checked.expr)
    _fold(checked, checked.expr)


# -- ValidateDurationLiterals / ValidateTimestampLiterals ----------------------------------------------------
# cel-go cel/validator.go formatValidator: a literal argument of any call named duration()/timestamp() is
# evaluated with the function's overloads; an error (`duration("x")`, `duration(1)`, year 0000) is reported
# at the argument.
def _literals(text: str, c: Checked, e: ast.Expr, function: str) -> None:
    if isinstance(e, ast.Call) and e.function == function and e.target is None and len(e.args) == 1 and isinstance(
            e.args[0], ast.Const):
        try:
            _evaluate(c, e)
        except CelRuntimeError:
            raise error_at(text, e.args[0].pos, f"invalid {function} argument") from None
    for child in ast.children(e):
        _literals(text, c, child, function)


# -- ValidateRegexLiterals ---------------------------------------------------------------------------------
def _regexes(text: str, e: ast.Expr) -> None:
    if isinstance(e, ast.Call) and e.function in ("matches", "find", "findAll"):
        pattern = e.args[-1] if e.target is None and e.function == "matches" else (e.args[0] if e.args else None)
        if isinstance(pattern, ast.Const) and isinstance(pattern.value, str):
            try:
                regex.compile_re2(pattern.value)
            except regex.RegexError:
                raise error_at(text, pattern.pos, f"invalid {e.function} argument") from None
    for child in ast.children(e):
        _regexes(text, child)


# -- ValidateHomogeneousAggregateLiterals (lists and maps under format() are exempt) -----------------------
# cel-go cel/validator.go: on the checked types (free type variables already bound or dyn), every element must
# have the first one's type exactly; a list stops at its first mismatch, a map reports each.
def _homogeneous(text: str, c: Checked, e: ast.Expr, *, exempt: bool) -> None:
    if isinstance(e, ast.Call) and e.function == "format":
        exempt = True
    if not exempt and isinstance(e, ast.ListExpr):
        first: t.Type | None = None
        for i, el in enumerate(e.elements):
            ty = _entry_type(text, c, el, i in e.optional)
            if first is None:
                first = ty
            elif ty != first:
                raise error_at(text, el.pos, f"expected type '{t.display(first)}' but found '{t.display(ty)}'")
    if not exempt and isinstance(e, ast.MapExpr):
        kt: t.Type | None = None
        vt: t.Type | None = None
        for i, (k, v) in enumerate(e.entries):
            kty, vty = c.type_of(k), _entry_type(text, c, v, i in e.optional)
            if kt is None or vt is None:
                kt, vt = kty, vty
                continue
            if kty != kt:
                raise error_at(text, k.pos, f"expected type '{t.display(kt)}' but found '{t.display(kty)}'")
            if vty != vt:
                raise error_at(text, v.pos, f"expected type '{t.display(vt)}' but found '{t.display(vty)}'")
    for child in ast.children(e):
        _homogeneous(text, c, child, exempt=exempt)


def _entry_type(text: str, c: Checked, e: ast.Expr, optional: bool) -> t.Type:
    ty = c.type_of(e)
    if not optional:
        return ty
    if ty.name != "optional_type":
        # the checker lets a dyn entry through (`[?dyn(x)]`); the validator then takes its type parameter, which
        # dyn has not: cel-go panics ("index out of range [0] with length 0", cel/validator.go
        # homogeneousAggregateLiteralValidator) and kube-apiserver answers 500, so no such selector is ever stored
        raise error_at(text, e.pos, f"an optional entry must have an optional type, not '{t.display(ty)}' "
                                    "(kube-apiserver's CEL validator crashes on it: HTTP 500)",
                       hint="give the entry an optional type: optional.of(x), m.?field or l[?i]")
    return ty.params[0]


# -- ext.Strings' format() validator -----------------------------------------------------------------------
_VERB_TYPES = {
    "d": ("int", "uint"), "o": ("int", "uint"), "b": ("int", "uint", "bool"),
    "f": ("double", "string"), "e": ("double", "string"), "x": ("int", "uint", "string", "bytes"),
    "X": ("int", "uint", "string", "bytes"),
}
_VERB_ERRORS = {
    "d": "decimal clause can only be used on integers", "o": "octal clause can only be used on integers",
    "b": "only integers and bools can be formatted as binary", "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
}
_STRING_OK = frozenset({"list", "map", "int", "uint", "double", "bool", "string", "bytes", "type", "null_type",
                        "google.protobuf.Timestamp", "google.protobuf.Duration"})
STRING_CLAUSE = ("string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
                 "durations, and timestamps")


def clauses(fmt: str) -> list[tuple[str, int | None]]:
    """The (verb, precision) of each clause of a format string; raises ValueError with cel-go's text."""
    out: list[tuple[str, int | None]] = []
    i = 0
    while i < len(fmt):
        if fmt[i] != "%":
            i += 1
            continue
        i += 1
        if i < len(fmt) and fmt[i] == "%":
            i += 1
            continue
        precision = None
        if i < len(fmt) and fmt[i] == ".":
            j = i + 1
            while j < len(fmt) and fmt[j].isdigit():
                j += 1
            precision, i = int(fmt[i + 1 : j] or 0), j
        if i >= len(fmt):
            raise ValueError("could not parse formatting clause: unexpected end of string")
        verb = fmt[i]
        if verb not in "sdfeboxX":
            raise ValueError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
        out.append((verb, precision))
        i += 1
    return out


def _format_calls(text: str, c: Checked, e: ast.Expr) -> None:
    if (
        isinstance(e, ast.Call) and e.function == "format" and isinstance(e.target, ast.Const)
        and e.target.kind == "string" and len(e.args) == 1 and isinstance(e.args[0], ast.ListExpr)
    ):
        args = e.args[0].elements
        try:
            found = clauses(e.target.value)  # type: ignore[arg-type]
        except ValueError as exc:
            raise error_at(text, e.pos, str(exc)) from None
        for n, (verb, _precision) in enumerate(found):
            if n >= len(args):
                raise error_at(text, e.pos, f"index {n} out of range")
            bad = _bad_arg(c, args[n], verb)
            if bad is not None:
                what = STRING_CLAUSE if verb == "s" else _VERB_ERRORS[verb]
                raise error_at(text, bad.pos, f"error during formatting: {what}, was given {_type_name(c, bad)}")
        if len(args) > len(found):
            raise error_at(text, e.pos, f"too many arguments supplied to string.format "
                           f"(expected {len(found)}, got {len(args)})")
    for child in ast.children(e):
        _format_calls(text, c, child)


def _type_name(c: Checked, e: ast.Expr) -> str:
    ty = c.type_of(e)
    return "google.protobuf.Any" if ty.name == "any" else ty.name


def _bad_arg(c: Checked, e: ast.Expr, verb: str) -> ast.Expr | None:
    ty = c.type_of(e)
    if ty.name == "dyn":
        return None
    if verb != "s":
        return None if ty.name in _VERB_TYPES[verb] else e
    if ty.name not in _STRING_OK:
        return e
    if isinstance(e, ast.ListExpr):
        for el in e.elements:
            if (bad := _bad_arg(c, el, "s")) is not None:
                return bad
    if isinstance(e, ast.MapExpr):
        for k, v in e.entries:
            for part in (k, v):
                if (bad := _bad_arg(c, part, "s")) is not None:
                    return bad
    return None


# -- OptOptimize: type conversions of constants are evaluated when the program is built --------------------
def _fold(c: Checked, e: ast.Expr) -> bool:
    """Whether ``e`` is a constant for cel-go's planner; raise where folding a conversion fails."""
    kids = [_fold(c, child) for child in ast.children(e)]
    if isinstance(e, ast.Const):
        return True
    if isinstance(e, ast.Ident):
        if c.type_of(e).name != "type":
            return False
        if e.name not in t.TYPE_NAMES:
            # cel-go's planCheckedIdent plans an identifier typed `type(T)` as a type name to look up in the type
            # provider; a variable (cel.bind's, a macro's) holding a type is none, so the program is never built,
            # even when the variable is unused: cel.bind's expansion reads it in its loop step
            raise CelCompileError(f"program instantiation failed: reference to undefined type: {e.name}")
        return True  # `int`: the checker resolved it to a type value
    if isinstance(e, ast.Call) and e.target is None and e.function in ("_[_]", "_[?_]") and len(kids) == 2 and kids[1]:
        _qualifier(c, e.args[1])
        return False
    if isinstance(e, ast.ListExpr | ast.MapExpr):
        return not e.optional and all(kids)
    if isinstance(e, ast.Call) and e.target is None and e.function in _CONVERSIONS and len(e.args) == 1 and kids[0]:
        try:
            _evaluate(c, e)
        except CelRuntimeError as err:
            raise CelCompileError(f"program instantiation failed: {err.message}") from None
        return True
    return False


# cel-go interpreter/attributes.go newQualifier: "invalid qualifier type: %T" for any other constant
_QUALIFIER_TYPES = {type(None): "types.Null", bytes: "types.Bytes", list: "*types.baseList", dict: "*types.baseMap",
                    Duration: "types.Duration", Timestamp: "types.Timestamp"}


def _qualifier(c: Checked, index: ast.Expr) -> None:
    """The planner turns a constant index into a qualifier (interpreter/planner.go ``planCallIndex``), which
    only strings, ints, uints, bools and doubles can be: `{}[null]` fails when the program is built."""
    from gpuclaim.dra.cel.values import TypeValue

    value = _evaluate(c, index) if isinstance(index, ast.Call) else (
        TypeValue("") if isinstance(index, ast.Ident) else None)
    if isinstance(index, ast.Const):
        value = index.value
    elif isinstance(index, ast.ListExpr):
        value = []
    elif isinstance(index, ast.MapExpr):
        value = {}
    name = "*types.Type" if isinstance(value, TypeValue) else _QUALIFIER_TYPES.get(type(value))
    if name is not None:
        raise CelCompileError(f"program instantiation failed: invalid qualifier type: {name}")


def _evaluate(c: Checked, e: ast.Expr) -> Any:
    from gpuclaim.dra.cel.runtime import compile_checked

    return compile_checked(Checked(e, c.types, c.overloads), track_cost=False)({})
