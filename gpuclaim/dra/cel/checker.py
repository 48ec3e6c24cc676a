"""Static type checker for the DRA CEL environment (cel-python has none).

It rejects what cel-go's checker rejects in the Kubernetes DRA environment - undeclared names, unknown
fields of ``device``, calls without a matching overload (relational operators on quantities and
semantic versions among them) - with cel-go's wording and positions, and records the type of every
node and the overloads of every call for the cost estimator and the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuclaim.dra.cel import ast
from gpuclaim.dra.cel import types as t
from gpuclaim.dra.cel.declarations import QUALIFIED, Overload, by_name
from gpuclaim.dra.cel.errors import CelCompileError, error_at

_RELATIONAL = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}
_DEVICE_FIELDS = {"driver": t.STRING, "attributes": t.ATTRIBUTES, "capacity": t.CAPACITY}
_TABLES = {mode: by_name(stored=mode) for mode in (False, True)}


@dataclass(slots=True)
class Checked:
    expr: ast.Expr
    types: dict[int, t.Type] = field(default_factory=dict)
    overloads: dict[int, list[Overload]] = field(default_factory=dict)

    def type_of(self, e: ast.Expr) -> t.Type:
        return self.types[e.id]


def check(text: str, expr: ast.Expr, *, stored: bool, multi_alloc: bool = False) -> Checked:
    return _Checker(text, stored=stored, multi_alloc=multi_alloc).run(expr)


def _describe(args: list[t.Type], member: bool) -> str:
    if member:
        return f"{args[0]}.({', '.join(str(a) for a in args[1:])})"
    return f"({', '.join(str(a) for a in args)})"


def _qualified_name(e: ast.Expr) -> str | None:
    if isinstance(e, ast.Ident):
        return e.name
    if isinstance(e, ast.Select) and not e.test_only:
        inner = _qualified_name(e.operand)
        return None if inner is None else f"{inner}.{e.field}"
    return None


class _Checker:
    def __init__(self, text: str, *, stored: bool, multi_alloc: bool) -> None:
        self.text = text
        self.stored = stored
        self.table = _TABLES[stored]
        self.device_fields = dict(_DEVICE_FIELDS)
        if stored or multi_alloc:
            # StoredExpressions has the field even with DRAConsumableCapacity off (it evaluates to false).
            self.device_fields["allowMultipleAllocations"] = t.BOOL
        self.scopes: list[dict[str, t.Type]] = []
        self.out: Checked

    def run(self, expr: ast.Expr) -> Checked:
        self.out = Checked(expr)
        self.out.expr = self.visit(expr)
        return self.out

    def fail(self, pos: int, message: str, hint: str | None = None) -> CelCompileError:
        return error_at(self.text, pos, message, hint=hint)

    def set(self, e: ast.Expr, ty: t.Type) -> ast.Expr:
        self.out.types[e.id] = ty
        return e

    def lookup(self, name: str) -> t.Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name == "device":
            return t.DEVICE
        if name in t.TYPE_NAMES:
            return t.type_of(t.TYPE_NAMES[name])
        return None

    def visit(self, e: ast.Expr) -> ast.Expr:
        match e:
            case ast.Const():
                return self.set(e, t.Type("null_type") if e.kind == "null" else t.Type(e.kind))
            case ast.Ident():
                ty = self.lookup(e.name)
                if ty is None:
                    raise self.fail(e.pos, f"undeclared reference to '{e.name}' (in container '')")
                return self.set(e, ty)
            case ast.Select():
                return self.select(e)
            case ast.Call():
                return self.call(e)
            case ast.ListExpr():
                e.elements = [self.visit(x) for x in e.elements]
                types = [self.unwrap(x, i in e.optional) for i, x in enumerate(e.elements)]
                elem = t.common(types) if e.elements else t.FREE
                return self.set(e, t.list_of(elem))
            case ast.MapExpr():
                e.entries = [(self.visit(k), self.visit(v)) for k, v in e.entries]
                kt = t.common([self.out.type_of(k) for k, _ in e.entries]) if e.entries else t.FREE
                vts = [self.unwrap(v, i in e.optional) for i, (_, v) in enumerate(e.entries)]
                vt = t.common(vts) if e.entries else t.FREE
                return self.set(e, t.map_of(kt, vt))
            case ast.Comprehension():
                return self.comprehension(e)
        raise AssertionError(e)  # pragma: no cover

    def unwrap(self, e: ast.Expr, optional: bool) -> t.Type:
        """The type an element adds to its literal: the value type of an optional (`?x`) one."""
        ty = self.out.type_of(e)
        if not optional:
            return ty
        if ty.name == "optional_type":
            return ty.params[0]
        if ty.is_dyn:
            return t.DYN
        raise self.fail(e.pos, f"found no matching overload for 'optional literal' applied to '({ty})'")

    def select(self, e: ast.Select) -> ast.Expr:
        name = _qualified_name(e)
        if name is not None and name in QUALIFIED:
            raise self.fail(e.pos, f"undeclared reference to '{name}' (in container '')")
        e.operand = self.visit(e.operand)
        operand = self.out.type_of(e.operand)
        optional = operand.name == "optional_type"
        if optional:
            operand = operand.params[0]  # `x.?a.b`: selection continues inside the optional
        if operand == t.DEVICE:
            ty = self.device_fields.get(e.field)
            if ty is None:
                raise self.fail(e.pos, f"undefined field '{e.field}'")
        elif operand.name == "map":
            ty = operand.params[1]
        elif operand.is_dyn:
            ty = t.DYN
        else:
            raise self.fail(e.pos, f"type '{operand}' does not support field selection")
        if optional and not e.test_only:
            ty = t.optional_of(ty)
        return self.set(e, t.BOOL if e.test_only else ty)

    def two_variable(self, e: ast.Comprehension) -> ast.Expr:
        e.iter_range = self.visit(e.iter_range)
        e.accu_init = self.visit(e.accu_init)
        rng = self.out.type_of(e.iter_range)
        if rng.name == "list":
            v1, v2 = t.INT, rng.params[0]
        elif rng.name == "map":
            v1, v2 = rng.params
        elif rng.is_dyn:
            v1, v2 = t.DYN, t.DYN
        else:
            raise self.fail(e.iter_range.pos, f"expression of type '{rng}' cannot be range of a comprehension "
                            "(must be list, map, or dynamic)")
        self.scopes.append({e.iter_var: v1, e.iter_var2: v2})  # type: ignore[dict-item]
        if e.filter is not None:
            e.filter = self.visit(e.filter)
            self.expect_bool(e.filter)
        e.loop_cond = self.visit(e.loop_cond)
        e.loop_step = self.visit(e.loop_step)
        self.scopes.pop()
        step = self.out.type_of(e.loop_step)
        if e.macro in ("all2", "exists2", "existsOne2"):
            self.expect_bool(e.loop_step)
            result = t.BOOL
        elif e.macro == "transformList":
            result = t.list_of(step)
        elif e.macro == "transformMap":
            result = t.map_of(v1, step)
        elif step.name == "map" or step.is_dyn:
            result = step if step.name == "map" else t.map_of(t.DYN, t.DYN)
        else:
            raise self.fail(e.loop_step.pos, f"found no matching overload for 'transformMapEntry' applied to "
                            f"'({step})'")
        self.scopes.append({e.accu_var: result})
        e.result = self.visit(e.result)
        self.scopes.pop()
        return self.set(e, result)

    def expect_bool(self, e: ast.Expr) -> None:
        ty = self.out.type_of(e)
        if ty != t.BOOL and not ty.is_dyn:
            raise self.fail(e.pos, f"found no matching overload for '_&&_' applied to '(bool, {ty})'")

    def sort_by(self, e: ast.Comprehension) -> ast.Expr:
        """ext.Lists v3's sortBy(x, key): only in the scheduler's StoredExpressions environment in 1.34."""
        if not self.stored:
            raise self.fail(e.pos, "undeclared reference to 'sortBy' (in container '')")
        e.iter_range = self.visit(e.iter_range)
        e.accu_init = self.visit(e.accu_init)
        rng = self.out.type_of(e.iter_range)
        if rng.name != "list" and not rng.is_dyn:
            raise self.fail(e.pos, f"found no matching overload for 'sortBy' applied to '{rng}.(dyn)'")
        elem = rng.params[0] if rng.name == "list" else t.DYN
        self.scopes.append({e.iter_var: elem})
        e.loop_cond = self.visit(e.loop_cond)
        e.loop_step = self.visit(e.loop_step)
        self.scopes.pop()
        self.scopes.append({e.accu_var: t.list_of(elem)})
        e.result = self.visit(e.result)
        self.scopes.pop()
        return self.set(e, t.list_of(elem))

    def comprehension(self, e: ast.Comprehension) -> ast.Expr:
        if e.macro == "sortBy":
            return self.sort_by(e)
        if e.iter_var2 is not None:
            return self.two_variable(e)
        e.iter_range = self.visit(e.iter_range)
        e.accu_init = self.visit(e.accu_init)
        rng = self.out.type_of(e.iter_range)
        if rng.name == "list" or rng.name == "map":
            var_t = rng.params[0]
        elif rng.is_dyn:
            var_t = t.DYN
        else:
            raise self.fail(e.iter_range.pos, f"expression of type '{rng}' cannot be range of a comprehension "
                            "(must be list, map, or dynamic)")
        accu_t = self.out.type_of(e.accu_init)
        if e.macro in ("map", "filter"):
            accu_t = t.list_of(t.FREE)  # the element type comes from what each step appends
        self.scopes.append({e.accu_var: accu_t} if e.macro == "bind" else {e.iter_var: var_t, e.accu_var: accu_t})
        e.loop_cond = self.visit(e.loop_cond)
        e.loop_step = self.visit(e.loop_step)
        if e.macro in ("map", "filter"):
            # The element type of the built list is the type of what each step appends.
            step_t = self.out.type_of(e.loop_step)
            self.scopes[-1][e.accu_var] = step_t
            self.out.types[e.accu_init.id] = step_t
        e.result = self.visit(e.result)
        self.scopes.pop()
        return self.set(e, self.out.type_of(e.result))

    def call(self, e: ast.Call) -> ast.Expr:
        if e.target is not None:
            qualified = _qualified_name(e.target)
            if qualified is not None and f"{qualified}.{e.function}" in QUALIFIED and self.lookup(
                qualified.split(".")[0]
            ) is None:
                name = f"{qualified}.{e.function}"
                if (name, False) in self.table:
                    e.function, e.target = name, None
        member = e.target is not None
        if member:
            e.target = self.visit(e.target)  # type: ignore[arg-type]
        e.args = [self.visit(a) for a in e.args]
        candidates = self.table.get((e.function, member))
        if candidates is None and (e.function, not member) not in self.table:
            raise self.fail(e.pos, f"undeclared reference to '{e.function}' (in container '')")
        arg_types = ([self.out.type_of(e.target)] if e.target is not None else []) + [
            self.out.type_of(a) for a in e.args
        ]
        matched: list[Overload] = []
        results: list[t.Type] = []
        for o in candidates or []:
            if len(o.params) != len(arg_types):
                continue
            subst: t.Subst = {}
            if all(t.assignable(p, a, subst) for p, a in zip(o.params, arg_types, strict=True)):
                matched.append(o)
                results.append(t.substitute(o.result, subst))
        if not matched and e.function in _RELATIONAL and t.NULL in arg_types and all(
                a == t.NULL or a.is_dyn for a in arg_types):
            # cel-go's null is assignable to its timestamp/duration overloads: it compiles, then fails
            self.out.overloads[e.id] = []
            return self.set(e, t.BOOL)
        if not matched:
            raise self.fail(
                e.pos,
                f"found no matching overload for '{e.function}' applied to '{_describe(arg_types, member)}'",
                hint=_hint(e.function, arg_types),
            )
        self.out.overloads[e.id] = matched
        # a free type parameter in an argument is bound by the first overload that matches (cel-go's
        # unification): `[].min()` is an int
        result = results[0] if any(t.has_free(a) for a in arg_types) else t.common(results)
        if e.function == "_?._" and arg_types[0].name == "map":
            result = t.optional_of(arg_types[0].params[1])
        if e.function == "_?._" and arg_types[0] == t.DEVICE:
            raise self.fail(e.pos, "optional field selection is not supported on device")
        return self.set(e, result)


def _hint(function: str, args: list[t.Type]) -> str | None:
    op = _RELATIONAL.get(function)
    if op is None or not any(a in (t.QUANTITY, t.SEMVER) for a in args):
        return None
    return (
        f"quantities and semantic versions have no '{op}' operator; write "
        f"a.compareTo(b) {op} 0 (or a.isGreaterThan(b) / a.isLessThan(b))"
    )
