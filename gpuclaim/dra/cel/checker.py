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
from gpuclaim.dra.cel.environment import Environment
from gpuclaim.dra.cel.errors import CelCompileError, error_at

_RELATIONAL = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}
_DEVICE_FIELDS = {"driver": t.STRING, "attributes": t.ATTRIBUTES, "capacity": t.CAPACITY}
_TABLES = {(lists, inc): by_name(ext_lists=lists, includes=inc) for lists in (False, True) for inc in (False, True)}


@dataclass(slots=True)
class Checked:
    expr: ast.Expr
    types: dict[int, t.Type] = field(default_factory=dict)
    overloads: dict[int, list[Overload]] = field(default_factory=dict)

    def type_of(self, e: ast.Expr) -> t.Type:
        return self.types[e.id]


def check(text: str, expr: ast.Expr, *, env: Environment) -> Checked:
    return _Checker(text, env=env).run(expr)


def _describe(args: list[t.Type], member: bool) -> str:
    if member:
        return f"{t.display(args[0])}.({', '.join(t.display(a) for a in args[1:])})"
    return f"({', '.join(t.display(a) for a in args)})"


def _qualified_name(e: ast.Expr) -> str | None:
    if isinstance(e, ast.Ident):
        return e.name
    if isinstance(e, ast.Select) and not e.test_only:
        inner = _qualified_name(e.operand)
        return None if inner is None else f"{inner}.{e.field}"
    return None


class _Checker:
    def __init__(self, text: str, *, env: Environment) -> None:
        self.text = text
        self.ext_lists = env.ext_lists >= 3
        self.table = _TABLES[(self.ext_lists, env.includes)]
        self.device_fields = dict(_DEVICE_FIELDS)
        if env.allow_multiple_allocations:
            # StoredExpressions has the field even with DRAConsumableCapacity off (it evaluates to false).
            self.device_fields["allowMultipleAllocations"] = t.BOOL
        self.scopes: list[dict[str, t.Type]] = []
        self.out: Checked
        # cel-go's type variables: `[]` is list(_var0); uses bind _var0 through unification, and the
        # bindings hold for the whole expression (checker/checker.go, checker/types.go)
        self.mapping: t.Mapping = {}
        self.fresh = 0

    def run(self, expr: ast.Expr) -> Checked:
        self.out = Checked(expr)
        self.out.expr = self.visit(expr)
        # as cel-go does at the end: every type with its variables' bindings, the free ones dyn
        types = self.out.types
        for key, ty in types.items():
            if t.has_param(ty):
                types[key] = t.substitute(self.mapping, ty, True)
        return self.out

    def new_var(self) -> t.Type:
        self.fresh += 1
        return t.Type(f"_var{self.fresh - 1}")

    def assignable(self, t1: t.Type, t2: t.Type) -> bool:
        """cel-go ``checker.isAssignable``: t1 assignable to t2, keeping the bindings if so."""
        m = t.is_assignable(self.mapping, t1, t2)
        if m is None:
            return False
        self.mapping = m
        return True

    def sub(self, ty: t.Type) -> t.Type:
        return t.substitute(self.mapping, ty, False) if t.has_param(ty) else ty

    def mismatch(self, pos: int, expected: t.Type, found: t.Type) -> CelCompileError:
        # cel-go's typeMismatch prints the types as they are (a free variable by its name)
        return self.fail(pos, f"expected type '{t.display(expected)}' but found '{t.display(found)}'")

    def assert_type(self, e: ast.Expr, expected: t.Type) -> None:
        found = self.out.type_of(e)
        if not self.assignable(expected, found):
            raise self.mismatch(e.pos, expected, found)

    def join(self, e: ast.Expr, previous: t.Type | None, current: t.Type) -> t.Type:
        """cel-go ``joinTypes`` of literal elements (mixed elements are dyn here; the homogeneous-literal
        validator refuses them afterwards)."""
        if previous is None:
            return current
        if self.assignable(previous, current):
            return t.most_general(previous, current)
        return t.DYN

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
                elem: t.Type | None = None
                for i, x in enumerate(e.elements):
                    e.elements[i] = x = self.visit(x)
                    elem = self.join(x, elem, self.unwrap(x, i in e.optional))
                return self.set(e, t.list_of(self.new_var() if elem is None else elem))
            case ast.MapExpr():
                kt: t.Type | None = None
                vt: t.Type | None = None
                for i, (k, v) in enumerate(e.entries):
                    k = self.visit(k)
                    kt = self.join(k, kt, self.out.type_of(k))
                    v = self.visit(v)
                    vt = self.join(v, vt, self.unwrap(v, i in e.optional))
                    e.entries[i] = (k, v)
                if kt is None or vt is None:
                    kt, vt = self.new_var(), self.new_var()
                return self.set(e, t.map_of(kt, vt))
            case ast.Comprehension():
                return self.comprehension(e)
        raise AssertionError(e)  # pragma: no cover

    def unwrap(self, e: ast.Expr, optional: bool) -> t.Type:
        """The type an element adds to its literal: the value type of an optional (`?x`) one."""
        ty = self.out.type_of(e)
        if not optional or ty.is_dyn:
            return ty
        if ty.name == "optional_type":
            return ty.params[0]
        raise self.mismatch(e.pos, t.optional_of(ty), ty)

    def select(self, e: ast.Select) -> ast.Expr:
        name = _qualified_name(e)
        if name is not None and name in QUALIFIED:
            raise self.fail(e.pos, f"undeclared reference to '{name}' (in container '')")
        e.operand = self.visit(e.operand)
        ty = self.select_field(e.pos, self.out.type_of(e.operand), e.field, optional=False)
        return self.set(e, t.BOOL if e.test_only else self.sub(ty))

    def select_field(self, pos: int, operand: t.Type, name: str, *, optional: bool) -> t.Type:
        """cel-go ``checkSelectField``: the type of `operand.name` (`operand.?name` if optional)."""
        operand = self.sub(operand)
        inside = operand.name == "optional_type"
        if inside:
            operand = operand.params[0]  # `x.?a.b`: selection continues inside the optional
        if operand == t.DEVICE:
            if optional:
                raise self.fail(pos, "optional field selection is not supported on device")
            ty = self.device_fields.get(name)
            if ty is None:
                raise self.fail(pos, f"undefined field '{name}'")
        elif operand.name == "map":
            ty = operand.params[1]
        elif operand.is_param:
            self.assignable(t.DYN, operand)  # the variable becomes dyn, as cel-go binds it
            ty = t.DYN
        elif operand.is_dyn or operand == t.ERROR:
            ty = t.DYN
        elif operand in (t.QUANTITY, t.SEMVER, t.URL, t.IP, t.CIDR):
            # object types to cel-go (the apiserver declares them with cel.ObjectType), but no struct the type
            # provider knows: checkSelectField's lookupFieldType reports the failed lookup
            raise self.fail(pos, f"unexpected failed resolution of '{operand.name}'")
        else:
            raise self.fail(pos, f"type '{t.display(operand)}' does not support field selection")
        return t.optional_of(ty) if inside or optional else ty

    def range_vars(self, e: ast.Comprehension) -> tuple[t.Type, t.Type]:
        """The iteration variables' types: element (or key), and for two variables index/key and value."""
        rng = self.sub(self.out.type_of(e.iter_range))
        if rng.name == "list":
            return (t.INT, rng.params[0]) if e.iter_var2 is not None else (rng.params[0], t.DYN)
        if rng.name == "map":
            return rng.params[0], rng.params[1]
        if rng.is_dyn or rng.is_param or rng == t.ERROR:
            self.assignable(t.DYN, rng)  # a free range becomes dyn (cel-go checkComprehension)
            return t.DYN, t.DYN
        raise self.fail(e.iter_range.pos, f"expression of type '{rng}' cannot be range of a comprehension "
                        "(must be list, map, or dynamic)")

    def two_variable(self, e: ast.Comprehension) -> ast.Expr:
        """ext.TwoVarComprehensions: gpuclaim keeps the user's expressions (loop_step, filter); they are typed
        as the steps cel-go builds around them (ext/comprehensions.go)."""
        e.iter_range = self.visit(e.iter_range)
        e.accu_init = self.visit(e.accu_init)
        accu = self.out.type_of(e.accu_init)
        v1, v2 = self.range_vars(e)
        self.scopes.append({e.iter_var: v1, e.iter_var2: v2})  # type: ignore[dict-item]
        if e.filter is not None:
            e.filter = self.visit(e.filter)
        e.loop_cond = self.visit(e.loop_cond)
        e.loop_step = self.visit(e.loop_step)
        self.scopes.pop()
        body = self.out.type_of(e.loop_step)
        if e.macro in ("all2", "exists2"):
            step = self.logical(e.loop_step)  # accu && body / accu || body
        elif e.macro == "existsOne2":
            step = self.resolve(e.pos, "_?_:_", [body, t.INT, t.INT], member=False)  # body ? accu + 1 : accu
        elif e.macro == "transformList":
            step = self.resolve(e.pos, "_+_", [accu, t.list_of(body)], member=False)  # accu + [body]
        elif e.macro == "transformMap":
            step = self.resolve(e.pos, "cel.@mapInsert", [accu, v1, body], member=False)
        else:
            step = self.resolve(e.pos, "cel.@mapInsert", [accu, body], member=False)
        if e.filter is not None:
            step = self.resolve(e.pos, "_?_:_", [self.out.type_of(e.filter), step, accu], member=False)
        if not self.assignable(accu, step):
            raise self.mismatch(e.loop_step.pos, accu, step)
        self.scopes.append({e.accu_var: accu})
        e.result = self.visit(e.result)
        self.scopes.pop()
        if e.macro == "existsOne2":
            return self.set(e, t.BOOL)  # the result is `__result__ == 1` upstream; gpuclaim keeps the count
        return self.set(e, self.sub(self.out.type_of(e.result)))

    def logical(self, e: ast.Expr) -> t.Type:
        """An operand of `&&` / `||`: cel-go requires it assignable to bool ("expected type 'bool' ...")."""
        if not self.assignable(self.out.type_of(e), t.BOOL):
            raise self.mismatch(e.pos, t.BOOL, self.out.type_of(e))
        return t.BOOL

    def sort_by(self, e: ast.Comprehension) -> ast.Expr:
        """ext.Lists v3's sortBy(x, key): in the scheduler's environment, and in the apiserver's from 1.35."""
        if not self.ext_lists:
            raise self.fail(e.pos, "undeclared reference to 'sortBy' (in container '')")
        e.iter_range = self.visit(e.iter_range)
        e.accu_init = self.visit(e.accu_init)
        rng = self.sub(self.out.type_of(e.iter_range))
        if rng.is_param:
            self.assignable(t.DYN, rng)
            rng = t.DYN
        if rng.name != "list" and not rng.is_dyn:
            raise self.fail(e.pos, f"found no matching overload for 'sortBy' applied to '{rng}.(dyn)'")
        elem = rng.params[0] if rng.name == "list" else t.DYN
        self.scopes.append({e.iter_var: elem})
        e.loop_cond = self.visit(e.loop_cond)
        e.loop_step = self.visit(e.loop_step)
        self.scopes.pop()
        if self.sub(self.out.type_of(e.loop_step)).is_param:
            # cel-go resolves @sortByAssociatedKeys(list(T), list(K)) over its overloads in order, int first: a
            # free key type is bound to int, and so is the element type when the key is the element
            # (`[].sortBy(y, y)` is a list(int))
            self.assignable(self.sub(self.out.type_of(e.loop_step)), t.INT)
        self.scopes.append({e.accu_var: t.list_of(elem)})
        e.result = self.visit(e.result)
        self.scopes.pop()
        return self.set(e, self.sub(t.list_of(elem)))

    def comprehension(self, e: ast.Comprehension) -> ast.Expr:
        """cel-go ``checkComprehension``: the macros' expansions are typed as written, so the element type of
        an iterated `[]` is what the body binds it to (`[].filter(y, y == 0u)` is a list(uint))."""
        if e.macro == "sortBy":
            return self.sort_by(e)
        if e.iter_var2 is not None:
            return self.two_variable(e)
        e.iter_range = self.visit(e.iter_range)
        e.accu_init = self.visit(e.accu_init)
        accu_t = self.out.type_of(e.accu_init)
        var_t = self.range_vars(e)[0]
        self.scopes.append({e.accu_var: accu_t} if e.macro == "bind" else {e.iter_var: var_t, e.accu_var: accu_t})
        e.loop_cond = self.visit(e.loop_cond)
        self.assert_type(e.loop_cond, t.BOOL)
        e.loop_step = self.visit(e.loop_step)
        self.assert_type(e.loop_step, accu_t)
        e.result = self.visit(e.result)
        self.scopes.pop()
        return self.set(e, self.sub(self.out.type_of(e.result)))

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
        if (e.function, member) not in self.table and (e.function, not member) not in self.table:
            raise self.fail(e.pos, f"undeclared reference to '{e.function}' (in container '')")
        if e.function == "_?._" and not member and isinstance(e.args[1], ast.Const) and isinstance(
                e.args[1].value, str):
            # cel-go checkOptSelect: typed as a field selection that yields an optional
            self.out.overloads[e.id] = self.table[("_?._", False)]
            ty = self.select_field(e.pos, self.out.type_of(e.args[0]), e.args[1].value, optional=True)
            return self.set(e, self.sub(ty))
        if e.function in ("_&&_", "_||_"):
            for a in e.args:
                self.logical(a)
            self.out.overloads[e.id] = self.table[(e.function, False)]
            return self.set(e, t.BOOL)
        arg_types = ([self.out.type_of(e.target)] if e.target is not None else []) + [
            self.out.type_of(a) for a in e.args
        ]
        return self.set(e, self.resolve(e.pos, e.function, arg_types, member=member, node=e.id))

    def resolve(self, pos: int, function: str, arg_types: list[t.Type], *, member: bool, node: int = 0) -> t.Type:
        """cel-go ``resolveOverload``: every overload (in declaration order) whose parameters, instantiated with
        fresh type variables, the arguments are assignable to; the first match binds the variables, so later
        ones must agree with it. The result is the first match's, or dyn if the matches' results differ."""
        candidates = _MAP_INSERT if function == "cel.@mapInsert" else self.table.get((function, member), [])
        matched: list[Overload] = []
        result: t.Type | None = None
        concrete = not any(t.has_param(a) for a in arg_types)
        for o in candidates:
            if len(o.params) != len(arg_types):
                continue
            if concrete:  # the common case: nothing of the expression's to bind
                local = t.assignable_local(arg_types, o.params)
                if local is None:
                    continue
                matched.append(o)
                ret = o.result
                if o.generic:
                    ret = t.substitute(local, ret, False)
                    if t.has_param(ret):  # `optional.none()`: a parameter no argument binds is a fresh variable
                        ret = t.substitute({"_A": self.new_var(), "_B": self.new_var()}, ret, False)
                if result is None:
                    result = ret
                elif not result.is_dyn and ret != result:
                    result = t.DYN
                continue
            params, ret = o.params, o.result
            if o.generic:
                fresh = {"_A": self.new_var(), "_B": self.new_var()}
                params = tuple(t.substitute(fresh, p, False) for p in params)
                ret = t.substitute(fresh, ret, False)
            m = t.is_assignable_list(self.mapping, arg_types, params)
            if m is None:
                continue
            self.mapping = m
            matched.append(o)
            ret = self.sub(ret)
            if result is None:
                result = ret
            elif not result.is_dyn and ret != result:
                result = t.DYN
        if result is None:
            shown = [t.substitute(self.mapping, a, True) for a in arg_types]
            raise self.fail(
                pos,
                f"found no matching overload for '{function}' applied to '{_describe(shown, member)}'",
                hint=_hint(function, shown),
            )
        if node:
            self.out.overloads[node] = matched
        return result


_K, _V = t.Type("_A"), t.Type("_B")
# ext.TwoVarComprehensions' internal insertion step (ext/comprehensions.go `cel.@mapInsert`)
_MAP_INSERT = [
    Overload("@mapInsert_map_key_value", "cel.@mapInsert", False, (t.map_of(_K, _V), _K, _V), t.map_of(_K, _V)),
    Overload("@mapInsert_map_map", "cel.@mapInsert", False, (t.map_of(_K, _V), t.map_of(_K, _V)), t.map_of(_K, _V)),
]


def _hint(function: str, args: list[t.Type]) -> str | None:
    op = _RELATIONAL.get(function)
    if op is None or not any(a in (t.QUANTITY, t.SEMVER) for a in args):
        return None
    return (
        f"quantities and semantic versions have no '{op}' operator; write "
        f"a.compareTo(b) {op} 0 (or a.isGreaterThan(b) / a.isLessThan(b))"
    )
