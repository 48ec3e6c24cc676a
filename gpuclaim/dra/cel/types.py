"""Static CEL types of the DRA environment, printed as cel-go prints them in error messages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    params: tuple[Type, ...] = ()

    def __str__(self) -> str:
        if self.name == "free":
            return "dyn"
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name

    @property
    def is_param(self) -> bool:
        return self.name.startswith("_")

    @property
    def is_dyn(self) -> bool:
        # The attribute value type is apiserver's AnyType ("any"); the checker treats it as dyn.
        return self.name in ("dyn", "any", "free")


INT, UINT, DOUBLE = Type("int"), Type("uint"), Type("double")
BOOL, STRING, BYTES = Type("bool"), Type("string"), Type("bytes")
NULL, DYN, ANY, ERROR = Type("null_type"), Type("dyn"), Type("any"), Type("*error*")
# a type parameter nothing bound (`[]`, `{}`, `optional.none()`, `[].min()`): cel-go keeps it free, so it
# unifies with any element type in a literal (the homogeneous-literal rule does not count it)
FREE = Type("free")
QUANTITY, SEMVER = Type("kubernetes.Quantity"), Type("kubernetes.Semver")
URL, IP, CIDR = Type("kubernetes.URL"), Type("net.IP"), Type("net.CIDR")
DEVICE = Type("kubernetes.DRADevice")
A, B = Type("_A"), Type("_B")


_NULLABLE = frozenset({"kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL", "net.IP", "net.CIDR",
                       "optional_type"})


def list_of(t: Type) -> Type:
    return Type("list", (t,))


def map_of(k: Type, v: Type) -> Type:
    return Type("map", (k, v))


def optional_of(t: Type) -> Type:
    return Type("optional_type", (t,))


def type_of(t: Type) -> Type:
    return Type("type", (t,))


ATTRIBUTES = map_of(STRING, map_of(STRING, ANY))
CAPACITY = map_of(STRING, map_of(STRING, QUANTITY))

#: identifiers that name types (`type(x) == int`)
TYPE_NAMES = {
    "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING, "bytes": BYTES,
    "null_type": NULL, "list": list_of(DYN), "map": map_of(DYN, DYN), "dyn": DYN,
}
TYPE_NAMES["type"] = type_of(DYN)

Subst = dict[str, Type]


def substitute(t: Type, subst: Subst) -> Type:
    if t.is_param:
        bound = subst.get(t.name)
        return FREE if bound is None else substitute(bound, subst)
    if t.params:
        return Type(t.name, tuple(substitute(p, subst) for p in t.params))
    return t


def assignable(param: Type, arg: Type, subst: Subst) -> bool:
    """Whether a value of type ``arg`` may be passed where ``param`` is declared, binding type params."""
    if param.is_param:
        bound = subst.get(param.name)
        if bound is None:
            subst[param.name] = arg
            return True
        if bound.name == "free" and arg.name != "free":
            subst[param.name] = arg  # a free parameter takes the first concrete type
            return True
        if bound.is_dyn:
            return True  # already the most general: `x.?a.orValue("s")` on an attribute stays any
        if arg.is_dyn and arg.name != "free":
            subst[param.name] = arg  # widened: `c ? true : dyn(x)` is dyn, as cel-go joins them
            return True
        return assignable(bound, arg, subst)
    if param.is_dyn or arg.is_dyn or arg == ERROR:
        return True
    if NULL in (param, arg) and {param.name, arg.name} & _NULLABLE:
        return True  # cel-go: null is assignable to its object types (Quantity, Semver, IP, ...)
    if param.name != arg.name or len(param.params) != len(arg.params):
        return False
    if param.name == "type":
        return True  # type values compare across types: `type(x) == string`
    return all(assignable(p, a, subst) for p, a in zip(param.params, arg.params, strict=True))


def compatible(a: Type, b: Type) -> bool:
    """Equal types, a free parameter matching anything (cel-go's IsExactType after unification)."""
    if a.name == "free" or b.name == "free":
        return True
    return a.name == b.name and len(a.params) == len(b.params) and all(
        compatible(x, y) for x, y in zip(a.params, b.params, strict=True))


def has_free(t: Type) -> bool:
    return t.name == "free" or any(has_free(p) for p in t.params)


def common(types: list[Type]) -> Type:
    """The result type of several matching overloads (or literal elements): theirs if they agree, else dyn;
    free parameters do not count."""
    concrete = [t for t in types if not has_free(t)]
    if not concrete:
        return types[0]
    first = concrete[0]
    types = concrete
    return first if all(t == first for t in types) else DYN
